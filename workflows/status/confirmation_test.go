package status

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// confirmObserved answers Confirm with what its pods serve, per namespace.
type confirmObserved struct {
	workflowstest.Applied
	now     time.Time
	serving map[string]func(revision string, held bool) v1beta1.NamespaceServing
	asked   map[string][]topology.Key
}

func (c confirmObserved) Confirm(f topology.Key, namespace string, readers []topology.Key, revision string, flags int, held bool) v1beta1.NamespaceServing {
	c.asked[namespace] = readers
	return c.serving[namespace](revision, held)
}
func (c confirmObserved) ConfirmBound() time.Duration { return DefaultConfirmBound }
func (c confirmObserved) ConfirmNow() time.Time       { return c.now }

// TestReadyWaitsForConfirmation: a FeatureFlag whose ConfigMaps hold its
// revision is Ready only once every pod that reads it answers with it;
// until then Reconciling (Confirming), past the bound Stalled
// (NotConfirmed), naming the namespace, the pod and what its flagd
// answered.
func TestReadyWaitsForConfirmation(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New(workflows.DefaultSettings().FlagSets.TopologyOptions()...)
	g.Expect(manifests.Load(topo, strings.NewReader(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: flags, generation: 1}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true}, defaultVariant: "on"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: src}
spec:
  targetRefs: [{group: apps, kind: Deployment, name: web}]
  sources: [{source: flags, provider: file}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
`))).To(Succeed())
	v := topo.Snapshot()
	ff, ok := v.FlagSet(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var revision string
	since := now.Add(-10 * time.Second)
	answer := v1beta1.NamespaceServing{}
	obs := confirmObserved{Applied: workflowstest.Applied{View: v, Settings: workflows.DefaultSettings()}, now: now,
		asked: map[string][]topology.Key{},
		serving: map[string]func(string, bool) v1beta1.NamespaceServing{"shop": func(rev string, held bool) v1beta1.NamespaceServing {
			g.Expect(held).To(BeTrue(), "the applied ConfigMap holds the revision")
			revision = rev
			out := answer
			out.Namespace, out.Revision, out.Since = "shop", rev, &metav1.Time{Time: since}
			return out
		}}}
	ready := func() (*metav1.Condition, v1beta1.FeatureFlagStatus) {
		st := DesiredFlagSet(v, ff, obs)
		return meta.FindStatusCondition(st.Conditions, v1beta1.ConditionReady), st
	}

	By := func(string) {}
	By("one pod of two serves the revision, ten seconds after its copy got it")
	answer = v1beta1.NamespaceServing{Pods: 2, Confirmed: 1, Others: []v1beta1.RevisionPods{{Revision: "0123456789abcdef", Pods: 1}},
		Reason: "pod web-2: flagd serves revision 01234567 of FeatureFlag shop/flags"}
	c, st := ready()
	g.Expect(obs.asked["shop"]).To(Equal([]topology.Key{topology.WorkloadKey(topology.KindDeployment, "shop", "web")}))
	g.Expect(st.Delivered).To(Equal("1/1"), "written")
	g.Expect(st.Confirmed).To(Equal("1/2"))
	g.Expect(revision).To(Equal(st.Revision))
	g.Expect(st.Serving).To(HaveLen(1))
	g.Expect(*c).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonConfirming),
		HaveField("Message", And(ContainSubstring("namespace shop: 1 of 2 pods"), ContainSubstring("pod web-2: flagd serves revision 01234567")))))
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionReconciling)).To(BeTrue())

	By("past the bound")
	since = now.Add(-DefaultConfirmBound - time.Second)
	c, st = ready()
	g.Expect(*c).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonNotConfirmed),
		HaveField("Message", And(ContainSubstring("pod web-2: flagd serves revision 01234567"), ContainSubstring("for more than 3m0s")))))
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionStalled)).To(BeTrue())

	By("both pods serve it")
	answer = v1beta1.NamespaceServing{Pods: 2, Confirmed: 2}
	c, st = ready()
	g.Expect(st.Confirmed).To(Equal("2/2"))
	g.Expect(*c).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("served by 2/2 pods"))))

	By("no pod has an IP yet: nothing is counted, and Ready says what was written")
	answer = v1beta1.NamespaceServing{Starting: 2}
	c, st = ready()
	g.Expect(st.Confirmed).To(BeEmpty())
	g.Expect(st.Serving).To(BeEmpty())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))

	By("without confirmation (--confirm-delivery=false), as before")
	st = DesiredFlagSet(v, ff, obs.Applied)
	g.Expect(st.Confirmed).To(BeEmpty())
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionReady)).To(BeTrue())
}
