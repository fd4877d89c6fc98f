package restarts_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// replicaSetName is the name the Deployment controller gives a
// Deployment's ReplicaSet: "<name>-<hash>", the name cut to fit 253
// characters.
func replicaSetName(deployment, hash string) string {
	return deployment[:min(len(deployment), validation.DNS1123SubdomainMaxLength-1-len(hash))] + "-" + hash
}

func podOf(kind, apiVersion, owner, hash string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop",
		Labels:          map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, UID: "u", Controller: ptr.To(true)}}}}
}

func TestWorkloadOfPodOfANewReplicaSet(t *testing.T) {
	const hash = "5d4f8c7b9"
	long := strings.Repeat("d", 252) + "x"
	other := strings.Repeat("d", 252) + "y" // cut alike
	for _, tc := range []struct {
		title       string
		deployments []string
		name        string // the pod's Deployment
		want        string // "" for not resolved
	}{
		{title: "a short name is the ReplicaSet's without its hash", name: "web", want: "web"},
		{title: "a name cut to fit, one Deployment starts so", deployments: []string{long, "web"}, name: long, want: long},
		{title: "a name cut to fit, not in the cache yet", name: long},
		{title: "a name cut to fit, two Deployments start so", deployments: []string{long, other}, name: long},
		{title: "the longest name not cut", deployments: []string{long[:243]}, name: long[:243], want: long[:243]},
	} {
		t.Run(tc.title, func(t *testing.T) {
			g := NewWithT(t)
			var objs []client.Object
			for _, d := range tc.deployments {
				objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: d}})
			}
			owners := restarts.Owners{Reader: fakeReader(objs...)}
			res := owners.WorkloadOf(context.Background(), "shop", podOf("ReplicaSet", "apps/v1", replicaSetName(tc.name, hash), hash))
			if tc.want == "" {
				g.Expect(res.OK).To(BeFalse(), "resolved to %s", res.Workload)
				return
			}
			g.Expect(res.OK).To(BeTrue(), res.Why)
			g.Expect(res.Workload).To(Equal(topology.WorkloadKey(topology.KindDeployment, "shop", tc.want)))
		})
	}
}

// TestWorkloadOfPodOfNoPossibleObject: the API server takes any non-empty
// kind and name in a controller reference; one that no object could have
// is no workload (its name would go into a Role's name).
func TestWorkloadOfPodOfNoPossibleObject(t *testing.T) {
	owners := restarts.Owners{Reader: fakeReader()}
	for _, tc := range []struct {
		kind, apiVersion, name string
		ok                     bool
	}{
		{"Rollout", "argoproj.io/v1alpha1", "web", true},
		{"ReplicationController", "v1", "web", true},
		{"Rollout", "argoproj.io/v1alpha1", "a/b", false},
		{"Rollout", "argoproj.io/v1alpha1", "a%2f", false},
		{"Rollout", "argoproj.io/v1alpha1", "a:b", false},
		{"Roll/out", "argoproj.io/v1alpha1", "web", false},
		{"Roll:out", "argoproj.io/v1alpha1", "web", false},
		{"Rollout", "argo:proj.io/v1alpha1", "web", false},
	} {
		res := owners.WorkloadOf(context.Background(), "shop", podOf(tc.kind, tc.apiVersion, tc.name, ""))
		if res.OK != tc.ok {
			t.Errorf("%s %s %q: resolved %v (%s), want %v", tc.apiVersion, tc.kind, tc.name, res.OK, res.Why, tc.ok)
		}
	}
}

func fakeReader(objs ...client.Object) client.Reader {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}
