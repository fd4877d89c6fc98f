package staging

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/manifests"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// settings render flag sets as the manager does: real revisions.
var settings = workflows.DefaultSettings()

// consumersYAML is the cluster of the tests: FeatureFlag flags/checkout,
// consumed with the file provider by a Deployment web in each of the
// namespaces a (labelled stage=canary), b and c.
const consumersYAML = `
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {namespace: flags, name: consumers}
spec:
  from:
  - {group: core.openfeature.dev, kind: FeatureFlagSource, namespace: a}
  - {group: core.openfeature.dev, kind: FeatureFlagSource, namespace: b}
  - {group: core.openfeature.dev, kind: FeatureFlagSource, namespace: c}
  to:
  - {group: core.openfeature.dev, kind: FeatureFlag}
---
apiVersion: v1
kind: Namespace
metadata: {name: a, labels: {stage: canary}}
---
apiVersion: v1
kind: Namespace
metadata: {name: b}
---
apiVersion: v1
kind: Namespace
metadata: {name: c}
`

// consumerYAML is namespace ns's source and Deployment.
func consumerYAML(ns string) string {
	return fmt.Sprintf(`
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: %[1]s, name: src}
spec:
  sources: [{source: flags/checkout, provider: file}]
  targetRefs: [{group: apps, kind: Deployment, name: web}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: %[1]s, name: web, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
`, ns)
}

// flagSet is flags/checkout with its banner flag's default variant.
func flagSet(variant string) *v1beta1.FeatureFlag {
	return &v1beta1.FeatureFlag{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flags", Name: "checkout", UID: "checkout-uid"},
		Spec: v1beta1.FeatureFlagSpec{FlagSpec: v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{
			"banner": {State: v1beta1.FlagStateEnabled, DefaultVariant: variant,
				Variants: []byte(`{"blue":"blue","gold":"gold","green":"green","red":"red"}`)},
		}}},
	}
}

// world is the cluster of the tests with a rollout policy, whose status
// Next moves as the workflow would.
type world struct {
	t      *testing.T
	g      Gomega
	topo   *topology.Topology
	f      topology.Key
	policy *deliveryv1alpha1.FeatureFlagRolloutPolicy
	number int64
}

// newWorld starts the cluster serving variant, recorded as revision 1.
func newWorld(t *testing.T, variant string) *world {
	t.Helper()
	w := &world{t: t, g: NewWithT(t), topo: topology.New(settings.FlagSets.TopologyOptions()...), f: topology.FlagSetKey("flags", "checkout")}
	w.g.Expect(manifests.Load(w.topo, strings.NewReader(consumersYAML+"---"+consumerYAML("a")+"---"+consumerYAML("b")+"---"+consumerYAML("c")))).To(Succeed())
	w.edit(variant)
	return w
}

// edit writes the flag set with variant and records it as the next
// revision, as the history does.
func (w *world) edit(variant string) {
	ff := flagSet(variant)
	_, err := w.topo.UpsertFlagSet(ff)
	w.g.Expect(err).NotTo(HaveOccurred())
	w.number++
	w.topo.UpsertRevision(&deliveryv1alpha1.FeatureFlagRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flags", Name: fmt.Sprintf("checkout-%d", w.number),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "core.openfeature.dev/v1beta1", Kind: "FeatureFlag", Name: "checkout",
				UID: ff.UID, Controller: new(true)}}},
		Spec: deliveryv1alpha1.FeatureFlagRevisionSpec{FlagSet: "checkout", Number: w.number, Revision: w.rev(variant), FlagSpec: ff.Spec.FlagSpec},
	})
}

// rev is the revision of variant.
func (w *world) rev(variant string) string {
	return w.topo.Snapshot().RenderFlagSet(flagSet(variant)).Revision
}

// attach puts a policy with these steps and gates on the flag set.
func (w *world) attach(steps []deliveryv1alpha1.RolloutStep, gates ...deliveryv1alpha1.Gate) {
	w.policy = &deliveryv1alpha1.FeatureFlagRolloutPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flags", Name: "checkout", Generation: 1, UID: "policy-uid"},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: "core.openfeature.dev", Kind: "FeatureFlag", Name: "checkout"},
			Steps:     steps, Gates: gates,
		},
	}
	w.store()
}

// store hands the graph the policy as it stands.
func (w *world) store() {
	_, err := w.topo.UpsertRolloutPolicy(w.policy.DeepCopy())
	w.g.Expect(err).NotTo(HaveOccurred())
}

// plan is the graph's plan now.
func (w *world) plan() *topology.RolloutPlan { return w.topo.Snapshot().RolloutPlan(w.f) }

// served is what every consumer is planned to serve, as if delivered.
func (w *world) served() map[string]string {
	out := map[string]string{}
	v := w.topo.Snapshot()
	for _, ns := range []string{"a", "b", "c"} {
		s, _ := v.ServedFor(w.f, ns)
		out[ns] = s.Revision
	}
	return out
}

// next runs Next on the graph's plan with obs (its Serving, when nil, what
// every consumer is planned to serve), writes the status it returns as the
// workflow does, and returns the result.
func (w *world) next(obs Observation) Result {
	w.t.Helper()
	if obs.Serving == nil {
		obs.Serving = w.served()
	}
	r := Next(w.policy, w.plan(), obs)
	w.g.Expect(len(r.Status.Message)).To(BeNumerically("<=", MessageMaxLength))
	w.policy.Status = r.Status
	w.store()
	return r
}

// annotate sets an annotation of the policy.
func (w *world) annotate(key, value string) {
	if w.policy.Annotations == nil {
		w.policy.Annotations = map[string]string{}
	}
	w.policy.Annotations[key] = value
	w.store()
}

func reasons(events []Event) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, e.Reason)
	}
	return out
}
