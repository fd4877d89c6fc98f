package status

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
)

// maxPolicyNotes caps the notes an Enforced message carries.
const maxPolicyNotes = 3

// DesiredSourcePolicy is the status of a FeatureFlagSourcePolicy:
// whether it is accepted (it targets its own namespace), how many sidecars
// of the namespace it governs, on how many its settings are in force, and
// what of it did not apply (an atomic block a source pre-empted, a setting
// another policy wins). It computes the injection of every governed
// sidecar: a policy's cost grows with its namespace, not the cluster.
func DesiredSourcePolicy(v *topology.View, p *policyv1alpha1.FeatureFlagSourcePolicy, s workflows.Settings) policyv1alpha1.FeatureFlagSourcePolicyStatus {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	key := topology.SourcePolicyKey(p.Namespace, p.Name)
	accepted := metav1.Condition{Type: policyv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: policyv1alpha1.ReasonAccepted, ObservedGeneration: p.Generation,
		Message: "targets its own namespace " + p.Namespace}
	enforced := metav1.Condition{Type: policyv1alpha1.ConditionEnforced, ObservedGeneration: p.Generation}
	if problems := topology.SourcePolicyProblems(p); len(problems) > 0 {
		accepted.Status, accepted.Reason = metav1.ConditionFalse, policyv1alpha1.ReasonInvalid
		accepted.Message = workflows.InvalidMessage(problems)
		enforced.Status, enforced.Reason, enforced.Message = metav1.ConditionFalse, policyv1alpha1.ReasonInvalid, "not accepted: it applies to nothing"
		st.Sidecars = 0
		meta.SetStatusCondition(&st.Conditions, accepted)
		meta.SetStatusCondition(&st.Conditions, enforced)
		setPolicyHealth(&st, p.Generation)
		return st
	}
	governed := v.GovernedBySourcePolicies(p.Namespace)
	inForce := 0
	var notes []string
	for _, w := range governed {
		var decisions []injection.PolicyDecision
		var pn []injection.PolicyNote
		if w.Kind == topology.KindFlagd {
			src, state, ok := v.FlagdSource(w)
			if !ok || state != topology.RefResolved {
				continue
			}
			c := injection.ContainerOfSource(v, w, src, s.Injection)
			decisions, pn = c.PolicyDecisions, c.PolicyNotes
		} else {
			inj := injection.Desired(v, w, s.Injection)
			decisions, pn = inj.PolicyDecisions, inj.PolicyNotes
		}
		if slices.ContainsFunc(decisions, func(d injection.PolicyDecision) bool { return d.Policy == key }) {
			inForce++
		}
		for _, n := range pn {
			if n.Policy != key {
				continue
			}
			note := fmt.Sprintf("%s on %s %s/%s: %s", n.Block, w.Kind, w.Namespace, w.Name, n.Message)
			if !slices.Contains(notes, note) {
				notes = append(notes, note)
			}
		}
	}
	st.Sidecars = int32(len(governed))
	switch {
	case len(governed) == 0:
		enforced.Status, enforced.Reason = metav1.ConditionFalse, policyv1alpha1.ReasonNoSidecars
		enforced.Message = "no workload or Flagd of namespace " + p.Namespace + " has a flagd sidecar yet"
	case inForce == 0:
		enforced.Status, enforced.Reason = metav1.ConditionFalse, policyv1alpha1.ReasonOverridden
		enforced.Message = fmt.Sprintf("none of its settings is in force on the %d sidecars of namespace %s", len(governed), p.Namespace)
	default:
		enforced.Status, enforced.Reason = metav1.ConditionTrue, policyv1alpha1.ReasonEnforced
		enforced.Message = fmt.Sprintf("its settings are in force on %d of the %d sidecars of namespace %s", inForce, len(governed), p.Namespace)
	}
	if len(notes) > 0 {
		more := ""
		if len(notes) > maxPolicyNotes {
			more = fmt.Sprintf("; and %d more", len(notes)-maxPolicyNotes)
			notes = notes[:maxPolicyNotes]
		}
		enforced.Message += "; " + strings.Join(notes, "; ") + more
	}
	meta.SetStatusCondition(&st.Conditions, accepted)
	meta.SetStatusCondition(&st.Conditions, enforced)
	setPolicyHealth(&st, p.Generation)
	return st
}

// setPolicyHealth summarises a policy's status: Ready when it is accepted
// (then Enforced says where its settings are in force: a policy whose
// namespace has no sidecar yet, or whose defaults every source pre-empts,
// is doing what it asks), Stalled when it is not.
func setPolicyHealth(st *policyv1alpha1.FeatureFlagSourcePolicyStatus, gen int64) {
	enforced := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionEnforced)
	workflows.SetHealth(&st.Conditions, gen, workflows.Judge(st.Conditions, []string{policyv1alpha1.ConditionAccepted}, false, enforced.Message))
}

// UpdateSourcePolicy writes the status of a FeatureFlagSourcePolicy.
func (u *Updater) UpdateSourcePolicy(ctx context.Context, v *topology.View, key topology.Key) error {
	p := &policyv1alpha1.FeatureFlagSourcePolicy{}
	if err := u.get(ctx, key, p); err != nil || p.UID == "" {
		return err
	}
	desired := DesiredSourcePolicy(v, p, u.Settings)
	if equality.Semantic.DeepEqual(p.Status, desired) {
		return nil
	}
	if c := workflows.TurnedFalse(p.Status.Conditions, desired.Conditions, policyv1alpha1.ConditionAccepted); c != nil {
		workflows.Warn(u.Events, p, workflows.EventInvalidPolicy, workflows.ActionValidate, "%s", c.Message)
	}
	p.Status = desired
	return u.write(ctx, key, p)
}
