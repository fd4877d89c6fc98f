package explain_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/inspect/topodump"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

func view(t *testing.T) *topology.View {
	t.Helper()
	top, err := topodump.LoadDir("testdata", "default")
	if err != nil {
		t.Fatal(err)
	}
	return top.Snapshot()
}

func TestWorkload(t *testing.T) {
	g := NewWithT(t)
	r, err := explain.Explain(view(t), "deploy", "shop", "web", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Object).To(Equal("Deployment shop/web"))
	g.Expect(r.Sources).To(ConsistOf(
		explain.AppliedSource{Source: "shop/by-name", Why: []string{"its targetRefs name Deployment web"}},
		explain.AppliedSource{Source: "shop/by-label", Why: []string{"its selector tier=front matches the workload's labels"}},
	))
	g.Expect(r.FlagSets).To(ConsistOf(
		explain.Delivery{FlagSet: "shop/checkout", Source: "shop/by-name", Provider: "file", ConfigMap: "shop/flagd.shop.checkout"},
		explain.Delivery{FlagSet: "shop/checkout", Source: "shop/by-label", Provider: "kubernetes"},
	))
	g.Expect(r.Unresolved).To(ConsistOf(
		ContainSubstring("FeatureFlagSource platform/shared: no ReferenceGrant in platform permits"),
		ContainSubstring("sources[1] names FeatureFlag shop/missing, which does not exist"),
	))
	g.Expect(r.Sidecar).NotTo(BeNil())
	g.Expect(r.Sidecar.Args).To(ContainElements("--port", "9013"), "the source that wins the port")
	g.Expect(r.Sidecar.Volumes).To(ConsistOf("flagd.shop.checkout"))
	g.Expect(r.Overridden).To(ConsistOf(
		"port: FeatureFlagSource shop/by-label sets 9014 but FeatureFlagSource shop/by-name overrides it with 9013"))
	g.Expect(r.Reaches).To(BeNil())
}

func TestWorkloadNothingApplies(t *testing.T) {
	g := NewWithT(t)
	r, err := explain.Explain(view(t), "deployment", "shop", "batch", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Sources).To(BeEmpty())
	g.Expect(r.Sidecar).To(BeNil())
	var out bytes.Buffer
	g.Expect(explain.Write(&out, r, "text")).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("its pods get no flagd"))
}

func TestFlagSetAndSourceReach(t *testing.T) {
	g := NewWithT(t)
	v := view(t)
	r, err := explain.Explain(v, "ff", "shop", "checkout", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*r.Reaches).To(Equal(explain.Reach{
		Sources:    []string{"FeatureFlagSource shop/by-label", "FeatureFlagSource shop/by-name"},
		Workloads:  []string{"Deployment shop/web"},
		Namespaces: []string{"shop"},
		ConfigMaps: []string{"shop/flagd.shop.checkout"},
	}))

	r, err = explain.Explain(v, "ffs", "platform", "shared", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Reaches.Workloads).To(BeEmpty(), "the annotation is not granted")
	g.Expect(r.Reaches.Denied).To(ConsistOf("Deployment shop/web"))
	g.Expect(r.Reaches.FlagSets).To(ConsistOf("FeatureFlag platform/checkout"))

	r, err = explain.Explain(v, "featureflagsource", "shop", "by-label", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Reaches.Unresolved).To(ConsistOf(ContainSubstring("FeatureFlag shop/missing, which does not exist")))
}

func TestErrors(t *testing.T) {
	g := NewWithT(t)
	v := view(t)
	_, err := explain.Explain(v, "ff", "shop", "nope", injection.DefaultOptions())
	g.Expect(err).To(MatchError("FeatureFlag shop/nope is not in the graph (it does not exist, or you may not list it)"))
	_, err = explain.Explain(v, "deploy", "default", "web", injection.DefaultOptions())
	g.Expect(err).To(MatchError("Deployment default/web is not in the graph (it does not exist, or you may not list it); "+
		"there is one in namespace shop: give -n shop"), "the wrong namespace: the error says the right one")
	_, err = explain.Explain(v, "ff", "default", "checkout", injection.DefaultOptions())
	g.Expect(err).To(MatchError(HaveSuffix("there are some in namespaces platform, shop: give -n NAMESPACE")))
	_, err = explain.Explain(v, "pod", "shop", "web-1", injection.DefaultOptions())
	g.Expect(err).To(MatchError(ContainSubstring(`cannot explain kind "pod"`)))
	g.Expect(explain.Write(&bytes.Buffer{}, &explain.Report{}, "xml")).To(MatchError(ContainSubstring(`unknown output format "xml"`)))
}

