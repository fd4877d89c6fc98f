package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
)

// Scheme is what a client given to Scan and Apply must know: client-go's
// kinds, CRDs, and flagplane's API.
func Scheme() (*runtime.Scheme, error) {
	s, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the CRD kinds to the scheme: %w", err)
	}
	return s, nil
}

// Options configure Scan.
type Options struct {
	// ManagedBy is the value of app.kubernetes.io/managed-by that flagplane
	// labels what it generates with (its manager's --managed-by); empty
	// reads it from the managers on the cluster (ManagedBy). With the
	// OpenFeature Operator's value, what that made for a Flagd is
	// flagplane's now (taken over in place), not a leftover.
	ManagedBy string
}

// Scan reads the cluster with c (the caller's permissions: list and get
// cluster-wide, as a cluster administrator) and reports what the OpenFeature
// Operator left. Findings come in the order Apply removes them: admission
// first, so that new pods stop getting its sidecar.
func Scan(ctx context.Context, c client.Client, o Options) (*Report, error) {
	s := &scan{c: c, r: &Report{ManagedBy: o.ManagedBy}}
	if s.r.ManagedBy == "" {
		v, err := ManagedBy(ctx, c)
		if err != nil {
			return nil, err
		}
		s.r.ManagedBy = v
	}
	s.flagplane = workflows.GeneratedMetadata{ManagedBy: s.r.ManagedBy}
	pods, err := s.ofoPods(ctx)
	if err != nil {
		return nil, err
	}
	s.pods = pods
	for _, step := range []func(context.Context) error{
		s.manager, s.webhooks, s.kubernetesSync, s.ownRBAC, s.flagdProxy, s.flagdObjects, s.configMaps, s.podsToRoll, s.crds, s.takenOver,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return s.r, nil
}

type scan struct {
	c    client.Client
	r    *Report
	pods []ofoPod
	// flagplane tells flagplane's generated objects by their label.
	flagplane workflows.GeneratedMetadata
}

// flagplanes tells whether o is one of flagplane's generated objects: its
// label says so, and it is a Flagd's (the only kind of object flagplane
// generates that carries the OpenFeature Operator's label, when flagplane
// is configured with it).
func (s *scan) flagplanes(o client.Object) bool {
	return s.flagplane.Owns(o.GetLabels()) && isFlagdChild(o)
}

func (s *scan) add(f Finding) { s.r.Findings = append(s.r.Findings, f) }

func (s *scan) manager(ctx context.Context) error {
	var list appsv1.DeploymentList
	if err := s.c.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", ofoManagerDeployment)}); err != nil {
		return fmt.Errorf("looking for the OpenFeature Operator's manager: %w", err)
	}
	for _, d := range list.Items {
		s.r.ManagerRunning = true
		s.add(Finding{Object: objectOf(&d, "apps/v1", "Deployment"), Action: Manual,
			What:  "the OpenFeature Operator's manager",
			Means: "it still injects its own flagd into pods beside flagplane's (replacing the sidecar flagplane injected), validates FeatureFlags its way, grows its ClusterRoleBinding and recreates its flagd-proxy",
			Do: fmt.Sprintf("uninstall it: helm uninstall <release> -n %s (or delete what you installed it with); helm keeps the CRDs and your FeatureFlags, which flagplane takes over",
				d.Namespace)})
	}
	return nil
}

