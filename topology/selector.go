package topology

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Label selectors are indexed per namespace so that matching a workload
// costs what its own labels and its namespace's selectors that could match
// it cost, not what all selectors cost:
//
//   - a selector with an equality or set-membership requirement is indexed
//     under the (namespace, label, value) pairs of its first such requirement;
//     a workload looks up the pairs of its own labels;
//   - any other selector (empty, or only NotIn, Exists, DoesNotExist) is
//     indexed under its namespace and tried against every workload there.
//
// Workloads are indexed the same way, so that a new or changed selector
// finds its candidates without a scan.

// selectorRec is a source's parsed selector and where it is indexed.
type selectorRec struct {
	sel       labels.Selector // nil: the source has no usable selector
	namespace string
	index     []labelKey
}

func newSelectorRec(namespace string, sel labels.Selector) selectorRec {
	rec := selectorRec{sel: sel, namespace: namespace}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			for _, v := range r.ValuesUnsorted() {
				rec.index = append(rec.index, labelKey{namespace: namespace, key: r.Key(), value: v})
			}
			return rec
		}
	}
	return rec
}

func (s selectorRec) matches(l map[string]string) bool {
	return s.sel != nil && s.sel.Matches(labels.Set(l))
}

// scan is where a selector that has no index pair is kept: its namespace.
func (s selectorRec) scan() []nsKey {
	if s.sel == nil || len(s.index) > 0 {
		return nil
	}
	return []nsKey{nsKey(s.namespace)}
}

// selectorCandidates lists the workloads a selector may match.
func (st *state) selectorCandidates(s selectorRec) []Key {
	if s.sel == nil {
		return nil
	}
	if len(s.index) == 0 {
		return indexGet(st.wlByNs, nsKey(s.namespace))
	}
	var out []Key
	for _, lk := range s.index {
		out = append(out, indexGet(st.wlByLabel, lk)...)
	}
	return out
}

// sourcesSelecting lists the sources whose selectors may match a workload
// with these labels in this namespace.
func (st *state) sourcesSelecting(namespace string, l map[string]string) []Key {
	out := indexGet(st.selScan, nsKey(namespace))
	for k, v := range l {
		out = append(out, indexGet(st.selByLabel, labelKey{namespace: namespace, key: k, value: v})...)
	}
	return out
}

// labelKeys lists a workload's label pairs as index keys.
func labelKeys(namespace string, l map[string]string) []labelKey {
	out := make([]labelKey, 0, len(l))
	for k, v := range l {
		out = append(out, labelKey{namespace: namespace, key: k, value: v})
	}
	return out
}