func TestJSON(t *testing.T) {
	g := NewWithT(t)
	r, err := explain.Explain(view(t), "deploy", "shop", "web", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	var out bytes.Buffer
	g.Expect(explain.Write(&out, r, "json")).To(Succeed())
	var back explain.Report
	g.Expect(json.Unmarshal(out.Bytes(), &back)).To(Succeed())
	g.Expect(back).To(Equal(*r))
}

func TestSourcePolicies(t *testing.T) {
	g := NewWithT(t)
	v := view(t)
	r, err := explain.Explain(v, "deploy", "pay", "checkout", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Policies).To(Equal([]string{
		"debugLogging=false from FeatureFlagSourcePolicy pay/platform overrides (was true from FeatureFlagSource pay/app)",
		"otelCollectorUri=otel-collector.observability:4317 from FeatureFlagSourcePolicy pay/platform defaults",
	}))
	g.Expect(r.Settings).To(Equal([]string{
		"debugLogging=false from FeatureFlagSourcePolicy pay/platform overrides",
		"otelCollectorUri=otel-collector.observability:4317 from FeatureFlagSourcePolicy pay/platform defaults",
	}), "every setting in force with what it comes from")
	g.Expect(r.Sidecar.Args).To(ContainElements("--otel-collector-uri", "otel-collector.observability:4317"))
	g.Expect(r.Sidecar.Args).NotTo(ContainElement("--debug"))
	var out bytes.Buffer
	g.Expect(explain.Write(&out, r, "text")).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("settings decided by FeatureFlagSourcePolicies"))

	r, err = explain.Explain(v, "ffsp", "pay", "platform", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*r.Reaches).To(Equal(explain.Reach{Workloads: []string{"Deployment pay/checkout"}, Namespaces: []string{"pay"}}))
	r, err = explain.Explain(v, "featureflagsourcepolicy", "pay", "stray", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Reaches.Workloads).To(BeEmpty())
	g.Expect(r.Reaches.Unresolved).To(ConsistOf(ContainSubstring(`spec.targetRef: Invalid value: "Namespace shop": a FeatureFlagSourcePolicy governs only the Namespace it lives in (pay), so it applies to nothing`)))
}

func TestKinds(t *testing.T) {
	g := NewWithT(t)
	for _, name := range []string{"deploy", "Deployments", "DEPLOYMENT"} {
		k, err := explain.LookupKind(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k.Kind).To(Equal(topology.KindDeployment))
	}
	_, err := explain.LookupKind("Pod")
	g.Expect(err).To(MatchError(ContainSubstring(`cannot explain kind "Pod"`)))

	v := view(t)
	g.Expect(explain.Objects(v, topology.KindDeployment)).To(Equal([]topology.Key{
		topology.WorkloadKey(topology.KindDeployment, "pay", "checkout"),
		topology.WorkloadKey(topology.KindDeployment, "shop", "batch"),
		topology.WorkloadKey(topology.KindDeployment, "shop", "web"),
	}))
	g.Expect(explain.Objects(v, topology.KindFlagSet)).To(Equal([]topology.Key{
		topology.FlagSetKey("pay", "payments"), topology.FlagSetKey("platform", "checkout"), topology.FlagSetKey("shop", "checkout"),
	}))
	g.Expect(explain.Objects(v, topology.KindStatefulSet)).To(BeEmpty())
}