func (s *scan) webhooks(ctx context.Context) error {
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	if err := s.c.List(ctx, &mutating); err != nil {
		return fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for _, m := range mutating.Items {
		if m.Name != ofoMutatingConfiguration && !slices.ContainsFunc(m.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == ofoMutatingWebhook }) {
			continue
		}
		s.add(Finding{Object: objectOf(&m, "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"), Action: Remove,
			What: "the OpenFeature Operator's pod injector (webhook " + ofoMutatingWebhook + ")",
			Means: "while it is registered, a new pod with openfeature.dev/enabled gets the OpenFeature Operator's flagd too, which replaces the one flagplane injected; " +
				"with its Service gone, every pod creation waits for it to time out. flagplane's injector (flagplane-injector) replaces it"})
	}
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := s.c.List(ctx, &validating); err != nil {
		return fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	for _, v := range validating.Items {
		if v.Name != ofoValidatingConfiguration && !slices.ContainsFunc(v.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == ofoValidatingWebhook }) {
			continue
		}
		s.add(Finding{Object: objectOf(&v, "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"), Action: Remove,
			What: "the OpenFeature Operator's FeatureFlag validator (webhook " + ofoValidatingWebhook + ")",
			Means: "with its Service gone and failurePolicy Fail, every create and update of a FeatureFlag is refused; " +
				"flagplane's validator (flagplane-validator) replaces it"})
	}
	return nil
}

