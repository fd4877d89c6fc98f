package fleet

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/workflows"
)

// A fleet rollout stages an edit of a hub FeatureFlag cluster by cluster:
// its FeatureFlagRolloutPolicy's steps select clusters by their
// ClusterProfile's labels. A cluster gets the new spec when its step
// starts and keeps the stable spec until then; a halt writes the stable
// spec back to every cluster. The functions here are pure: Begin and
// Planned before the copies are written, Advance once they are observed.

// ClusterSteps says whether a policy's steps select clusters: the policies
// a fleet hub stages.
func ClusterSteps(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) bool {
	return len(p.Spec.Steps) > 0 && p.Spec.Steps[0].ClusterSelector != nil
}

// StepOf is the first step whose clusterSelector picks a cluster of these
// labels; len(steps) when none does (the cluster gets the revision once
// the rollout completes).
func StepOf(steps []deliveryv1alpha1.RolloutStep, clusterLabels map[string]string) int {
	set := labels.Set(clusterLabels)
	for i, s := range steps {
		if s.ClusterSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.ClusterSelector)
		if err == nil && sel.Matches(set) {
			return i
		}
	}
	return len(steps)
}

// Begin is the policy's status once it has seen the hub's revision: the
// first one it sees is stable; an edit starts a rollout from the stable
// revision; an edit back to the stable revision ends one.
func Begin(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, hubRev string, now time.Time) deliveryv1alpha1.FeatureFlagRolloutPolicyStatus {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	at := metav1.NewTime(now.Truncate(time.Second))
	steps := int32(len(p.Spec.Steps))
	base := st.StableRevision
	if st.Phase == deliveryv1alpha1.PhaseCompleted {
		base = st.TargetRevision
	}
	switch {
	case hubRev == "" || (hubRev == st.TargetRevision && st.StableRevision != ""):
		return st
	case st.StableRevision == "" || hubRev == base:
		st.ReplacedRevision = ""
		if st.Phase == deliveryv1alpha1.PhaseProgressing || st.Phase == deliveryv1alpha1.PhasePaused {
			st.ReplacedRevision = st.TargetRevision
		}
		st.StableRevision, st.TargetRevision, st.Phase, st.Step = hubRev, hubRev, deliveryv1alpha1.PhaseCompleted, steps
		st.Rollout++
		st.StepStartedAt, st.StepServedAt = &at, nil
		st.Message = "revision " + short(hubRev) + " is the stable revision"
	default:
		st.ReplacedRevision = ""
		if st.Phase == deliveryv1alpha1.PhaseProgressing || st.Phase == deliveryv1alpha1.PhasePaused {
			st.ReplacedRevision = st.TargetRevision
		}
		st.StableRevision, st.TargetRevision, st.Phase, st.Step = base, hubRev, deliveryv1alpha1.PhaseProgressing, 0
		st.Rollout++
		st.StepStartedAt, st.StepServedAt = &at, nil
		st.Message = fmt.Sprintf("rolling out revision %s from revision %s, cluster by cluster", short(hubRev), short(base))
	}
	return st
}

// Planned is the revision the rollout gives a cluster of step step now.
func Planned(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, step int) string {
	switch st.Phase {
	case deliveryv1alpha1.PhaseHalted, deliveryv1alpha1.PhaseAborted:
		return st.StableRevision
	case deliveryv1alpha1.PhaseProgressing, deliveryv1alpha1.PhasePaused:
		if step <= int(st.Step) {
			return st.TargetRevision
		}
		return st.StableRevision
	}
	return st.TargetRevision
}

// RolloutCluster is what Advance needs of one granted cluster.
type RolloutCluster struct {
	Cluster string
	Step    int
	Status  fleetv1alpha1.ClusterPlacementStatus
}

