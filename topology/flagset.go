package topology

import (
	"bytes"
	"fmt"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// UpsertFlagSet adds or updates a FeatureFlag.
//
// A spec change (or a new UID: the object was recreated) gives the flag set
// and its ConfigMaps, to render again: nothing else reads the content; and,
// when it makes the flag set valid or invalid (WithFlagSetValidity), the
// sources that resolve it, whose status says whether it is served. Creating one resolves the references
// waiting for it; the Delta then also names the sources whose references
// resolved, their workloads (their sidecars read the resolved flag sets) and
// the ConfigMaps created. Metadata and status changes give an empty Delta.
//
// The topology keeps ff: do not modify it afterwards (objects from an
// informer's cache are never modified).
func (t *Topology) UpsertFlagSet(ff *v1beta1.FeatureFlag) (Delta, error) {
	if ff == nil {
		return Delta{}, fmt.Errorf("upserting FeatureFlag: nil object")
	}
	if ff.Namespace == "" || ff.Name == "" {
		return Delta{}, fmt.Errorf("upserting FeatureFlag %q in namespace %q: namespace and name are required", ff.Name, ff.Namespace)
	}
	k := FlagSetKey(ff.Namespace, ff.Name)
	d, err := t.apply(k, func(x *tx) error { return x.upsertFlagSet(k, ff) })
	if err != nil {
		return d, fmt.Errorf("upserting FeatureFlag %s: %w", k, err)
	}
	return d, nil
}

// DeleteFlagSet removes a FeatureFlag. References to it stay, as pending
// edges, until it comes back. The Delta: the flag set, the sources whose
// references to it no longer resolve, their workloads, the ConfigMaps no
// longer needed.
func (t *Topology) DeleteFlagSet(namespace, name string) Delta {
	k := FlagSetKey(namespace, name)
	return t.mustApply(k, func(x *tx) error { return x.deleteFlagSet(k) })
}

func (x *tx) upsertFlagSet(k Key, ff *v1beta1.FeatureFlag) error {
	if n, ok := x.st.g.node(k); ok {
		old := n.payload
		specSame := flagSpecEqual(old.flagSet.Spec.FlagSpec, ff.Spec.FlagSpec)
		valid := old.valid
		if !specSame {
			valid = x.flagSetValid(ff)
		}
		x.st.g.setPayload(x.o, k, payload{flagSet: ff, valid: valid})
		// A new UID is a flag set deleted and created again between two
		// observations: its ConfigMaps' owner references change.
		if FlagSetChanged(old.flagSet, ff) {
			x.mark(k)
			x.markAll(x.st.g.children(k, relRenders))
		}
		if valid != old.valid {
			x.markAll(x.st.g.parents(k, relRefs))
		}
		return nil
	}
	if err := x.st.g.addNode(x.o, k, layerFlagSet, payload{flagSet: ff, valid: x.flagSetValid(ff)}); err != nil {
		return err
	}
	x.mark(k)
	for _, s := range indexGet(x.st.refsTo, k) {
		if err := x.reevalRefs(s); err != nil {
			return err
		}
	}
	return nil
}

func (x *tx) deleteFlagSet(k Key) error {
	if !x.st.g.removeNode(x.o, k) {
		return nil
	}
	x.mark(k)
	for _, s := range indexGet(x.st.refsTo, k) {
		if err := x.reevalRefs(s); err != nil {
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

func (x *tx) flagSetValid(ff *v1beta1.FeatureFlag) bool {
	return x.st.flagSetValid == nil || x.st.flagSetValid(ff)
}
