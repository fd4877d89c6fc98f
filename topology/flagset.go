package topology

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// UpsertFlagSet adds or updates a FeatureFlag.
//
// A spec change gives the flag set and its ConfigMaps, to render again:
// nothing else reads the content. Creating one resolves the references
// waiting for it; the Delta then also names the sources whose references
// resolved, their workloads (their sidecars read the resolved flag sets) and
// the ConfigMaps created. Metadata and status changes give an empty Delta.
func (t *Topology) UpsertFlagSet(ff *v1beta1.FeatureFlag) (Delta, error) {
	if ff == nil {
		return Delta{}, fmt.Errorf("upserting FeatureFlag: nil object")
	}
	if ff.Namespace == "" || ff.Name == "" {
		return Delta{}, fmt.Errorf("upserting FeatureFlag %q in namespace %q: namespace and name are required", ff.Name, ff.Namespace)
	}
	ff = ff.DeepCopy()
	k := FlagSetKey(ff.Namespace, ff.Name)
	d, err := t.apply(func(x *tx) error { return x.upsertFlagSet(k, ff) })
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
		old := n.payload.flagSet
		x.st.g.setPayload(x.o, k, payload{flagSet: ff})
		if !equality.Semantic.DeepEqual(old.Spec, ff.Spec) {
			x.mark(k)
			x.markAll(x.st.g.children(k, relRenders))
		}
		return nil
	}
	if err := x.st.g.addNode(x.o, k, layerFlagSet, payload{flagSet: ff}); err != nil {
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
