package topology

import (
	"bytes"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// UpsertFlagSet adds or updates a FeatureFlag.
//
// A spec the topology did not hold is rendered here, once, whatever reads
// it afterwards (WithFlagSetRendering, View.FlagSetRendered). A spec change
// (or a new UID: the object was recreated) gives the flag set and its
// ConfigMaps, to render again: nothing else reads the content; and, when
// it makes the flag set valid or invalid, or too large for a delivery mode
// or no longer (Rendered.Overflow), the sources that resolve it, whose
// status says whether it is served. Creating one resolves the references
// waiting for it; the Delta then also names the sources whose references
// resolved, their workloads (their sidecars read the resolved flag sets) and
// the ConfigMaps created. Metadata and status changes give an empty Delta.
//
// The topology keeps ff: do not modify it afterwards (objects from an
// informer's cache are never modified).
func (t *Topology) UpsertFlagSet(ff *v1beta1.FeatureFlag) (Delta, error) {
	return upsertObject(t, KindFlagSet, ff, (*tx).upsertFlagSet)
}

// DeleteFlagSet removes a FeatureFlag. References to it stay, as pending
// edges, until it comes back. The Delta: the flag set, the sources whose
// references to it no longer resolve, their workloads, the ConfigMaps no
// longer needed.
func (t *Topology) DeleteFlagSet(namespace, name string) Delta {
	return deleteObject(t, Key{Kind: KindFlagSet, Namespace: namespace, Name: name}, (*tx).deleteFlagSet)
}

func (edit *tx) upsertFlagSet(k Key, ff *v1beta1.FeatureFlag) error {
	if n, ok := edit.state.g.node(k); ok {
		old := n.payload
		rendered := old.rendered
		if !flagSpecEqual(old.flagSet.Spec.FlagSpec, ff.Spec.FlagSpec) {
			rendered = edit.state.render(ff)
		}
		edit.state.g.setPayload(edit.owner, k, payload{flagSet: ff, rendered: rendered})
		// A new UID is a flag set deleted and created again between two
		// observations: its ConfigMaps' owner references change.
		if FlagSetChanged(old.flagSet, ff) {
			edit.mark(k)
			edit.markAll(edit.state.g.children(k, relRenders))
		}
		if old.flagSet.UID != ff.UID && edit.state.rolloutsByFlagSet.has(k) {
			// Which recorded revisions are its own (revisions.go) changed.
			edit.markStaged(k)
		}
		if servingChanged(rendered, old.rendered) {
			edit.markAll(edit.state.g.parents(k, relRefs))
		}
		return nil
	}
	if err := edit.state.g.addNode(edit.owner, k, layerFlagSet, payload{flagSet: ff, rendered: edit.state.render(ff)}); err != nil {
		return err
	}
	edit.mark(k)
	for _, s := range indexGet(edit.state.refsTo, k) {
		if err := edit.reevalRefs(s); err != nil {
			return err
		}
	}
	return nil
}

func (edit *tx) deleteFlagSet(k Key) error {
	if !edit.state.g.removeNode(edit.owner, k) {
		return nil
	}
	edit.mark(k)
	for _, s := range indexGet(edit.state.refsTo, k) {
		if err := edit.reevalRefs(s); err != nil {
			return err
		}
	}
	return nil
}

// flagSpecEqual compares two flag definitions field by field. Flag edits are
// the most frequent event, and reflection-based comparison of the raw JSON
// maps costs more than the rest of the edit; a test keeps this function in
// step with the fields of FlagSpec and Flag.
func flagSpecEqual(a, b v1beta1.FlagSpec) bool {
	if len(a.Flags) != len(b.Flags) || !bytes.Equal(a.Evaluators, b.Evaluators) || !bytes.Equal(a.Metadata, b.Metadata) {
		return false
	}
	for key, fa := range a.Flags {
		fb, ok := b.Flags[key]
		if !ok || fa.State != fb.State || fa.DefaultVariant != fb.DefaultVariant ||
			!bytes.Equal(fa.Variants, fb.Variants) || !bytes.Equal(fa.Targeting, fb.Targeting) ||
			!bytes.Equal(fa.Metadata, fb.Metadata) {
			return false
		}
	}
	return true
}
