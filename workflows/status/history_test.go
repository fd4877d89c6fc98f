package status

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// historyObserved is an Observed that knows which specs the revision
// history did not record.
type historyObserved struct {
	workflowstest.Applied
	unrecorded *workflows.UnrecordedRevisions
}

func (h historyObserved) UnrecordedRevision(k topology.Key) (workflows.Unrecorded, bool) {
	return h.unrecorded.Of(k)
}

// TestRevisionRecordedCondition: while the history does not record a
// FeatureFlag's accepted spec, its status has RevisionRecorded False with
// the history's reason and message; the flag set stays Ready (its
// consumers are served). Once recorded, the condition is gone, and the
// status is what it was before.
func TestRevisionRecordedCondition(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New()
	g.Expect(manifests.Load(topo, strings.NewReader(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: flags, generation: 3}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true}, defaultVariant: "on"}}}}
`))).To(Succeed())
	v := topo.Snapshot()
	ff, ok := v.FlagSet(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	unrecorded := &workflows.UnrecordedRevisions{}
	obs := historyObserved{Applied: workflowstest.Applied{View: v, Settings: workflows.DefaultSettings()}, unrecorded: unrecorded}

	before := DesiredFlagSet(v, ff, obs)
	g.Expect(meta.FindStatusCondition(before.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)).To(BeNil())

	unrecorded.Set(topology.FlagSetKey("shop", "flags"), workflows.Unrecorded{Reason: deliveryv1alpha1.ReasonRevisionRefused,
		Message: "FeatureFlagRevision shop/flags-4 not written: the API server refused it (Forbidden): exceeded quota: revisions"})
	ff.Status = before
	st := DesiredFlagSet(v, ff, obs)
	c := meta.FindStatusCondition(st.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)
	g.Expect(c).NotTo(BeNil())
	g.Expect(*c).To(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", deliveryv1alpha1.ReasonRevisionRefused),
		HaveField("Message", ContainSubstring("exceeded quota: revisions")),
		HaveField("ObservedGeneration", int64(3))))
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionReady)).To(BeTrue(), "served all the same")

	unrecorded.Clear(topology.FlagSetKey("shop", "flags"))
	ff.Status = st
	after := DesiredFlagSet(v, ff, obs)
	g.Expect(meta.FindStatusCondition(after.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)).To(BeNil())
	g.Expect(after).To(Equal(before))
}
