package flagds

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// Children is what the apply step found and did for a Flagd's
// generated objects, the input of its status besides the graph.
type Children struct {
	// InPlace are the kinds (Deployment, Service, Ingress, HTTPRoute) whose
	// object is as desired.
	InPlace map[string]bool
	// Pending says what is not in place yet, and why.
	Pending []string
	// Failed are the writes that failed.
	Failed []string
	// Permanent: one of them was refused for good (workflows.PermanentFailure).
	Permanent bool
	// GatewayAPIMissing: an HTTPRoute is wanted and Gateway API's CRDs are
	// not installed.
	GatewayAPIMissing bool
	// Deployment is the Deployment as the cache holds it, or nil.
	Deployment *appsv1.Deployment
}

// DesiredStatus is the status a Flagd should have, from what the graph
// wants for it (Desired) and what its apply step found.
func DesiredStatus(f *v1beta1.Flagd, objs *Objects, children Children) v1beta1.FlagdStatus {
	gen := f.Generation
	status := *f.Status.DeepCopy()
	status.ObservedGeneration = gen
	cond := func(t string, ok bool, reason, msg string) metav1.Condition {
		c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: gen}
		if !ok {
			c.Status = metav1.ConditionFalse
		}
		return c
	}

	accepted := cond(v1beta1.ConditionAccepted, true, v1beta1.ReasonAccepted, "Flagd is valid")
	if len(objs.Invalid) > 0 {
		accepted = cond(v1beta1.ConditionAccepted, false, v1beta1.ReasonInvalid, workflows.InvalidMessage(objs.Invalid))
	}
	meta.SetStatusCondition(&status.Conditions, accepted)

	src := objs.Source.Namespace + "/" + objs.Source.Name
	var resolved metav1.Condition
	switch objs.SourceState {
	case topology.RefResolved:
		resolved = cond(v1beta1.ConditionResolvedRefs, true, v1beta1.ReasonResolvedRefs, "FeatureFlagSource "+src+" resolved")
	case topology.RefNotPermitted:
		resolved = cond(v1beta1.ConditionResolvedRefs, false, v1beta1.ReasonRefNotPermitted,
			fmt.Sprintf("FeatureFlagSource %s is in another namespace and no ReferenceGrant there permits kind Flagd of namespace %s to refer to it", src, f.Namespace))
	default:
		resolved = cond(v1beta1.ConditionResolvedRefs, false, v1beta1.ReasonSourceNotFound, "FeatureFlagSource "+src+" does not exist")
	}
	meta.SetStatusCondition(&status.Conditions, resolved)

	var programmed metav1.Condition
	switch {
	case accepted.Status != metav1.ConditionTrue:
		programmed = cond(v1beta1.ConditionProgrammed, false, v1beta1.ReasonInvalid, "Flagd is not accepted: its objects are left as they are")
	case resolved.Status != metav1.ConditionTrue:
		programmed = cond(v1beta1.ConditionProgrammed, false, v1beta1.ReasonUnresolvedRefs, "the FeatureFlagSource does not resolve (see ResolvedRefs): its objects are left as they are")
	case objs.Unservable != "":
		programmed = cond(v1beta1.ConditionProgrammed, false, v1beta1.ReasonUnresolvedRefs,
			objs.Unservable+": "+workflows.WaitingFor(objs.Warnings, 5)+"; its objects are left as they are")
	case len(children.Failed) > 0:
		programmed = cond(v1beta1.ConditionProgrammed, false, v1beta1.ReasonApplyFailed, workflows.WaitingFor(children.Failed, 5))
	case len(objs.TooLarge) > 0:
		// Its objects are in place; the pods keep the last content of
		// these flag sets that fitted.
		programmed = cond(v1beta1.ConditionProgrammed, false, v1beta1.ReasonFlagSetTooLarge, strings.Join(objs.TooLarge, "; "))
	case children.GatewayAPIMissing:
		programmed = cond(v1beta1.ConditionProgrammed, false, v1beta1.ReasonGatewayAPINotInstalled,
			"spec.gatewayApiRoutes is enabled and Gateway API's HTTPRoute CRD is not installed: the HTTPRoute is created once it is")
	case len(children.Pending) > 0:
		programmed = cond(v1beta1.ConditionProgrammed, false, v1beta1.ReasonPending, workflows.WaitingFor(children.Pending, 5))
	default:
		msg := strings.Join(kindsInPlace(objs, children), ", ") + " in place"
		if len(objs.Warnings) > 0 {
			msg += "; but " + workflows.WaitingFor(objs.Warnings, 5)
		}
		programmed = cond(v1beta1.ConditionProgrammed, true, v1beta1.ReasonProgrammed, msg)
	}
	meta.SetStatusCondition(&status.Conditions, programmed)

	status.Replicas, status.ReadyReplicas = 0, 0
	available := cond(v1beta1.ConditionAvailable, false, v1beta1.ReasonUnavailable, "no flagd Deployment")
	if d := children.Deployment; d != nil {
		status.Replicas, status.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		msg := fmt.Sprintf("%d of %d flagd replicas ready", d.Status.ReadyReplicas, want)
		available = cond(v1beta1.ConditionAvailable, d.Status.ReadyReplicas > 0,
			map[bool]string{true: v1beta1.ReasonAvailable, false: v1beta1.ReasonUnavailable}[d.Status.ReadyReplicas > 0], msg)
	}
	meta.SetStatusCondition(&status.Conditions, available)
	meta.SetStatusCondition(&status.Conditions, workflows.FlagdVersionCondition("Flagd", objs.Release, objs.FlagdVersionGaps, gen))
	workflows.SetHealth(&status.Conditions, gen, flagdVerdict(status, children))

	status.Endpoints = nil
	for _, e := range objs.Endpoints {
		if children.InPlace[e.Kind] {
			status.Endpoints = append(status.Endpoints, e)
		}
	}
	return status
}

