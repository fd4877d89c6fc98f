package staging

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// Observation is what the cluster shows of a rollout's consumers now.
type Observation struct {
	Now time.Time
	// Serving is, per consumer namespace, the revision every copy there
	// holds ("" when they differ or are not known yet).
	Serving map[string]string
	// Unread are the consumer namespaces whose copies hold the revision
	// and whose pods that do not confirm it were not read yet: what they
	// serve is not known (a manager that just took the lead has read
	// none), and none is known to serve another revision.
	Unread map[string]bool
	// GateFailure says which gate fails on the consumers serving the new
	// revision, and why ("" when every gate holds).
	GateFailure string
	// GateUnknown says which gate could not be evaluated (a Prometheus
	// that does not answer): the step does not end while it cannot be.
	GateUnknown string
	// PrometheusGates says that the manager evaluates Prometheus gates.
	PrometheusGates bool
}

// Event is an Event worth sending on the policy.
type Event struct {
	Reason, Note string
	Warning      bool
}

// Result is what Next decides.
type Result struct {
	Status deliveryv1alpha1.FeatureFlagRolloutPolicyStatus
	// RequeueAfter is when to look again without an event (a pause ends);
	// 0: the next event will do.
	RequeueAfter time.Duration
	// Events are worth sending (a step started, the rollout completed,
	// halted or was aborted, readers no plan stages appeared).
	Events []Event
	// held: the step waits for consumers not read yet, which the status
	// last recorded serving its revision; the status keeps what it says.
	held bool
}

// MessageMaxLength is the most bytes status.message holds (the CRD's
// maxLength counts characters; bytes are never fewer): a longer message
// would have the API server refuse the status write, a halt with it.
const MessageMaxLength = 2048

// ConditionMessageMaxLength is the most a condition's message holds
// (metav1.Condition).
const ConditionMessageMaxLength = 32768