func (s *scan) kubernetesSync(ctx context.Context) error {
	used := s.usedBy(func(p ofoPod) bool { return p.kubernetesSync })
	crb := &rbacv1.ClusterRoleBinding{}
	switch err := s.c.Get(ctx, client.ObjectKey{Name: ofoKubernetesSync}, crb); {
	case err == nil:
		s.add(removeUnlessUsed(Finding{Object: objectOf(crb, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			What: fmt.Sprintf("the binding the OpenFeature Operator grows with the ServiceAccount of every pod of a kubernetes-provider source (%d subjects: %s)",
				len(crb.Subjects), subjects(crb.Subjects, 5)),
			Means: "it lets those ServiceAccounts read every FeatureFlag and FeatureFlagSource of the cluster; flagplane grants a workload a Role on the FeatureFlags of the namespaces it reads, and removes it with the workload"}, used))
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading ClusterRoleBinding %s: %w", ofoKubernetesSync, err)
	}
	cr := &rbacv1.ClusterRole{}
	switch err := s.c.Get(ctx, client.ObjectKey{Name: ofoKubernetesSync}, cr); {
	case err == nil:
		s.add(removeUnlessUsed(Finding{Object: objectOf(cr, "rbac.authorization.k8s.io/v1", "ClusterRole"),
			What:  "the role of that binding: get, list, watch on FeatureFlags and FeatureFlagSources",
			Means: "bound cluster-wide by " + ofoKubernetesSync + "; flagplane's Roles replace it"}, used))
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading ClusterRole %s: %w", ofoKubernetesSync, err)
	}
	return nil
}

// ownRBAC: the OpenFeature Operator's own cluster-wide roles and bindings
// (its manager's, its metrics proxy's), left when its namespace was deleted
// without uninstalling it.
func (s *scan) ownRBAC(ctx context.Context) error {
	if s.r.ManagerRunning {
		return nil // its own, in use: the manager's row says to uninstall it
	}
	var bindings rbacv1.ClusterRoleBindingList
	if err := s.c.List(ctx, &bindings); err != nil {
		return fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	for _, b := range bindings.Items {
		if !isOFOName(b.Name) || b.Name == ofoKubernetesSync {
			continue
		}
		s.add(Finding{Object: objectOf(&b, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), Action: Remove,
			What:  fmt.Sprintf("the OpenFeature Operator's own permissions: %s %s to %s", b.RoleRef.Kind, b.RoleRef.Name, subjects(b.Subjects, 5)),
			Means: "its manager is gone, but whoever creates a ServiceAccount of that name in that namespace gets these permissions"})
	}
	var roles rbacv1.ClusterRoleList
	if err := s.c.List(ctx, &roles); err != nil {
		return fmt.Errorf("listing ClusterRoles: %w", err)
	}
	for _, r := range roles.Items {
		if !isOFOName(r.Name) || r.Name == ofoKubernetesSync {
			continue
		}
		s.add(Finding{Object: objectOf(&r, "rbac.authorization.k8s.io/v1", "ClusterRole"), Action: Remove,
			What:  "a ClusterRole of the OpenFeature Operator's install",
			Means: "nothing of flagplane's uses it"})
	}
	return nil
}

func (s *scan) flagdProxy(ctx context.Context) error {
	if s.r.ManagerRunning {
		return nil // its manager would recreate it
	}
	used := s.usedBy(func(p ofoPod) bool { return p.flagdProxy })
	means := "flagd-proxy sources sync from flagplane's built-in sync server (Service flagplane-sync) once their pods are rolled"
	ofo := client.MatchingLabels{v1beta1.LabelManagedBy: ofoManagedByValue}
	for _, k := range []struct {
		list       client.ObjectList
		name, what string
		gvk        schema.GroupVersionKind
	}{
		{&appsv1.DeploymentList{}, ofoFlagdProxyDeployment, "the OpenFeature Operator's flagd-proxy", appsv1.SchemeGroupVersion.WithKind("Deployment")},
		{&corev1.ServiceList{}, ofoFlagdProxyService, "the Service of the OpenFeature Operator's flagd-proxy", corev1.SchemeGroupVersion.WithKind("Service")},
		{&policyv1.PodDisruptionBudgetList{}, ofoFlagdProxyPDB, "the disruption budget of the OpenFeature Operator's flagd-proxy", policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")},
	} {
		if err := s.c.List(ctx, k.list, ofo); err != nil {
			return fmt.Errorf("listing %ss: %w", k.gvk.Kind, err)
		}
		items, err := meta.ExtractList(k.list)
		if err != nil {
			return err
		}
		for _, item := range items {
			o := item.(client.Object)
			if o.GetName() != k.name || s.flagplanes(o) {
				continue
			}
			s.add(removeUnlessUsed(Finding{Object: objectOf(o, k.gvk.GroupVersion().String(), k.gvk.Kind), What: k.what, Means: means}, used))
		}
	}
	var sas corev1.ServiceAccountList
	if err := s.c.List(ctx, &sas, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", ofoFlagdProxyServiceAccount)}); err != nil {
		return fmt.Errorf("listing ServiceAccounts: %w", err)
	}
	for _, sa := range sas.Items {
		s.add(removeUnlessUsed(Finding{Object: objectOf(&sa, "v1", "ServiceAccount"), What: "the ServiceAccount of the OpenFeature Operator's flagd-proxy",
			Means: means}, used))
	}
	return nil
}

func (s *scan) configMaps(ctx context.Context) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	return each(ctx, s.c, list, func(obj client.Object) error {
		ann := obj.GetAnnotations()
		if _, ok := ann[ofoConfigMapAnnotation]; !ok || s.flagplane.Owns(obj.GetLabels()) {
			return nil
		}
		if !slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
			return r.Kind == v1beta1.FeatureFlagKind && strings.HasPrefix(r.APIVersion, v1beta1.GroupVersion.Group+"/")
		}) {
			return nil
		}
		ns, name := obj.GetNamespace(), obj.GetName()
		used := s.usedBy(func(p ofoPod) bool { return p.namespace == ns && slices.Contains(p.configMaps, name) })
		s.add(removeUnlessUsed(Finding{Object: objectOf(obj, "v1", "ConfigMap"),
			What: fmt.Sprintf("the OpenFeature Operator's copy of FeatureFlag %s/%s for the file provider", ns, ann[ofoConfigMapAnnotation]),
			Means: "nothing updates it any more: it holds the flags as they were when the OpenFeature Operator wrote it. " +
				"flagplane mounts its own ConfigMap (flagd.<namespace>.<name>), which follows every edit"}, used))
		return nil
	})
}

