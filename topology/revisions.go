package topology

import (
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// Revisions: the recorded specs of flag sets (FeatureFlagRevision), kept
// beside the graph. A plan reads the content of a revision that its flag
// set no longer renders: the stable one while a new one rolls out.
//
// A revision object is served only when it is its flag set's own and its
// content is the one it claims:
//
//   - its controller owner is the FeatureFlag the graph holds (same UID):
//     revisions of an earlier FeatureFlag of the name, left by a delete
//     with --cascade=orphan, serve nothing until the history adopts them;
//   - its spec renders to the revision it claims, which is the one the
//     plan names (SameRevision: a legacy 48-bit claim is the full
//     revision it begins).
//
// Every object of a revision is kept apart, and the first of them (by
// name) that qualifies is served, so that one that does not (another
// owner, content that is not what it claims) never stands in the way of
// one that does, and the answer does not depend on the order the objects
// arrived in.

// revKey is a flag set's revisions whose hash begins with short
// (ShortRevision): legacy and full claims of one content share it.
type revKey struct {
	flagSet Key
	short   string
}

func (r revKey) hash() uint64 { return hash3(r.flagSet.Namespace, r.flagSet.Name, r.short) }

// revisionRec is the revision objects of a revKey, sorted by name.
type revisionRec struct {
	objects []*revisionObj
}

// revisionObj is one FeatureFlagRevision; its rendering is made when a
// plan first reads it, once.
type revisionObj struct {
	name string
	// owner is the UID of its controller owner ("" when it has none).
	owner types.UID
	// claimed is its spec.revision.
	claimed string
	ff      *v1beta1.FeatureFlag

	once     sync.Once
	rendered Rendered
}

func revisionKey(f Key, hash string) revKey { return revKey{flagSet: f, short: ShortRevision(hash)} }

// UpsertRevision takes a FeatureFlagRevision: its spec is content that a
// plan may give consumers. The Delta: what reads the plan of its flag set,
// when the flag set has a rollout policy and the revision is new or its
// owner changed (adopted).
func (t *Topology) UpsertRevision(r *deliveryv1alpha1.FeatureFlagRevision) Delta {
	f := FlagSetKey(r.Namespace, r.Spec.FlagSet)
	k := revisionKey(f, r.Spec.Revision)
	owner := types.UID("")
	if ref := metav1.GetControllerOf(r); ref != nil {
		owner = ref.UID
	}
	return t.mustApply(f, func(edit *tx) error {
		rec, _ := edit.state.revisions.get(k)
		var objects []*revisionObj
		if rec != nil {
			objects = slices.Clone(rec.objects)
		}
		i, found := slices.BinarySearchFunc(objects, r.Name, func(o *revisionObj, name string) int { return strings.Compare(o.name, name) })
		if found && objects[i].owner == owner && objects[i].claimed == r.Spec.Revision {
			return nil // its spec is immutable, and its owner is the same: nothing new
		}
		obj := &revisionObj{name: r.Name, owner: owner, claimed: r.Spec.Revision, ff: &v1beta1.FeatureFlag{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Spec.FlagSet},
			Spec:       v1beta1.FeatureFlagSpec{FlagSpec: r.Spec.FlagSpec},
		}}
		if found {
			objects[i] = obj
		} else {
			objects = slices.Insert(objects, i, obj)
		}
		edit.state.revisions.set(edit.owner, k, &revisionRec{objects: objects})
		if edit.state.rolloutsByFlagSet.has(f) {
			edit.markStaged(f)
		}
		return nil
	})
}

// DeleteRevision forgets a FeatureFlagRevision of a flag set's content hash.
func (t *Topology) DeleteRevision(namespace, name, flagSet, hash string) Delta {
	f := FlagSetKey(namespace, flagSet)
	k := revisionKey(f, hash)
	return t.mustApply(f, func(edit *tx) error {
		rec, ok := edit.state.revisions.get(k)
		if !ok {
			return nil
		}
		i, found := slices.BinarySearchFunc(rec.objects, name, func(o *revisionObj, name string) int { return strings.Compare(o.name, name) })
		if !found {
			return nil
		}
		if len(rec.objects) == 1 {
			edit.state.revisions.del(edit.owner, k)
		} else {
			edit.state.revisions.set(edit.owner, k, &revisionRec{objects: slices.Delete(slices.Clone(rec.objects), i, i+1)})
		}
		if edit.state.rolloutsByFlagSet.has(f) {
			edit.markStaged(f)
		}
		return nil
	})
}

// revisionRendered is the rendering of a flag set's revision of a given
// hash: its current rendering when that is the one, else that of a
// recorded revision that qualifies (see above). ok is false when neither
// holds it.
func (st *state) revisionRendered(f Key, hash string) (Rendered, bool) {
	n, ok := st.g.node(f)
	if !ok || n.payload.flagSet == nil {
		return Rendered{}, false
	}
	if r := n.payload.rendered; r != nil && r.Revision != "" && SameRevision(r.Revision, hash) {
		return *r, true
	}
	rec, ok := st.revisions.get(revisionKey(f, hash))
	if !ok {
		return Rendered{}, false
	}
	uid := n.payload.flagSet.UID
	for _, obj := range rec.objects {
		if obj.owner != uid || !SameRevision(obj.claimed, hash) {
			continue
		}
		obj.once.Do(func() { obj.rendered = *st.render(obj.ff) })
		if obj.rendered.Valid() && obj.rendered.Revision != "" && SameRevision(obj.rendered.Revision, obj.claimed) &&
			SameRevision(obj.rendered.Revision, hash) {
			return obj.rendered, true
		}
	}
	return Rendered{}, false
}

// fullRevision is the full form of a flag set's revision: r itself, or,
// when r is legacy (IsLegacyRevision), the full revision of the content it
// names if the graph holds that content.
func (st *state) fullRevision(f Key, r string) string {
	if !IsLegacyRevision(r) {
		return r
	}
	if rendered, ok := st.revisionRendered(f, r); ok {
		return rendered.Revision
	}
	return r
}
