package topology

import (
	"cmp"
	"hash/fnv"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

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

// Revisions: the recorded specs of flag sets (FeatureFlagRevision), kept
// beside the graph, keyed by flag set and content hash. A plan reads the
// content of a revision that its flag set no longer renders: the stable
// one while a new one rolls out.

// revKey is a flag set's revision of a given content hash.
type revKey struct {
	flagSet  Key
	revision string
}

func (r revKey) hash() uint64 { return hash3(r.flagSet.Namespace, r.flagSet.Name, r.revision) }

// revisionRec is a recorded revision; its rendering is made when a plan
// first reads it, once.
type revisionRec struct {
	ff       *v1beta1.FeatureFlag
	objects  []string // names of the FeatureFlagRevisions that hold it
	once     sync.Once
	rendered Rendered
}

// UpsertRevision takes a FeatureFlagRevision: its spec is content that a
// plan may give consumers. The Delta: what reads the plan of its flag set,
// when the flag set has a rollout policy.
func (t *Topology) UpsertRevision(r *deliveryv1alpha1.FeatureFlagRevision) Delta {
	f := FlagSetKey(r.Namespace, r.Spec.FlagSet)
	k := revKey{flagSet: f, revision: r.Spec.Revision}
	return t.mustApply(f, func(edit *tx) error {
		rec, _ := edit.state.revisions.get(k)
		if rec != nil && slices.Contains(rec.objects, r.Name) {
			return nil // immutable: nothing new
		}
		next := &revisionRec{ff: &v1beta1.FeatureFlag{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Spec.FlagSet},
			Spec:       v1beta1.FeatureFlagSpec{FlagSpec: r.Spec.FlagSpec},
		}}
		if rec != nil {
			next.ff = rec.ff
			next.objects = slices.Clone(rec.objects)
		}
		next.objects = append(next.objects, r.Name)
		slices.Sort(next.objects)
		edit.state.revisions.set(edit.owner, k, next)
		if rec == nil && edit.state.rolloutsByFlagSet.has(f) {
			edit.markStaged(f)
		}
		return nil
	})
}

// DeleteRevision forgets a FeatureFlagRevision of a flag set's content hash.
func (t *Topology) DeleteRevision(namespace, name, flagSet, hash string) Delta {
	f := FlagSetKey(namespace, flagSet)
	k := revKey{flagSet: f, revision: hash}
	return t.mustApply(f, func(edit *tx) error {
		rec, ok := edit.state.revisions.get(k)
		if !ok || !slices.Contains(rec.objects, name) {
			return nil
		}
		if len(rec.objects) == 1 {
			edit.state.revisions.del(edit.owner, k)
			if edit.state.rolloutsByFlagSet.has(f) {
				edit.markStaged(f)
			}
			return nil
		}
		next := &revisionRec{ff: rec.ff, objects: slices.DeleteFunc(slices.Clone(rec.objects), func(n string) bool { return n == name })}
		edit.state.revisions.set(edit.owner, k, next)
		return nil
	})
}

// revisionRendered is the rendering of a flag set's revision of a given
// hash: its current rendering when that is the one, else a recorded
// revision's. ok is false when neither holds it.
func (st *state) revisionRendered(f Key, hash string) (Rendered, bool) {
	if n, ok := st.g.node(f); ok && n.payload.rendered != nil && n.payload.rendered.Revision == hash {
		return *n.payload.rendered, true
	}
	rec, ok := st.revisions.get(revKey{flagSet: f, revision: hash})
	if !ok {
		return Rendered{}, false
	}
	rec.once.Do(func() { rec.rendered = *st.render(rec.ff) })
	if rec.rendered.Revision != hash || !rec.rendered.Valid() {
		// A revision whose spec does not render to the hash it claims is
		// not served: its content is not the revision a plan names (an
		// object written by someone else than flagplane, or by a renderer
		// that changed since).
		return Rendered{}, false
	}
	return rec.rendered, true
}

// Namespaces: their labels, which namespaceSelector steps match.

// UpsertNamespace takes a Namespace's labels. The Delta: what reads the
// plans of the flag sets consumed there, when they changed.
func (t *Topology) UpsertNamespace(name string, nsLabels map[string]string) Delta {
	return t.mustApply(Key{}, func(edit *tx) error {
		before, had := edit.state.nsLabels.get(nsKey(name))
		if had && maps.Equal(before, nsLabels) {
			return nil
		}
		edit.state.nsLabels.set(edit.owner, nsKey(name), nsLabels)
		edit.markAllPlans()
		return nil
	})
}