// flagdObjects finds what the OpenFeature Operator's manager made for a
// Flagd: a Deployment, Service, Ingress or HTTPRoute named like it, labelled
// as its, owned by the Flagd. flagplane makes its own of the same names and
// never takes over an object it did not make, so these must go; the
// Flagd's pods serve until they do, and flagplane's within seconds after.
// A flagplane configured with the OpenFeature Operator's label
// (--managed-by=open-feature-operator) takes them over in place instead:
// then they are flagplane's, and none is a leftover.
func (s *scan) flagdObjects(ctx context.Context) error {
	if s.r.ManagerRunning {
		return nil // its manager would recreate them
	}
	if s.flagplane.Owns(map[string]string{v1beta1.LabelManagedBy: ofoManagedByValue}) {
		return nil
	}
	ofo := client.MatchingLabels{v1beta1.LabelManagedBy: ofoManagedByValue}
	route := &unstructured.UnstructuredList{}
	route.SetGroupVersionKind(flagds.HTTPRouteGVK.GroupVersion().WithKind("HTTPRouteList"))
	for _, k := range []struct {
		list client.ObjectList
		gvk  schema.GroupVersionKind
	}{
		{&appsv1.DeploymentList{}, appsv1.SchemeGroupVersion.WithKind("Deployment")},
		{&corev1.ServiceList{}, corev1.SchemeGroupVersion.WithKind("Service")},
		{&networkingv1.IngressList{}, networkingv1.SchemeGroupVersion.WithKind("Ingress")},
		{route, flagds.HTTPRouteGVK},
	} {
		err := s.c.List(ctx, k.list, ofo)
		if meta.IsNoMatchError(err) {
			continue // Gateway API is not installed: no HTTPRoutes
		}
		if err != nil {
			return fmt.Errorf("listing %ss: %w", k.gvk.Kind, err)
		}
		items, err := meta.ExtractList(k.list)
		if err != nil {
			return err
		}
		for _, item := range items {
			o := item.(client.Object)
			for _, ref := range o.GetOwnerReferences() {
				if ref.Kind != v1beta1.FlagdKind || !strings.HasPrefix(ref.APIVersion, v1beta1.GroupVersion.Group+"/") || ref.Name != o.GetName() {
					continue
				}
				s.add(Finding{Object: objectOf(o, k.gvk.GroupVersion().String(), k.gvk.Kind), Action: Remove,
					What: "the " + k.gvk.Kind + " the OpenFeature Operator made for Flagd " + o.GetNamespace() + "/" + ref.Name,
					Means: "flagplane serves the Flagd and makes its own " + k.gvk.Kind + " of that name once this one is gone (it never takes over what it did not make); " +
						"until then the Flagd is not Programmed, and its pods keep serving. (A flagplane with --managed-by=" + ofoManagedByValue +
						", chart value managedBy, takes it over in place instead.)"})
				break
			}
		}
	}
	return nil
}

// each lists page by page and calls fn for every item.
func each(ctx context.Context, c client.Client, list client.ObjectList, fn func(client.Object) error) error {
	opts := &client.ListOptions{Limit: 500}
	for {
		if err := c.List(ctx, list, opts); err != nil {
			return err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok {
				return fmt.Errorf("unexpected list item %T", item)
			}
			if err := fn(obj); err != nil {
				return err
			}
		}
		next := list.GetContinue()
		if next == "" {
			return nil
		}
		opts.Continue = next
	}
}

func objectOf(o client.Object, apiVersion, kind string) Object {
	return Object{APIVersion: apiVersion, Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()}
}

func subjects(subs []rbacv1.Subject, max int) string {
	var out []string
	for _, s := range subs {
		switch {
		case s.Namespace != "":
			out = append(out, s.Kind+" "+s.Namespace+"/"+s.Name)
		default:
			out = append(out, s.Kind+" "+s.Name)
		}
	}
	if len(out) == 0 {
		return "nobody"
	}
	if len(out) > max {
		return strings.Join(out[:max], ", ") + fmt.Sprintf(" and %d more", len(out)-max)
	}
	return strings.Join(out, ", ")
}
