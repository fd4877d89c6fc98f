// Package staging runs the staged rollout of a flag set's edits: it moves a
// FeatureFlagRolloutPolicy from step to step as the step's consumers serve
// the new revision, its pause passes and its approval comes, and halts it
// when a gate fails. It decides nothing about who serves what: the
// topology's plan (topology.View.RolloutPlan) reads the status this package
// writes. Next is the whole state machine, a pure function of the policy,
// the plan and what was observed; the controllers write what it returns.
//
// Everything the machine needs to resume is in the policy's status (the
// revisions, the phase, the step and when it was served), so a restart or a
// new leader continues exactly where the last one stood.
package staging

import (
	"fmt"
	"strconv"
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
	// GateFailure says which gate fails on the consumers serving the new
	// revision, and why ("" when every gate holds).
	GateFailure string
	// GateUnknown says which gate could not be evaluated (a Prometheus
	// that does not answer): the step does not end while it cannot be.
	GateUnknown string
	// PrometheusGates says that the manager evaluates Prometheus gates.
	PrometheusGates bool
}

// Result is what Next decides.
type Result struct {
	Status deliveryv1alpha1.FeatureFlagRolloutPolicyStatus
	// RequeueAfter is when to look again without an event (a pause ends);
	// 0: the next event will do.
	RequeueAfter time.Duration
	// Event, when set, is worth an Event on the policy (a step started, the
	// rollout completed, halted or was aborted).
	Event, EventReason string
	Warning            bool
}