// DeleteNamespace forgets a Namespace's labels.
func (t *Topology) DeleteNamespace(name string) Delta {
	return t.mustApply(Key{}, func(edit *tx) error {
		if edit.state.nsLabels.del(edit.owner, nsKey(name)) {
			edit.markAllPlans()
		}
		return nil
	})
}

// markAllPlans marks the plans of every staged flag set: a namespace's
// labels can move its consumers between steps. Namespaces change seldom,
// and rollout policies are few.
func (edit *tx) markAllPlans() {
	for f := range edit.state.rolloutsByFlagSet.all() {
		edit.markStaged(f)
	}
}

// The plan.

// RolloutPlan is who serves what of a flag set under its rollout policy.
type RolloutPlan struct {
	// Policy is the policy in force.
	Policy Key
	// Problem says why the policy stages nothing ("" when it does): then
	// every consumer serves the flag set's current rendering.
	Problem, ProblemReason string
	// Stable is the revision consumers return to; Target the one rolling
	// out. Phase and Step are where it stands (Step == len(Steps) when
	// completed).
	Stable, Target string
	Phase          deliveryv1alpha1.RolloutPhase
	Step           int
	Steps          int
	// NewPlan says that the flag set renders a revision that the policy's
	// status has not recorded yet: an edit the rollout workflow is to
	// start a plan for (Replaced is the target it replaces, if any).
	NewPlan  bool
	Replaced string
	// Consumers are the flag set's consumers, by namespace.
	Consumers []PlanConsumer
	// Unstaged are the workloads and Flagds that read the FeatureFlag
	// themselves (provider kubernetes).
	Unstaged []Key
}

// PlanConsumer is one consumer of a plan: a namespace's copy of the flag set.
type PlanConsumer struct {
	Namespace string
	// Step is the first step that selects it; Steps when none does (it
	// gets the revision when the rollout completes).
	Step int
	// Workloads are the consuming workloads and Flagds of the namespace.
	Workloads []Key
	// Revision is what it is planned to serve now.
	Revision string
}

// Staged tells whether the plan holds consumers at different revisions or
// at one other than the flag set's current rendering.
func (p *RolloutPlan) Staged() bool { return p != nil && p.Problem == "" }

// RevisionFor is the revision the plan gives the consumer in namespace: a
// namespace the plan does not know (it consumes through something the
// graph does not see, an in-process SDK on the sync server) is planned
// with the consumers of no step.
func (p *RolloutPlan) RevisionFor(namespace string) string {
	if i, ok := slices.BinarySearchFunc(p.Consumers, namespace, func(c PlanConsumer, ns string) int { return strings.Compare(c.Namespace, ns) }); ok {
		return p.Consumers[i].Revision
	}
	return p.revisionAt(p.Steps)
}

// revisionAt is the revision of a consumer first selected by step.
func (p *RolloutPlan) revisionAt(step int) string {
	switch p.Phase {
	case deliveryv1alpha1.PhaseHalted, deliveryv1alpha1.PhaseAborted:
		return p.Stable
	case deliveryv1alpha1.PhaseCompleted:
		return p.Target
	}
	if p.Target == p.Stable || step <= p.Step {
		return p.Target
	}
	return p.Stable
}

// RolloutPlan is the plan of a flag set, nil when no rollout policy targets
// it. The view computes it once.
func (v *View) RolloutPlan(f Key) *RolloutPlan {
	if v.state.rolloutsByFlagSet.len() == 0 || !v.state.rolloutsByFlagSet.has(f) {
		return nil
	}
	if v.plans == nil {
		return v.state.plan(f)
	}
	if p, ok := v.plans.Load(f); ok {
		return p.(*RolloutPlan)
	}
	p, _ := v.plans.LoadOrStore(f, v.state.plan(f))
	return p.(*RolloutPlan)
}

func (st *state) plan(f Key) *RolloutPlan {
	policies := st.rolloutPoliciesOf(f)
	if len(policies) == 0 {
		return nil
	}
	return st.planWith(f, policies[0])
}

// PlanFor is the plan p would give its flag set's consumers were it the
// policy in force, as the graph stands: what admission checks a policy's
// steps against before it is stored.
func (v *View) PlanFor(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) *RolloutPlan {
	return v.state.planWith(rolloutTarget(p), p)
}

