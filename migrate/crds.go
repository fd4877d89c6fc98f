package migrate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// crds: flagplane serves FeatureFlags, FeatureFlagSources and
// InProcessConfigurations from CRDs of the same names. Those the OpenFeature
// Operator installed (helm uninstall keeps them) must be replaced by
// flagplane's before it runs.
func (s *scan) crds(ctx context.Context) error {
	for _, name := range ofoCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		switch err := s.c.Get(ctx, client.ObjectKey{Name: name}, crd); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
		}
		obj := objectOf(crd, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
		if extra := slices.DeleteFunc(slices.Clone(crd.Status.StoredVersions), func(v string) bool { return v == v1beta1.GroupVersion.Version }); len(extra) > 0 {
			s.add(Finding{Object: obj, Action: Manual,
				What:  "a CRD whose objects were stored in versions flagplane does not serve: " + strings.Join(extra, ", "),
				Means: "flagplane's CRD serves v1beta1 only; the API server refuses to drop a version objects may still be stored in",
				Do:    "rewrite every object in v1beta1 (kubectl get " + crd.Spec.Names.Plural + " -A -o json | kubectl replace -f -), then remove the other versions from the CRD's status.storedVersions"})
		}
		if isFlagplaneCRD(crd) {
			continue
		}
		s.add(Finding{Object: obj, Action: Manual,
			What:  "the OpenFeature Operator's CRD (" + managers(crd.ManagedFields) + ")",
			Means: "the same kind and API as flagplane's, with the OpenFeature Operator's schema: flagplane's fields (targetRefs, selector, status) are pruned until its CRD is installed",
			Do:    "install flagplane with kubectl apply --server-side --force-conflicts -k config/default: its CRDs take over the fields those managers own; your objects are kept"})
	}
	for name, kind := range ofoOnlyCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		switch err := s.c.Get(ctx, client.ObjectKey{Name: name}, crd); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
		}
		n, err := countOf(ctx, s.c, crd)
		if err != nil {
			return err
		}
		f := Finding{Object: objectOf(crd, "apiextensions.k8s.io/v1", "CustomResourceDefinition"), Action: Manual,
			What: fmt.Sprintf("a kind of the OpenFeature Operator's that flagplane does not serve: %s (%d objects)", kind, n),
			Do:   "when you no longer need them: kubectl delete crd " + name + " (which deletes its objects)"}
		f.Means = "a kind of older OpenFeature Operator releases; nothing reads it"
		s.add(f)
	}
	return nil
}

// isFlagplaneCRD: flagplane's CRDs have status conditions (and, for
// FeatureFlagSource, targetRefs); the OpenFeature Operator's have an
// empty status.
func isFlagplaneCRD(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name != v1beta1.GroupVersion.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		status, ok := v.Schema.OpenAPIV3Schema.Properties["status"]
		_, conditions := status.Properties["conditions"]
		return ok && conditions
	}
	return false
}

// takenOver counts the custom resources flagplane serves as they are.
func (s *scan) takenOver(ctx context.Context) error {
	for _, kind := range []string{v1beta1.FeatureFlagKind, v1beta1.FeatureFlagSourceKind, "InProcessConfiguration", v1beta1.FlagdKind} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(v1beta1.GroupVersion.WithKind(kind + "List"))
		n := 0
		err := each(ctx, s.c, list, func(client.Object) error { n++; return nil })
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("listing %ss: %w", kind, err)
		}
		if n > 0 {
			s.add(Finding{Object: Object{APIVersion: v1beta1.GroupVersion.String(), Kind: kind + "s"}, Count: n, Action: TakenOver})
		}
	}
	return nil
}

func countOf(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) (int, error) {
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
	n := 0
	err := each(ctx, c, list, func(client.Object) error { n++; return nil })
	if meta.IsNoMatchError(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("counting %s: %w", crd.Spec.Names.Plural, err)
	}
	return n, nil
}

// managers names the field managers of an object, for a message.
func managers(entries []metav1.ManagedFieldsEntry) string {
	var names []string
	for _, e := range entries {
		n := e.Manager + " (" + string(e.Operation) + ")"
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "no field managers"
	}
	return "fields owned by " + strings.Join(names, ", ")
}
