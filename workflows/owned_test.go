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
		g.Expect(failures.Of(workflows.ObjectRef{Kind: "ConfigMap", Namespace: "shop", Name: cmName}).Message).To(ContainSubstring("not managed by flagplane"))
		g.Expect(failures.Of(workflows.ObjectRef{Kind: "ConfigMap", Namespace: "shop", Name: cmName}).Permanent).To(BeTrue(), "a name taken by a foreign object needs a user")

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
		g.Expect(failures.Of(workflows.ObjectRef{Kind: "RBAC", Namespace: "shop", Name: rbacName}).Message).To(ContainSubstring("not managed by flagplane"))
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

// TestManagedByValue: a manager whose --managed-by is another value (the
// OpenFeature Operator's) writes that value, adopts and relabels what it
// made under flagplane's default, takes over what carries its value, and
// still leaves everything else alone; it deletes no ConfigMap of a name it
// does not generate, whatever its label says.
func TestManagedByValue(t *testing.T) {
	const ofo = "open-feature-operator"
	cmName := topology.ConfigMapName(topology.FlagSetKey("shop", "flags"))
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	settings := workflows.DefaultSettings()
	settings.Generated.ManagedBy = ofo
	labelled := func(obj client.Object, value string) client.Object {
		obj.SetNamespace("shop")
		if value != "" {
			obj.SetLabels(map[string]string{v1beta1.LabelManagedBy: value})
		}
		return obj
	}
	cm := func(name, value string) client.Object {
		return labelled(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"old": "content"}}, value)
	}
	get := func(g Gomega, c client.Client, name string) *corev1.ConfigMap {
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: name}, got)).To(Succeed())
		return got
	}

	for _, tc := range []struct {
		name     string
		existing string // the managed-by value of the ConfigMap in the cluster
		cached   bool   // in the manager's cache (which selects what it owns)
	}{
		{"its own value, not in the cache yet: written", ofo, false},
		{"flagplane's default, not in the cache yet: adopted", "flagplane", false},
		{"flagplane's default, in the cache: relabelled", "flagplane", true},
	} {
		t.Run("ConfigMap, "+tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v, c := workflowstest.World(t, cm(cmName, tc.existing))
			var cache client.Client = workflowstest.EmptyCache{Client: c}
			if tc.cached {
				cache = c
			}
			r := &configmaps.Reconciler{Client: cache, Live: c, Settings: settings, Failures: &workflows.WriteFailures{}}
			g.Expect(r.Reconcile(context.Background(), v, "shop", cmName)).To(Succeed())
			got := get(g, c, cmName)
			g.Expect(got.Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo))
			g.Expect(got.Data).To(HaveKey(topology.ConfigMapDataKey(topology.FlagSetKey("shop", "flags"))))
			if tc.cached {
				g.Expect(got.Data).NotTo(HaveKey("old"), "flagplane's content only")
			}
		})
	}

	t.Run("ConfigMap of another tool, under a generated name: not taken over", func(t *testing.T) {
		g := NewWithT(t)
		v, c := workflowstest.World(t, cm(cmName, "Helm"))
		r := &configmaps.Reconciler{Client: workflowstest.EmptyCache{Client: c}, Live: c, Settings: settings, Failures: &workflows.WriteFailures{}}
		err := r.Reconcile(context.Background(), v, "shop", cmName)
		g.Expect(workflows.IsNotManaged(err)).To(BeTrue(), "got %v", err)
		g.Expect(err).To(MatchError(ContainSubstring("no label app.kubernetes.io/managed-by=open-feature-operator or flagplane")))
		g.Expect(get(g, c, cmName).Data).To(Equal(map[string]string{"old": "content"}))
	})

	t.Run("the default value does not take over the OpenFeature Operator's", func(t *testing.T) {
		g := NewWithT(t)
		v, c := workflowstest.World(t, cm(cmName, ofo))
		r := &configmaps.Reconciler{Client: workflowstest.EmptyCache{Client: c}, Live: c, Settings: workflows.DefaultSettings(), Failures: &workflows.WriteFailures{}}
		err := r.Reconcile(context.Background(), v, "shop", cmName)
		g.Expect(workflows.IsNotManaged(err)).To(BeTrue(), "got %v", err)
		g.Expect(err).To(MatchError(ContainSubstring("no label app.kubernetes.io/managed-by=flagplane)")))
		g.Expect(get(g, c, cmName).Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo))
	})

	t.Run("no ConfigMap that no workload needs is deleted unless its name is a generated one", func(t *testing.T) {
		g := NewWithT(t)
		gone := topology.ConfigMapName(topology.FlagSetKey("shop", "gone"))
		v, c := workflowstest.World(t, cm("settings", ofo), cm(gone, ofo))
		r := &configmaps.Reconciler{Client: c, Live: c, Settings: settings, Failures: &workflows.WriteFailures{}}
		g.Expect(r.Reconcile(context.Background(), v, "shop", "settings")).To(Succeed())
		get(g, c, "settings")
		g.Expect(r.Reconcile(context.Background(), v, "shop", gone)).To(Succeed())
		err := c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: gone}, &corev1.ConfigMap{})
		g.Expect(err).To(HaveOccurred(), "a generated name that no workload needs is deleted")
	})

	t.Run("Role and RoleBinding: what it made as flagplane is adopted and relabelled", func(t *testing.T) {
		g := NewWithT(t)
		name := rbac.Name(web)
		role := labelled(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}}, "flagplane")
		v, c := workflowstest.World(t, role)
		r := &rbac.Reconciler{Client: workflowstest.EmptyCache{Client: c}, Live: c, Generated: settings.Generated, Failures: &workflows.WriteFailures{}}
		g.Expect(r.Reconcile(context.Background(), v, web)).To(Succeed())
		gotRole, gotBinding := &rbacv1.Role{}, &rbacv1.RoleBinding{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: name}, gotRole)).To(Succeed())
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: name}, gotBinding)).To(Succeed())
		g.Expect(gotRole.Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo))
		g.Expect(gotRole.Rules).NotTo(BeEmpty())
		g.Expect(gotBinding.Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo))
	})
}