func (st *state) planWith(f Key, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) *RolloutPlan {
	plan := &RolloutPlan{Policy: RolloutPolicyKey(p.Namespace, p.Name), Steps: len(p.Spec.Steps)}
	n, ok := st.g.node(f)
	if !ok || n.payload.flagSet == nil {
		plan.Problem, plan.ProblemReason = "FeatureFlag "+f.Name+" does not exist", deliveryv1alpha1.ReasonTargetNotFound
		return plan
	}
	consumers, unstaged := st.planConsumers(f)
	plan.Unstaged = unstaged
	if len(unstaged) > 0 {
		plan.Problem, plan.ProblemReason = "workloads or Flagds read the FeatureFlag themselves with the kubernetes provider, which no rollout can stage", deliveryv1alpha1.ReasonUnstageableConsumers
		return plan
	}
	st.selectSteps(f, p, consumers)

	current := n.payload.rendered
	s := p.Status
	plan.Stable, plan.Target, plan.Phase, plan.Step = s.StableRevision, s.TargetRevision, s.Phase, int(s.Step)
	base := s.StableRevision
	if s.Phase == deliveryv1alpha1.PhaseCompleted {
		base = s.TargetRevision
	}
	switch {
	case s.StableRevision == "" || s.TargetRevision == "":
		// No plan recorded yet: the current rendering is stable.
		plan.Stable, plan.Target = current.Revision, current.Revision
		plan.Phase, plan.Step, plan.NewPlan = deliveryv1alpha1.PhaseCompleted, plan.Steps, current.Revision != ""
	case current.Valid() && current.Revision != "" && current.Revision != s.TargetRevision:
		// An edit: a new plan from the stable revision, from its first step.
		plan.NewPlan = true
		if s.Phase == deliveryv1alpha1.PhaseProgressing || s.Phase == deliveryv1alpha1.PhasePaused {
			plan.Replaced = s.TargetRevision
		}
		plan.Stable, plan.Target, plan.Phase, plan.Step = base, current.Revision, deliveryv1alpha1.PhaseProgressing, 0
		if plan.Target == plan.Stable {
			plan.Phase, plan.Step = deliveryv1alpha1.PhaseCompleted, plan.Steps
		}
	}
	for i := range consumers {
		consumers[i].Revision = plan.revisionAt(consumers[i].Step)
	}
	plan.Consumers = consumers
	return plan
}

// planConsumers lists the consumers of a flag set, by namespace, and the
// workloads and Flagds that read it with the kubernetes provider.
func (st *state) planConsumers(f Key) (consumers []PlanConsumer, unstaged []Key) {
	byNs := map[string][]Key{}
	add := func(ns string, w Key) {
		if !slices.Contains(byNs[ns], w) {
			byNs[ns] = append(byNs[ns], w)
		}
	}
	for _, s := range st.g.parents(f, relRefs) {
		n, ok := st.g.node(s)
		if !ok || n.payload.source == nil {
			continue
		}
		readers := append(st.g.children(s, relTargets), st.g.children(s, relServes)...)
		for _, r := range n.payload.source.refs {
			if r.FlagSet != f || r.State != RefResolved {
				continue
			}
			for _, w := range readers {
				if r.Provider == string(v1beta1.SyncProviderKubernetes) {
					if !slices.Contains(unstaged, w) {
						unstaged = append(unstaged, w)
					}
					continue
				}
				add(w.Namespace, w)
			}
		}
	}
	// The ConfigMaps: every namespace that mounts one consumes it.
	for _, cm := range st.g.children(f, relRenders) {
		if _, ok := byNs[cm.Namespace]; !ok {
			byNs[cm.Namespace] = nil
		}
	}
	for ns, ws := range byNs {
		slices.SortFunc(ws, Key.Compare)
		consumers = append(consumers, PlanConsumer{Namespace: ns, Workloads: ws})
	}
	slices.SortFunc(consumers, func(a, b PlanConsumer) int { return strings.Compare(a.Namespace, b.Namespace) })
	slices.SortFunc(unstaged, Key.Compare)
	return consumers, unstaged
}

// selectSteps sets the first step that selects each consumer.
func (st *state) selectSteps(f Key, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, consumers []PlanConsumer) {
	for i := range consumers {
		consumers[i].Step = len(p.Spec.Steps)
	}
	order := percentageOrder(f, consumers)
	for si := len(p.Spec.Steps) - 1; si >= 0; si-- {
		for _, i := range st.stepSelects(&p.Spec.Steps[si], consumers, order) {
			consumers[i].Step = si
		}
	}
}

