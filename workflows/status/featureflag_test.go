package status

import (
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// refused observes every ConfigMap write as refused for good.
type refused struct{}

func (refused) ConfigMapData(string, string) (map[string]string, bool) { return nil, false }
func (refused) Role(string, string) *rbacv1.Role                       { return nil }
func (refused) RoleBinding(string, string) *rbacv1.RoleBinding         { return nil }
func (refused) WriteFailure(kind, ns, name string) workflows.Failure {
	return workflows.Failure{Message: "exceeded quota: team-quota, used: configmaps=10, limited: configmaps=10", Permanent: true}
}

// A flag set whose ConfigMap cannot be written is Stalled; why, it says for
// its own namespace only: another namespace's API answers (its quota, its
// policies) are for that namespace's sources to say.
func TestFlagSetVerdictKeepsOtherNamespacesAnswers(t *testing.T) {
	g := NewWithT(t)
	st := v1beta1.FeatureFlagStatus{Revision: "new", Delivered: "0/2", Consumers: []v1beta1.ConsumerRevision{
		{Kind: "ConfigMap", Namespace: "platform", Name: "flagd.platform.flags", Revision: "old"},
		{Kind: "ConfigMap", Namespace: "team", Name: "flagd.platform.flags", Revision: "old"},
	}}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1beta1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonAccepted})

	own := flagSetVerdict("platform", st, refused{}, "", nil, topology.Consumers{})
	g.Expect(own.Health).To(Equal(workflows.Stalled))
	g.Expect(own.Reason).To(Equal(v1beta1.ReasonDeliveryFailed))
	g.Expect(own.Message).To(ContainSubstring("exceeded quota"))

	st.Consumers = st.Consumers[1:]
	other := flagSetVerdict("platform", st, refused{}, "", nil, topology.Consumers{})
	g.Expect(other.Health).To(Equal(workflows.Stalled))
	g.Expect(other.Message).To(ContainSubstring("ConfigMap team/flagd.platform.flags"))
	g.Expect(other.Message).NotTo(ContainSubstring("quota"))
}