// Next is the state machine: the status p should have, given the plan of
// its flag set and the observation.
func Next(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan, obs Observation) Result {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	res := Result{}
	now := metav1.NewTime(obs.Now.Truncate(time.Second))
	accepted := metav1.Condition{Type: deliveryv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: deliveryv1alpha1.ReasonAccepted, Message: "the policy stages the edits of FeatureFlag " + p.Spec.TargetRef.Name, ObservedGeneration: p.Generation}
	switch {
	case plan == nil:
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, deliveryv1alpha1.ReasonTargetNotFound, "FeatureFlag "+p.Spec.TargetRef.Name+" does not exist"
	case plan.Policy.Name != p.Name:
		accepted.Status, accepted.Reason = metav1.ConditionFalse, deliveryv1alpha1.ReasonConflicted
		accepted.Message = "FeatureFlagRolloutPolicy " + plan.Policy.Name + " (older) stages FeatureFlag " + p.Spec.TargetRef.Name + "; this one does nothing"
	case Unsupported(p.Spec.Gates, obs.PrometheusGates) != "":
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, "UnsupportedGate", Unsupported(p.Spec.Gates, obs.PrometheusGates)
	case plan.Problem != "":
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, plan.ProblemReason, plan.Problem
		if len(plan.Unstaged) > 0 {
			accepted.Message += ": " + keyList(plan.Unstaged, 5) + "; its edits reach every consumer at once, as without a policy"
		}
	}
	st.Unstaged = nil
	if plan != nil {
		for i, k := range plan.Unstaged {
			if i == 32 {
				break
			}
			st.Unstaged = append(st.Unstaged, strings.ToLower(string(k.Kind))+"/"+k.Namespace+"/"+k.Name)
		}
	}
	meta.SetStatusCondition(&st.Conditions, accepted)
	if accepted.Status != metav1.ConditionTrue {
		st.Steps = nil
		workflows.SetHealth(&st.Conditions, p.Generation, workflows.Verdict{Health: workflows.Stalled, Reason: accepted.Reason, Message: accepted.Message})
		setProgressing(&st, p.Generation, false, accepted.Reason, accepted.Message)
		res.Status = st
		return res
	}

	steps := len(p.Spec.Steps)
	switch {
	case plan.NewPlan:
		if plan.Replaced != "" {
			st.Message = fmt.Sprintf("revision %s replaced revision %s, which was rolling out at step %d: a new plan from revision %s",
				plan.Target, plan.Replaced, st.Step+1, plan.Stable)
		} else {
			st.Message = fmt.Sprintf("rolling out revision %s from revision %s", plan.Target, plan.Stable)
		}
		st.StableRevision, st.TargetRevision, st.Phase, st.Step = plan.Stable, plan.Target, plan.Phase, int32(plan.Step)
		st.ReplacedRevision = plan.Replaced
		st.StepStartedAt, st.StepServedAt, st.Approved = &now, nil, -1
		if plan.Phase == deliveryv1alpha1.PhaseCompleted {
			st.Message = "revision " + plan.Target + " is the stable revision"
		} else {
			res.Event, res.EventReason = st.Message, "RolloutStarted"
		}
	case st.Phase == deliveryv1alpha1.PhaseProgressing || st.Phase == deliveryv1alpha1.PhasePaused:
		res = advance(p, plan, obs, &st, now, steps)
	}
	if st.Phase == deliveryv1alpha1.PhaseCompleted {
		st.Step = int32(steps)
		st.StableRevision = st.TargetRevision
	}
	st.Steps = stepStatus(p, plan, obs)
	verdict := workflows.Verdict{Health: workflows.Reconciling, Reason: deliveryv1alpha1.ReasonStepProgressing, Message: st.Message}
	switch st.Phase {
	case deliveryv1alpha1.PhaseCompleted:
		verdict = workflows.Verdict{Health: workflows.Ready, Reason: deliveryv1alpha1.ReasonCompleted,
			Message: "every consumer serves revision " + st.TargetRevision}
	case deliveryv1alpha1.PhaseHalted:
		verdict = workflows.Verdict{Health: workflows.Stalled, Reason: deliveryv1alpha1.ReasonGateFailed, Message: st.Message}
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
	setProgressing(&st, p.Generation, running, verdict.Reason, verdict.Message)
	res.Status = st
	return res
}

// advance moves a running rollout: abort, a failing gate, spec.paused, the
// step's delivery, its pause, its approval, then the next step.
func advance(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan, obs Observation,
	st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, now metav1.Time, steps int) Result {
	res := Result{}
	target, step := st.TargetRevision, int(st.Step)
	if a := p.Annotations[deliveryv1alpha1.AbortAnnotation]; a != "" && a == target {
		st.Phase = deliveryv1alpha1.PhaseAborted
		st.Message = fmt.Sprintf("aborted at step %d: every consumer serves revision %s again", step+1, st.StableRevision)
		res.Event, res.EventReason, res.Warning = st.Message, "RolloutAborted", true
		return res
	}
	if obs.GateFailure != "" {
		st.Phase = deliveryv1alpha1.PhaseHalted
		st.Message = fmt.Sprintf("halted at step %d: %s; every consumer serves revision %s again", step+1, obs.GateFailure, st.StableRevision)
		res.Event, res.EventReason, res.Warning = st.Message, "RolloutHalted", true
		return res
	}
	if p.Spec.Paused {
		st.Phase = deliveryv1alpha1.PhasePaused
		st.Message = fmt.Sprintf("paused at step %d (spec.paused): consumers keep what they serve", step+1)
		return res
	}
	st.Phase = deliveryv1alpha1.PhaseProgressing
	var waiting []string
	total := 0
	for _, c := range plan.Consumers {
		if c.Step > step {
			continue
		}
		total++
		if obs.Serving[c.Namespace] != target {
			waiting = append(waiting, c.Namespace)
		}
	}
	if len(waiting) > 0 {
		st.StepServedAt = nil
		st.Message = fmt.Sprintf("step %d: %d of %d consumers serve revision %s; %s", step+1, total-len(waiting), total, target,
			workflows.WaitingFor(waiting, 5))
		return res
	}
	if st.StepServedAt == nil {
		st.StepServedAt = &now
	}
	s := p.Spec.Steps[step]
	promoted := p.Annotations[deliveryv1alpha1.PromoteAnnotation] == target+"/"+strconv.Itoa(step)
	if promoted && st.Approved < int32(step) {
		st.Approved = int32(step)
	}
	serving := servingText(total, target)
	if s.Pause != nil && !promoted {
		if end := st.StepServedAt.Add(s.Pause.Duration); obs.Now.Before(end) {
			st.Message = fmt.Sprintf("step %d: %s; pausing until %s", step+1, serving, end.UTC().Format(time.RFC3339))
			res.RequeueAfter = end.Sub(obs.Now) + 100*time.Millisecond
			return res
		}
	}
	if s.Approval && st.Approved < int32(step) {
		st.Phase = deliveryv1alpha1.PhasePaused
		st.Message = fmt.Sprintf("step %d: %s; waiting for approval (flagplane rollout promote ff/%s)", step+1, serving, p.Spec.TargetRef.Name)
		if obs.GateUnknown != "" {
			st.Message += "; and " + obs.GateUnknown
		}
		return res
	}
	if obs.GateUnknown != "" {
		// A gate that cannot be read keeps the step from ending, promoted
		// or not; the promotion is remembered (Approved).
		st.Message = fmt.Sprintf("step %d: %s; the step cannot end while %s", step+1, serving, obs.GateUnknown)
		return res
	}
	if step+1 >= steps {
		st.Phase = deliveryv1alpha1.PhaseCompleted
		st.Message = "completed: every consumer serves revision " + target
		res.Event, res.EventReason = st.Message, "RolloutCompleted"
		return res
	}
	st.Step = int32(step + 1)
	st.StepStartedAt, st.StepServedAt = &now, nil
	st.Message = fmt.Sprintf("step %d started: delivering revision %s to its consumers", step+2, target)
	res.Event, res.EventReason = st.Message, "StepStarted"
	return res
}

// servingText says that a step's n consumers serve revision.
func servingText(n int, revision string) string {
	if n == 1 {
		return "its one consumer serves revision " + revision
	}
	return fmt.Sprintf("its %d consumers serve revision %s", n, revision)
}

// stepStatus lists each step's consumers, with what they are planned and
// observed to serve.
func stepStatus(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan, obs Observation) []deliveryv1alpha1.StepStatus {
	out := make([]deliveryv1alpha1.StepStatus, len(p.Spec.Steps)+1)
	for i := range p.Spec.Steps {
		out[i].Name = p.Spec.Steps[i].Name
		if out[i].Name == "" {
			out[i].Name = "step-" + strconv.Itoa(i+1)
		}
	}
	out[len(p.Spec.Steps)].Name = "rest"
	for _, c := range plan.Consumers {
		s := &out[min(c.Step, len(p.Spec.Steps))]
		if len(s.Consumers) == 64 {
			s.More++
			continue
		}
		s.Consumers = append(s.Consumers, deliveryv1alpha1.ConsumerStatus{Namespace: c.Namespace, Workloads: int32(len(c.Workloads)),
			Planned: c.Revision, Serving: obs.Serving[c.Namespace]})
	}
	if len(out[len(p.Spec.Steps)].Consumers) == 0 {
		out = out[:len(p.Spec.Steps)]
	}
	return out
}

func setProgressing(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, gen int64, running bool, reason, message string) {
	c := metav1.Condition{Type: deliveryv1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: gen}
	if running {
		c.Status = metav1.ConditionTrue
	}
	if c.Message == "" {
		c.Message = reason
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func keyList(keys []topology.Key, max int) string {
	var names []string
	for _, k := range keys {
		names = append(names, string(k.Kind)+" "+k.Namespace+"/"+k.Name)
	}
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