// Advance moves the rollout on from what the clusters confirm: a step's
// pause counts from when every cluster of it and of the steps before it
// is Current with the target; then the next step starts. A Confirmed gate
// halts the rollout when a cluster of a started step has not confirmed
// the target within the gate's For of the step's start. It returns how
// soon to look again (0: only when something changes).
func Advance(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus,
	clusters []RolloutCluster, now time.Time) (time.Duration, []string) {
	at := metav1.NewTime(now.Truncate(time.Second))
	steps := int32(len(p.Spec.Steps))
	if st.Phase != deliveryv1alpha1.PhaseProgressing && st.Phase != deliveryv1alpha1.PhasePaused {
		return 0, nil
	}
	if p.Spec.Paused {
		st.Phase, st.Message = deliveryv1alpha1.PhasePaused, fmt.Sprintf("paused at step %d (spec.paused)", st.Step+1)
		return 0, nil
	}
	st.Phase = deliveryv1alpha1.PhaseProgressing
	var waiting []string
	for _, c := range clusters {
		if c.Step > int(st.Step) {
			continue
		}
		if c.Status.State != fleetv1alpha1.ClusterCurrent || c.Status.Revision != st.TargetRevision {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", c.Cluster, c.Status.State))
		}
	}
	if len(waiting) > 0 {
		st.StepServedAt = nil
		if failed, c := gateFailed(p, st, clusters, now); failed != "" {
			halt(st, failed)
			return 0, []string{fmt.Sprintf("halted: %s: %s", failed, c)}
		}
		st.Message = fmt.Sprintf("step %d: %s", st.Step+1, workflows.WaitingFor(waiting, 8))
		return nextGateCheck(p, st, now), nil
	}
	if st.StepServedAt == nil {
		st.StepServedAt = &at
	}
	pause := time.Duration(0)
	if st.Step < steps && p.Spec.Steps[st.Step].Pause != nil {
		pause = p.Spec.Steps[st.Step].Pause.Duration
	}
	if left := st.StepServedAt.Add(pause).Sub(now); left > 0 {
		st.Message = fmt.Sprintf("step %d: every cluster of it serves revision %s; the next starts in %s",
			st.Step+1, short(st.TargetRevision), left.Round(time.Second))
		return left, nil
	}
	st.Step++
	st.StepStartedAt, st.StepServedAt = &at, nil
	if st.Step >= steps {
		st.Step, st.Phase, st.StableRevision = steps, deliveryv1alpha1.PhaseCompleted, st.TargetRevision
		st.Message = "revision " + short(st.TargetRevision) + " is the stable revision: every cluster has it"
		return 0, []string{st.Message}
	}
	st.Message = fmt.Sprintf("step %d started", st.Step+1)
	return time.Millisecond, []string{st.Message}
}

// gateFailed is a Confirmed gate's failure, and the cluster it names.
func gateFailed(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus,
	clusters []RolloutCluster, now time.Time) (string, string) {
	for i, g := range p.Spec.Gates {
		if g.Type != deliveryv1alpha1.GateConfirmed || st.StepStartedAt == nil {
			continue
		}
		bound := time.Duration(0)
		if g.For != nil {
			bound = g.For.Duration
		}
		if now.Sub(st.StepStartedAt.Time) < bound {
			continue
		}
		for _, c := range clusters {
			if c.Step > int(st.Step) || (c.Status.State == fleetv1alpha1.ClusterCurrent && c.Status.Revision == st.TargetRevision) {
				continue
			}
			return fmt.Sprintf("gate Confirmed (spec.gates[%d]) failed: cluster %s did not confirm revision %s within %s of step %d's start",
				i, c.Cluster, short(st.TargetRevision), bound, st.Step+1), fmt.Sprintf("%s: %s", c.Status.State, c.Status.Message)
		}
	}
	return "", ""
}

// nextGateCheck is how soon the earliest Confirmed gate's bound passes.
func nextGateCheck(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, now time.Time) time.Duration {
	next := time.Duration(0)
	for _, g := range p.Spec.Gates {
		if g.Type != deliveryv1alpha1.GateConfirmed || g.For == nil || st.StepStartedAt == nil {
			continue
		}
		if left := st.StepStartedAt.Add(g.For.Duration).Sub(now); left > 0 && (next == 0 || left < next) {
			next = left + time.Second
		}
	}
	return next
}

func halt(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, why string) {
	st.Phase = deliveryv1alpha1.PhaseHalted
	st.StepServedAt = nil
	st.Message = fmt.Sprintf("%s; every cluster returns to revision %s", why, short(st.StableRevision))
}

// setRolloutConditions sets Accepted and the summary conditions of a
// fleet rollout's policy.
func setRolloutConditions(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, gen int64) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: deliveryv1alpha1.ConditionAccepted,
		Status: metav1.ConditionTrue, Reason: deliveryv1alpha1.ReasonAccepted, ObservedGeneration: gen,
		Message: "a fleet hub stages the edits of the flag set cluster by cluster"})
	v := workflows.Verdict{Health: workflows.Ready, Reason: deliveryv1alpha1.ReasonCompleted, Message: st.Message}
	switch st.Phase {
	case deliveryv1alpha1.PhaseProgressing:
		v = workflows.Verdict{Health: workflows.Reconciling, Reason: deliveryv1alpha1.ReasonStepProgressing, Message: st.Message}
	case deliveryv1alpha1.PhasePaused:
		v = workflows.Verdict{Health: workflows.Reconciling, Reason: deliveryv1alpha1.ReasonPaused, Message: st.Message}
	case deliveryv1alpha1.PhaseHalted:
		v = workflows.Verdict{Health: workflows.Stalled, Reason: deliveryv1alpha1.ReasonGateFailed, Message: st.Message}
	}
	workflows.SetHealth(&st.Conditions, gen, v)
}
