package status

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// maxStatusTargets caps status.targets so that a source selecting thousands
// of workloads keeps a small object; status.targetCount has the full count.
const maxStatusTargets = 256

// Observed reads what the cluster holds of the objects flagplane generates.
// The controllers implement it over the informer cache.
type Observed interface {
	// ConfigMapData returns the data of a ConfigMap and whether it exists.
	ConfigMapData(namespace, name string) (map[string]string, bool)
	// Role returns a Role, or nil.
	Role(namespace, name string) *rbacv1.Role
	// RoleBinding returns a RoleBinding, or nil.
	RoleBinding(namespace, name string) *rbacv1.RoleBinding
	// WriteFailure says why the last write of a generated object failed
	// (kind ConfigMap, or RBAC for a Role and its RoleBinding), if it did.
	WriteFailure(kind, namespace, name string) workflows.Failure
}

// SyncObserved is what an Observed that knows of the sync server's streams
// (CacheObserved) implements too; the status of a flag set counts them.
type SyncObserved interface {
	// SyncSubscribers is what the sync server's streams of a flag set hold,
	// by subscriber namespace, over the reports of every replica (see
	// SyncReports).
	SyncSubscribers(flagSet topology.Key) []SyncSubscribers
}

// HistoryObserved is what an Observed that knows of the revision history
// (CacheObserved) implements too: why a flag set's accepted spec is not
// recorded, if it is not (workflows/history).
type HistoryObserved interface {
	UnrecordedRevision(flagSet topology.Key) (workflows.Unrecorded, bool)
}

// DesiredFlagSet is the status a FeatureFlag should have. Its revision,
// validity and warnings are the graph's rendering of ff
// (topology.View.RenderFlagSet: made once per edit; ff may be a copy, as
// the cache gives it). obs gives the generated ConfigMaps as the cache
// holds them and the sync server's streams as its replicas report them,
// for the revision each holds (Revision, Delivered, Consumers); what reads
// the flag set unobserved is counted in Unobserved.
func DesiredFlagSet(v *topology.View, ff *v1beta1.FeatureFlag, obs Observed) v1beta1.FeatureFlagStatus {
	key := topology.FlagSetKey(ff.Namespace, ff.Name)
	rendered := v.RenderFlagSet(ff)
	status := *ff.Status.DeepCopy()
	status.ObservedGeneration = ff.Generation
	status.Flags = int32(len(ff.Spec.FlagSpec.Flags))
	status.Sources = int32(len(v.SourcesOfFlagSet(key)))
	status.Namespaces = v.ConsumerNamespaces(key)
	status.Revision, status.Delivered, status.Consumers = delivery(v, key, rendered, obs, ff.Status.Consumers)
	status.Unobserved = unobserved(v, key)
	status.Confirmed, status.Serving = "", nil
	if co, ok := obs.(ConfirmObserved); ok && rendered.Err == nil && status.Revision != "" {
		status.Confirmed, status.Serving = confirmation(v, key, status.Revision, int(status.Flags), CopiesOf(v, key, obs), v.RolloutPlan(key), co)
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
	verdict := flagSetVerdict(ff.Namespace, status, obs, tooLarge(v, key, rendered), v.RolloutPlan(key))
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
// (topology.Rendered.Overflow): the generated ConfigMaps of file-provider
// consumers, the sync streams of flagd-proxy consumers. They keep the last
// content that fitted. "" when every consumer can get it.
func tooLarge(v *topology.View, key topology.Key, rendered topology.Rendered) string {
	var msgs []string
	if o, over := rendered.Overflow(string(v1beta1.SyncProviderFile)); over {
		var cms []string
		for _, ns := range v.ConsumerNamespaces(key) {
			if v.ConfigMapNeeded(topology.ConfigMapKey(key, ns)) {
				cms = append(cms, ns+"/"+topology.ConfigMapName(key))
			}
		}
		if len(cms) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s; ConfigMap(s) %s keep the last content that fitted", o.Message(key), summarize(cms, 5)))
		}
	}
	if o, over := rendered.Overflow(string(v1beta1.SyncProviderFlagdProxy)); over {
		var readers []string
		for _, s := range v.SourcesOfFlagSet(key) {
			if v.DeliversWith(s, key, string(v1beta1.SyncProviderFlagdProxy)) && len(v.TargetNamespaces(s)) > 0 {
				readers = append(readers, s.Namespace+"/"+s.Name)
			}
		}
		if len(readers) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s; the sync streams of FeatureFlagSource(s) %s keep the last content that fitted", o.Message(key), summarize(readers, 5)))
		}
	}
	return strings.Join(msgs, "; and ")
}

