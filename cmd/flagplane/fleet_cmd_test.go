package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/inspect/fleetstatus"
)

// TestFleetCommandLines: the usage errors of fleet, before any cluster is
// asked.
func TestFleetCommandLines(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr string
		help    string
	}{
		{[]string{"fleet"}, "give a fleet command: status", "fleet"},
		{[]string{"fleet", "rollout"}, `unknown fleet command "rollout": status`, "fleet"},
		{[]string{"fleet", "status"}, "give one FeatureFlag as ff/NAME or NAME", "fleet status"},
		{[]string{"fleet", "status", "ff/a", "b"}, "give one FeatureFlag as ff/NAME or NAME", "fleet status"},
		{[]string{"fleet", "status", "deploy/web"}, `name the FeatureFlag as ff/NAME, not "deploy/web"`, "fleet status"},
		{[]string{"fleet", "status", "ff/checkout", "-o", "yaml"}, `unknown -o "yaml": use one of text, json`, "fleet status"},
	} {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tt.args, &stdout, &stderr)
		g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)), "%v", tt.args)
		g.Expect(exitCode(err)).To(Equal(2), "%v: a usage error", tt.args)
		g.Expect(stderr.String()).To(ContainSubstring("See 'flagplane " + tt.help + " --help'."))
	}
}

// hubServer is an API server that lists the given placements of
// namespace shop; without the fleet's kinds (placements nil), it knows
// none of them, as a cluster that is not a hub.
func hubServer(t *testing.T, placements []fleetv1alpha1.FeatureFlagPlacement) string {
	gv := fleetv1alpha1.GroupVersion
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body any
		switch r.URL.Path {
		case "/apis/" + gv.String(), "/apis/" + gv.String() + "/namespaces/shop/featureflagplacements":
			if placements == nil {
				http.NotFound(w, r)
				return
			}
		}
		switch r.URL.Path {
		case "/api":
			body = metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
		case "/api/v1":
			body = metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: "v1"}
		case "/apis":
			list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList"}, Groups: []metav1.APIGroup{}}
			if placements != nil {
				v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
				list.Groups = append(list.Groups, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
			}
			body = list
		case "/apis/" + gv.String():
			body = metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: gv.String(),
				APIResources: []metav1.APIResource{{Name: "featureflagplacements", SingularName: "featureflagplacement", Namespaced: true,
					Kind: "FeatureFlagPlacement", Verbs: metav1.Verbs{"get", "list", "watch"}}}}
		case "/apis/" + gv.String() + "/namespaces/shop/featureflagplacements":
			body = fleetv1alpha1.FeatureFlagPlacementList{TypeMeta: metav1.TypeMeta{APIVersion: gv.String(), Kind: "FeatureFlagPlacementList"},
				Items: placements}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestFleetStatus: the command reads the hub's placements of the
// FeatureFlag, by either form of its name, as text or JSON, and says when
// none targets it or the cluster is no hub.
func TestFleetStatus(t *testing.T) {
	heard := metav1.NewTime(time.Now().Add(-10 * time.Minute))
	placement := func(name, target string) fleetv1alpha1.FeatureFlagPlacement {
		return fleetv1alpha1.FeatureFlagPlacement{
			TypeMeta:   metav1.TypeMeta{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "FeatureFlagPlacement"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Generation: 1},
			Spec:       fleetv1alpha1.FeatureFlagPlacementSpec{TargetRef: fleetv1alpha1.FlagSetTargetReference{Name: target}},
			Status: fleetv1alpha1.FeatureFlagPlacementStatus{ObservedGeneration: 1, Revision: "0123456789abcdef0123", Current: "1/2",
				Clusters: []fleetv1alpha1.ClusterPlacementStatus{
					{Cluster: "prod", State: fleetv1alpha1.ClusterUnknown, Revision: "fedcba9876543210", Confirmed: "2/2", LastHeard: &heard,
						Message: "the hub cannot reach the member"},
					{Cluster: "dev", State: fleetv1alpha1.ClusterCurrent, Revision: "0123456789abcdef0123", Confirmed: "1/1", LastHeard: &heard},
				}},
		}
	}
	hub := writeKubeconfig(t, hubServer(t, []fleetv1alpha1.FeatureFlagPlacement{placement("everywhere", "checkout"), placement("pricing", "pricing")}), "default")
	notHub := writeKubeconfig(t, hubServer(t, nil), "shop")

	t.Run("text", func(t *testing.T) {
		g := NewWithT(t)
		for _, arg := range []string{"ff/checkout", "checkout", "featureflag/checkout"} {
			var stdout, stderr bytes.Buffer
			g.Expect(run(context.Background(), []string{"fleet", "status", arg, "-n", "shop", "--kubeconfig", hub}, &stdout, &stderr)).
				To(Succeed(), stderr.String())
			g.Expect(stdout.String()).To(Equal(`FeatureFlag shop/checkout on the fleet

FeatureFlagPlacement everywhere: hub revision 0123456789ab, 1/2 current
CLUSTER  STATE    PLANNED  REVISION      CONFIRMED  LAST HEARD  MESSAGE
prod     Unknown  -        fedcba987654  2/2        10m         the hub cannot reach the member
dev      Current  -        0123456789ab  1/1        10m
`), arg)
		}
	})
	t.Run("json", func(t *testing.T) {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		g.Expect(run(context.Background(), []string{"fleet", "status", "checkout", "-n", "shop", "--kubeconfig", hub, "-o", "json"}, &stdout, &stderr)).
			To(Succeed(), stderr.String())
		var r fleetstatus.Report
		g.Expect(json.Unmarshal(stdout.Bytes(), &r)).To(Succeed())
		g.Expect(r.FlagSet).To(Equal("checkout"))
		g.Expect(r.Placements).To(HaveLen(1))
		g.Expect(r.Placements[0].Revision).To(Equal("0123456789abcdef0123"), "in full")
		g.Expect(r.Placements[0].Clusters).To(HaveLen(2))
	})
	for _, tt := range []struct{ name, kubeconfig, wantErr string }{
		{"no placement targets it", hub, "no FeatureFlagPlacement of namespace shop targets FeatureFlag shipping: the hub places it nowhere"},
		{"not a hub", notHub, "the cluster knows no FeatureFlagPlacement: is the kubeconfig's context the fleet hub's?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"fleet", "status", "shipping", "-n", "shop", "--kubeconfig", tt.kubeconfig}, &stdout, &stderr)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(exitCode(err)).To(Equal(1))
			g.Expect(strings.TrimSpace(stdout.String())).To(BeEmpty())
		})
	}
}

// TestFleetCompletion: fleet's command, then ff/ and -o's values.
func TestFleetCompletion(t *testing.T) {
	for _, tt := range []struct{ args, want []string }{
		{[]string{"fleet", ""}, []string{"status\tEach member cluster's state of a FeatureFlag of the hub", ":4"}},
		{[]string{"fleet", "status", ""}, []string{"ff/", "featureflag/", ":6"}},
		{[]string{"fleet", "status", "-o", ""}, []string{"text", "json", ":4"}},
	} {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		g.Expect(run(context.Background(), append([]string{"__complete"}, tt.args...), &stdout, &stderr)).To(Succeed())
		g.Expect(strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")).To(Equal(tt.want), "%v", tt.args)
	}
}
