package admissionfuzz

import (
	"context"
	"sort"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The API server's limits on the estimated cost of a CRD's CEL rules: it
// refuses a CRD with a rule above the first, or rules above the second in
// all.
const (
	RuleCostLimit = apiextensionsvalidation.StaticEstimatedCostLimit
	CRDCostLimit  = apiextensionsvalidation.StaticEstimatedCRDCostLimit
)

// RuleCost is the estimated cost of one CEL rule of a CRD: the cost of one
// evaluation times the number of times it may run (the product of the
// maxItems and maxProperties around it), as the API server estimates it
// when it accepts the CRD.
type RuleCost struct {
	Path string
	Rule string
	Cost uint64
}

// ValidateDefinition is the API server's validation of the CRD itself, as
// on a create of it: the estimated cost of its rules included.
func (c *CRD) ValidateDefinition(ctx context.Context) field.ErrorList {
	return apiextensionsvalidation.ValidateCustomResourceDefinition(ctx, c.Internal)
}

// RuleCosts estimates the cost of every CEL rule of c, most expensive
// first, and their total.
func (c *CRD) RuleCosts() ([]RuleCost, uint64, error) {
	validation, err := apiextensionsinternal.GetSchemaForVersion(c.Internal, c.GVK.Version)
	if err != nil {
		return nil, 0, err
	}
	root := validation.OpenAPIV3Schema
	ctx := apiextensionsvalidation.RootCELContext(root)
	env := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	var out []RuleCost
	var walk func(p *field.Path, s *apiextensionsinternal.JSONSchemaProps, ctx *apiextensionsvalidation.CELSchemaContext) error
	walk = func(p *field.Path, s *apiextensionsinternal.JSONSchemaProps, ctx *apiextensionsvalidation.CELSchemaContext) error {
		if len(s.XValidations) > 0 {
			info, err := ctx.TypeInfo()
			if err != nil {
				return err
			}
			results, err := cel.Compile(info.Schema, info.DeclType, celconfig.PerCallLimit, env, cel.NewExpressionsEnvLoader())
			if err != nil {
				return err
			}
			for i, r := range results {
				cardinality := r.MaxCardinality
				if ctx.MaxCardinality != nil {
					cardinality = *ctx.MaxCardinality
				}
				cost := r.MaxCost * cardinality
				if cardinality != 0 && cost/cardinality != r.MaxCost {
					cost = ^uint64(0) // the API server's overflow guard
				}
				rule := p.Child("x-kubernetes-validations").Index(i)
				ctx.TotalCost.ObserveExpressionCost(rule, cost)
				out = append(out, RuleCost{Path: rule.String(), Rule: s.XValidations[i].Rule, Cost: cost})
			}
		}
		for name, prop := range s.Properties {
			if err := walk(p.Child("properties").Key(name), &prop, ctx.ChildPropertyContext(&prop, name)); err != nil {
				return err
			}
		}
		if s.Items != nil && s.Items.Schema != nil {
			if err := walk(p.Child("items"), s.Items.Schema, ctx.ChildItemsContext(s.Items.Schema)); err != nil {
				return err
			}
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			if err := walk(p.Child("additionalProperties"), s.AdditionalProperties.Schema, ctx.ChildAdditionalPropertiesContext(s.AdditionalProperties.Schema)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(field.NewPath("openAPIV3Schema"), root, ctx); err != nil {
		return nil, 0, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cost > out[j].Cost })
	return out, ctx.TotalCost.Total, nil
}
