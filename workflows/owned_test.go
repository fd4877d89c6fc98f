package workflows_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/status"
)

// TestGeneratedNamesAreNotTakenOver: a ConfigMap, Role or RoleBinding that
// somebody else made under a name flagplane generates is left as it is, and
// the failure is remembered for status; one of flagplane's own (labelled)
// that the cache has not seen yet is written.
func TestGeneratedNamesAreNotTakenOver(t *testing.T) {
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	cmName := topology.ConfigMapName(topology.FlagSetKey("shop", "flags"))
	rbacName := rbac.Name(web)
	foreign := func(obj client.Object) client.Object {
		obj.SetNamespace("shop")
		obj.SetLabels(map[string]string{"team": "mine"})
		return obj
	}
	squatCM := foreign(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName}, Data: map[string]string{"mine": "yes"}})
	squatRole := foreign(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: rbacName},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}})

	t.Run("ConfigMap", func(t *testing.T) {
		g := NewWithT(t)
		v, c := workflowstest.World(t, squatCM.DeepCopyObject().(client.Object))
		failures := &workflows.WriteFailures{}
		r := &configmaps.Reconciler{Client: workflowstest.EmptyCache{Client: c}, Live: c, Failures: failures}
		err := r.Reconcile(context.Background(), v, "shop", cmName)
		g.Expect(workflows.IsNotManaged(err)).To(BeTrue(), "got %v", err)
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: cmName}, got)).To(Succeed())
		g.Expect(got.Data).To(Equal(map[string]string{"mine": "yes"}), "not taken over")
		g.Expect(got.Labels).NotTo(HaveKey(v1beta1.LabelManagedBy))
		g.Expect(failures.Of(workflows.ObjectRef{Kind: "ConfigMap", Namespace: "shop", Name: cmName})).To(ContainSubstring("not managed by flagplane"))

		obs := status.CacheObserved{Ctx: context.Background(), Reader: workflowstest.EmptyCache{Client: c}, Failures: failures}
		src, _ := v.Source(topology.SourceKey("shop", "src"))
		st := status.DesiredSource(v, src, obs, workflows.DefaultSettings())
		programmed := findCondition(st.Conditions, v1beta1.ConditionProgrammed)
		g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonApplyFailed))
		g.Expect(programmed.Message).To(ContainSubstring("ConfigMap shop/" + cmName + " exists and is not managed by flagplane"))
	})

	t.Run("Role", func(t *testing.T) {
		g := NewWithT(t)
		v, c := workflowstest.World(t, squatRole.DeepCopyObject().(client.Object))
		failures := &workflows.WriteFailures{}
		r := &rbac.Reconciler{Client: workflowstest.EmptyCache{Client: c}, Live: c, Failures: failures}
		err := r.Reconcile(context.Background(), v, web)
		g.Expect(workflows.IsNotManaged(err)).To(BeTrue(), "got %v", err)
		got := &rbacv1.Role{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: rbacName}, got)).To(Succeed())
		g.Expect(got.Rules).To(Equal(squatRole.(*rbacv1.Role).Rules), "not taken over")
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: rbacName}, &rbacv1.RoleBinding{})).NotTo(Succeed(),
			"no binding to a Role flagplane does not control")
		g.Expect(failures.Of(workflows.ObjectRef{Kind: "RBAC", Namespace: "shop", Name: rbacName})).To(ContainSubstring("not managed by flagplane"))
	})

	t.Run("flagplane's own, not in the cache yet", func(t *testing.T) {
		g := NewWithT(t)
		own := squatCM.DeepCopyObject().(client.Object)
		own.SetLabels(workflows.ManagedLabels())
		v, c := workflowstest.World(t, own)
		r := &configmaps.Reconciler{Client: workflowstest.EmptyCache{Client: c}, Live: c, Failures: &workflows.WriteFailures{}}
		g.Expect(r.Reconcile(context.Background(), v, "shop", cmName)).To(Succeed())
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: cmName}, got)).To(Succeed())
		g.Expect(got.Data).To(HaveKey(topology.ConfigMapDataKey(topology.FlagSetKey("shop", "flags"))))
	})
}

func findCondition(cs []metav1.Condition, t string) metav1.Condition {
	for _, c := range cs {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}
