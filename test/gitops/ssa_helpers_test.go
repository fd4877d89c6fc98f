package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// ssaTool is a GitOps tool as it applies: by server-side apply under its
// own field manager, with the metadata it tracks its objects by on every
// object of the application.
type ssaTool struct {
	name    string
	manager string
	// metadata are the labels and annotations the tool puts on an object
	// of the given group, kind, namespace and name.
	metadata func(group, kind, ns, name string) (labels, annotations map[string]string)
}

// argoCD applies as Argo CD with ServerSideApply=true and the
// annotation+label tracking method: its SSA field manager, the instance
// label and the tracking-id annotation, and its sync options on the object.
var argoCD = ssaTool{
	name:    "Argo CD",
	manager: "argocd-controller",
	metadata: func(group, kind, ns, name string) (map[string]string, map[string]string) {
		return map[string]string{"app.kubernetes.io/instance": "shop"},
			map[string]string{
				"argocd.argoproj.io/tracking-id":  fmt.Sprintf("shop:%s/%s:%s/%s", group, kind, ns, name),
				"argocd.argoproj.io/sync-options": "ServerSideApply=true",
			}
	},
}

// flux applies as Flux's kustomize-controller: its field manager and the
// owner labels of the Kustomization (fluxcd/pkg/ssa SetOwnerLabels).
var flux = ssaTool{
	name:    "Flux",
	manager: "kustomize-controller",
	metadata: func(_, _, _, _ string) (map[string]string, map[string]string) {
		return map[string]string{
			"kustomize.toolkit.fluxcd.io/name":      "shop",
			"kustomize.toolkit.fluxcd.io/namespace": "flux-system",
		}, nil
	},
}

// ssaAppImage is an application the node runs as an idle placeholder.
const ssaAppImage = "example.com/shop/web:1.0"

// ssaManifests are what the tool applies from Git, in order: a
// ServiceAccount, two FeatureFlags, a FeatureFlagSource (rolloutOnChange,
// one entry by file and one by the kubernetes provider, so that flagplane
// generates ConfigMaps, a Role and a RoleBinding), a Deployment opting in by
// annotation, and a Flagd of the same source with an Ingress and an
// HTTPRoute. stage is the value of an environment variable of the source,
// which the sidecars get: changing it changes what is injected.
const ssaManifests = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: web, namespace: NS}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: checkout, namespace: NS}
spec:
  flagSpec:
    flags:
      new-checkout:
        state: ENABLED
        variants: {"on": true, "off": false}
        defaultVariant: "off"
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: pricing, namespace: NS}
spec:
  flagSpec:
    flags:
      discount:
        state: ENABLED
        variants: {"none": 0, "some": 10}
        defaultVariant: none
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: flags, namespace: NS}
spec:
  rolloutOnChange: true
  envVars:
  - {name: STAGE, value: "STAGE_VALUE"}
  sources:
  - {source: checkout, provider: file}
  - {source: pricing, provider: kubernetes}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        openfeature.dev/enabled: "true"
        openfeature.dev/featureflagsource: flags
    spec:
      serviceAccountName: web
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: APP_IMAGE
---
apiVersion: core.openfeature.dev/v1beta1
kind: Flagd
metadata: {name: edge, namespace: NS}
spec:
  featureFlagSource: flags
  ingress:
    enabled: true
    hosts: [flags.shop.example]
  gatewayApiRoutes:
    enabled: true
    hosts: [flags.shop.example]