// Next is the state machine: the status p should have, given the plan of
// its flag set and the observation. It always reaches a stated phase:
// what cannot go on (a gate that fails, one this manager cannot evaluate,
// a step the policy no longer has) halts the rollout with its reason, and
// the plan then gives every consumer the stable revision.
func Next(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan, obs Observation) Result {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	res := Result{}
	now := metav1.NewTime(obs.Now.Truncate(time.Second))
	accepted := metav1.Condition{Type: deliveryv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: deliveryv1alpha1.ReasonAccepted, Message: "the policy stages the edits of FeatureFlag " + p.Spec.TargetRef.Name, ObservedGeneration: p.Generation}
	unsupported := Unsupported(p.Spec.Gates, obs.PrometheusGates)
	switch {
	case plan == nil:
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, deliveryv1alpha1.ReasonTargetNotFound, "FeatureFlag "+p.Spec.TargetRef.Name+" does not exist"
	case plan.Policy.Name != p.Name:
		accepted.Status, accepted.Reason = metav1.ConditionFalse, deliveryv1alpha1.ReasonConflicted
		accepted.Message = "FeatureFlagRolloutPolicy " + plan.Policy.Name + " (older) stages FeatureFlag " + p.Spec.TargetRef.Name + "; this one does nothing"
	case plan.Problem != "":
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, plan.ProblemReason, plan.Problem
	case unsupported != "":
		// Accepted False, and no rollout of it runs: each is halted as it
		// starts (below), so that every consumer keeps the stable revision.
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, deliveryv1alpha1.ReasonUnsupportedGate, unsupported
	}
	meta.SetStatusCondition(&st.Conditions, accepted)
	if accepted.Status != metav1.ConditionTrue && accepted.Reason != deliveryv1alpha1.ReasonUnsupportedGate {
		st.Steps, st.Unstaged = nil, nil
		meta.RemoveStatusCondition(&st.Conditions, deliveryv1alpha1.ConditionStaged)
		workflows.SetHealth(&st.Conditions, p.Generation, workflows.Verdict{Health: workflows.Stalled, Reason: accepted.Reason, Message: accepted.Message})
		setProgressing(&st, p.Generation, false, accepted.Reason, accepted.Message)
		res.Status = st
		return res
	}
	res.Events = append(res.Events, staged(&st, p, plan)...)

	steps := len(p.Spec.Steps)
	halt := ""
	switch {
	case plan.NewPlan:
		if plan.Replaced != "" {
			st.Message = fmt.Sprintf("revision %s replaced revision %s, which was rolling out at step %d: a new plan from revision %s",
				short(plan.Target), short(plan.Replaced), st.Step+1, short(plan.Stable))
		} else {
			st.Message = fmt.Sprintf("rolling out revision %s from revision %s", short(plan.Target), short(plan.Stable))
		}
		st.StableRevision, st.TargetRevision, st.Phase, st.Step = plan.Stable, plan.Target, plan.Phase, int32(plan.Step)
		st.Rollout = plan.Rollout
		st.ReplacedRevision = plan.Replaced
		st.StepStartedAt, st.StepServedAt, st.Approved = &now, nil, -1
		if plan.Phase == deliveryv1alpha1.PhaseCompleted {
			st.Message = "revision " + short(plan.Target) + " is the stable revision"
			break
		}
		res.Events = append(res.Events, Event{Reason: "RolloutStarted", Note: st.Message})
		if unsupported != "" {
			halt = deliveryv1alpha1.ReasonUnsupportedGate
			haltRollout(&st, &res, fmt.Sprintf("%s; every consumer keeps revision %s", unsupported, short(st.StableRevision)))
		}
	case st.Phase == deliveryv1alpha1.PhaseProgressing || st.Phase == deliveryv1alpha1.PhasePaused:
		// A status an earlier version wrote names its revisions with 48
		// bits; the plan read them as the full revisions of now.
		if topology.SameRevision(plan.Stable, st.StableRevision) {
			st.StableRevision = plan.Stable
		}
		if topology.SameRevision(plan.Target, st.TargetRevision) {
			st.TargetRevision = plan.Target
		}
		switch {
		case unsupported != "":
			halt = deliveryv1alpha1.ReasonUnsupportedGate
			haltRollout(&st, &res, fmt.Sprintf("halted at step %d: %s; every consumer serves revision %s again", st.Step+1, unsupported, short(st.StableRevision)))
		case plan.Halt != "":
			halt = deliveryv1alpha1.ReasonPolicyChanged
			haltRollout(&st, &res, fmt.Sprintf("halted: %s; every consumer serves revision %s again", plan.Halt, short(st.StableRevision)))
		default:
			var r Result
			r, halt = advance(p, plan, obs, &st, now, steps)
			res.RequeueAfter, res.held = r.RequeueAfter, r.held
			res.Events = append(res.Events, r.Events...)
		}
	}
	if st.Phase == deliveryv1alpha1.PhaseCompleted {
		st.Step = int32(steps)
		st.StableRevision = st.TargetRevision
	}
	st.Message = workflows.Cut(st.Message, MessageMaxLength-len("..."))
	if !res.held {
		st.Steps = stepStatus(p, plan, obs)
	}
	summarize(&st, p, halt)
	res.Status = st
	return res
}

// summarize sets the summary conditions (Ready, Reconciling, Stalled) and
// Progressing of a status from its phase; halt is the reason of a halt
// this reconcile made.
func summarize(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, halt string) {
	verdict := workflows.Verdict{Health: workflows.Reconciling, Reason: deliveryv1alpha1.ReasonStepProgressing, Message: st.Message}
	switch st.Phase {
	case deliveryv1alpha1.PhaseCompleted:
		verdict = workflows.Verdict{Health: workflows.Ready, Reason: deliveryv1alpha1.ReasonCompleted,
			Message: "every consumer serves revision " + short(st.TargetRevision)}
	case deliveryv1alpha1.PhaseHalted:
		verdict = workflows.Verdict{Health: workflows.Stalled, Reason: haltReason(halt, p.Status.Conditions), Message: st.Message}
	case deliveryv1alpha1.PhaseAborted:
		verdict = workflows.Verdict{Health: workflows.Stalled, Reason: deliveryv1alpha1.ReasonAborted, Message: st.Message}
	case deliveryv1alpha1.PhasePaused:
		reason := deliveryv1alpha1.ReasonPaused
		if !p.Spec.Paused {
			reason = deliveryv1alpha1.ReasonAwaitingApproval
		}
		verdict = workflows.Verdict{Health: workflows.Reconciling, Reason: reason, Message: st.Message}
	}
	workflows.SetHealth(&st.Conditions, p.Generation, verdict)
	running := st.Phase == deliveryv1alpha1.PhaseProgressing || st.Phase == deliveryv1alpha1.PhasePaused
	setProgressing(st, p.Generation, running, verdict.Reason, verdict.Message)
}

