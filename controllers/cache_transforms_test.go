package controllers

import (
	"math/rand"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// workloadCase is a random workload of one kind, and how to read it as the
// graph does.
type workloadCase struct {
	kind     topology.Kind
	obj      client.Object
	template func(client.Object) *corev1.PodTemplateSpec
}

func randomWorkloads(f *randfill.Filler, r *rand.Rand) []workloadCase {
	d, s, ds := &appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}
	f.Fill(d)
	f.Fill(s)
	f.Fill(ds)
	out := []workloadCase{
		{topology.KindDeployment, d, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template }},
		{topology.KindStatefulSet, s, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.StatefulSet).Spec.Template }},
		{topology.KindDaemonSet, ds, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.DaemonSet).Spec.Template }},
	}
	for _, c := range out {
		tmpl := c.template(c.obj)
		// Random strings almost never opt in: make half of them do, with
		// references, kubectl's restart, and an empty service account.
		if r.Intn(2) == 0 {
			if tmpl.Annotations == nil {
				tmpl.Annotations = map[string]string{}
			}
			tmpl.Annotations[v1beta1.AnnotationEnabled] = "true"
			tmpl.Annotations[v1beta1.AnnotationFeatureFlagSource] = "a, other/b,c"
			tmpl.Annotations[v1beta1.AnnotationInProcessConfiguration] = "ipc"
			tmpl.Annotations[restarts.RestartedAtAnnotation] = "2026-11-28T02:00:00Z"
		}
		if r.Intn(3) == 0 {
			tmpl.Spec.ServiceAccountName = ""
		}
		if r.Intn(2) == 0 {
			a := c.obj.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[lastAppliedAnnotation] = `{"apiVersion":"apps/v1"}`
			c.obj.SetAnnotations(a)
		}
	}
	return out
}

// TestSlimWorkloadKeepsWhatTheGraphReads: over random workloads of every
// kind, the slim object the cache keeps reads as the same
// topology.Workload as the whole one (so the graph, and the relevance of
// an update, cannot tell them apart), and keeps what the other readers of
// a cached workload use: the identity an Event points at, owners,
// deletion, the pod template's annotations (rollouts, the healer).
func TestSlimWorkloadKeepsWhatTheGraphReads(t *testing.T) {
	g := NewWithT(t)
	gen := workflows.GeneratedMetadata{}
	transform := slimWorkloads(gen)
	r := rand.New(rand.NewSource(1))
	f := randfill.New().NilChance(0.2).NumElements(0, 3).RandSource(rand.NewSource(r.Int63()))
	for range 300 {
		for _, c := range randomWorkloads(f, r) {
			whole := c.obj.DeepCopyObject().(client.Object)
			out, err := transform(c.obj)
			g.Expect(err).NotTo(HaveOccurred())
			slim := out.(client.Object)

			g.Expect(topology.WorkloadFrom(c.kind, slim, c.template(slim))).
				To(Equal(topology.WorkloadFrom(c.kind, whole, c.template(whole))), "%s", c.kind)
			g.Expect(slim.GetName()).To(Equal(whole.GetName()))
			g.Expect(slim.GetNamespace()).To(Equal(whole.GetNamespace()))
			g.Expect(slim.GetUID()).To(Equal(whole.GetUID()))
			g.Expect(slim.GetResourceVersion()).To(Equal(whole.GetResourceVersion()))
			g.Expect(slim.GetGeneration()).To(Equal(whole.GetGeneration()))
			g.Expect(slim.GetOwnerReferences()).To(Equal(whole.GetOwnerReferences()))
			g.Expect(slim.GetDeletionTimestamp()).To(Equal(whole.GetDeletionTimestamp()))
			g.Expect(c.template(slim).Annotations).To(Equal(c.template(whole).Annotations))
			g.Expect(c.template(slim).Labels).To(Equal(c.template(whole).Labels))

			// What it drops.
			g.Expect(slim.GetManagedFields()).To(BeNil())
			g.Expect(slim.GetAnnotations()).NotTo(HaveKey(lastAppliedAnnotation))
			g.Expect(c.template(slim).Spec.Containers).To(BeEmpty())
			g.Expect(c.template(slim).Spec.Volumes).To(BeEmpty())
		}
	}
}

