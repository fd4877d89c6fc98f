package flagds

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/manifests"
)

const ofoManagedBy = "open-feature-operator"

// TestManagedByLabelsEveryObject: with --managed-by open-feature-operator,
// a Flagd's Deployment (and its pods), Service, Ingress and HTTPRoute carry
// the OpenFeature Operator's value, as its own e2e suite asserts.
func TestManagedByLabelsEveryObject(t *testing.T) {
	g := NewWithT(t)
	f, err := os.Open(filepath.Join("testdata", "file-ingress-gateway.in.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	topo := topology.New()
	g.Expect(manifests.Load(topo, f)).To(Succeed())
	opts := goldenFlagdOptions()
	opts.Generated = workflows.GeneratedMetadata{ManagedBy: ofoManagedBy, Labels: map[string]string{"cost-center": "a"}}
	objs := Desired(topo.Snapshot(), topology.FlagdKey("shop", "flags"), opts)
	g.Expect(objs.Deployment).NotTo(BeNil())
	g.Expect(objs.Ingress).NotTo(BeNil())
	g.Expect(objs.HTTPRoute).NotTo(BeNil())
	for what, l := range map[string]map[string]string{
		"Deployment":   objs.Deployment.Labels,
		"pod template": objs.Deployment.Spec.Template.Labels,
		"Service":      objs.Service.Labels,
		"Ingress":      objs.Ingress.Labels,
		"HTTPRoute":    objs.HTTPRoute.GetLabels(),
	} {
		g.Expect(l).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofoManagedBy), what)
		g.Expect(l).To(HaveKeyWithValue("cost-center", "a"), what)
	}
	g.Expect(objs.Deployment.Spec.Selector.MatchLabels).To(Equal(map[string]string{LabelApp: "flags"}),
		"the selector is the OpenFeature Operator's, which an existing Deployment keeps (it cannot change)")
}

// TestManagedByTakesOverInPlace: the Deployment the OpenFeature Operator
// made for a Flagd (its label, controlled by the Flagd) is taken over in
// place by a manager with its value, and left alone by one with
// flagplane's; one that the Flagd does not control is never deleted.
func TestManagedByTakesOverInPlace(t *testing.T) {
	ctx := context.Background()
	flagd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags", UID: "flagd-uid"}}
	ofoDeployment := func() *appsv1.Deployment {
		return &appsv1.Deployment{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags", UID: "ofo-made",
				Labels:          map[string]string{LabelApp: "flags", v1beta1.LabelManagedBy: ofoManagedBy},
				OwnerReferences: flagdOwner(flagd)},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: "flags"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelApp: "flags"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "flagd", Image: "flagd:old"}}}}},
		}
	}
	desired := ofoDeployment()
	desired.Spec.Template.Spec.Containers[0].Image = "flagd:new"
	desired.UID = ""
	desiredU := toUnstructured(desired)
	newClient := func(g Gomega, objs ...client.Object) client.Client {
		s := runtime.NewScheme()
		g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
		g.Expect(v1beta1.AddToScheme(s)).To(Succeed())
		return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	}
	deploymentChild := func(d *unstructured.Unstructured, wanted bool) child {
		return child{kind: "Deployment", gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), desired: d, wanted: wanted, current: &appsv1.Deployment{}}
	}

	t.Run("open-feature-operator: taken over in place", func(t *testing.T) {
		g := NewWithT(t)
		desiredU := desiredU.DeepCopy()
		desiredU.SetLabels(map[string]string{LabelApp: "flags", v1beta1.LabelManagedBy: ofoManagedBy})
		c := newClient(g, ofoDeployment())
		r := &Reconciler{Client: c, Live: c, Options: Options{Generated: workflows.GeneratedMetadata{ManagedBy: ofoManagedBy}}}
		ch := deploymentChild(desiredU, true)
		ch.reader = c
		inPlace, err := r.ensure(ctx, flagd, ch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(inPlace).To(BeTrue())
		got := &appsv1.Deployment{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(desired), got)).To(Succeed())
		g.Expect(got.UID).To(BeEquivalentTo("ofo-made"), "the same object")
		g.Expect(got.Spec.Template.Spec.Containers[0].Image).To(Equal("flagd:new"))
	})

	t.Run("flagplane: the OpenFeature Operator's is not its", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(g, ofoDeployment())
		r := &Reconciler{Client: c, Live: c, Options: Options{}}
		ch := deploymentChild(desiredU, true)
		ch.reader = c
		_, err := r.ensure(ctx, flagd, ch)
		g.Expect(workflows.IsNotManaged(err)).To(BeTrue(), "got %v", err)
		got := &appsv1.Deployment{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(desired), got)).To(Succeed())
		g.Expect(got.Spec.Template.Spec.Containers[0].Image).To(Equal("flagd:old"), "left as it is")
	})

	t.Run("open-feature-operator: one the Flagd does not control is not deleted", func(t *testing.T) {
		g := NewWithT(t)
		squat := ofoDeployment()
		squat.OwnerReferences = nil
		c := newClient(g, squat)
		r := &Reconciler{Client: c, Live: c, Options: Options{Generated: workflows.GeneratedMetadata{ManagedBy: ofoManagedBy}}}
		ch := deploymentChild(nil, false)
		ch.reader = c
		_, err := r.ensure(ctx, flagd, ch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(squat), &appsv1.Deployment{})).To(Succeed(), "still there")

		owned := ofoDeployment()
		c = newClient(g, owned)
		r.Client, r.Live = c, c
		ch.reader = c
		_, err = r.ensure(ctx, flagd, ch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(owned), &appsv1.Deployment{})).NotTo(Succeed(), "controlled by the Flagd and no longer wanted: deleted")
	})
}