// summarize joins at most max items, saying how many more there are.
func summarize(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
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
func flagSetVerdict(namespace string, status v1beta1.FeatureFlagStatus, obs Observed, tooLarge string, plan *topology.RolloutPlan) workflows.Verdict {
	if v := workflows.Judge(status.Conditions, []string{v1beta1.ConditionAccepted}, false, ""); v.Health != workflows.Ready {
		return v
	}
	if tooLarge != "" {
		return workflows.Verdict{Health: workflows.Stalled, Reason: v1beta1.ReasonFlagSetTooLarge,
			Message: fmt.Sprintf("revision %s cannot reach every consumer until a user acts: %s", status.Revision, tooLarge)}
	}
	// Under a rollout, a consumer is behind when it does not hold what the
	// plan gives it.
	staged := plan.Staged() && plan.Target == status.Revision && plan.Stable != plan.Target &&
		plan.Phase != deliveryv1alpha1.PhaseCompleted
	wanted := func(c v1beta1.ConsumerRevision) string {
		if staged {
			return plan.RevisionFor(c.Namespace)
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

// summarizeWarnings joins at most max warnings, saying how many more there are.
func summarizeWarnings(warnings []string, max int) string {
	shown := make([]string, 0, min(len(warnings), max))
	for _, w := range warnings[:min(len(warnings), max)] {
		shown = append(shown, workflows.Cut(w, 1024)) // each names what a user wrote
	}
	if len(warnings) <= max {
		return strings.Join(shown, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(shown, "; "), len(warnings)-max)
}

// DesiredSource is the status a FeatureFlagSource should have:
// Accepted (its spec makes sense), ResolvedRefs (every flag set it names
// exists and may be read, naming each one that does not), Programmed (every
// workload it targets has its ConfigMaps and RBAC in place),
// FlagdVersionSupported (flagplane vouches for the flagd release its
// sidecars run, which takes everything the source asks for), and its
// targets.
func DesiredSource(v *topology.View, src *v1beta1.FeatureFlagSource, obs Observed, s workflows.Settings) v1beta1.FeatureFlagSourceStatus {
	key := topology.SourceKey(src.Namespace, src.Name)
	gen := src.Generation
	status := *src.Status.DeepCopy()
	status.ObservedGeneration = gen
	targets, first := v.FirstWorkloadsOfSource(key, maxStatusTargets)
	status.TargetCount = int32(targets)
	status.Targets = workloadRefs(src.Namespace, first)

	accepted := metav1.Condition{Type: v1beta1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: v1beta1.ReasonAccepted, Message: "source is valid", ObservedGeneration: gen}
	if errs := ValidateSource(src, v.DefaultSyncProvider()); len(errs) > 0 {
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, v1beta1.ReasonInvalid, workflows.InvalidMessage(errs)
	}
	meta.SetStatusCondition(&status.Conditions, accepted)

	resolved := metav1.Condition{Type: v1beta1.ConditionResolvedRefs, Status: metav1.ConditionTrue,
		Reason: v1beta1.ReasonResolvedRefs, Message: "all flag sets resolved", ObservedGeneration: gen}
	if msgs, reason := unresolvedMessages(v.UnresolvedRefs(key)); len(msgs) > 0 {
		resolved.Status, resolved.Reason, resolved.Message = metav1.ConditionFalse, reason, summarizeWarnings(msgs, 10)
	}
	meta.SetStatusCondition(&status.Conditions, resolved)
	meta.SetStatusCondition(&status.Conditions, referrersCondition(v, key, gen))

	programmed := metav1.Condition{Type: v1beta1.ConditionProgrammed, Status: metav1.ConditionTrue,
		Reason: v1beta1.ReasonProgrammed, ObservedGeneration: gen}
	permanent := false
	switch pending := pendingOutputs(v, key, obs, s); {
	case accepted.Status != metav1.ConditionTrue:
		programmed.Status, programmed.Reason, programmed.Message = metav1.ConditionFalse, v1beta1.ReasonInvalid, "source is not accepted"
	case resolved.Status != metav1.ConditionTrue:
		programmed.Status, programmed.Reason = metav1.ConditionFalse, v1beta1.ReasonUnresolvedRefs
		programmed.Message = fmt.Sprintf("%d flag set reference(s) do not resolve (see ResolvedRefs): its workloads do not get them", len(v.UnresolvedRefs(key)))
	case len(pending) > 0:
		programmed.Status, programmed.Reason = metav1.ConditionFalse, v1beta1.ReasonPending
		var msgs, large []string
		for _, item := range pending {
			switch {
			case item.tooLarge:
				large = append(large, item.message)
			case item.failed:
				programmed.Reason = v1beta1.ReasonApplyFailed
				msgs = append(msgs, item.message)
			default:
				msgs = append(msgs, item.message)
			}
			permanent = permanent || item.permanent
		}
		programmed.Message = workflows.WaitingFor(msgs, 5)
		if len(large) > 0 {
			// Nothing to wait for: only a user can make it fit.
			programmed.Reason = v1beta1.ReasonFlagSetTooLarge
			programmed.Message = summarizeWarnings(large, 5)
			if len(msgs) > 0 {
				programmed.Message += "; and " + workflows.WaitingFor(msgs, 5)
			}
		}
	case targets == 0:
		programmed.Message = "source targets no workload"
	default:
		programmed.Message = fmt.Sprintf("%d workload(s) programmed", targets)
		// A sidecar that could not start is not injected (injection's limits.go).
		if r := injection.RefusalsOfSource(v, key, 5, s.Injection); r != nil {
			programmed.Status, programmed.Reason, programmed.Message = metav1.ConditionFalse, v1beta1.ReasonSidecarRefused, r.String()
			break
		}
		// Where several sources configure one sidecar, a later one wins a
		// setting; the source that lost it is told which and to whom.
		if cs := injection.ConflictsOfSource(v, key, 5, s.Injection); len(cs) > 0 {
			programmed.Reason = v1beta1.ReasonSettingsConflict
			for _, c := range cs {
				programmed.Message += "; overridden: " + c.String()
			}
		}
	}
	meta.SetStatusCondition(&status.Conditions, programmed)
	// The flagd release its sidecars run, and what of the source it cannot take.
	meta.SetStatusCondition(&status.Conditions, workflows.FlagdVersionCondition("source", s.Injection.Sidecar.Flagd(),
		injection.VersionGapsOfSource(v, key, s.Injection), gen))
	// ReferrersPermitted is left out: other namespaces' workloads do not
	// make the source's own delivery fail.
	workflows.SetHealth(&status.Conditions, gen, workflows.Judge(status.Conditions, []string{v1beta1.ConditionAccepted,
		v1beta1.ConditionResolvedRefs, v1beta1.ConditionProgrammed, v1beta1.ConditionFlagdVersionSupported}, permanent, programmed.Message))
	return status
}

// DesiredInProcessConfig is the status an InProcessConfiguration should have.
func DesiredInProcessConfig(v *topology.View, c *v1beta1.InProcessConfiguration) v1beta1.InProcessConfigurationStatus {
	status := *c.Status.DeepCopy()
	status.ObservedGeneration = c.Generation
	workloads := v.WorkloadsOfInProcessConfig(topology.InProcessConfigKey(c.Namespace, c.Name))
	status.TargetCount = int32(len(workloads))
	status.Targets = workloadRefs(c.Namespace, workloads)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1beta1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: v1beta1.ReasonAccepted, Message: "configuration is valid", ObservedGeneration: c.Generation})
	meta.SetStatusCondition(&status.Conditions, referrersCondition(v, topology.InProcessConfigKey(c.Namespace, c.Name), c.Generation))
	workflows.SetHealth(&status.Conditions, c.Generation, workflows.Judge(status.Conditions, []string{v1beta1.ConditionAccepted}, false,
		fmt.Sprintf("configuration is valid; %d workload(s) use it", len(workloads))))
	return status
}

// maxDeniedReferrers caps the workloads a ReferrersPermitted condition
// names: another namespace must not be able to grow this object's status.
const maxDeniedReferrers = 10

// referrersCondition tells the owner of a source or an in-process
// configuration which workloads of other namespaces name it without a
// ReferenceGrant permitting them: nothing is applied to those.
func referrersCondition(v *topology.View, target topology.Key, gen int64) metav1.Condition {
	c := metav1.Condition{Type: v1beta1.ConditionReferrersPermitted, Status: metav1.ConditionTrue,
		Reason: v1beta1.ReasonReferrersPermitted, ObservedGeneration: gen,
		Message: "no workload of another namespace names it without a ReferenceGrant"}
	denied := v.DeniedReferrers(target)
	if len(denied) == 0 {
		return c
	}
	names := make([]string, 0, min(len(denied), maxDeniedReferrers))
	for _, w := range denied[:min(len(denied), maxDeniedReferrers)] {
		names = append(names, fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name))
	}
	more := ""
	if len(denied) > maxDeniedReferrers {
		more = fmt.Sprintf(" and %d more", len(denied)-maxDeniedReferrers)
	}
	c.Status, c.Reason = metav1.ConditionFalse, v1beta1.ReasonRefNotPermitted
	c.Message = fmt.Sprintf("workloads of other namespaces name this %s in a pod-template annotation, and no ReferenceGrant in namespace %s "+
		"permits the pods of their namespace to use it, so nothing is applied to them: %s%s",
		target.Kind, target.Namespace, strings.Join(names, ", "), more)
	if slices.ContainsFunc(denied, func(k topology.Key) bool { return k.Kind == topology.KindFlagd }) {
		c.Message = fmt.Sprintf("workloads or Flagds of other namespaces name this %s (in a pod-template annotation, in spec.featureFlagSource), "+
			"and no ReferenceGrant in namespace %s permits it (to the pods of their namespace, to kind Flagd), so nothing is applied to them: %s%s",
			target.Kind, target.Namespace, strings.Join(names, ", "), more)
	}
	return c
}

// ValidateSource checks what the CRD schema cannot: the syntax of flag-set
// references and of the label selector. defaultProvider is the operator's
// (topology.View.DefaultSyncProvider).
func ValidateSource(src *v1beta1.FeatureFlagSource, defaultProvider v1beta1.SyncProviderType) field.ErrorList {
	var errs field.ErrorList
	for i, s := range src.Spec.Sources {
		provider := topology.ProviderInForce(s, src.Spec.DefaultSyncProvider, defaultProvider)
		if !provider.ReferencesFlagSet() {
			continue
		}
		if _, _, ok := topology.ParseRef(s.Source, src.Namespace); !ok {
			errs = append(errs, field.Invalid(field.NewPath("spec", "sources").Index(i).Child("source"), s.Source,
				fmt.Sprintf("provider %s takes a FeatureFlag as name or namespace/name", provider)))
		}
	}
	if src.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(src.Spec.Selector); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), field.OmitValueType{}, err.Error()))
		}
	}
	return errs
}