// haltRollout halts the rollout a status describes with message: every
// consumer returns to the stable revision.
func haltRollout(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, res *Result, message string) {
	st.Phase = deliveryv1alpha1.PhaseHalted
	st.Message = message
	res.Events = append(res.Events, Event{Reason: "RolloutHalted", Note: message, Warning: true})
}

// haltReason is the reason of a halted rollout's Stalled condition: the
// halt's (this reconcile halted it), else the one it was stated with.
func haltReason(halt string, before []metav1.Condition) string {
	if halt != "" {
		return halt
	}
	if c := meta.FindStatusCondition(before, deliveryv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		switch c.Reason {
		case deliveryv1alpha1.ReasonUnsupportedGate, deliveryv1alpha1.ReasonPolicyChanged:
			return c.Reason
		}
	}
	return deliveryv1alpha1.ReasonGateFailed
}

// staged sets the Staged condition and status.unstaged from the plan's
// readers that no plan stages, and says when they appear.
func staged(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan) []Event {
	st.Unstaged = nil
	for i, k := range plan.Unstaged {
		if i == 32 {
			break
		}
		st.Unstaged = append(st.Unstaged, strings.ToLower(string(k.Kind))+"/"+k.Namespace+"/"+k.Name)
	}
	c := metav1.Condition{Type: deliveryv1alpha1.ConditionStaged, Status: metav1.ConditionTrue, Reason: deliveryv1alpha1.ReasonAllStaged,
		Message: "every consumer follows the plan", ObservedGeneration: p.Generation}
	if len(plan.Unstaged) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, deliveryv1alpha1.ReasonUnstageableConsumers
		c.Message = workflows.Cut(fmt.Sprintf("%s read FeatureFlag %s themselves (provider kubernetes) and get every edit at once; "+
			"every other consumer follows the plan. Move them to provider file or flagd-proxy to stage them",
			keyList(plan.Unstaged, 5), p.Spec.TargetRef.Name), ConditionMessageMaxLength-len("..."))
	}
	was := meta.FindStatusCondition(p.Status.Conditions, deliveryv1alpha1.ConditionStaged)
	meta.SetStatusCondition(&st.Conditions, c)
	if c.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse) {
		return []Event{{Reason: deliveryv1alpha1.ReasonUnstageableConsumers, Note: c.Message, Warning: true}}
	}
	return nil
}

