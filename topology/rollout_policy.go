package topology

import (
	"reflect"
	"slices"
	"strings"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
)

// Staged delivery in the graph. Its parts, a file each: the policies
// (this file), the recorded revisions (revisions.go), the labels of
// namespaces (namespaces.go), the plan (plan.go) and what each consumer
// is served (served.go).
//
// A FeatureFlagRolloutPolicy stages the edits of the FeatureFlag it targets
// (api/delivery/v1alpha1). In the graph it is a node of the source layer
// with no edge, found from its flag set through an index
// (rolloutsByFlagSet), as a FeatureFlagSourcePolicy is found from its
// namespace. The topology decides who serves what: RolloutPlan derives,
// from the policy's spec and status, the flag set's rendering, its recorded
// revisions (UpsertRevision) and the labels of the consuming namespaces
// (UpsertNamespace), the revision each consumer is to serve, and
// ServedFor gives the content every reader (ConfigMaps, the sync server,
// status) delivers to a consumer. The plan is computed from the view on
// demand, never stored, so that an incremental graph and a rebuilt one
// cannot plan differently.
//
// A consumer is one namespace's copy of the flag set: its generated
// ConfigMap, which every workload and Flagd of the namespace mounts, and
// the sync server's streams to the namespace, whose subscribers are
// authorised as the namespace.

// KindRolloutPolicy is the node kind of a FeatureFlagRolloutPolicy.
const KindRolloutPolicy Kind = "FeatureFlagRolloutPolicy"

// RolloutPolicyKey is the key of a FeatureFlagRolloutPolicy.
func RolloutPolicyKey(namespace, name string) Key {
	return Key{Kind: KindRolloutPolicy, Namespace: namespace, Name: name}
}

// rolloutTarget is the flag set a rollout policy targets.
func rolloutTarget(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) Key {
	return FlagSetKey(p.Namespace, p.Spec.TargetRef.Name)
}

// RolloutPolicyChanged tells whether a policy update changes what any
// consumer is planned to serve: its spec, the plan its status records,
// its creation time (which orders two policies of one flag set), or a new
// UID. Conditions, messages and the consumer lists of status do not.
// The rollout's number does not either: it changes with its target.
func RolloutPolicyChanged(old, new *deliveryv1alpha1.FeatureFlagRolloutPolicy) bool {
	o, n := old.Status, new.Status
	return old.UID != new.UID || !old.CreationTimestamp.Equal(&new.CreationTimestamp) ||
		o.StableRevision != n.StableRevision || o.TargetRevision != n.TargetRevision ||
		o.Phase != n.Phase || o.Step != n.Step || !reflect.DeepEqual(old.Spec, new.Spec)
}

// UpsertRolloutPolicy adds or updates a FeatureFlagRolloutPolicy. The Delta,
// when it is new or its plan changed (RolloutPolicyChanged): the policy, the
// other policies of its flag set (one wins), the flag set (its status and
// its streams) and the flag set's ConfigMaps; of the flag set it targeted
// before too.
//
// The topology keeps p: do not modify it afterwards.
func (t *Topology) UpsertRolloutPolicy(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) (Delta, error) {
	return upsertObject(t, KindRolloutPolicy, p, (*tx).upsertRolloutPolicy)
}

// DeleteRolloutPolicy removes a FeatureFlagRolloutPolicy; its flag set's
// consumers then serve its current rendering. The Delta is as for
// UpsertRolloutPolicy.
func (t *Topology) DeleteRolloutPolicy(namespace, name string) Delta {
	return deleteObject(t, RolloutPolicyKey(namespace, name), (*tx).deleteRolloutPolicy)
}

func (edit *tx) upsertRolloutPolicy(k Key, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) error {
	if n, ok := edit.state.g.node(k); ok {
		old := n.payload.rollout
		edit.state.g.setPayload(edit.owner, k, payload{rollout: p})
		if RolloutPolicyChanged(old, p) {
			if before := rolloutTarget(old); before != rolloutTarget(p) {
				indexDel(edit.owner, &edit.state.rolloutsByFlagSet, before, k)
				indexAdd(edit.owner, &edit.state.rolloutsByFlagSet, rolloutTarget(p), k)
				edit.markStaged(before)
			}
			edit.markStaged(rolloutTarget(p))
		}
		return nil
	}
	if err := edit.state.g.addNode(edit.owner, k, layerSource, payload{rollout: p}); err != nil {
		return err
	}
	indexAdd(edit.owner, &edit.state.rolloutsByFlagSet, rolloutTarget(p), k)
	edit.markStaged(rolloutTarget(p))
	return nil
}

func (edit *tx) deleteRolloutPolicy(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok {
		return nil
	}
	f := rolloutTarget(n.payload.rollout)
	edit.state.g.removeNode(edit.owner, k)
	indexDel(edit.owner, &edit.state.rolloutsByFlagSet, f, k)
	edit.mark(k)
	edit.markStaged(f)
	return nil
}

// markStaged marks everything that reads a flag set's plan: its rollout
// policies, the flag set, and its ConfigMaps.
func (edit *tx) markStaged(f Key) {
	edit.markAll(indexGet(edit.state.rolloutsByFlagSet, f))
	if edit.state.g.has(f) {
		edit.mark(f)
		edit.markAll(edit.state.g.children(f, relRenders))
	}
}

