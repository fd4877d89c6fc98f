package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rollout"
	"github.com/flagplane/flagplane/workflows/status"
)

// ConfigMaps is what the Pod webhook needs of a ConfigMapEnsurer.
type ConfigMaps interface {
	Ensure(ctx context.Context, v *topology.View, key topology.Key) error
}

// PodMutator is the mutating Pod webhook's handler. See the package documentation.
type PodMutator struct {
	Graph      Graph
	Resolver   rollout.Owners
	ConfigMaps ConfigMaps
	Options    injection.Options
	// WorkloadWait bounds the wait for the graph to know the pod's workload.
	WorkloadWait time.Duration
}

var _ admission.Handler = (*PodMutator)(nil)

// Handle admits a pod, with the injection of its workload.
func (p *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.SubResource != "" {
		// Only creates are mutated: a pod's spec is immutable, and a pod
		// that exists has whatever it was admitted with.
		return admission.Allowed("flagplane mutates pods on creation only")
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	if _, done := pod.Annotations[rollout.AnnotationInjection]; done {
		return admission.Allowed("injected already")
	}
	ns := req.Namespace
	if ns == "" {
		ns = pod.Namespace
	}
	optedIn := topology.OptedIn(pod.Annotations)
	res := p.Resolver.WorkloadOf(ctx, ns, pod)
	if !res.OK {
		if optedIn {
			return admission.Allowed("no workload: " + res.Why).WithWarnings("flagplane injects nothing into this pod: " + res.Why)
		}
		return admission.Allowed("no workload: " + res.Why)
	}
	if res.Workload.Kind.IsPodOwner() && !optedIn {
		// Workloads known only through their pods opt in by annotation
		// (targetRefs and selectors name Deployments, StatefulSets and DaemonSets).
		return admission.Allowed(fmt.Sprintf("not opted in: %s is known only through its pods, which do not carry %s", res.Workload, v1beta1.AnnotationEnabled))
	}
	v := p.view(ctx, res.Workload, pod)
	inj := injection.Desired(v, res.Workload, p.Options)
	warnings := append(status.AnnotationWarnings(v, res.Workload), inj.Warnings...)
	if inj.Empty() {
		if optedIn && len(warnings) == 0 {
			warnings = append(warnings, fmt.Sprintf("flagplane injects nothing: no source of %s %s/%s exists",
				res.Workload.Kind, res.Workload.Namespace, res.Workload.Name))
		}
		// The pod's record that the webhook saw it: should its workload be
		// targeted later, the Healer tells "admitted before flagplane knew"
		// from "the webhook was not reached" by it, whichever replica admitted it.
		return admission.Patched("nothing to inject: no source or in-process configuration applies to "+res.Workload.String(),
			markAdmitted(pod)).WithWarnings(warnings...)
	}

	// Every ConfigMap the pod mounts exists before it is admitted; one that
	// cannot be made to exist is left out rather than mounted dangling. A
	// dry run writes nothing and answers with the whole injection.
	var incomplete []string
	if req.DryRun == nil || !*req.DryRun {
		var missing []topology.Key
		for _, cm := range inj.ConfigMaps {
			if err := p.ConfigMaps.Ensure(ctx, v, cm); err != nil {
				log.FromContext(ctx).Error(err, "leaving a flag set out of a pod", "pod", ns+"/"+pod.GenerateName+pod.Name)
				missing = append(missing, cm)
				incomplete = append(incomplete, cm.FlagSet().Namespace+"/"+cm.FlagSet().Name)
				warnings = append(warnings, fmt.Sprintf("flag set %s/%s left out of this pod: %v", cm.FlagSet().Namespace, cm.FlagSet().Name, err))
			}
		}
		inj = inj.Without(missing...)
	}

	mutated := pod.DeepCopy()
	_, applyWarnings := inj.ApplyTo(&mutated.Spec)
	warnings = append(warnings, applyWarnings...)
	if mutated.Annotations == nil {
		mutated.Annotations = map[string]string{}
	}
	if inj.Sidecar != nil && len(mutated.Spec.InitContainers) > 0 && mutated.Spec.InitContainers[len(mutated.Spec.InitContainers)-1].Name == inj.Sidecar.Name {
		maps.Copy(mutated.Annotations, inj.PodAnnotations)
	}
	mutated.Annotations[rollout.AnnotationInjection] = inj.Fingerprint()
	delete(mutated.Annotations, rollout.AnnotationAdmitted) // a copy's, of an earlier admission
	if inj.RolloutOnChange(v) {
		mutated.Annotations[rollout.AnnotationRolloutOnChange] = "true"
	}
	if len(incomplete) > 0 {
		mutated.Annotations[rollout.AnnotationIncomplete] = strings.Join(incomplete, ",")
	}
	if unresolved := unresolvedAnnotationRefs(v, res.Workload); len(unresolved) > 0 {
		// What it names but did not get: the healer rolls the workload
		// once that resolves, as the warning promises.
		mutated.Annotations[rollout.AnnotationUnresolved] = strings.Join(unresolved, ",")
	}
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, raw).WithWarnings(warnings...)
	if resp.Allowed {
		// What was injected, for the decision's log line (loggedDecisions).
		resp.Result = &metav1.Status{Code: http.StatusOK, Message: injectedSummary(res.Workload, inj, incomplete)}
	}
	return resp
}

