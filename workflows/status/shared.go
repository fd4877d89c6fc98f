package status

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// maxStatusTargets caps status.targets so that a source selecting thousands
// of workloads keeps a small object; status.targetCount has the full count.
const maxStatusTargets = 256

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

// summarize joins at most max items, saying how many more there are.
func summarize(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
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