// StepSelects lists the namespaces of the consumers of p's flag set that
// step i of p selects on its own, whatever the steps before it select.
func (v *View) StepSelects(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, i int) []string {
	f := rolloutTarget(p)
	consumers, _ := v.state.planConsumers(f)
	order := percentageOrder(f, consumers)
	var out []string
	for _, c := range v.state.stepSelects(&p.Spec.Steps[i], consumers, order) {
		out = append(out, consumers[c].Namespace)
	}
	slices.Sort(out)
	return out
}

// percentageOrder is the order percentages take the consumers in: a hash
// of the flag set and the namespace, so that a consumer that comes or goes
// moves few others.
func percentageOrder(f Key, consumers []PlanConsumer) []int {
	order := make([]int, len(consumers))
	for i := range order {
		order[i] = i
	}
	weight := func(i int) uint32 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(f.Namespace + "/" + f.Name + "/" + consumers[i].Namespace))
		return h.Sum32()
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(weight(a), weight(b)), strings.Compare(consumers[a].Namespace, consumers[b].Namespace))
	})
	return order
}

// stepSelects lists the consumers a step selects on its own.
func (st *state) stepSelects(step *deliveryv1alpha1.RolloutStep, consumers []PlanConsumer, order []int) []int {
	var out []int
	switch {
	case step.Percentage != nil:
		n := (len(consumers)*int(*step.Percentage) + 99) / 100
		out = append(out, order[:min(n, len(order))]...)
	case step.NamespaceSelector != nil:
		sel, err := metav1.LabelSelectorAsSelector(step.NamespaceSelector)
		if err != nil {
			return nil
		}
		for i, c := range consumers {
			l, _ := st.nsLabels.get(nsKey(c.Namespace))
			if sel.Matches(labels.Set(l)) {
				out = append(out, i)
			}
		}
	case step.WorkloadSelector != nil:
		sel, err := metav1.LabelSelectorAsSelector(step.WorkloadSelector)
		if err != nil {
			return nil
		}
		for i, c := range consumers {
			for _, w := range c.Workloads {
				if sel.Matches(labels.Set(st.labelsOf(w))) {
					out = append(out, i)
					break
				}
			}
		}
	}
	return out
}

// labelsOf is a workload's or a Flagd's labels.
func (st *state) labelsOf(w Key) map[string]string {
	n, ok := st.g.node(w)
	if !ok {
		return nil
	}
	switch {
	case n.payload.workload != nil:
		return n.payload.workload.w.Labels
	case n.payload.flagd != nil:
		return n.payload.flagd.obj.Labels
	}
	return nil
}

// NamespaceLabels are a namespace's labels as the topology holds them.
func (v *View) NamespaceLabels(namespace string) (map[string]string, bool) {
	return v.state.nsLabels.get(nsKey(namespace))
}

// Served is what a consumer of a flag set is to serve.
type Served struct {
	Rendered
	// Held is true when its planned revision's content is not known (its
	// FeatureFlagRevision is not recorded, or not seen yet): the consumer
	// keeps what it has.
	Held bool
}

// ServedFor is what the consumer of a flag set in namespace serves: the
// flag set's rendering, or, while a rollout plan holds the namespace at
// another revision, that revision's. ok is false when the flag set is not
// in the graph.
func (v *View) ServedFor(f Key, namespace string) (Served, bool) {
	r, ok := v.FlagSetRendered(f)
	if !ok {
		return Served{}, false
	}
	plan := v.RolloutPlan(f)
	if !plan.Staged() {
		return Served{Rendered: r}, true
	}
	want := plan.RevisionFor(namespace)
	if want == "" || want == r.Revision {
		return Served{Rendered: r}, true
	}
	held, ok := v.state.revisionRendered(f, want)
	if !ok {
		return Served{Rendered: Rendered{Revision: want}, Held: true}, true
	}
	return Served{Rendered: held}, true
}

// PlannedRevision is the revision the consumer of a flag set in namespace
// is to serve: the flag set's rendering's, unless a rollout plan holds it
// at another.
func (v *View) PlannedRevision(f Key, namespace string) string {
	s, ok := v.ServedFor(f, namespace)
	if !ok {
		return ""
	}
	return s.Revision
}

// RevisionRendered is the rendering of a flag set's revision of a given
// content hash, from its current rendering or a recorded revision.
func (v *View) RevisionRendered(f Key, hash string) (Rendered, bool) {
	return v.state.revisionRendered(f, hash)
}
