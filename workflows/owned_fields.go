package workflows

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Whether a generated object that flagplane writes with server-side apply
// is up to date, without a request: the cluster's object holds every field
// of the desired one with its value (FieldsMismatch), and flagplane's own
// apply owns no field that the desired object no longer has
// (OwnsUndesiredFields). Fields others add (a label, an annotation, defaults)
// are theirs and stay; a field of flagplane's that someone edits, removes or
// takes over is written back.

// FieldsMismatch returns the path of the first field of want that got lacks
// or holds with another value, or "" when got holds all of want. Maps are
// compared key by key; lists element by element and must have the same
// length (as a server-side apply of an atomic or keyed list leaves it);
// scalars must be equal (numbers of any Go type by value).
func FieldsMismatch(got, want any) string { return fieldsMismatch(got, want, "") }

func fieldsMismatch(got, want any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return orRoot(path)
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			gv, ok := g[k]
			if !ok {
				if w[k] == nil {
					continue
				}
				return path + "." + k
			}
			if mismatch := fieldsMismatch(gv, w[k], path+"."+k); mismatch != "" {
				return mismatch
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return orRoot(path)
		}
		for i := range w {
			if mismatch := fieldsMismatch(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); mismatch != "" {
				return mismatch
			}
		}
		return ""
	case nil:
		return ""
	}
	if a, ok := number(got); ok {
		if b, ok := number(want); ok && a == b {
			return ""
		}
		return orRoot(path)
	}
	if !reflect.DeepEqual(got, want) {
		return orRoot(path)
	}
	return ""
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// OwnsUndesiredFields returns the path of a field that flagplane's last
// server-side apply owns (its managedFields entry) and that want, the
// desired object, no longer has, or "". Only fields of objects (maps) are
// followed: list elements are compared by FieldsMismatch, whose lists must
// have the same length.
func OwnsUndesiredFields(managed []metav1.ManagedFieldsEntry, want map[string]any) string {
	for _, e := range managed {
		if e.Manager != v1beta1.FieldManager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var owned map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &owned) != nil {
			return "." // unreadable: write it again
		}
		return ownsUndesired(owned, want, "")
	}
	return ""
}

func ownsUndesired(owned map[string]any, want map[string]any, path string) string {
	for _, k := range slices.Sorted(maps.Keys(owned)) {
		name, ok := strings.CutPrefix(k, "f:")
		if !ok {
			continue // ".", and list elements: k:, v:, i:
		}
		wv, has := want[name]
		if !has || wv == nil {
			return path + "." + name
		}
		sub, _ := owned[k].(map[string]any)
		wm, isMap := wv.(map[string]any)
		if len(sub) > 0 && isMap {
			if undesired := ownsUndesired(sub, wm, path+"."+name); undesired != "" {
				return undesired
			}
		}
	}
	return ""
}