// injectedSummary says what a pod of w got, in one line.
func injectedSummary(w topology.Key, inj *injection.Injection, incomplete []string) string {
	var b strings.Builder
	b.WriteString("injected for " + w.String() + ":")
	if inj.Sidecar != nil {
		b.WriteString(" flagd sidecar " + inj.Sidecar.Image)
	}
	if len(inj.ConfigMaps) > 0 {
		flagSets := make([]string, len(inj.ConfigMaps))
		for i, cm := range inj.ConfigMaps {
			flagSets[i] = cm.FlagSet().Namespace + "/" + cm.FlagSet().Name
		}
		b.WriteString(", flag sets " + strings.Join(flagSets, ","))
	}
	if len(inj.Env) > 0 {
		fmt.Fprintf(&b, ", %d env vars", len(inj.Env))
	}
	for _, from := range [][]topology.Key{inj.Sources, inj.InProcessConfigs} {
		for _, k := range from {
			b.WriteString(", from " + string(k.Kind) + " " + k.Namespace + "/" + k.Name)
		}
	}
	if len(incomplete) > 0 {
		b.WriteString("; left out (no ConfigMap): " + strings.Join(incomplete, ","))
	}
	return b.String()
}

// view returns a snapshot of the graph that knows the workload as the pod
// sees it: built from the caches, holding the workload, with the
// openfeature.dev annotations the pod carries. The workload informer can
// lag the pod by a few milliseconds; the wait is bounded by WorkloadWait,
// after which the pod is admitted with what the graph says (the Healer
// catches a pod that missed its injection that way).
//
// A workload known only through its pods (a Job, an Argo Rollout...) is
// not in the graph before its first pod exists: that pod is admitted with a
// view in which the workload is what the pod says, as the pod informer will
// tell the graph a moment later.
func (p *PodMutator) view(ctx context.Context, w topology.Key, pod *corev1.Pod) *topology.View {
	deadline := time.Now().Add(p.WorkloadWait)
	for {
		v := p.Graph.Topology().Snapshot()
		if p.Graph.GraphBuilt() {
			fromPod := topology.PodOwnerWorkload(w, pod.Annotations, pod.Spec.ServiceAccountName)
			wl, ok := v.Workload(w)
			if ok && topology.SameAnnotationRefs(w.Namespace, wl.PodAnnotations, pod.Annotations) &&
				(!w.Kind.IsPodOwner() || wl.ServiceAccountName == fromPod.ServiceAccountName) {
				return v
			}
			if w.Kind.IsPodOwner() {
				if forked, err := v.WithWorkload(fromPod); err == nil {
					return forked
				}
			}
		}
		if time.Now().After(deadline) {
			return v
		}
		select {
		case <-ctx.Done():
			return v
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// unresolvedAnnotationRefs names the references of a workload's
// annotations that do not resolve, "<Kind> <namespace>/<name>".
func unresolvedAnnotationRefs(v *topology.View, w topology.Key) []string {
	var out []string
	for _, r := range v.AnnotationRefs(w) {
		if r.State != topology.RefResolved {
			out = append(out, string(r.Target.Kind)+" "+r.Target.Namespace+"/"+r.Target.Name)
		}
	}
	return out
}

// markAdmitted is the patch that sets rollout.AnnotationAdmitted on pod.
func markAdmitted(pod *corev1.Pod) jsonpatch.JsonPatchOperation {
	if pod.Annotations == nil {
		return jsonpatch.NewOperation("add", "/metadata/annotations",
			map[string]string{rollout.AnnotationAdmitted: rollout.AdmittedNothingToInject})
	}
	// RFC 6901: "~" and "/" escaped in a path's segment.
	key := strings.NewReplacer("~", "~0", "/", "~1").Replace(rollout.AnnotationAdmitted)
	return jsonpatch.NewOperation("add", "/metadata/annotations/"+key, rollout.AdmittedNothingToInject)
}
