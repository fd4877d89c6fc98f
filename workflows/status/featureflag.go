package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// DesiredFlagSet is the status a FeatureFlag should have. Its revision,
// validity and warnings are the graph's rendering of ff (made once per
// edit; ff may be a copy, as the cache gives it), and the rest of what it
// reads of the graph is gathered with it in one pass
// (topology.View.FlagSetFacts). obs gives the generated ConfigMaps as the
// cache holds them and the sync server's streams as its replicas report
// them, for the revision each holds (Revision, Delivered, Consumers); what
// reads the flag set unobserved is counted in Unobserved.
func DesiredFlagSet(v *topology.View, ff *v1beta1.FeatureFlag, obs Observed) v1beta1.FeatureFlagStatus {
	facts := v.FlagSetFacts(ff)
	key, rendered := facts.Key, facts.Rendered
	status := *ff.Status.DeepCopy()
	status.ObservedGeneration = ff.Generation
	status.Flags = int32(len(ff.Spec.FlagSpec.Flags))
	status.Sources = int32(facts.Sources)
	status.Namespaces = facts.Consumers.ConfigMaps
	copies := CopiesOf(facts.Consumers, obs)
	status.Revision, status.Delivered, status.Consumers = delivery(facts, copies, obs, ff.Status.Consumers)
	status.Unobserved = unobserved(facts.Unobserved)
	status.Confirmed, status.Serving = "", nil
	if co, ok := obs.(ConfirmObserved); ok && rendered.Err == nil && status.Revision != "" {
		status.Confirmed, status.Serving = confirmation(facts.Consumers, status.Revision, int(status.Flags), copies, co)
	}
	cond := metav1.Condition{Type: v1beta1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonAccepted,
		Message: "flag set is valid", ObservedGeneration: ff.Generation}
	if err := rendered.Err; err != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1beta1.ReasonInvalid
		cond.Message = "flag set is invalid, workloads keep its last valid content: " + err.Error()
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	consistent := metav1.Condition{Type: v1beta1.ConditionConsistent, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonConsistent,
		Message: "nothing in the flag set looks like a mistake", ObservedGeneration: ff.Generation}
	if warnings := rendered.Warnings; len(warnings) > 0 {
		consistent.Status, consistent.Reason = metav1.ConditionFalse, v1beta1.ReasonProbableMistakes
		consistent.Message = "flagd loads the flag set, but: " + summarizeWarnings(warnings, 10)
	}
	meta.SetStatusCondition(&status.Conditions, consistent)
	if h, ok := obs.(HistoryObserved); ok {
		recordedCondition(&status.Conditions, h, key, ff.Generation)
	}
	verdict := flagSetVerdict(ff.Namespace, status, obs, tooLarge(facts), facts.Plan, facts.Consumers)
	workflows.SetHealth(&status.Conditions, ff.Generation, verdict)
	return status
}

// recordedCondition sets a FeatureFlag's RevisionRecorded condition, False
// with the history's reason, while its accepted spec is not recorded, and
// removes it otherwise: the condition is there only when something is
// wrong, as a Deployment's ReplicaFailure, so that the status of a flag set
// whose history is fine is what it was before the condition existed. It is
// not part of the flag set's health: its consumers are served all the
// same.
func recordedCondition(conditions *[]metav1.Condition, h HistoryObserved, key topology.Key, generation int64) {
	why, unrecorded := h.UnrecordedRevision(key)
	if !unrecorded {
		meta.RemoveStatusCondition(conditions, deliveryv1alpha1.ConditionRevisionRecorded)
		return
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: deliveryv1alpha1.ConditionRevisionRecorded, Status: metav1.ConditionFalse,
		Reason: why.Reason, Message: workflows.Cut(why.Message, 4096), ObservedGeneration: generation})
}

// tooLarge says which consumers of a flag set cannot get it as it is
// rendered now, because it is larger than their delivery mode carries
// (topology.FlagSetFacts.TooLarge): the generated ConfigMaps of
// file-provider consumers, the sync streams of flagd-proxy consumers. They
// keep the last content that fitted. "" when every consumer can get it.
func tooLarge(facts topology.FlagSetFacts) string {
	var msgs []string
	c, t := facts.Consumers, facts.TooLarge
	if t.File != "" {
		var cms []string
		for _, ns := range c.ConfigMaps {
			if c.Copies[ns].ConfigMap {
				cms = append(cms, ns+"/"+c.ConfigMapName)
			}
		}
		if len(cms) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s; ConfigMap(s) %s keep the last content that fitted", t.File, summarize(cms, 5)))
		}
	}
	if t.FlagdProxy != "" {
		var readers []string
		for _, s := range t.ProxySources {
			readers = append(readers, s.Namespace+"/"+s.Name)
		}
		if len(readers) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s; the sync streams of FeatureFlagSource(s) %s keep the last content that fitted", t.FlagdProxy, summarize(readers, 5)))
		}
	}
	return strings.Join(msgs, "; and ")
}

