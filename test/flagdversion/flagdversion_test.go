package flagdversion

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
)

// newNamespace creates a namespace for a spec and deletes it afterwards;
// a failed spec gets its Events and container logs in the report.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			AddReportEntry("events of namespace "+ns, fixtures.Events(ctx, k8s, ns))
			AddReportEntry("container logs of namespace "+ns, n.LogsOf(ns))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}

// versioned is a flag set with a DISABLED flag, a fractional rule that
// buckets by the targetingKey, and a flag the releases evaluate alike.
func versioned(ns, name string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"beta": {State: "DISABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off"},
		"split": {State: "ENABLED", Variants: json.RawMessage(`{"a":"a","b":"b"}`), DefaultVariant: "a",
			Targeting: json.RawMessage(`{"fractional":[["a",50],["b",50]]}`)},
		fixtures.FlagKey: {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"},
	}
	return ff
}

// aboutFlags keeps the warnings about flags (not the blast radius).
func aboutFlags(ws []string) []string {
	var out []string
	for _, w := range ws {
		if strings.HasPrefix(w, "spec.flagSpec.flags[") {
			out = append(out, w)
		}
	}
	return out
}

// kubectlApplyStderr applies a manifest with kubectl and returns what it
// printed on standard error: its warnings.
func kubectlApplyStderr(ns string, obj client.Object) string {
	GinkgoHelper()
	raw, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "manifest.json")
	Expect(os.WriteFile(path, raw, 0o600)).To(Succeed())
	cmd := exec.Command(cp.KubectlPath, "--kubeconfig="+cp.KubeconfigPath, "--cache-dir="+filepath.Join(cp.Dir, "kubectl-cache"), "apply", "-n", ns, "-f", path)
	cmd.Env = append(os.Environ(), "KUBERC=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	Expect(cmd.Run()).To(Succeed(), "kubectl apply: %s", stderr.String())
	return stderr.String()
}

// versionCondition is the FlagdVersionSupported condition of obj, as the API server has it.
func versionCondition(ctx context.Context, obj client.Object) func() *metav1.Condition {
	return func() *metav1.Condition {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return nil
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *v1beta1.FeatureFlagSource:
			conds = o.Status.Conditions
		case *v1beta1.Flagd:
			conds = o.Status.Conditions
		}
		return meta.FindStatusCondition(conds, v1beta1.ConditionFlagdVersionSupported)
	}
}

func haveCondition(status metav1.ConditionStatus, reason string, message types.GomegaMatcher) types.GomegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason), HaveField("Message", message))
}

// versionEvents are the notes of the UnsupportedFlagdVersion Warning Events regarding name.
func versionEvents(ctx context.Context, ns, kind, name string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil
		}
		var out []string
		for _, e := range list.Items {
			if e.Reason == workflows.EventUnsupportedFlagdVersion && e.Type == corev1.EventTypeWarning &&
				e.Regarding.Kind == kind && e.Regarding.Name == name {
				out = append(out, e.Note)
			}
		}
		return out
	}
}