// advance moves a running rollout: abort, a failing gate, spec.paused, the
// step's delivery, its pause, its approval, then the next step. halt is
// the reason of a halt it made.
func advance(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan, obs Observation,
	st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, now metav1.Time, steps int) (res Result, halt string) {
	target, step := st.TargetRevision, int(st.Step)
	if step >= steps {
		// The plan says so too (Halt); here for a plan made apart.
		haltRollout(st, &res, fmt.Sprintf("halted: the policy now has %d step(s), and the rollout stood at step %d; every consumer serves revision %s again",
			steps, step+1, short(st.StableRevision)))
		return res, deliveryv1alpha1.ReasonPolicyChanged
	}
	if p.Annotations[deliveryv1alpha1.AbortAnnotation] == deliveryv1alpha1.AbortValue(*st) {
		st.Phase = deliveryv1alpha1.PhaseAborted
		st.Message = fmt.Sprintf("aborted at step %d: every consumer serves revision %s again", step+1, short(st.StableRevision))
		res.Events = append(res.Events, Event{Reason: "RolloutAborted", Note: st.Message, Warning: true})
		return res, ""
	}
	if obs.GateFailure != "" {
		haltRollout(st, &res, fmt.Sprintf("halted at step %d: %s; every consumer serves revision %s again", step+1, obs.GateFailure, short(st.StableRevision)))
		return res, deliveryv1alpha1.ReasonGateFailed
	}
	if p.Spec.Paused {
		st.Phase = deliveryv1alpha1.PhasePaused
		st.Message = fmt.Sprintf("paused at step %d (spec.paused): consumers keep what they serve", step+1)
		return res, ""
	}
	var waiting []string
	total, unread := 0, 0
	servedBefore := servedBefore(p.Status, target)
	for _, c := range plan.Consumers {
		if c.Step > step {
			continue
		}
		total++
		if obs.Serving[c.Namespace] != target {
			waiting = append(waiting, c.Namespace)
			if obs.Unread[c.Namespace] && servedBefore[c.Namespace] {
				unread++
			}
		}
	}
	if len(waiting) > 0 && unread == len(waiting) && st.StepServedAt != nil {
		// Every consumer it waits for was last seen serving the revision,
		// and none is known to serve another since: their pods were not
		// read yet (a manager that just took the lead has read none).
		// What is not known yet changes nothing: the step keeps its
		// clock, its phase, its message and its consumers' list, and
		// cannot end until they are read.
		res.RequeueAfter, res.held = time.Second, true
		return res, ""
	}
	st.Phase = deliveryv1alpha1.PhaseProgressing
	if len(waiting) > 0 {
		st.StepServedAt = nil
		st.Message = fmt.Sprintf("step %d: %d of %d consumers serve revision %s; %s", step+1, total-len(waiting), total, short(target),
			workflows.WaitingFor(waiting, 5))
		return res, ""
	}
	if st.StepServedAt == nil {
		st.StepServedAt = &now
	}
	s := p.Spec.Steps[step]
	promoted := p.Annotations[deliveryv1alpha1.PromoteAnnotation] == deliveryv1alpha1.PromoteValue(*st, int32(step))
	if promoted && st.Approved < int32(step) {
		st.Approved = int32(step)
	}
	serving := servingText(total, short(target))
	if s.Pause != nil && !promoted {
		if end := st.StepServedAt.Add(s.Pause.Duration); obs.Now.Before(end) {
			st.Message = fmt.Sprintf("step %d: %s; pausing until %s", step+1, serving, end.UTC().Format(time.RFC3339))
			res.RequeueAfter = end.Sub(obs.Now) + 100*time.Millisecond
			return res, ""
		}
	}
	if s.Approval && st.Approved < int32(step) {
		st.Phase = deliveryv1alpha1.PhasePaused
		st.Message = fmt.Sprintf("step %d: %s; waiting for approval (flagplane rollout promote ff/%s)", step+1, serving, p.Spec.TargetRef.Name)
		if obs.GateUnknown != "" {
			st.Message += "; and " + obs.GateUnknown
		}
		return res, ""
	}
	if obs.GateUnknown != "" {
		// A gate that cannot be read keeps the step from ending, promoted
		// or not; the promotion is remembered (Approved).
		st.Message = fmt.Sprintf("step %d: %s; the step cannot end while %s", step+1, serving, obs.GateUnknown)
		return res, ""
	}
	if step+1 >= steps {
		st.Phase = deliveryv1alpha1.PhaseCompleted
		st.Message = "completed: every consumer serves revision " + short(target)
		res.Events = append(res.Events, Event{Reason: "RolloutCompleted", Note: st.Message})
		return res, ""
	}
	st.Step = int32(step + 1)
	st.StepStartedAt, st.StepServedAt = &now, nil
	st.Message = fmt.Sprintf("step %d started: delivering revision %s to its consumers", step+2, short(target))
	res.Events = append(res.Events, Event{Reason: "StepStarted", Note: st.Message})
	return res, ""
}

// servedBefore are the consumers st records serving revision.
func servedBefore(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, revision string) map[string]bool {
	out := map[string]bool{}
	for _, s := range st.Steps {
		for _, c := range s.Consumers {
			if c.Serving == revision {
				out[c.Namespace] = true
			}
		}
	}
	return out
}

// short is a revision as messages show it.
func short(r string) string { return topology.ShortRevision(r) }
