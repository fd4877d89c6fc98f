package admissionfuzz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// MaxRequestBytes is the largest request body the API server reads (its
// --max-request-bytes default, 3 MiB); a larger one is refused whole.
const MaxRequestBytes = 3 << 20

// CRD is one of flagplane's custom resource definitions, served as the API
// server serves it: the steps the API server takes on a create of one of
// its objects, from k8s.io/apiextensions-apiserver's own packages.
type CRD struct {
	// Definition is the CRD as config/crd/bases holds it.
	Definition *apiextensionsv1.CustomResourceDefinition
	// GVK is the kind at its served version (flagplane's CRDs serve one).
	GVK schema.GroupVersionKind
	// Resource is the plural of its REST path.
	Resource string
	// Internal is the definition in the API server's internal version,
	// which its validation of CRDs takes.
	Internal *apiextensionsinternal.CustomResourceDefinition

	namespaced bool
	status     bool
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	rules      *cel.Validator
}

// Admission is what the API server makes of a create: the object as it
// would store it, or why it refuses it.
type Admission struct {
	// Object is the object after decoding, pruning and defaulting.
	Object map[string]any
	// Undecodable is why the request was refused before validation (400,
	// or 413 for a body over MaxRequestBytes).
	Undecodable error
	// Invalid are the field errors of a refusal (422).
	Invalid field.ErrorList
	// Warnings are what the API server warns of: duplicate and unknown
	// fields, which it drops (its default field validation, Warn).
	Warnings []string
}

// Admitted tells whether the API server would store the object.
func (a Admission) Admitted() bool { return a.Undecodable == nil && len(a.Invalid) == 0 }

// LoadCRDs reads every CRD of dir (config/crd/bases), by kind.
func LoadCRDs(dir string) (map[string]*CRD, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]*CRD{}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		c, err := NewCRD(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[c.GVK.Kind] = c
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRD in %s", dir)
	}
	return out, nil
}

// NewCRD prepares a CRD (YAML) as the API server does when it starts
// serving it: the internal version of its schema, the structural schema
// with its defaults pruned, the OpenAPI validator and the CEL rules,
// compiled with the API server's per-call cost limit.
func NewCRD(raw []byte) (*CRD, error) {
	c := &CRD{Definition: &apiextensionsv1.CustomResourceDefinition{}}
	if err := yaml.UnmarshalStrict(raw, c.Definition); err != nil {
		return nil, err
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(c.Definition)
	if len(c.Definition.Spec.Versions) != 1 {
		return nil, fmt.Errorf("%d versions: one is served", len(c.Definition.Spec.Versions))
	}
	v := c.Definition.Spec.Versions[0]
	c.GVK = schema.GroupVersionKind{Group: c.Definition.Spec.Group, Version: v.Name, Kind: c.Definition.Spec.Names.Kind}
	c.Resource = c.Definition.Spec.Names.Plural
	c.namespaced = c.Definition.Spec.Scope == apiextensionsv1.NamespaceScoped
	c.status = v.Subresources != nil && v.Subresources.Status != nil
	c.Internal = &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(c.Definition, c.Internal, nil); err != nil {
		return nil, err
	}
	validation, err := apiextensionsinternal.GetSchemaForVersion(c.Internal, v.Name)
	if err != nil || validation == nil {
		return nil, fmt.Errorf("no schema of version %s: %v", v.Name, err)
	}
	props := validation.OpenAPIV3Schema
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("pruning defaults: %w", err)
	}
	c.structural = s
	if c.schema, _, err = apiservervalidation.NewSchemaValidator(props); err != nil {
		return nil, err
	}
	c.rules = cel.NewValidator(s, true, celconfig.PerCallLimit)
	return c, nil
}

// Create is what the API server makes of a create of raw (the request's
// JSON body) in namespace: the request's size, the decoding (the apiVersion
// and kind of the CRD, duplicate fields warned of and the last kept), the
// coercion of metadata, the pruning of unknown fields and of nulls, the
// defaults; then the validation of metadata, the OpenAPI schema,
// x-kubernetes-list-type and the CEL rules, with the API server's runtime
// cost budget, skipped as it skips them after a blocking error.
func (c *CRD) Create(ctx context.Context, namespace string, raw []byte) Admission {
	var a Admission
	if len(raw) > MaxRequestBytes {
		a.Undecodable = fmt.Errorf("request entity too large: %d bytes, more than %d", len(raw), MaxRequestBytes)
		return a
	}
	obj := map[string]any{}
	strict, err := kjson.UnmarshalStrict(raw, &obj, kjson.DisallowDuplicateFields)
	if err != nil {
		a.Undecodable = fmt.Errorf("decoding: %w", err)
		return a
	}
	for _, e := range strict {
		a.Warnings = append(a.Warnings, e.Error())
	}
	if err := c.typeMeta(obj); err != nil {
		a.Undecodable = err
		return a
	}
	unknown, err := c.coerce(obj)
	if err != nil {
		a.Undecodable = err
		return a
	}
	for _, p := range unknown {
		a.Warnings = append(a.Warnings, fmt.Sprintf("unknown field %q", p))
	}
	structuraldefaulting.Default(obj, c.structural)
	u := &unstructured.Unstructured{Object: obj}
	if c.namespaced && u.GetNamespace() == "" {
		u.SetNamespace(namespace)
	}
	if c.status {
		delete(obj, "status") // a create does not set the status subresource
	}
	u.SetGeneration(1)
	a.Object = obj
	a.Invalid = c.validate(ctx, u)
	return a
}

// typeMeta refuses an object of another kind, as the API server refuses a
// body that does not match its path.
func (c *CRD) typeMeta(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if want := c.GVK.GroupVersion().String(); apiVersion != want || kind != c.GVK.Kind {
		return fmt.Errorf("the object is %s %s, not %s %s", apiVersion, kind, want, c.GVK.Kind)
	}
	return nil
}

// coerce is the API server's decoding of a custom resource beyond JSON:
// metadata read as an ObjectMeta, unknown fields pruned (returned), nulls
// the schema does not allow dropped, embedded objects' metadata checked.
func (c *CRD) coerce(obj map[string]any) ([]string, error) {
	meta, found, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, fmt.Errorf("decoding metadata: %w", err)
	}
	unknown = append(unknown, structuralpruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, c.structural)
	fieldErr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, c.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if fieldErr != nil {
		return nil, fieldErr
	}
	unknown = append(unknown, paths...)
	obj["apiVersion"], obj["kind"] = c.GVK.GroupVersion().String(), c.GVK.Kind
	if found {
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// validate is the API server's validation of a new custom resource.
func (c *CRD) validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	errs := metavalidation.ValidateObjectMetaAccessor(u, c.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, c.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, c.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, u.Object)...)
	if blocking(errs) {
		return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
	}
	ruleErrs, _ := c.rules.Validate(ctx, nil, c.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, ruleErrs...)
}

// blocking tells whether errs hold an error after which the API server
// does not run the CEL rules: a wrong type, a missing field, a value
// outside an enum, too long, too many.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// OverBudget is the first error that says a CEL rule ran out of the API
// server's runtime cost budget (celconfig.RuntimeCELCostBudget) or of its
// per-call limit, or nil.
func OverBudget(errs field.ErrorList) error {
	for _, e := range errs {
		if strings.Contains(e.Detail, "cost budget") || strings.Contains(e.Detail, "cost limit") {
			return errors.New(e.Error())
		}
	}
	return nil
}