var _ = Describe("the injected flagd release", Ordered, func() {
	Context("--sidecar-tag v0.15.4, --flagd-tag v0.18.0", func() {
		It("warns a controller-runtime client and kubectl of the flags v0.15.4 evaluates otherwise than v0.16.0, on create and update", func(ctx SpecContext) {
			ns := newNamespace(ctx, "warned")
			c, w := warnedClient()
			ff := versioned(ns, "flags")
			Expect(c.Create(ctx, ff)).To(Succeed())
			Expect(aboutFlags(w.take())).To(HaveExactElements(
				"spec.flagSpec.flags[beta]: DISABLED: flagd v0.15.4 (--sidecar-tag) answers its evaluations with the error FLAG_NOT_FOUND "+
					"and leaves it out of bulk evaluations; flagd v0.16.0 resolves it with reason DISABLED and no value "+
					"(SDKs return the caller's default) and lists it in bulk evaluations",
				`spec.flagSpec.flags[split]: fractional with an empty targetingKey: the rule buckets by the targetingKey: `+
					`for an evaluation whose targetingKey is "", flagd v0.15.4 (--sidecar-tag) buckets it by the flag key alone, `+
					"so that all such evaluations get one variant; flagd v0.16.0 serves the defaultVariant",
			), "nothing for --flagd-tag v0.18.0, whose evaluation flagplane does not know")

			// An update that enables the flag leaves the fractional rule's
			// warning (retried while it races the status writes).
			var updated []string
			Eventually(func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
					return err
				}
				f := ff.Spec.FlagSpec.Flags["beta"]
				f.State = "ENABLED"
				ff.Spec.FlagSpec.Flags["beta"] = f
				w.take()
				err := c.Update(ctx, ff)
				updated = w.take()
				return err
			}).Should(Succeed())
			Expect(aboutFlags(updated)).To(HaveExactElements(HavePrefix("spec.flagSpec.flags[split]: fractional with an empty targetingKey:")))

			// A flag set both releases evaluate alike: no warning of the kind.
			Expect(c.Create(ctx, fixtures.FlagSet(ns, "alike", "on"))).To(Succeed())
			Expect(aboutFlags(w.take())).To(BeEmpty())

			// kubectl prints them.
			applied := versioned(ns, "applied")
			applied.TypeMeta = metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: v1beta1.FeatureFlagKind}
			stderr := kubectlApplyStderr(ns, applied)
			Expect(stderr).To(ContainSubstring("Warning: spec.flagSpec.flags[beta]: DISABLED: flagd v0.15.4 (--sidecar-tag) answers its evaluations with the error FLAG_NOT_FOUND"))
			Expect(stderr).To(ContainSubstring("Warning: spec.flagSpec.flags[split]: fractional with an empty targetingKey"))
		})

		It("says in a source's status that flagplane vouches for v0.15.4, and what of a flagd-proxy entry it cannot take, with an Event", func(ctx SpecContext) {
			ns := newNamespace(ctx, "source")
			file := fixtures.Source(ns, "file", []v1beta1.Source{fixtures.FileRef("flags")})
			proxy := fixtures.Source(ns, "proxy", []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderFlagdProxy}})
			Expect(k8s.Create(ctx, fixtures.FlagSet(ns, "flags", "on"))).To(Succeed())
			Expect(k8s.Create(ctx, file)).To(Succeed())
			Expect(k8s.Create(ctx, proxy)).To(Succeed())

			Eventually(versionCondition(ctx, file)).Should(haveCondition(metav1.ConditionTrue, v1beta1.ReasonSupportedFlagdVersion, Equal(
				"flagd v0.15.4 (--sidecar-tag) is a release flagplane vouches for, and it takes everything this source asks for; "+
					"it evaluates DISABLED flags, fractional targeting otherwise than flagd v0.16.0 (FeatureFlag admission warns of the flags concerned)")))
			Eventually(versionCondition(ctx, proxy)).Should(haveCondition(metav1.ConditionFalse, v1beta1.ReasonUnsupportedSettings, Equal(
				`flagd v0.15.4 (--sidecar-tag) cannot take what this source asks for, which its flagd goes without: sources[0] "flags": `+
					"takes no --sources field headers (it came in v0.15.6), which carries the sync server's credential for namespace "+ns)))
			Eventually(versionEvents(ctx, ns, "FeatureFlagSource", "proxy")).Should(ConsistOf(ContainSubstring("takes no --sources field headers")))
			Consistently(versionEvents(ctx, ns, "FeatureFlagSource", "file")).Should(BeEmpty())

			By("kstatus: a setting its flagd lacks needs a user (Failed); a release's other semantics do not (Current)")
			Eventually(kstatus(ctx, proxy)).Should(And(HavePrefix("Failed: "), ContainSubstring("takes no --sources field headers")))
			Eventually(kstatus(ctx, file)).Should(HavePrefix("Current: "))
		})

		It("runs on the test node the sidecar it writes for v0.15.4 (the node's flagd is v0.16.0 whatever the tag)", func(ctx SpecContext) {
			ns := newNamespace(ctx, "pod")
			Expect(k8s.Create(ctx, fixtures.FlagSet(ns, "flags", "on"))).To(Succeed())
			src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")}, fixtures.Targeting("Deployment", "web"),
				func(s *v1beta1.FeatureFlagSource) { s.Spec.ContextValues = map[string]string{"region": "eu"} })
			Expect(k8s.Create(ctx, src)).To(Succeed())
			Eventually(versionCondition(ctx, src)).Should(HaveField("Status", metav1.ConditionTrue))
			Expect(k8s.Create(ctx, fixtures.Deployment(ns, "web", nil, nil))).To(Succeed())

			var pod corev1.Pod
			Eventually(func(g Gomega) {
				var pods corev1.PodList
				g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
				g.Expect(pods.Items).To(HaveLen(1))
				pod = pods.Items[0]
				g.Expect(meta.IsStatusConditionTrue(podConditions(pod), string(corev1.PodReady))).To(BeTrue(), "the pod is Ready")
			}, "90s").Should(Succeed())
			var sidecar *corev1.Container
			for i := range pod.Spec.InitContainers {
				if pod.Spec.InitContainers[i].Name == injection.SidecarName {
					sidecar = &pod.Spec.InitContainers[i]
				}
			}
			Expect(sidecar).NotTo(BeNil())
			Expect(sidecar.Image).To(Equal(injection.DefaultSidecarImage + ":" + sidecarTag))
			Expect(sidecar.Args).To(ContainElements("--context-value", "region=eu"), "v0.15.4 takes --context-value")
		})

		It("says in a Flagd's status that flagplane does not vouch for --flagd-tag v0.18.0, with an Event", func(ctx SpecContext) {
			ns := newNamespace(ctx, "flagd")
			Expect(k8s.Create(ctx, fixtures.FlagSet(ns, "flags", "on"))).To(Succeed())
			Expect(k8s.Create(ctx, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")}))).To(Succeed())
			fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}, Spec: v1beta1.FlagdSpec{FeatureFlagSource: "src"}}
			Expect(k8s.Create(ctx, fd)).To(Succeed())
			unvouched := Equal("flagd v0.18.0 (--flagd-tag) is not a flagd release flagplane vouches for (every flagd release from v0.10.0 to v0.16.1): " +
				"flagplane writes the arguments, env vars and --sources of flagd v0.16.0, and cannot tell whether that image takes them")
			Eventually(versionCondition(ctx, fd)).Should(haveCondition(metav1.ConditionFalse, v1beta1.ReasonUnsupportedFlagdVersion, unvouched))
			Eventually(versionEvents(ctx, ns, "Flagd", "flagd")).Should(ConsistOf(unvouched))
		})
	})

	Context("--sidecar-tag latest", func() {
		BeforeAll(func(ctx SpecContext) {
			Expect(op.Stop()).To(Succeed())
			op = startOperator(ctx, "latest", "")
		})

		It("says in every source's status that flagplane does not vouch for it, with an Event, and warns of no flag", func(ctx SpecContext) {
			ns := newNamespace(ctx, "latest")
			c, w := warnedClient()
			Expect(c.Create(ctx, versioned(ns, "flags"))).To(Succeed())
			Expect(aboutFlags(w.take())).To(BeEmpty(), "how that image evaluates, flagplane does not know")

			src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")})
			Expect(k8s.Create(ctx, src)).To(Succeed())
			unvouched := Equal(`flagd latest (--sidecar-tag) is not a flagd release flagplane vouches for (every flagd release from v0.10.0 to v0.16.1): ` +
				"flagplane writes the arguments, env vars and --sources of flagd v0.16.0, and cannot tell whether that image takes them")
			Eventually(versionCondition(ctx, src)).Should(haveCondition(metav1.ConditionFalse, v1beta1.ReasonUnsupportedFlagdVersion, unvouched))
			Eventually(versionEvents(ctx, ns, "FeatureFlagSource", "src")).Should(ConsistOf(unvouched))
			Eventually(kstatus(ctx, src)).Should(HavePrefix("Current: "), "flagplane still delivers to a tag it cannot vouch for")
		})
	})
})

func podConditions(pod corev1.Pod) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(pod.Status.Conditions))
	for _, c := range pod.Status.Conditions {
		out = append(out, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status)})
	}
	return out
}

// kstatus is what kstatus computes for obj as the API server holds it.
func kstatus(ctx context.Context, obj client.Object) func() (string, error) {
	return func() (string, error) { return fixtures.KStatus(ctx, k8s, cp.Scheme, obj) }
}
