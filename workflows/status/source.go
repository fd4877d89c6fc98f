package status

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
)

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