// pending is something a source's workloads still lack, whether its write
// failed (rather than not having happened yet), whether only a user's
// action lets it succeed (a write refused for good, a flag set that is
// invalid or too large), and whether it is a flag set too large for its
// delivery mode (FlagSetTooLarge).
type pending struct {
	message   string
	failed    bool
	permanent bool
	tooLarge  bool
}

// pendingOutputs lists what a source's workloads still lack: ConfigMaps with
// the current flag set content, and the RBAC of the kubernetes provider.
func pendingOutputs(v *topology.View, source topology.Key, obs Observed, s workflows.Settings) []pending {
	var out []pending
	refs := v.FlagSetRefs(source)
	if len(v.TargetNamespaces(source)) > 0 {
		out = append(out, syncTooLarge(v, refs)...)
	}
	// ConfigMaps: one per file flag set and namespace of its workloads, found
	// without going through the workloads.
	kubernetes := false
	for _, ns := range v.TargetNamespaces(source) {
		for _, ref := range refs {
			if ref.State != topology.RefResolved {
				continue
			}
			kubernetes = kubernetes || ref.Provider == string(v1beta1.SyncProviderKubernetes)
			if ref.Provider != string(v1beta1.SyncProviderFile) {
				continue
			}
			if missing, ok := configMapPending(v, topology.ConfigMapKey(ref.FlagSet, ns), obs, s); ok && !slices.Contains(out, missing) {
				out = append(out, missing)
			}
		}
	}
	if !kubernetes {
		return out
	}
	// RBAC: a Role and RoleBinding per workload.
	for _, w := range v.WorkloadsOfSource(source) {
		roles, bindings := rbac.Desired(v, w, s.Generated)
		for i := range roles {
			if rbac.RoleUpToDate(obs.Role(roles[i].Namespace, roles[i].Name), roles[i]) &&
				rbac.RoleBindingUpToDate(obs.RoleBinding(bindings[i].Namespace, bindings[i].Name), bindings[i]) {
				continue
			}
			what := fmt.Sprintf("RBAC for %s %s/%s in namespace %s", w.Kind, w.Namespace, w.Name, roles[i].Namespace)
			if f := obs.WriteFailure("RBAC", roles[i].Namespace, roles[i].Name); f.Message != "" {
				out = append(out, pending{message: what + ": " + f.Message, failed: true, permanent: f.Permanent})
			} else {
				out = append(out, pending{message: what})
			}
		}
	}
	return out
}