`

// manifests renders ssaManifests for namespace ns and stage, with the
// tool's tracking metadata on every object, as the tool sends them.
func (t ssaTool) manifests(ns, stage string) []*unstructured.Unstructured {
	GinkgoHelper()
	text := strings.NewReplacer("NS", ns, "STAGE_VALUE", stage, "APP_IMAGE", ssaAppImage).Replace(ssaManifests)
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "\n---\n") {
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		gvk := u.GroupVersionKind()
		labels, annotations := t.metadata(gvk.Group, gvk.Kind, ns, u.GetName())
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		out = append(out, u)
	}
	return out
}

// trackingKeys are the keys of the labels and annotations the tool puts on
// what it applies.
func (t ssaTool) trackingKeys() []string {
	labels, annotations := t.metadata("g", "K", "ns", "n")
	return slices.Sorted(maps.Keys(mergeMaps(labels, annotations)))
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// apply server-side applies obj as the tool: the object is left as the
// API server returns it.
func (t ssaTool) apply(ctx context.Context, obj *unstructured.Unstructured, opts ...client.ApplyOption) error {
	return k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), append([]client.ApplyOption{client.FieldOwner(t.manager)}, opts...)...)
}

// applyAll applies every manifest, each a copy, and fails on the first error.
func (t ssaTool) applyAll(ctx context.Context, objs []*unstructured.Unstructured, opts ...client.ApplyOption) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(t.apply(ctx, o.DeepCopy(), opts...)).To(Succeed(), "%s applying %s %s", t.name, o.GetKind(), o.GetName())
	}
}

// comparable is what of an object a diff compares: everything but status
// and the metadata the API server keeps (resourceVersion, managedFields,
// timestamps, uid, generation).
func comparable(u *unstructured.Unstructured) map[string]any {
	out := maps.Clone(u.Object)
	delete(out, "status")
	out["metadata"] = map[string]any{"labels": u.GetLabels(), "annotations": u.GetAnnotations(),
		"ownerReferences": u.GetOwnerReferences(), "finalizers": u.GetFinalizers()}
	return out
}

// entriesOf are the managedFields entries of a manager.
func entriesOf(u *unstructured.Unstructured, manager string) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range u.GetManagedFields() {
		if e.Manager == manager {
			out = append(out, e)
		}
	}
	return out
}

// fieldsJSON is the field set of an entry as a JSON value, for comparison.
func fieldsJSON(e metav1.ManagedFieldsEntry) any {
	GinkgoHelper()
	var v any
	Expect(json.Unmarshal(e.FieldsV1.GetRawBytes(), &v)).To(Succeed())
	return v
}

// restartField is the field set of flagplane's restart of a workload:
// its pod template's restart annotation.
func restartField() any {
	return map[string]any{"f:spec": map[string]any{"f:template": map[string]any{"f:metadata": map[string]any{
		"f:annotations": map[string]any{"f:" + restarts.RestartedAtAnnotation: map[string]any{}}}}}}
}

// othersFields lists the managedFields entries of an object the tool
// applies that someone other than the tool owns outside status: those a
// GitOps tool would find itself fighting over. Status writes (flagplane's
// of its kinds, under whatever name; kube-controller-manager's of a
// Deployment) are not; nor is flagplane's restart of a Deployment, an
// Update of its pod template's restart annotation and nothing else.
func othersFields(u *unstructured.Unstructured, tool ssaTool) []string {
	GinkgoHelper()
	var out []string
	for _, e := range u.GetManagedFields() {
		switch {
		case e.Manager == tool.manager, e.Subresource == "status":
		case u.GetKind() == "Deployment" && e.Manager == v1beta1.FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate &&
			e.Subresource == "" && reflect.DeepEqual(fieldsJSON(e), restartField()):
		default:
			out = append(out, fmt.Sprintf("%s (%s): %s", e.Manager, e.Operation, e.FieldsV1.GetRawString()))
		}
	}
	return out
}

// managersReport renders who owns what of an object, for the report.
func managersReport(u *unstructured.Unstructured) string {
	var b strings.Builder
	for _, e := range u.GetManagedFields() {
		fmt.Fprintf(&b, "%s %s/%s: manager %s, %s", u.GetKind(), u.GetNamespace(), u.GetName(), e.Manager, e.Operation)
		if e.Subresource != "" {
			fmt.Fprintf(&b, " (subresource %s)", e.Subresource)
		}
		fmt.Fprintf(&b, ": %s\n", e.FieldsV1.GetRawString())
	}
	return b.String()
}

// ssaPods are the pods of app web that are not being deleted.
func ssaPods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": "web"}); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// ssaReadyPod waits until web has exactly one pod, Ready, admitted with
// flagplane's injection, whose flagd sidecar has FLAGD_STAGE=stage (the source's STAGE, with its envVarPrefix).
func ssaReadyPod(ctx context.Context, ns, stage string) corev1.Pod {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		pods, err := ssaPods(ctx, ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(1))
		pod = pods[0]
		g.Expect(pod.Annotations).To(HaveKey(restarts.AnnotationInjection))
		g.Expect(pod.Spec.InitContainers).To(ContainElement(And(
			HaveField("Name", injection.SidecarName),
			HaveField("Env", ContainElement(corev1.EnvVar{Name: "FLAGD_STAGE", Value: stage})))))
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
	}).WithTimeout(90*time.Second).Should(Succeed(), "web never ran one Ready pod with the sidecar of STAGE=%s", stage)
	return pod
}

// generatedKinds are the kinds flagplane generates, as listed.
var generatedKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMapList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBindingList"},
	{Group: "apps", Version: "v1", Kind: "DeploymentList"},
	{Version: "v1", Kind: "ServiceList"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "IngressList"},
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRouteList"},
}

// httpRoute is an empty HTTPRoute named name, to read into.
func httpRoute(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"})
	u.SetName(name)
	return u
}

// generated lists the objects of a namespace that carry flagplane's
// managed-by label, by kind.
func generated(ctx context.Context, ns string, managed map[string]string) map[string][]unstructured.Unstructured {
	GinkgoHelper()
	out := map[string][]unstructured.Unstructured{}
	for _, gvk := range generatedKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		Expect(k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(managed))).To(Succeed(), "listing %s", gvk.Kind)
		out[strings.TrimSuffix(gvk.Kind, "List")] = list.Items
	}
	return out
}
