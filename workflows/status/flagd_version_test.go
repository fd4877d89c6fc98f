package status

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// versionWorld: a source with context values and a flagd-proxy entry, so
// that older releases lack something of it.
func versionWorld(t *testing.T) *topology.View {
	t.Helper()
	topo := topology.New()
	for _, m := range []string{
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"flags","uid":"ff"},"spec":{"flagSpec":{"flags":{}}}}`,
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"src","uid":"src"},"spec":{` +
			`"sources":[{"source":"flags"},{"source":"flags","provider":"flagd-proxy"}],"contextValues":{"region":"eu"},` +
			`"targetRefs":[{"group":"apps","kind":"Deployment","name":"web"}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}`,
	} {
		if err := manifests.Load(topo, strings.NewReader(m)); err != nil {
			t.Fatal(err)
		}
	}
	return topo.Snapshot()
}

func settingsWithTag(tag string) workflows.Settings {
	s := workflows.DefaultSettings()
	s.Injection.Sidecar.Tag = tag
	s.Injection.SyncServer = "flagplane-sync.flagplane-system.svc:8015"
	s.Injection.SyncServerHeaders = func(ns string) (map[string]string, error) {
		return map[string]string{"authorization": "Bearer token-of-" + ns}, nil
	}
	return s
}

// TestSourceFlagdVersionCondition: a source says whether flagplane vouches
// for the flagd release its sidecars run, and what of it that release
// cannot take.
func TestSourceFlagdVersionCondition(t *testing.T) {
	v := versionWorld(t)
	src, _ := v.Source(topology.SourceKey("shop", "src"))
	for _, tc := range []struct {
		tag     string
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"v0.16.0", metav1.ConditionTrue, v1beta1.ReasonSupportedFlagdVersion,
			"flagd v0.16.0 (--sidecar-tag) is a release flagplane vouches for, and it takes everything this source asks for"},
		{"v0.15.6", metav1.ConditionTrue, v1beta1.ReasonSupportedFlagdVersion,
			"flagd v0.15.6 (--sidecar-tag) is a release flagplane vouches for, and it takes everything this source asks for; " +
				"it evaluates DISABLED flags otherwise than flagd v0.16.0 (FeatureFlag admission warns of the flags concerned)"},
		{"v0.15.4", metav1.ConditionFalse, v1beta1.ReasonUnsupportedSettings,
			`flagd v0.15.4 (--sidecar-tag) cannot take what this source asks for, which its flagd goes without: sources[1] "flags": ` +
				"takes no --sources field headers (it came in v0.15.6), which carries the sync server's credential for namespace shop"},
		{"v0.11.4", metav1.ConditionFalse, v1beta1.ReasonUnsupportedSettings,
			`flagd v0.11.4 (--sidecar-tag) cannot take what this source asks for, which its flagd goes without: sources[1] "flags": ` +
				"takes no --sources field headers (it came in v0.15.6), which carries the sync server's credential for namespace shop; " +
				"contextValues: has no --context-value (it came in v0.11.5)"},
		{"latest", metav1.ConditionFalse, v1beta1.ReasonUnsupportedFlagdVersion,
			"flagd latest (--sidecar-tag) is not a flagd release flagplane vouches for (every flagd release from v0.10.0 to v0.16.1): " +
				"flagplane writes the arguments, env vars and --sources of flagd v0.16.0, and cannot tell whether that image takes them"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			g := NewWithT(t)
			_, cluster := workflowstest.World(t)
			st := DesiredSource(v, src, CacheObserved{Ctx: context.Background(), Reader: cluster}, settingsWithTag(tc.tag))
			c := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionFlagdVersionSupported)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.Message).To(Equal(tc.message))
			g.Expect(c.ObservedGeneration).To(Equal(src.Generation))
		})
	}
}

// TestFlagdVersionEvent: the source gets a Warning Event when its
// FlagdVersionSupported condition turns False, and not on every reconcile.
func TestFlagdVersionEvent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	v := versionWorld(t)
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1beta1.AddToScheme(s)
	src := &v1beta1.FeatureFlagSource{}
	srcv, _ := v.Source(topology.SourceKey("shop", "src"))
	srcv.DeepCopyInto(src)
	cluster := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1beta1.FeatureFlagSource{}).WithObjects(src).Build()
	rec := events.NewFakeRecorder(10)
	u := &Updater{Client: cluster, Settings: settingsWithTag("v0.18.0"), Events: rec}
	g.Expect(u.UpdateSource(ctx, v, topology.SourceKey("shop", "src"))).To(Succeed())
	g.Expect(rec.Events).To(Receive(And(ContainSubstring("Warning "+workflows.EventUnsupportedFlagdVersion),
		ContainSubstring("flagd v0.18.0 (--sidecar-tag) is not a flagd release flagplane vouches for"))))
	written := &v1beta1.FeatureFlagSource{}
	g.Expect(cluster.Get(ctx, client.ObjectKeyFromObject(src), written)).To(Succeed())
	g.Expect(meta.IsStatusConditionFalse(written.Status.Conditions, v1beta1.ConditionFlagdVersionSupported)).To(BeTrue())
	g.Expect(u.UpdateSource(ctx, v, topology.SourceKey("shop", "src"))).To(Succeed())
	g.Expect(rec.Events).NotTo(Receive(ContainSubstring(workflows.EventUnsupportedFlagdVersion)), "once, on the transition")
}
