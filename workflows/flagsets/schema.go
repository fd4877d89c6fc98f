package flagsets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	flagdschemas "github.com/open-feature/flagd-schemas/json"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The flagd flag schema layer: flagd-schemas v0.2.13, embedded by its Go
// module, compiled once with a JSON-schema library (santhosh-tekuri/jsonschema)
// rather than re-implemented. The schemas refer to each other by these
// $ids; nothing is fetched, the compiler knows only the embedded documents.
const (
	// FlagSchemaVersion is the flagd-schemas release flag sets are checked against.
	FlagSchemaVersion = "v0.2.13"

	flagsSchemaURL     = "https://flagd.dev/schema/v0/flags.json"
	flagdSchemaURL     = "https://flagd.dev/schema/v0/flagd.json"
	targetingSchemaURL = "https://flagd.dev/schema/v0/targeting.json"
)

// FlagSchemas are the compiled flagd schemas.
type FlagSchemas struct {
	// Flags is flags.json: a flag set as providers read it (flags as an
	// object), the document a FeatureFlag's spec.flagSpec renders to.
	Flags *jsonschema.Schema
	// Flagd is flagd.json: flagd's superset (flags as an object or array).
	Flagd *jsonschema.Schema
	// Targeting is targeting.json: one targeting rule.
	Targeting *jsonschema.Schema
	// typed are flags.json's booleanFlag, stringFlag, numberFlag and
	// objectFlag, by the JSON type of the variants: one flag is checked
	// against the one that applies, so that its messages are not those of
	// the three others.
	typed map[string]*jsonschema.Schema
	// metadata is flags.json's metadata definition.
	metadata *jsonschema.Schema
}

// CompiledFlagSchemas returns the flagd schemas, compiled on first use.
func CompiledFlagSchemas() (*FlagSchemas, error) { return compiledFlagSchemas() }

var compiledFlagSchemas = sync.OnceValues(func() (*FlagSchemas, error) {
	c := jsonschema.NewCompiler()
	for url, doc := range map[string]string{
		flagsSchemaURL:     flagdschemas.FlagSchema,
		flagdSchemaURL:     flagdschemas.FlagdSchema,
		targetingSchemaURL: flagdschemas.TargetingSchema,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			return nil, fmt.Errorf("reading the embedded flagd schema %s: %w", url, err)
		}
		if err := c.AddResource(url, v); err != nil {
			return nil, fmt.Errorf("adding the flagd schema %s: %w", url, err)
		}
	}
	s := &FlagSchemas{typed: map[string]*jsonschema.Schema{}}
	var err error
	compile := func(loc string) *jsonschema.Schema {
		if err != nil {
			return nil
		}
		var sch *jsonschema.Schema
		if sch, err = c.Compile(loc); err != nil {
			err = fmt.Errorf("compiling the flagd schema %s: %w", loc, err)
		}
		return sch
	}
	s.Flags = compile(flagsSchemaURL)
	s.Flagd = compile(flagdSchemaURL)
	s.Targeting = compile(targetingSchemaURL)
	for jsonType, def := range map[string]string{"boolean": "booleanFlag", "string": "stringFlag", "number": "numberFlag", "object": "objectFlag"} {
		s.typed[jsonType] = compile(flagsSchemaURL + "#/definitions/" + def)
	}
	s.metadata = compile(flagsSchemaURL + "#/definitions/metadata")
	return s, err
})

// FlagSpecDocument is the flagd JSON document of a flag set as the schema
// sees it, decoded the way the schema library wants (numbers as
// json.Number). Parts that are not valid JSON, or nest deeper than
// MaxRuleDepth, are left out: the semantic layer reports them.
func FlagSpecDocument(spec *v1beta1.FlagSpec) map[string]any {
	doc := map[string]any{}
	flags := map[string]any{}
	for key, f := range spec.Flags {
		flags[key] = flagDocument(f)
	}
	doc["flags"] = flags
	if v, ok := decodeForSchema(spec.Evaluators); ok {
		doc["$evaluators"] = v
	}
	if v, ok := decodeForSchema(spec.Metadata); ok {
		doc["metadata"] = v
	}
	return doc
}