// flagSetVerdict is a flag set's health: Stalled while it is invalid, and
// while it is too large for the delivery mode of some of its consumers
// (tooLarge, FlagSetTooLarge); Reconciling while a consumer flagplane
// observes does not hold its current revision, Stalled when one cannot
// get it because a write of its ConfigMap was refused for good (the
// refusal's text only for its own namespace's ConfigMaps); else Ready.
// Consistent is left out: flagd serves a flag set with probable mistakes.
// So is what reads it unobserved (the kubernetes provider's flagd, which
// reports nothing).
func flagSetVerdict(namespace string, status v1beta1.FeatureFlagStatus, obs Observed, tooLarge string, plan *topology.RolloutPlan, consumers topology.Consumers) workflows.Verdict {
	if v := workflows.Judge(status.Conditions, []string{v1beta1.ConditionAccepted}, false, ""); v.Health != workflows.Ready {
		return v
	}
	if tooLarge != "" {
		return workflows.Verdict{Health: workflows.Stalled, Reason: v1beta1.ReasonFlagSetTooLarge,
			Message: fmt.Sprintf("revision %s cannot reach every consumer until a user acts: %s", status.Revision, tooLarge)}
	}
	// Under a rollout, a consumer is behind when it does not hold what the
	// plan gives it.
	staged := consumers.Staged && plan.Target == status.Revision && plan.Stable != plan.Target &&
		plan.Phase != deliveryv1alpha1.PhaseCompleted
	wanted := func(c v1beta1.ConsumerRevision) string {
		if staged {
			return copyPlan(consumers, c.Namespace).Revision
		}
		return status.Revision
	}
	if staged && (plan.Phase == deliveryv1alpha1.PhaseHalted || plan.Phase == deliveryv1alpha1.PhaseAborted) {
		return workflows.Verdict{Health: workflows.Stalled, Reason: v1beta1.ReasonRolloutHalted,
			Message: fmt.Sprintf("the rollout of revision %s was %s by FeatureFlagRolloutPolicy %s: every consumer serves revision %s until the flag set is edited (flagplane rollback)",
				status.Revision, strings.ToLower(string(plan.Phase)), plan.Policy.Name, plan.Stable)}
	}
	var behind []string
	for _, c := range status.Consumers {
		if c.Revision == wanted(c) {
			continue
		}
		what := fmt.Sprintf("%s %s/%s", c.Kind, c.Namespace, c.Name)
		if c.Kind == KindSyncSubscribers {
			what = fmt.Sprintf("%d of %d sync stream(s) of namespace %s", c.Streams-c.Current, c.Streams, c.Namespace)
		}
		if c.Kind == "ConfigMap" {
			if f := obs.WriteFailure("ConfigMap", c.Namespace, c.Name); f.Permanent {
				// The failure names the ConfigMap and what the API server
				// answered (workflows.WriteError).
				why := f.Message
				if c.Namespace != namespace {
					// What another namespace's API answered (its quota,
					// its policies) is its business: its sources say it.
					why = fmt.Sprintf("ConfigMap %s/%s not written; the status of the FeatureFlagSources there says why", c.Namespace, c.Name)
				}
				return workflows.Verdict{Health: workflows.Stalled, Reason: v1beta1.ReasonDeliveryFailed,
					Message: fmt.Sprintf("revision %s cannot reach every consumer until a user acts: %s", status.Revision, why)}
			}
		}
		behind = append(behind, what)
	}
	if len(behind) > 0 {
		return workflows.Verdict{Health: workflows.Reconciling, Reason: v1beta1.ReasonDelivering,
			Message: fmt.Sprintf("revision %s delivered to %s consumers; %s", status.Revision, status.Delivered, workflows.WaitingFor(behind, 5))}
	}
	if co, ok := obs.(ConfirmObserved); ok {
		if s, found, overdue := unconfirmed(status.Serving, co.ConfirmNow(), co.ConfirmBound()); found {
			msg := fmt.Sprintf("every copy holds the revision planned for it, and %s pods' flagd serve it; namespace %s: %d of %d pods serve revision %s (%s)",
				status.Confirmed, s.Namespace, s.Confirmed, s.Pods, topology.ShortRevision(s.Revision), s.Reason)
			if overdue {
				return workflows.Verdict{Health: workflows.Stalled, Reason: v1beta1.ReasonNotConfirmed,
					Message: fmt.Sprintf("%s, for more than %s", msg, co.ConfirmBound())}
			}
			return workflows.Verdict{Health: workflows.Reconciling, Reason: v1beta1.ReasonConfirming, Message: msg}
		}
	}
	if staged {
		serving := 0
		for _, c := range plan.Consumers {
			if c.Revision == plan.Target {
				serving++
			}
		}
		return workflows.Verdict{Health: workflows.Reconciling, Reason: v1beta1.ReasonRollingOut,
			Message: fmt.Sprintf("revision %s rolling out by FeatureFlagRolloutPolicy %s (%s, step %d of %d): %d of %d consumers serve it, the others revision %s",
				status.Revision, plan.Policy.Name, strings.ToLower(string(plan.Phase)), plan.Step+1, plan.Steps, serving, len(plan.Consumers), plan.Stable)}
	}
	msg := fmt.Sprintf("flag set is valid; revision %s", status.Revision)
	if status.Delivered != "" {
		msg += " delivered to " + status.Delivered + " consumers"
	}
	if status.Confirmed != "" {
		msg += ", served by " + status.Confirmed + " pods as their flagd answers"
	}
	return workflows.Verdict{Health: workflows.Ready, Reason: v1beta1.ReasonReady, Message: msg}
}
