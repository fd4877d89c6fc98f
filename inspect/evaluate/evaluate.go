// Package evaluate resolves flags as flagd serves them, with flagd's own
// evaluator: the JSON evaluator and flag store of
// github.com/open-feature/flagd/core, the version flagd v0.16.0 is built
// from (hack/tools/flagd pins the same one, and a test keeps the two
// equal). A flag set is loaded as flagd loads a file or a sync payload
// (its $evaluators substituted into targeting, its schema checked, a
// defaultVariant that is not a variant refusing the whole set), and each
// flag is resolved as flagd's evaluation API, flagd.evaluation.v1.Service,
// answers a typed Resolve call: same variant, value, reason and error.
//
// flagplane diff --contexts uses it to say which flags of an edited flag
// set change variant for the evaluation contexts of a file.
package evaluate

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"

	"github.com/open-feature/flagd/core/pkg/evaluator"
	"github.com/open-feature/flagd/core/pkg/logger"
	"github.com/open-feature/flagd/core/pkg/model"
	"github.com/open-feature/flagd/core/pkg/store"
	flagdsync "github.com/open-feature/flagd/core/pkg/sync"
	"go.uber.org/zap"
)

// FlagdVersion is the flagd release whose evaluator this package links
// (github.com/open-feature/flagd/core at the same version).
const FlagdVersion = "v0.16.0"

// Type is the type a client asks a flag's value as: flagd's evaluation API
// has one Resolve call per type.
type Type string

// The types of flagd's Resolve calls. Numbers are resolved as Float (an
// Int call truncates the same value).
const (
	Boolean Type = "boolean"
	String  Type = "string"
	Number  Type = "number"
	Object  Type = "object"
)

// Resolution is what flagd answers one Resolve call. On an error, Reason
// is ERROR and ErrorCode flagd's code (FLAG_NOT_FOUND, TYPE_MISMATCH,
// PARSE_ERROR, GENERAL), with no value or variant, as flagd's API answers
// an error; a disabled flag is served with its type's zero value, no
// variant and reason DISABLED.
type Resolution struct {
	Type      Type   `json:"type"`
	Value     any    `json:"value,omitempty"`
	Variant   string `json:"variant,omitempty"`
	Reason    string `json:"reason"`
	ErrorCode string `json:"errorCode,omitempty"`
}

// Equal tells whether two resolutions are the same answer.
func (r Resolution) Equal(o Resolution) bool {
	return r.Type == o.Type && r.Variant == o.Variant && r.Reason == o.Reason && r.ErrorCode == o.ErrorCode &&
		reflect.DeepEqual(r.Value, o.Value)
}

// FlagSet is a flag set loaded in flagd's evaluator, as a flagd with it as
// its only source holds it.
type FlagSet struct {
	eval  *evaluator.JSON
	types map[string]Type
}

// source is the name of the one source of a FlagSet's store.
const source = "flagplane"

// mu serialises flagd's evaluator: each new evaluator registers its JSON
// Logic operators in jsonlogic's global table, which evaluations read.
var mu sync.Mutex

// Load loads a flagd flag set document (the content flagplane serves,
// flagsets.Render) into flagd's evaluator. The error is flagd's
// refusal of the whole document: flagd then keeps what it held before.
func Load(document string) (*FlagSet, error) {
	mu.Lock()
	defer mu.Unlock()
	log := logger.NewLogger(zap.NewNop(), false)
	st, err := store.NewStore(log, []string{source})
	if err != nil {
		return nil, err
	}
	eval := evaluator.NewJSON(log, st)
	if err := eval.SetState(flagdsync.DataSync{FlagData: document, Source: source}); err != nil {
		return nil, err
	}
	sel := store.NewSelector("")
	flags, _, err := st.GetAll(context.Background(), &sel)
	if err != nil {
		return nil, err
	}
	fs := &FlagSet{eval: eval, types: map[string]Type{}}
	for _, f := range flags {
		fs.types[f.Key] = typeOf(f)
	}
	return fs, nil
}

// Empty is a flagd holding no flags: every flag is FLAG_NOT_FOUND.
func Empty() *FlagSet {
	fs, err := Load(`{"flags":{}}`)
	if err != nil {
		panic(fmt.Sprintf("flagd refuses an empty flag set: %v", err))
	}
	return fs
}

// typeOf is the type of a flag's values, taken from its default variant as
// flagd's ResolveAll does, or from its variants when it has none.
func typeOf(f model.Flag) Type {
	if t, ok := valueType(f.Variants[f.DefaultVariant]); ok {
		return t
	}
	for _, name := range slices.Sorted(maps.Keys(f.Variants)) {
		if t, ok := valueType(f.Variants[name]); ok {
			return t
		}
	}
	return Object
}

func valueType(v any) (Type, bool) {
	switch v.(type) {
	case bool:
		return Boolean, true
	case string:
		return String, true
	case float64:
		return Number, true
	case map[string]any:
		return Object, true
	}
	return "", false
}

// Keys lists the flags of the set, sorted.
func (fs *FlagSet) Keys() []string {
	keys := make([]string, 0, len(fs.types))
	for k := range fs.types {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TypeOf is the type of a flag of the set (that of its default variant).
func (fs *FlagSet) TypeOf(key string) (Type, bool) {
	t, ok := fs.types[key]
	return t, ok
}

// Resolve resolves a flag as flagd's evaluation API answers Resolve<t>
// with the evaluation context evalCtx (JSON values: numbers as float64).
func (fs *FlagSet) Resolve(key string, t Type, evalCtx map[string]any) Resolution {
	mu.Lock()
	defer mu.Unlock()
	// As flagd.evaluation.v1.Service calls its evaluator: no selector, and
	// the protocol version that makes a flag with no default variant and no
	// targeting match FLAG_NOT_FOUND.
	ctx := context.WithValue(context.Background(), store.SelectorContextKey{}, store.NewSelector(""))
	//nolint:staticcheck // SA1029: the key is flagd's own, of the type its evaluator reads.
	ctx = context.WithValue(ctx, evaluator.ProtoVersionKey, "v1")
	if evalCtx == nil {
		evalCtx = map[string]any{}
	}
	var (
		value   any
		variant string
		reason  string
		err     error
	)
	const reqID = "flagplane-diff"
	switch t {
	case Boolean:
		value, variant, reason, _, err = fs.eval.ResolveBooleanValue(ctx, reqID, key, evalCtx)
	case String:
		value, variant, reason, _, err = fs.eval.ResolveStringValue(ctx, reqID, key, evalCtx)
	case Number:
		value, variant, reason, _, err = fs.eval.ResolveFloatValue(ctx, reqID, key, evalCtx)
	case Object:
		var obj map[string]any
		obj, variant, reason, _, err = fs.eval.ResolveObjectValue(ctx, reqID, key, evalCtx)
		if obj != nil {
			value = obj
		}
	default:
		return Resolution{Type: t, Reason: model.ErrorReason, ErrorCode: model.TypeMismatchErrorCode}
	}
	if err != nil {
		// flagd's API answers a code it does not know as "unknown", as
		// it answers GENERAL.
		code := err.Error()
		if _, known := model.ReadableErrorMessage[code]; !known {
			code = model.GeneralErrorCode
		}
		return Resolution{Type: t, Reason: model.ErrorReason, ErrorCode: code}
	}
	return Resolution{Type: t, Value: value, Variant: variant, Reason: reason}
}