// TestSlimKeepsGeneratedObjectsWhole: what flagplane generated (a Flagd's
// Deployment, its ConfigMaps) is compared field by field by its reconciler
// and read for who owns its fields: the cache keeps it as it came.
func TestSlimKeepsGeneratedObjectsWhole(t *testing.T) {
	g := NewWithT(t)
	gen := workflows.GeneratedMetadata{}
	r := rand.New(rand.NewSource(3))
	f := randfill.New().NilChance(0.2).NumElements(1, 3).RandSource(rand.NewSource(r.Int63()))
	for range 50 {
		d := &appsv1.Deployment{}
		f.Fill(d)
		d.Labels = gen.ManagedLabels()
		d.Annotations = map[string]string{lastAppliedAnnotation: "{}"}
		whole := d.DeepCopy()
		out, err := slimWorkloads(gen)(d)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal(whole))

		cm := &corev1.ConfigMap{}
		f.Fill(cm)
		cm.Labels = gen.ManagedLabels()
		wholeCM := cm.DeepCopy()
		out, err = slimObjects(gen)(cm)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal(wholeCM))
	}
}

// TestSlimObjectsDropsOnlyManagedFieldsAndLastApplied: a FeatureFlag keeps
// everything but kubectl's last-applied record and the field sets of its
// managedFields (who wrote it, how, when and to which subresource stay, for
// its revision history); any other object flagplane did not generate,
// metadata-only ones included, keeps everything but its managedFields and
// the last-applied record.
func TestSlimObjectsDropsOnlyManagedFieldsAndLastApplied(t *testing.T) {
	g := NewWithT(t)
	gen := workflows.GeneratedMetadata{}
	r := rand.New(rand.NewSource(5))
	f := randfill.New().NilChance(0.2).NumElements(1, 3).RandSource(rand.NewSource(r.Int63()))
	for range 50 {
		ff := &v1beta1.FeatureFlag{}
		f.Fill(&ff.ObjectMeta)
		ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: v1beta1.FlagStateEnabled, DefaultVariant: "on"}}
		if ff.Annotations == nil {
			ff.Annotations = map[string]string{}
		}
		ff.Annotations[lastAppliedAnnotation] = "{}"
		ff.ManagedFields = append(ff.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "core.openfeature.dev/v1beta1", Time: &metav1.Time{}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)})
		want := ff.DeepCopy()
		for i := range want.ManagedFields {
			want.ManagedFields[i].FieldsV1 = nil
		}
		delete(want.Annotations, lastAppliedAnnotation)
		if len(want.Annotations) == 0 {
			want.Annotations = nil
		}
		out, err := slimObjects(gen)(ff)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal(want))
		slim := out.(*v1beta1.FeatureFlag)
		g.Expect(slim.ManagedFields).NotTo(BeEmpty())
		for _, e := range slim.ManagedFields {
			g.Expect(e.FieldsV1).To(BeNil())
		}
		last := slim.ManagedFields[len(slim.ManagedFields)-1]
		g.Expect([]string{last.Manager, string(last.Operation), last.Subresource}).To(Equal([]string{"kubectl-edit", "Update", ""}))
		g.Expect(last.Time).NotTo(BeNil())

		// A FeatureFlag that no one wrote with field tracking has none.
		bare := &v1beta1.FeatureFlag{}
		out, err = slimObjects(gen)(bare)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.(*v1beta1.FeatureFlag).ManagedFields).To(BeNil())

		// Other objects keep no managedFields at all.
		src := &v1beta1.FeatureFlagSource{}
		f.Fill(&src.ObjectMeta)
		src.ManagedFields = append(src.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-edit"})
		out, err = slimObjects(gen)(src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.(*v1beta1.FeatureFlagSource).ManagedFields).To(BeNil())

		rs := &metav1.PartialObjectMetadata{}
		f.Fill(&rs.ObjectMeta)
		rs.Labels = map[string]string{"app": "web"}
		wantRS := rs.DeepCopy()
		wantRS.ManagedFields = nil
		out, err = slimObjects(gen)(rs)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal(wantRS))
	}
	// A tombstone, or anything that is not an object, passes unchanged.
	out, err := slimObjects(gen)("not an object")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("not an object"))
}