// updatePlans computes, once the edit of k is done, the plan of every
// staged flag set whose plan the edit may have changed, for every reader
// of the views that follow. What a plan reads is the flag set's rendering
// and revisions, its policy, and its consumers through every source and
// provider, with their labels and their namespaces'. An edit can change a
// plan and no output (a consumer's step once the rollout completed), so
// the flag sets are found from the edited object k as well as from the
// Delta (plansTouched); every plan when all is set (a namespace's labels,
// a rebuild, a what-if, which computes no Delta).
func (edit *tx) updatePlans(k Key, all bool) {
	st := edit.state
	if st.rolloutsByFlagSet.len() == 0 && st.plans.len() == 0 {
		return
	}
	var touched []Key
	if all || k == (Key{}) {
		touched = st.rolloutsByFlagSet.keys()
	} else {
		touched = edit.plansTouched(k)
	}
	for f := range st.plans.all() {
		if !st.rolloutsByFlagSet.has(f) {
			touched = append(touched, f) // its last policy went
		}
	}
	slices.SortFunc(touched, compareKeys)
	for _, f := range slices.Compact(touched) {
		old, _ := st.plans.get(f)
		var p *RolloutPlan
		if st.rolloutsByFlagSet.has(f) {
			p = st.plan(f)
		}
		for _, w := range old.readers() {
			indexDel(edit.owner, &st.planReaders, w, f)
		}
		if p == nil {
			st.plans.del(edit.owner, f)
			continue
		}
		st.plans.set(edit.owner, f, p)
		for _, w := range p.readers() {
			indexAdd(edit.owner, &st.planReaders, w, f)
		}
	}
}

// plansTouched lists the flag sets whose plan the edit of k may have
// changed: the flag sets of k and of the Delta's keys, and those whose
// plan lists a workload or Flagd of them (it may have stopped reading).
func (edit *tx) plansTouched(k Key) []Key {
	st := edit.state
	var out []Key
	of := func(key Key) {
		switch {
		case key.Kind == KindFlagSet:
			out = append(out, key)
		case key.Kind == KindConfigMap:
			out = append(out, key.FlagSet())
		case key.Kind == KindRolloutPolicy:
			if n, ok := st.g.node(key); ok && n.payload.rollout != nil {
				out = append(out, rolloutTarget(n.payload.rollout))
			}
		case key.Kind == KindSource:
			out = append(out, st.refsOfSource(key)...)
		case key.Kind.IsWorkload() || key.Kind == KindFlagd:
			for _, s := range st.consumerSources(key) {
				out = append(out, st.refsOfSource(s)...)
			}
			out = append(out, indexGet(st.planReaders, key)...)
		}
	}
	of(k)
	for key := range edit.delta.All() {
		of(key)
	}
	return out
}

// refsOfSource lists the flag sets a source's spec.sources entries name.
func (st *state) refsOfSource(s Key) []Key {
	n, ok := st.g.node(s)
	if !ok || n.payload.source == nil {
		return nil
	}
	out := make([]Key, 0, len(n.payload.source.refs))
	for _, r := range n.payload.source.refs {
		out = append(out, r.FlagSet)
	}
	return out
}

// readers lists the workloads and Flagds a plan names (nil plan: none).
func (p *RolloutPlan) readers() []Key {
	if p == nil {
		return nil
	}
	out := slices.Clone(p.Unstaged)
	for _, c := range p.Consumers {
		out = append(out, c.Workloads...)
	}
	return out
}

// markPlansOfConsumers marks, at the end of an edit, the plans of the flag
// sets that a changed workload or Flagd consumes through a source: a
// consumer that comes or goes, or whose labels change, can move others
// between steps (a percentage is of all consumers).
func (edit *tx) markPlansOfConsumers() {
	if edit.state.rolloutsByFlagSet.len() == 0 {
		return
	}
	seen := map[Key]bool{}
	for _, w := range edit.delta.filter(func(k Key) bool { return k.Kind.IsWorkload() || k.Kind == KindFlagd }) {
		for _, s := range edit.state.consumerSources(w) {
			n, ok := edit.state.g.node(s)
			if !ok || n.payload.source == nil {
				continue
			}
			for _, r := range n.payload.source.refs {
				if !seen[r.FlagSet] && edit.state.rolloutsByFlagSet.has(r.FlagSet) {
					seen[r.FlagSet] = true
					edit.markStaged(r.FlagSet)
				}
			}
		}
	}
}

// RolloutPolicy returns a FeatureFlagRolloutPolicy of the graph.
func (v *View) RolloutPolicy(k Key) (*deliveryv1alpha1.FeatureFlagRolloutPolicy, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.rollout == nil {
		return nil, false
	}
	return n.payload.rollout, true
}

// RolloutPolicies lists every FeatureFlagRolloutPolicy of the graph.
func (v *View) RolloutPolicies() []Key { return v.state.g.ofKind(KindRolloutPolicy) }

// RolloutPoliciesOf lists the rollout policies that target a flag set, the
// one in force first: the oldest (creation time, then name).
func (v *View) RolloutPoliciesOf(f Key) []*deliveryv1alpha1.FeatureFlagRolloutPolicy {
	return v.state.rolloutPoliciesOf(f)
}

func (st *state) rolloutPoliciesOf(f Key) []*deliveryv1alpha1.FeatureFlagRolloutPolicy {
	var out []*deliveryv1alpha1.FeatureFlagRolloutPolicy
	for _, k := range indexGet(st.rolloutsByFlagSet, f) {
		if n, ok := st.g.node(k); ok && n.payload.rollout != nil {
			out = append(out, n.payload.rollout)
		}
	}
	slices.SortFunc(out, func(a, b *deliveryv1alpha1.FeatureFlagRolloutPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