func flagDocument(f v1beta1.Flag) map[string]any {
	obj := map[string]any{"state": f.State, "defaultVariant": f.DefaultVariant}
	if v, ok := decodeForSchema(f.Variants); ok {
		obj["variants"] = v
	}
	if v, ok := decodeForSchema(f.Targeting); ok {
		obj["targeting"] = v
	}
	if v, ok := decodeForSchema(f.Metadata); ok {
		obj["metadata"] = v
	}
	return obj
}

func decodeForSchema(raw json.RawMessage) (any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	if depth, _ := ruleSize(raw); depth > MaxRuleDepth {
		return nil, false
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	return v, err == nil
}

// Owners group schema errors by the part of the document they concern, so
// that a part the semantic layer reported gets no second message.
const (
	ownerEvaluators = "$evaluators"
	ownerMetadata   = "metadata"
)

func ownerFlag(key string) string { return "flags/" + key }

// schemaOwner is the owner of an instance location: a flag, an evaluator,
// the flag-set metadata, or the document itself ("").
func schemaOwner(loc []string) string {
	switch {
	case len(loc) >= 2 && loc[0] == "flags":
		return ownerFlag(loc[1])
	case len(loc) >= 2 && loc[0] == ownerEvaluators:
		return ownerEvaluators + "/" + loc[1]
	case len(loc) >= 1:
		return loc[0]
	}
	return ""
}

// schemaErrors validates the flag set against flags.json and turns what it
// finds into field errors, one per part of the document (flag, evaluator,
// metadata) that the semantic layer did not report already. A flag that
// does not match is an error: the OpenFeature Operator refuses it (it
// checks the flags against this schema). The $evaluators and the flag-set
// metadata are warnings: the OpenFeature Operator does not check them, and
// flagd loads a flag set that does not match its schema (it logs it).
//
// It checks the document part by part — each flag against the schema of
// its variants' type, each evaluator against targeting.json, the metadata,
// then the rest of the document without its flags — and never the whole
// at once: a failure deep inside flags.json's anyOf of four flag types
// yields four sets of errors, three of them about a type the flag does not
// have, and building them is most of what a large invalid flag set costs.
func schemaErrors(spec *v1beta1.FlagSpec, path *field.Path, reported map[string]bool) (errs, warnings field.ErrorList) {
	schemas, err := compiledFlagSchemas()
	if err != nil {
		// The schemas are compiled from embedded documents: this is a build
		// defect, not a property of the flag set. Say so rather than accept.
		return field.ErrorList{field.InternalError(path, err)}, nil
	}
	doc := FlagSpecDocument(spec)
	seen := map[string]bool{}
	add := func(owner string, ve *jsonschema.ValidationError, prefix []string) {
		if owner == "" || reported[owner] || seen[owner] {
			return
		}
		seen[owner] = true
		leaf := deepestLeaf(ve)
		loc := append(slices.Clone(prefix), leaf.InstanceLocation...)
		e := field.Invalid(fieldPathOf(path, loc), truncate(valueAt(doc, loc)),
			fmt.Sprintf("does not match flagd's flag schema (flagd-schemas %s) at /%s: %s",
				FlagSchemaVersion, strings.Join(loc, "/"), leafMessage(leaf)))
		if owner == ownerMetadata || strings.HasPrefix(owner, ownerEvaluators) {
			warnings = append(warnings, e)
		} else {
			errs = append(errs, e)
		}
	}

	// Flags, each against its own type's schema.
	flags, _ := doc["flags"].(map[string]any)
	for _, key := range slices.Sorted(maps.Keys(flags)) {
		owner := ownerFlag(key)
		if reported[owner] {
			continue
		}
		sch := schemas.typed[variantsType(spec.Flags[key].Variants)]
		if sch == nil {
			continue // the semantic layer reported the variants
		}
		var ve *jsonschema.ValidationError
		if err := sch.Validate(flags[key]); err != nil && asValidationError(err, &ve) {
			add(owner, ve, []string{"flags", key})
		}
	}
	// Evaluators, each against targeting.json.
	if evaluators, ok := doc[ownerEvaluators].(map[string]any); ok {
		for _, name := range slices.Sorted(maps.Keys(evaluators)) {
			var ve *jsonschema.ValidationError
			if err := schemas.Targeting.Validate(evaluators[name]); err != nil && asValidationError(err, &ve) {
				add(ownerEvaluators+"/"+name, ve, []string{ownerEvaluators, name})
			}
		}
	}
	if md, ok := doc[ownerMetadata]; ok {
		var ve *jsonschema.ValidationError
		if err := schemas.metadata.Validate(md); err != nil && asValidationError(err, &ve) {
			add(ownerMetadata, ve, []string{ownerMetadata})
		}
	}
	// Whatever neither layer explained, from the document's shape: the
	// whole document but its flags, which were validated each above.
	if len(errs) == 0 && len(warnings) == 0 && len(reported) == 0 {
		shape := doc
		if _, ok := doc["flags"].(map[string]any); ok {
			shape = maps.Clone(doc)
			shape["flags"] = map[string]any{}
		}
		var ve *jsonschema.ValidationError
		if asValidationError(schemas.Flags.Validate(shape), &ve) {
			leaf := deepestLeaf(ve)
			owner := schemaOwner(leaf.InstanceLocation)
			if owner == "" {
				owner = "document"
			}
			add(owner, ve, nil)
		}
	}
	return errs, warnings
}

// variantsType is the JSON type of a flag's variant values (of the first by
// name; the semantic layer makes sure they share one), or "".
func variantsType(raw json.RawMessage) string {
	var variants map[string]json.RawMessage
	if decodeObject(raw, &variants) != nil || len(variants) == 0 {
		return ""
	}
	return jsonType(variants[slices.Sorted(maps.Keys(variants))[0]])
}

func asValidationError(err error, into **jsonschema.ValidationError) bool {
	ve, ok := err.(*jsonschema.ValidationError)
	*into = ve
	return ok
}

// deepestLeaf picks, among the errors without causes, the one deepest in
// the instance (the most specific place), the first of equals.
func deepestLeaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := ve
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if best == ve || len(e.InstanceLocation) > len(best.InstanceLocation) {
				best = e
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return best
}

var schemaPrinter = message.NewPrinter(language.English)

func leafMessage(e *jsonschema.ValidationError) string {
	if e.ErrorKind == nil {
		return "invalid"
	}
	return e.ErrorKind.LocalizedString(schemaPrinter)
}

// fieldPathOf maps an instance location of the flagd document to the field
// path of the FeatureFlag: map keys of flags, variants, evaluators and
// metadata become [key], array positions [i].
func fieldPathOf(base *field.Path, loc []string) *field.Path {
	p := base
	for i, tok := range loc {
		parent := ""
		if i > 0 {
			parent = loc[i-1]
		}
		switch {
		case parent == "flags" && i == 1, parent == "variants", parent == ownerEvaluators && i == 1, parent == "metadata":
			p = p.Key(tok)
		default:
			if n, err := strconv.Atoi(tok); err == nil && i > 0 {
				p = p.Index(n)
			} else {
				p = p.Child(tok)
			}
		}
	}
	return p
}

// valueAt renders the value at a location of the document as compact JSON.
func valueAt(doc any, loc []string) string {
	v := doc
	for _, tok := range loc {
		switch t := v.(type) {
		case map[string]any:
			v = t[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(t) {
				return ""
			}
			v = t[n]
		default:
			return ""
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