// kindsInPlace lists the kinds of the generated objects, in order.
func kindsInPlace(objs *Objects, children Children) []string {
	var out []string
	for _, k := range []string{"Deployment", "Service", "Ingress", "HTTPRoute"} {
		if children.InPlace[k] {
			out = append(out, k)
		}
	}
	if len(objs.ConfigMaps) > 0 {
		out = append(out, fmt.Sprintf("%d ConfigMap(s)", len(objs.ConfigMaps)))
	}
	return out
}

// flagdVerdict is a Flagd's health: Ready when its objects are in place
// and a flagd pod serves (Accepted, ResolvedRefs, Programmed, Available,
// FlagdVersionSupported); Stalled when only a user can change what keeps
// it from that, including a Deployment that stopped progressing (its
// Progressing condition is False with ProgressDeadlineExceeded, which is
// where kstatus fails a Deployment); else Reconciling.
func flagdVerdict(status v1beta1.FlagdStatus, children Children) workflows.Verdict {
	judged := []string{v1beta1.ConditionAccepted, v1beta1.ConditionResolvedRefs,
		v1beta1.ConditionProgrammed, v1beta1.ConditionAvailable, v1beta1.ConditionFlagdVersionSupported}
	if d := children.Deployment; d != nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
		// Scaled to zero: no pod is what it asks for, as kstatus judges a
		// Deployment of zero replicas.
		judged = slices.DeleteFunc(judged, func(t string) bool { return t == v1beta1.ConditionAvailable })
	}
	v := workflows.Judge(status.Conditions, judged, children.Permanent, "")
	if v.Health == workflows.Stalled {
		return v
	}
	if d := children.Deployment; d != nil {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == v1beta1.ReasonProgressDeadlineExceeded {
				return workflows.Verdict{Health: workflows.Stalled, Reason: v1beta1.ReasonProgressDeadlineExceeded,
					Message: fmt.Sprintf("Deployment %s stopped progressing: %s", d.Name, c.Message)}
			}
		}
	}
	if v.Health == workflows.Ready {
		// What is in place, and how many of the replicas asked for serve.
		var parts []string
		for _, t := range []string{v1beta1.ConditionProgrammed, v1beta1.ConditionAvailable} {
			if c := meta.FindStatusCondition(status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
				parts = append(parts, c.Message)
			}
		}
		v.Message = strings.Join(parts, "; ")
	}
	return v
}
