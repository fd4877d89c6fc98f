package workflows

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// squatWorld: a flag set read by a workload of its namespace with the file
// and the kubernetes provider, and a client whose cluster holds what is given.
func squatWorld(t *testing.T, existing ...client.Object) (*topology.View, client.Client) {
	t.Helper()
	topo := topology.New()
	for _, m := range []string{
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"flags","uid":"ff"},"spec":{"flagSpec":{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on"}}}}}`,
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"src"},"spec":{"sources":[{"source":"flags"},{"source":"flags","provider":"kubernetes"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"web"}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}`,
	} {
		if err := manifests.Load(topo, strings.NewReader(m)); err != nil {
			t.Fatal(err)
		}
	}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1beta1.AddToScheme(s)
	return topo.Snapshot(), fake.NewClientBuilder().WithScheme(s).WithObjects(existing...).Build()
}

// TestGeneratedNamesAreNotTakenOver: a ConfigMap, Role or RoleBinding that
// somebody else made under a name flagplane generates is left as it is, and
// the failure is remembered for status; one of flagplane's own (labelled)
// that the cache has not seen yet is written.
func TestGeneratedNamesAreNotTakenOver(t *testing.T) {
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	cmName := topology.ConfigMapName(topology.FlagSetKey("shop", "flags"))
	rbacName := RBACName(web)
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
		v, c := squatWorld(t, squatCM.DeepCopyObject().(client.Object))
		failures := &WriteFailures{}
		r := &ConfigMapReconciler{Client: emptyCache{c}, Live: c, Failures: failures}
		err := r.Reconcile(context.Background(), v, "shop", cmName)
		g.Expect(IsNotManaged(err)).To(BeTrue(), "got %v", err)
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: cmName}, got)).To(Succeed())
		g.Expect(got.Data).To(Equal(map[string]string{"mine": "yes"}), "not taken over")
		g.Expect(got.Labels).NotTo(HaveKey(v1beta1.LabelManagedBy))
		g.Expect(failures.Of(ObjectRef{Kind: "ConfigMap", Namespace: "shop", Name: cmName})).To(ContainSubstring("not managed by flagplane"))

		obs := CacheObserved{Ctx: context.Background(), Reader: emptyCache{c}, Failures: failures}
		src, _ := v.Source(topology.SourceKey("shop", "src"))
		st := DesiredSourceStatus(v, src, obs, testSettings)
		programmed := findCondition(st.Conditions, v1beta1.ConditionProgrammed)
		g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonApplyFailed))
		g.Expect(programmed.Message).To(ContainSubstring("ConfigMap shop/" + cmName + " exists and is not managed by flagplane"))
	})

	t.Run("Role", func(t *testing.T) {
		g := NewWithT(t)
		v, c := squatWorld(t, squatRole.DeepCopyObject().(client.Object))
		failures := &WriteFailures{}
		r := &RBACReconciler{Client: emptyCache{c}, Live: c, Failures: failures}
		err := r.Reconcile(context.Background(), v, web)
		g.Expect(IsNotManaged(err)).To(BeTrue(), "got %v", err)
		got := &rbacv1.Role{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: rbacName}, got)).To(Succeed())
		g.Expect(got.Rules).To(Equal(squatRole.(*rbacv1.Role).Rules), "not taken over")
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: rbacName}, &rbacv1.RoleBinding{})).NotTo(Succeed(),
			"no binding to a Role flagplane does not control")
		g.Expect(failures.Of(ObjectRef{Kind: "RBAC", Namespace: "shop", Name: rbacName})).To(ContainSubstring("not managed by flagplane"))
	})

	t.Run("flagplane's own, not in the cache yet", func(t *testing.T) {
		g := NewWithT(t)
		own := squatCM.DeepCopyObject().(client.Object)
		own.SetLabels(ManagedLabels())
		v, c := squatWorld(t, own)
		r := &ConfigMapReconciler{Client: emptyCache{c}, Live: c, Failures: &WriteFailures{}}
		g.Expect(r.Reconcile(context.Background(), v, "shop", cmName)).To(Succeed())
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: cmName}, got)).To(Succeed())
		g.Expect(got.Data).To(HaveKey(topology.ConfigMapDataKey(topology.FlagSetKey("shop", "flags"))))
	})
}

// emptyCache is a client whose reads see nothing: the manager's cache,
// which holds only labelled ConfigMaps, Roles and RoleBindings, before it
// has seen any. Writes go through.
type emptyCache struct{ client.Client }

func (emptyCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return notFound(obj.GetObjectKind().GroupVersionKind().Kind, key.Name)
}

func (emptyCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func findCondition(cs []metav1.Condition, t string) metav1.Condition {
	for _, c := range cs {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

func notFound(kind, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, name)
}
