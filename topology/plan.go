package topology

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// The plan: who serves what of a staged flag set. It is derived from the
// policy's spec and status, the flag set's rendering, its recorded
// revisions and the labels of namespaces and workloads, never stored.
//
// It fails closed: what a consumer serves changes only with the policy
// (its status, which the staging workflow writes, or its spec) or with the
// consumer's own place in the steps. Nothing else releases a revision:
// readers of the FeatureFlag that no plan can stage (provider kubernetes)
// are listed in Unstaged and leave every other consumer to the plan, and a
// rollout whose step the policy no longer has is held at the stable
// revision (Halt) until the workflow writes its halt.

// RolloutPlan is who serves what of a flag set under its rollout policy.
type RolloutPlan struct {
	// Policy is the policy in force.
	Policy Key
	// Problem says why the policy stages nothing ("" when it does): its
	// flag set does not exist.
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
	// Rollout is the number of the rollout of Target: the status's, or the
	// next one for a new plan. Promotions and aborts name it, so that one
	// meant for a rollout never acts on a later one of the same revision.
	Rollout int64
	// Halt, when set, says why every consumer is held at the stable
	// revision although the status says the rollout runs: its step is
	// past the policy's steps (they were removed mid-rollout). The
	// staging workflow writes the halt, with this reason.
	Halt string
	// Consumers are the flag set's consumers, by namespace.
	Consumers []PlanConsumer
	// Unstaged are the workloads and Flagds that read the FeatureFlag
	// themselves (provider kubernetes): no plan can stage what they read,
	// and they leave the other consumers to the plan.
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

// Staged tells whether the plan decides what its consumers serve: it does
// whenever its flag set exists.
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
	if p.Halt != "" {
		return p.Stable
	}
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
// it: the one the last edit of the graph computed (updatePlans), shared by
// every reader. It must not be modified.
func (v *View) RolloutPlan(f Key) *RolloutPlan {
	p, _ := v.state.plans.get(f)
	return p
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
	if slices.ContainsFunc(p.Spec.Steps, func(s deliveryv1alpha1.RolloutStep) bool { return s.ClusterSelector != nil }) {
		plan.Problem = "its steps select clusters (clusterSelector): a fleet hub stages such a policy across member clusters; in a member it stages nothing"
		plan.ProblemReason = deliveryv1alpha1.ReasonClusterSteps
		return plan
	}
	consumers, unstaged := st.planConsumers(f)
	plan.Unstaged = unstaged
	st.selectSteps(f, p, consumers)

	current := n.payload.rendered
	s := p.Status
	stable, target := st.fullRevision(f, s.StableRevision), st.fullRevision(f, s.TargetRevision)
	plan.Stable, plan.Target, plan.Phase, plan.Step, plan.Rollout = stable, target, s.Phase, int(s.Step), s.Rollout
	base := stable
	if s.Phase == deliveryv1alpha1.PhaseCompleted {
		base = target
	}
	switch {
	case stable == "" || target == "":
		// No plan recorded yet: the current rendering is stable.
		plan.Stable, plan.Target = current.Revision, current.Revision
		plan.Phase, plan.Step, plan.NewPlan = deliveryv1alpha1.PhaseCompleted, plan.Steps, current.Revision != ""
		plan.Rollout = s.Rollout + 1
	case current.Valid() && current.Revision != "" && !SameRevision(current.Revision, target):
		// An edit: a new plan from the stable revision, from its first step.
		plan.NewPlan = true
		if s.Phase == deliveryv1alpha1.PhaseProgressing || s.Phase == deliveryv1alpha1.PhasePaused {
			plan.Replaced = target
		}
		plan.Stable, plan.Target, plan.Phase, plan.Step = base, current.Revision, deliveryv1alpha1.PhaseProgressing, 0
		plan.Rollout = s.Rollout + 1
		if SameRevision(plan.Target, plan.Stable) {
			plan.Stable = plan.Target
			plan.Phase, plan.Step = deliveryv1alpha1.PhaseCompleted, plan.Steps
		}
	case (s.Phase == deliveryv1alpha1.PhaseProgressing || s.Phase == deliveryv1alpha1.PhasePaused) && plan.Step >= plan.Steps:
		// The policy lost steps while the rollout stood at one of them:
		// nobody gets the target until a new plan (an edit) starts.
		plan.Halt = "the policy now has " + strconv.Itoa(plan.Steps) + " step(s), and the rollout stood at step " + strconv.Itoa(plan.Step+1)
	}
	for i := range consumers {
		consumers[i].Revision = plan.revisionAt(consumers[i].Step)
	}
	plan.Consumers = consumers
	return plan
}

// Readers lists, by namespace, the workloads and Flagds that read flag set
// f from a copy flagplane writes (a generated ConfigMap, a sync stream):
// the consumers a rollout stages, with no step set. The workloads and
// Flagds that read it with the kubernetes provider are listed apart.
func (v *View) Readers(f Key) (consumers []PlanConsumer, kubernetes []Key) {
	return v.state.planConsumers(f)
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
		// The schema keeps a percentage within 0–100; a plan does not rely
		// on it (a negative one made a slice bound below zero): outside,
		// the nearer bound.
		percent := min(max(int(*step.Percentage), 0), 100)
		out = append(out, order[:(len(consumers)*percent+99)/100]...)
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