// syncTooLarge lists the flag sets a source delivers with provider
// flagd-proxy that are larger than a sync message flagd takes: its
// workloads' streams keep the last content that fitted.
func syncTooLarge(v *topology.View, refs []topology.FlagSetRef) []pending {
	var out []pending
	for _, ref := range refs {
		if ref.State != topology.RefResolved || ref.Provider != string(v1beta1.SyncProviderFlagdProxy) {
			continue
		}
		r, _ := v.FlagSetRendered(ref.FlagSet)
		if o, over := r.Overflow(ref.Provider); over {
			p := pending{message: o.Message(ref.FlagSet) + " (its sync streams keep the last content that fitted)", permanent: true, tooLarge: true}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func configMapPending(v *topology.View, cm topology.Key, obs Observed, s workflows.Settings) (pending, bool) {
	name := topology.ConfigMapName(cm.FlagSet())
	desired, err := configmaps.Desired(v, cm, s)
	var invalid *configmaps.InvalidFlagSetError
	var large *configmaps.TooLargeError
	var held *configmaps.HeldRevisionError
	switch {
	case errors.As(err, &held):
		return pending{message: held.Error() + fmt.Sprintf(" (ConfigMap %s/%s keeps its content)", cm.Namespace, name)}, true
	case errors.As(err, &invalid):
		return pending{message: fmt.Sprintf("flag set %s/%s is invalid (ConfigMap %s/%s keeps the last valid content)",
			invalid.FlagSet.Namespace, invalid.FlagSet.Name, cm.Namespace, name), permanent: true}, true
	case errors.As(err, &large):
		return pending{message: fmt.Sprintf("%s (ConfigMap %s/%s keeps the last content that fitted)", large.Error(), cm.Namespace, name),
			permanent: true, tooLarge: true}, true
	case err != nil:
		return pending{message: fmt.Sprintf("ConfigMap %s/%s: %v", cm.Namespace, name, err)}, true
	case desired == nil:
		return pending{}, false
	}
	if f := obs.WriteFailure("ConfigMap", cm.Namespace, name); f.Message != "" {
		// The failure names the ConfigMap and what the API server answered
		// (workflows.WriteError).
		return pending{message: f.Message, failed: true, permanent: f.Permanent}, true
	}
	data, ok := obs.ConfigMapData(cm.Namespace, name)
	if !ok {
		return pending{message: fmt.Sprintf("ConfigMap %s/%s not created yet", cm.Namespace, name)}, true
	}
	for k, want := range desired.Data {
		if data[k] != want {
			return pending{message: fmt.Sprintf("ConfigMap %s/%s not up to date yet", cm.Namespace, name)}, true
		}
	}
	return pending{}, false
}

func workloadRefs(namespace string, keys []topology.Key) []v1beta1.WorkloadReference {
	if len(keys) == 0 {
		return nil
	}
	n := min(len(keys), maxStatusTargets)
	out := make([]v1beta1.WorkloadReference, 0, n)
	for _, k := range keys[:n] {
		ref := v1beta1.WorkloadReference{Kind: string(k.Kind), Name: k.Name}
		if k.Namespace != namespace {
			ref.Namespace = k.Namespace
		}
		out = append(out, ref)
	}
	return out
}

func unresolvedMessages(refs []topology.FlagSetRef) ([]string, string) {
	var msgs []string
	reason := v1beta1.ReasonFlagSetNotFound
	for _, r := range refs {
		switch r.State {
		case topology.RefNotPermitted:
			reason = v1beta1.ReasonRefNotPermitted
			msgs = append(msgs, fmt.Sprintf("sources[%d]: FeatureFlag %s/%s is in another namespace and no ReferenceGrant in %s permits it",
				r.Index, r.FlagSet.Namespace, r.FlagSet.Name, r.FlagSet.Namespace))
		default:
			msgs = append(msgs, fmt.Sprintf("sources[%d]: FeatureFlag %s/%s not found", r.Index, r.FlagSet.Namespace, r.FlagSet.Name))
		}
	}
	return msgs, reason
}

// maxConsumers caps status.consumers (the CRD's MaxItems).
const maxConsumers = 32

// delivery gives a flag set's revision (its rendering's) and, over the
// consumers whose revision flagplane observes, which hold it: "<up to
// date>/<all>" and the consumers, those behind first. The consumers are its
// generated ConfigMaps as the cache holds them, and the sync server's
// streams of each subscriber namespace (syncConsumer). A consumer keeps its
// Since while it holds the same revision.
func delivery(v *topology.View, key topology.Key, rendered topology.Rendered, obs Observed, prev []v1beta1.ConsumerRevision) (string, string, []v1beta1.ConsumerRevision) {
	revision := rendered.Revision
	if revision == "" {
		return "", "", nil
	}
	name := topology.ConfigMapName(key)
	// Up to date is holding what the plan gives the namespace: the flag
	// set's revision, unless a rollout holds the namespace at another.
	plan := v.RolloutPlan(key)
	want := func(ns string) string {
		if !plan.Staged() {
			return revision
		}
		s, _ := v.ServedFor(key, ns)
		return s.Revision
	}
	copies := CopiesOf(v, key, obs)
	planned := map[string]string{}
	var consumers []v1beta1.ConsumerRevision
	upToDate := 0
	for _, ns := range v.ConsumerNamespaces(key) {
		held := copies.In(ns)
		if !held.ConfigMap {
			continue
		}
		wantRevision := want(ns)
		planned[ns] = wantRevision
		c := v1beta1.ConsumerRevision{Kind: "ConfigMap", Namespace: ns, Name: name}
		if held.ConfigMapHeld {
			c.Revision = held.ConfigMapRevision
		}
		if c.Revision == wantRevision {
			upToDate++
		}
		c.Since = sinceOf(prev, c, time.Time{})
		consumers = append(consumers, c)
	}
	var syncs []SyncSubscribers
	if so, ok := obs.(SyncObserved); ok {
		syncs = so.SyncSubscribers(key)
	}
	for _, subs := range syncs {
		c, at, ok := syncConsumer(key, subs, want(subs.Namespace))
		if !ok {
			continue
		}
		if c.Revision == want(subs.Namespace) {
			upToDate++
		}
		c.Since = sinceOf(prev, c, at)
		consumers = append(consumers, c)
	}
	if len(consumers) == 0 {
		return revision, "", nil
	}
	delivered := fmt.Sprintf("%d/%d", upToDate, len(consumers))
	plannedOf := func(c v1beta1.ConsumerRevision) string {
		if c.Kind == "ConfigMap" {
			return planned[c.Namespace]
		}
		return want(c.Namespace)
	}
	slices.SortStableFunc(consumers, func(a, b v1beta1.ConsumerRevision) int {
		// Those behind first; then ConfigMaps by namespace, as
		// ConsumerNamespaces lists them, then sync subscribers by namespace.
		return cmp.Compare(boolInt(a.Revision == plannedOf(a)), boolInt(b.Revision == plannedOf(b)))
	})
	return revision, delivered, consumers[:min(len(consumers), maxConsumers)]
}

// syncConsumer is the consumer that stands for the sync server's streams of
// a flag set to one namespace: up to date (Revision) when every stream was
// sent revision; else it shows the streams furthest behind: those sent
// nothing yet, else those whose revision was sent the longest ago. at is
// when the streams shown got their revision (zero when unknown).
func syncConsumer(flagSet topology.Key, subs SyncSubscribers, revision string) (c v1beta1.ConsumerRevision, at time.Time, ok bool) {
	c = v1beta1.ConsumerRevision{Kind: KindSyncSubscribers, Namespace: subs.Namespace,
		Name: topology.GroupOpenFeature + "/" + flagSet.Namespace + "/" + flagSet.Name}
	var behind *HeldRevision
	for i, h := range subs.Held {
		c.Streams += h.Streams
		if h.Revision == revision {
			c.Current += h.Streams
			continue
		}
		if behind == nil || h.Revision == "" || (behind.Revision != "" && h.Since.Before(behind.Since)) {
			behind = &subs.Held[i]
		}
	}
	if c.Streams == 0 {
		return c, at, false
	}
	if behind == nil {
		c.Revision = revision
		for _, h := range subs.Held {
			if h.Revision == revision {
				at = h.Since
			}
		}
		return c, at, true
	}
	c.Revision = behind.Revision
	return c, behind.Since, true
}

// unobserved counts the readers of a flag set whose revision flagplane
// cannot ask: the workloads and Flagds that read it with the kubernetes
// provider (flagd watches the FeatureFlag itself, and nothing tells
// flagplane which revision it holds), and the workloads whose in-process
// SDKs read it (View.InProcessReaders).
func unobserved(v *topology.View, flagSet topology.Key) *v1beta1.UnobservedConsumers {
	var readers []topology.Key
	for _, s := range v.SourcesOfFlagSet(flagSet) {
		if v.DeliversWith(s, flagSet, string(v1beta1.SyncProviderKubernetes)) {
			readers = append(readers, s)
		}
	}
	var workloads, flagds int
	switch len(readers) {
	case 0:
	case 1:
		// One source: its targets counted, not listed.
		workloads, _ = v.FirstWorkloadsOfSource(readers[0], 0)
		flagds = len(v.FlagdsOfSource(readers[0]))
	default:
		// Several: a workload two of them target is one reader.
		seen := map[topology.Key]struct{}{}
		for _, s := range readers {
			for _, k := range append(v.WorkloadsOfSource(s), v.FlagdsOfSource(s)...) {
				seen[k] = struct{}{}
			}
		}
		for k := range seen {
			if k.Kind == topology.KindFlagd {
				flagds++
			} else {
				workloads++
			}
		}
	}
	inProcess := len(v.InProcessReaders(flagSet))
	if workloads+flagds+inProcess == 0 {
		return nil
	}
	var why []string
	if workloads+flagds > 0 {
		why = append(why, "they read the FeatureFlag from the API server with the kubernetes provider: which revision their flagd holds is not reported to flagplane")
	}
	if inProcess > 0 {
		why = append(why, "in-process SDKs evaluate inside the application: none reports its revision to flagplane (consumers say what flagplane's sync server sent to its subscribers)")
	}
	return &v1beta1.UnobservedConsumers{Workloads: int32(workloads), Flagds: int32(flagds), InProcess: int32(inProcess),
		Reason: strings.Join(why, "; ")}
}

// sinceOf keeps the Since of a consumer that held the same revision before;
// else it is at, when known, or now.
func sinceOf(prev []v1beta1.ConsumerRevision, c v1beta1.ConsumerRevision, at time.Time) *metav1.Time {
	if c.Revision == "" {
		return nil
	}
	for _, before := range prev {
		if before.Kind == c.Kind && before.Namespace == c.Namespace && before.Name == c.Name && before.Revision == c.Revision && before.Since != nil {
			return before.Since
		}
	}
	if !at.IsZero() {
		t := metav1.NewTime(at)
		return &t
	}
	now := metav1.Now()
	return &now
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