// TestFlagSetDelivered: read from a cluster, a FeatureFlag carries the
// delivery status the operator wrote; explain says it, and whether it is
// of the revision the flag set serves now. Offline there is none, and
// explain says nothing of it.
func TestFlagSetDelivered(t *testing.T) {
	g := NewWithT(t)
	v := view(t)
	r, err := explain.Explain(v, "ff", "shop", "checkout", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Delivered).To(BeNil(), "manifests have no status")
	rendered, _ := v.FlagSetRendered(topology.FlagSetKey("shop", "checkout"))
	rev := rendered.Revision
	g.Expect(r.Served).To(Equal(&explain.Served{Revision: rev}))

	ff, _ := v.FlagSet(topology.FlagSetKey("shop", "checkout"))
	ff = ff.DeepCopy()
	since := metav1.NewTime(time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC))
	ff.Status = v1beta1.FeatureFlagStatus{Revision: "bbb", Delivered: "1/2", Consumers: []v1beta1.ConsumerRevision{
		{Kind: "SyncSubscribers", Namespace: "shop", Name: "core.openfeature.dev/shop/checkout", Revision: "aaa", Since: &since, Streams: 3, Current: 1},
		{Kind: "ConfigMap", Namespace: "shop", Name: "flagd.shop.checkout", Revision: "bbb", Since: &since},
	}, Unobserved: &v1beta1.UnobservedConsumers{Workloads: 1, Reason: "they read it themselves"},
		Confirmed: "1/3", Serving: []v1beta1.NamespaceServing{{Namespace: "shop", Revision: "bbb", Pods: 3, Confirmed: 1, Since: &since, Starting: 1,
			Others: []v1beta1.RevisionPods{{Revision: "aaa", Pods: 1}, {Pods: 1}}, Reason: "pod web-2: flagd serves revision aaa of FeatureFlag shop/checkout"}}}
	withStatus, err := v.WithFlagSet(ff)
	g.Expect(err).NotTo(HaveOccurred())
	r, err = explain.Explain(withStatus, "ff", "shop", "checkout", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	var out bytes.Buffer
	g.Expect(explain.Write(&out, r, "text")).To(Succeed())
	g.Expect(out.String()).To(HaveSuffix(`  serves revision ` + topology.ShortRevision(rev) + `
  revision bbb, delivered 1/2 (status, not yet of revision ` + topology.ShortRevision(rev) + `)
  consumers:
    - SyncSubscribers shop/core.openfeature.dev/shop/checkout: behind, holds aaa since 2026-11-23T04:00:00Z (1 of 3 streams current)
    - ConfigMap shop/flagd.shop.checkout: holds bbb since 2026-11-23T04:00:00Z
  1 workload and 0 Flagds not counted: they read it themselves
  1/3 pods serve what is planned for them, as their flagd answers
  pods by namespace:
    - shop: 1 of 3 pods serve bbb (its copy since 2026-11-23T04:00:00Z); 1 serve aaa; 1 not known; 1 pod starting; pod web-2: flagd serves revision aaa of FeatureFlag shop/checkout
`))

	ff.Status.Revision = rev
	withStatus, err = v.WithFlagSet(ff)
	g.Expect(err).NotTo(HaveOccurred())
	r, err = explain.Explain(withStatus, "ff", "shop", "checkout", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	out.Reset()
	g.Expect(explain.Write(&out, r, "text")).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("  revision " + topology.ShortRevision(rev) + ", delivered 1/2 (status)\n"))
}

// TestFlagSetServed: explain says, from the graph's rendering, when flagd
// cannot load a flag set (its consumers keep its last valid content) and
// what in it is probably a mistake.
func TestFlagSetServed(t *testing.T) {
	g := NewWithT(t)
	v := view(t)
	ff, _ := v.FlagSet(topology.FlagSetKey("shop", "checkout"))
	ff = ff.DeepCopy()
	f := ff.Spec.FlagSpec.Flags["new-checkout"]
	f.DefaultVariant = "blue"
	ff.Spec.FlagSpec.Flags["new-checkout"] = f
	broken, err := v.WithFlagSet(ff)
	g.Expect(err).NotTo(HaveOccurred())
	r, err := explain.Explain(broken, "ff", "shop", "checkout", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Served).NotTo(BeNil())
	g.Expect(r.Served.Invalid).To(ContainSubstring("must be one of the variants"))
	var out bytes.Buffer
	g.Expect(explain.Write(&out, r, "text")).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`\n  revision [0-9a-f]{12} is not served, its consumers keep its last valid content: .*defaultVariant`))

	f.DefaultVariant = "off"
	f.Targeting = json.RawMessage(`{"if":[{"$ref":"missing"},"on","off"]}`)
	ff.Spec.FlagSpec.Flags["new-checkout"] = f
	suspect, err := v.WithFlagSet(ff)
	g.Expect(err).NotTo(HaveOccurred())
	r, err = explain.Explain(suspect, "ff", "shop", "checkout", injection.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Served.Invalid).To(BeEmpty())
	out.Reset()
	g.Expect(explain.Write(&out, r, "text")).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`\n  serves revision [0-9a-f]{12}\n  probable mistakes \(not served when the manager validates strictly\):\n    - .*\$ref "missing"`))
}
