package topology

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// SelectorPrefix starts every flag-set selector: a selector names one
// FeatureFlag as "core.openfeature.dev/<namespace>/<name>", as the
// OpenFeature Operator's flagd-proxy and flagplane's sync server read it.
const SelectorPrefix = "core.openfeature.dev/"

// ParseSelector returns the flag set a selector names. The namespace and
// name must be valid Kubernetes names, so that no selector can name
// something outside the FeatureFlag it appears to name.
func ParseSelector(selector string) (Key, error) {
	rest, ok := strings.CutPrefix(selector, SelectorPrefix)
	if !ok {
		return Key{}, fmt.Errorf("selector %q does not start with %q: want %s<namespace>/<name>", selector, SelectorPrefix, SelectorPrefix)
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok {
		return Key{}, fmt.Errorf("selector %q names no FeatureFlag: want %s<namespace>/<name>", selector, SelectorPrefix)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return Key{}, fmt.Errorf("selector %q: namespace %q is invalid: %s", selector, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return Key{}, fmt.Errorf("selector %q: name %q is invalid: %s", selector, name, strings.Join(errs, "; "))
	}
	return FlagSetKey(ns, name), nil
}

// UpsertInProcessConfig adds or updates an InProcessConfiguration. It applies
// to the workloads whose pod-template annotation
// openfeature.dev/inprocessconfiguration names it.
//
// The Delta, when the spec changed or the object is new (or has a new UID):
// the configuration and its workloads (their env vars), and the flag sets
// its selector names, before and after, when it has workloads (their
// in-process readers). Metadata and status changes give an empty Delta.
//
// The topology keeps c: do not modify it afterwards (objects from an
// informer's cache are never modified).
func (t *Topology) UpsertInProcessConfig(c *v1beta1.InProcessConfiguration) (Delta, error) {
	return upsertObject(t, KindInProcessConfig, c, (*tx).upsertIPC)
}

// DeleteInProcessConfig removes an InProcessConfiguration. The Delta: the
// configuration, its workloads and, when it had workloads, the flag set
// its selector names.
func (t *Topology) DeleteInProcessConfig(namespace, name string) Delta {
	return deleteObject(t, Key{Kind: KindInProcessConfig, Namespace: namespace, Name: name}, (*tx).deleteIPC)
}

// ipcSelects is the flag set an in-process configuration's selector
// names, if any: an SDK configured without a selector, or with one of
// another form, reads what its sync source sends, which names no flag set.
func ipcSelects(c *v1beta1.InProcessConfiguration) []Key {
	if c == nil || c.Spec.Selector == "" {
		return nil
	}
	f, err := ParseSelector(c.Spec.Selector)
	if err != nil {
		return nil
	}
	return []Key{f}
}

func (edit *tx) upsertIPC(k Key, c *v1beta1.InProcessConfiguration) error {
	if n, ok := edit.state.g.node(k); ok {
		old := n.payload.ipc
		edit.state.g.setPayload(edit.owner, k, payload{ipc: c})
		indexUpdate(edit.owner, &edit.state.ipcsSelecting, ipcSelects(old), ipcSelects(c), k)
		if InProcessConfigChanged(old, c) {
			edit.mark(k)
			targets := edit.state.g.children(k, relTargets)
			edit.markAll(targets)
			if old.Spec.Selector != c.Spec.Selector {
				edit.markReadFlagSets(k, ipcSelects(old), targets)
				edit.markReadFlagSets(k, ipcSelects(c), targets)
			}
		}
		return nil
	}
	if err := edit.state.g.addNode(edit.owner, k, layerSource, payload{ipc: c}); err != nil {
		return err
	}
	indexUpdate(edit.owner, &edit.state.ipcsSelecting, nil, ipcSelects(c), k)
	edit.mark(k)
	referrer := payload{ipc: c}
	for _, w := range indexGet(edit.state.annotIPCs, k) {
		if err := edit.retarget(k, referrer, w); err != nil {
			return err
		}
	}
	return nil
}

func (edit *tx) deleteIPC(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok {
		return nil
	}
	c := n.payload.ipc
	targets := edit.state.g.children(k, relTargets)
	if !edit.state.g.removeNode(edit.owner, k) {
		return nil
	}
	indexUpdate(edit.owner, &edit.state.ipcsSelecting, ipcSelects(c), nil, k)
	edit.mark(k)
	edit.markAll(targets)
	edit.markReadFlagSets(k, ipcSelects(c), targets)
	return nil
}

// markSelected marks the flag set that in-process configuration c (if it
// is one) selects, when the edge from c to workload w came or went and that
// changed f's in-process readers (View.InProcessReaders).
func (edit *tx) markSelected(c, w Key) {
	if c.Kind != KindInProcessConfig {
		return
	}
	if n, ok := edit.state.g.node(c); ok {
		edit.markReadFlagSets(c, ipcSelects(n.payload.ipc), []Key{w})
	}
}

// markReadFlagSets marks those of flagSets, selected by in-process
// configuration c before or after an edit, whose in-process readers
// changed with c's edges to workloads: they exist, and one of workloads
// may read them and has no other in-process configuration that selects
// them.
func (edit *tx) markReadFlagSets(c Key, flagSets, workloads []Key) {
	for _, f := range flagSets {
		if !edit.state.g.has(f) {
			continue
		}
		readers := edit.state.readerNamespaces(f)
		if slices.ContainsFunc(workloads, func(w Key) bool {
			if w.Namespace != f.Namespace && !slices.Contains(readers, w.Namespace) {
				return false
			}
			return !slices.ContainsFunc(edit.state.g.parentsOfKind(w, relTargets, KindInProcessConfig), func(o Key) bool {
				n, ok := edit.state.g.node(o)
				return o != c && ok && slices.Contains(ipcSelects(n.payload.ipc), f)
			})
		}) {
			edit.mark(f)
		}
	}
}
