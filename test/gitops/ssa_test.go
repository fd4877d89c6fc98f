package gitops

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// What a GitOps tool that applies with server-side apply sees of flagplane:
// Argo CD (ServerSideApply=true, server-side diff) and Flux's
// kustomize-controller both apply under a field manager of their own, with
// force, and then find what to sync by a dry-run apply. flagplane writes no
// field of their objects but the documented one — the restart annotation of
// a workload's pod template, under field manager flagplane — and the status
// of its own kinds; and nothing it generates carries their tracking
// metadata, although the objects it generates them for do.
var _ = Describe("server-side apply by a GitOps tool's field manager", func() {
	for _, tool := range []ssaTool{argoCD, flux} {
		It(fmt.Sprintf("%s (%s): re-applies without conflict, sees no diff, shares only flagplane's restart annotation, and finds its tracking metadata on nothing generated", tool.name, tool.manager), func(ctx SpecContext) {
			ssaSpec(ctx, tool)
		}, SpecTimeout(5*time.Minute))
	}
})

func ssaSpec(ctx SpecContext, tool ssaTool) {
	ns := newNamespace(ctx, "ssa")
	objs := tool.manifests(ns, "1")
	byKind := func(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
		GinkgoHelper()
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		Fail("no manifest " + kind + " " + name)
		return nil
	}
	deploymentKey := client.ObjectKey{Namespace: ns, Name: "web"}
	restartedAt := func() (string, error) {
		var d appsv1.Deployment
		err := k8s.Get(ctx, deploymentKey, &d)
		return d.Spec.Template.Annotations[restarts.RestartedAtAnnotation], err
	}
	sourceReconciled := func(g Gomega) {
		var src v1beta1.FeatureFlagSource
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flags"}, &src)).To(Succeed())
		g.Expect(src.Status.ObservedGeneration).To(Equal(src.Generation))
		g.Expect(meta.IsStatusConditionTrue(src.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue(), "Programmed: %v", src.Status.Conditions)
	}

	By(tool.name + " applies two FeatureFlags, a FeatureFlagSource, a Deployment opting in and a Flagd, with force, as it syncs")
	tool.applyAll(ctx, objs, client.ForceOwnership)

	By("flagplane reconciles: the source is Programmed; the ConfigMap, Role and RoleBinding exist; the pod runs its sidecar; the Flagd has its objects")
	Eventually(sourceReconciled).Should(Succeed())
	rbacName := rbac.Name(topology.WorkloadKey(topology.KindDeployment, ns, "web"))
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: topology.ConfigMapName(topology.FlagSetKey(ns, "checkout"))}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: rbacName}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbacName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "edge"}},
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "edge"}},
		httpRoute("edge"),
	} {
		key := client.ObjectKey{Namespace: ns, Name: obj.GetName()}
		Eventually(func() error { return k8s.Get(ctx, key, obj) }).Should(Succeed(), "%T %s", obj, key.Name)
	}
	first := ssaReadyPod(ctx, ns, "1")

	By("a commit changes the source's environment: " + tool.name + " applies it, and flagplane restarts the Deployment (rolloutOnChange)")
	before, err := restartedAt()
	Expect(err).NotTo(HaveOccurred())
	objs = tool.manifests(ns, "2")
	Expect(tool.apply(ctx, byKind(objs, v1beta1.FeatureFlagSourceKind, "flags").DeepCopy(), client.ForceOwnership)).To(Succeed())
	Eventually(restartedAt).ShouldNot(Equal(before), "flagplane never restarted the Deployment")
	second := ssaReadyPod(ctx, ns, "2")
	Expect(second.UID).NotTo(Equal(first.UID))
	Eventually(sourceReconciled).Should(Succeed())
	Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8s.Get(ctx, deploymentKey, &d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.Replicas).To(Equal(int32(1)))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(1)))
	}).Should(Succeed(), "the Deployment's rollout never settled")

	By(tool.name + " re-applies exactly the same manifests without force: no conflict, and nothing written")
	for _, m := range objs {
		Expect(tool.apply(ctx, m.DeepCopy())).To(Succeed(), "re-applying %s %s without force", m.GetKind(), m.GetName())
	}
	for _, m := range objs {
		// Retried only for a write of someone else in between (a status).
		Eventually(func(g Gomega) {
			rv := live(ctx, m).GetResourceVersion()
			got := m.DeepCopy()
			g.Expect(tool.apply(ctx, got)).To(Succeed())
			g.Expect(got.GetResourceVersion()).To(Equal(rv), "re-applying %s %s wrote it", m.GetKind(), m.GetName())
		}).Should(Succeed())
	}

	By("a server-side dry-run apply of the same manifests, as Argo CD's server-side diff and Flux's drift detection make it, predicts the live objects")
	for _, m := range objs {
		predicted := m.DeepCopy()
		Expect(tool.apply(ctx, predicted, client.DryRunAll)).To(Succeed())
		Expect(comparable(predicted)).To(Equal(comparable(live(ctx, m))), "the diff of %s %s", m.GetKind(), m.GetName())
	}
	src := live(ctx, byKind(objs, v1beta1.FeatureFlagSourceKind, "flags"))
	Expect(src.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("port", BeNumerically("==", 8013))),
		"the CRD's OpenAPI defaults are in the live object and in the prediction alike (spec.port)")
	for _, e := range src.GetManagedFields() {
		Expect(fieldsJSON(e)).NotTo(HaveKeyWithValue("f:spec", HaveKey("f:port")), "a default is nobody's field: %s owns spec.port", e.Manager)
	}

	By("control: the dry run shows a real change of the manifests as a diff, and writes nothing")
	for _, change := range []struct {
		kind, name string
		path       []string
		value      any
	}{
		{v1beta1.FeatureFlagKind, "checkout", []string{"spec", "flagSpec", "flags", "new-checkout", "defaultVariant"}, "on"},
		{v1beta1.FeatureFlagSourceKind, "flags", []string{"spec", "debugLogging"}, true},
		{"Deployment", "web", []string{"spec", "template", "metadata", "labels", "tier"}, "front"},
		{v1beta1.FlagdKind, "edge", []string{"spec", "replicas"}, int64(2)},
	} {
		m := byKind(objs, change.kind, change.name)
		changed := m.DeepCopy()
		Expect(unstructured.SetNestedField(changed.Object, change.value, change.path...)).To(Succeed())
		before := live(ctx, m)
		was, _, _ := unstructured.NestedFieldNoCopy(before.Object, change.path...)
		Expect(tool.apply(ctx, changed, client.DryRunAll)).To(Succeed())
		l := live(ctx, m)
		Expect(comparable(changed)).NotTo(Equal(comparable(l)), "a dry run of a changed %s %s shows no diff", change.kind, change.name)
		got, _, _ := unstructured.NestedFieldNoCopy(changed.Object, change.path...)
		Expect(got).To(Equal(change.value))
		// Not the resourceVersion: the manager may write the object's
		// status meanwhile. A write of the change would bump the
		// generation, and put the value in the live object.
		now, _, _ := unstructured.NestedFieldNoCopy(l.Object, change.path...)
		if was == nil {
			Expect(now).To(BeNil(), "the dry run wrote %s %s", change.kind, change.name)
		} else {
			Expect(now).To(Equal(was), "the dry run wrote %s %s", change.kind, change.name)
		}
		Expect(l.GetGeneration()).To(Equal(before.GetGeneration()), "the dry run wrote %s %s", change.kind, change.name)
	}

	By("managedFields: " + tool.manager + " owns what it applies; flagplane owns nothing of the FeatureFlags, the source and the Flagd, and of the Deployment only its restart annotation")
	for _, m := range objs {
		l := live(ctx, m)
		what := m.GetKind() + " " + m.GetName()
		Expect(entriesOf(l, tool.manager)).To(ConsistOf(And(
			HaveField("Operation", metav1.ManagedFieldsOperationApply), HaveField("Subresource", ""))), what)
		if _, hasSpec := m.Object["spec"]; hasSpec {
			Expect(fieldsJSON(entriesOf(l, tool.manager)[0])).To(HaveKey("f:spec"), "%s: the tool owns its spec", what)
		}
		Expect(othersFields(l, tool)).To(BeEmpty(), "%s: fields of the tool's object that someone else owns", what)
	}
	web := live(ctx, byKind(objs, "Deployment", "web"))
	AddReportEntry("managedFields of the Deployment", managersReport(web))
	Expect(entriesOf(web, v1beta1.FieldManager)).To(ConsistOf(And(
		HaveField("Operation", metav1.ManagedFieldsOperationUpdate), HaveField("Subresource", ""),
		WithTransform(fieldsJSON, Equal(restartField())))),
		"flagplane's restart is recorded under field manager %s, and is all it owns", v1beta1.FieldManager)

	By("control: a write of flagplane's to a FeatureFlag's metadata or to more of the Deployment would be seen (dry run)")
	for _, m := range []*unstructured.Unstructured{byKind(objs, v1beta1.FeatureFlagKind, "checkout"), byKind(objs, "Deployment", "web")} {
		written := live(ctx, m)
		patch := []byte(`{"metadata":{"labels":{"example.com/touched":"yes"}}}`)
		if m.GetKind() == "Deployment" {
			patch = []byte(`{"spec":{"template":{"metadata":{"annotations":{"example.com/touched":"yes"}}}}}`)
		}
		Expect(k8s.Patch(ctx, written, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v1beta1.FieldManager), client.DryRunAll)).To(Succeed())
		Expect(othersFields(written, tool)).NotTo(BeEmpty(), "%s %s: flagplane's write is not seen", m.GetKind(), m.GetName())
	}

	By("control: applying a field flagplane owns without force is a conflict (dry run)")
	d := byKind(objs, "Deployment", "web").DeepCopy()
	Expect(unstructured.SetNestedField(d.Object, "2020-01-01T00:00:00Z", "spec", "template", "metadata", "annotations", restarts.RestartedAtAnnotation)).To(Succeed())
	err = tool.apply(ctx, d, client.DryRunAll)
	Expect(apierrors.IsConflict(err)).To(BeTrue(), "applying spec.template.metadata.annotations[%s]: %v", restarts.RestartedAtAnnotation, err)
	Expect(err.Error()).To(ContainSubstring(`conflict with "%s"`, v1beta1.FieldManager))

	By("generated objects carry none of " + tool.name + "'s tracking metadata; the objects they are generated for do")
	keys := tool.trackingKeys()
	for _, m := range objs {
		l := live(ctx, m)
		for _, k := range keys {
			Expect(mergeMaps(l.GetLabels(), l.GetAnnotations())).To(HaveKey(k), "%s %s", m.GetKind(), m.GetName())
		}
	}
	gen := generated(ctx, ns, workflows.ManagedLabels())
	for _, kind := range []string{"ConfigMap", "Role", "RoleBinding", "Deployment", "Service", "Ingress", "HTTPRoute"} {
		Expect(gen[kind]).NotTo(BeEmpty(), "flagplane generated no %s", kind)
		for _, o := range gen[kind] {
			md := mergeMaps(o.GetLabels(), o.GetAnnotations())
			for k := range md {
				Expect(k).NotTo(BeElementOf(keys), "%s %s carries %s's %s", kind, o.GetName(), tool.name, k)
				Expect(workflows.GitOpsKey(k)).To(BeFalse(), "%s %s carries a GitOps tool's %s", kind, o.GetName(), k)
			}
		}
	}
	Expect(gen["Service"]).To(ContainElement(HaveField("Object", HaveKeyWithValue("metadata", HaveKeyWithValue("labels",
		HaveKeyWithValue(flagds.LabelApp, "edge"))))), "the Flagd's Service, which gets the Flagd's own annotations")
}
