package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
	"github.com/flagplane/flagplane/workflows/status"
)

// ConfigMaps is what the Pod webhook needs of a ConfigMapEnsurer.
type ConfigMaps interface {
	Ensure(ctx context.Context, v *topology.View, key topology.Key) error
}

// PodMutator is the mutating Pod webhook's handler. See the package documentation.
type PodMutator struct {
	Graph      Graph
	Resolver   restarts.Owners
	ConfigMaps ConfigMaps
	Options    injection.Options
	// WorkloadWait bounds the wait for the graph to know the pod's workload.
	WorkloadWait time.Duration
	// Events records, on the workload, that a pod was admitted without its
	// sidecar because it would pass a limit (EventInjectionRefused); nil
	// records none.
	Events events.EventRecorder
}

// EventInjectionRefused is the reason of the Warning Event on a workload
// whose pod was admitted without its flagd sidecar, because the sidecar
// would pass a limit of what a pod carries (injection.Refusal).
const EventInjectionRefused = "InjectionRefused"

// A pod whose injection would pass a limit (injection.Refusal: an argument
// or environment string longer than Linux's execve takes, a pod larger than
// the API server stores) is admitted without the flagd sidecar and what it
// brings, keeping the rest (the env vars of in-process configurations),
// rather than refused or admitted with a sidecar that cannot start:
//
//   - the webhook fails open everywhere else (a pod that misses its
//     injection runs, and the healer rolls it once it can get it), and a
//     refused pod would stop a rollout of its workload, or a Job, for a
//     flag delivery; a limit of the pod is no passing state. (A webhook
//     too busy to read a pod refuses it for now, with 429, which its
//     controller retries: the budget, in the package documentation.)
//   - a sidecar that cannot start is worse than none: as a native sidecar,
//     it holds the app containers back for good.
//
// It says so where the pod's owner looks: an admission warning, the pod's
// rollout.AnnotationRefused, a Warning Event InjectionRefused on the
// workload (not for a dry run), and the status of the sources. The pod
// records as its injection fingerprint that of its workload's injection,
// so that the healer rolls the workload once that changes (a source
// removed or edited so that it fits), and not before.
//
// The pod's annotations stay within the API server's 256 KiB
// (fitAnnotations), and an admission answers with at most maxWarnings
// warnings.

var _ admission.Handler = (*PodMutator)(nil)

// Handle admits a pod, with the injection of its workload.
func (p *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, resp, ok := podToInject(req)
	if !ok {
		return resp
	}
	ns := req.Namespace
	if ns == "" {
		ns = pod.Namespace
	}
	optedIn := topology.OptedIn(pod.Annotations)
	w, resp, ok := p.workloadToInject(ctx, ns, pod, optedIn)
	if !ok {
		return resp
	}
	dryRun := req.DryRun != nil && *req.DryRun
	v := p.view(ctx, w, pod)
	inj, refusal := injection.DesiredWithRefusal(v, w, p.Options)
	warnings := append(status.AnnotationWarnings(v, w), inj.Warnings...)
	// Set when the webhook refuses the sidecar: the fingerprint of the
	// workload's injection as it stands, which the pod records (see above).
	var refused string
	if r := injection.PodRefusal(pod, inj); r != nil && refusal == nil {
		refused = inj.Fingerprint()
		inj, refusal = inj.WithoutSidecar(), r
		warnings = append(warnings, r.String())
	}
	if refusal != nil && !dryRun {
		p.recordRefusal(ctx, w, refusal)
	}
	if inj.Empty() {
		return nothingInjected(pod, w, optedIn, refusal, refused, warnings)
	}

	// Every ConfigMap the pod mounts exists before it is admitted; one that
	// cannot be made to exist is left out rather than mounted dangling. A
	// dry run writes nothing and answers with the whole injection.
	var incomplete []string
	if !dryRun {
		inj, incomplete, warnings = p.ensureConfigMaps(ctx, v, inj, ns, pod, warnings)
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
	mutated.Annotations[restarts.AnnotationInjection] = inj.Fingerprint()
	if refused != "" {
		mutated.Annotations[restarts.AnnotationInjection] = refused
	}
	delete(mutated.Annotations, restarts.AnnotationAdmitted) // a copy's, of an earlier admission
	if inj.RolloutOnChange(v) {
		mutated.Annotations[restarts.AnnotationRolloutOnChange] = "true"
	}
	if refusal != nil {
		mutated.Annotations[restarts.AnnotationRefused] = refusal.String()
	}
	if len(incomplete) > 0 {
		mutated.Annotations[restarts.AnnotationIncomplete] = strings.Join(incomplete, ",")
	}
	if unresolved := unresolvedAnnotationRefs(v, w); len(unresolved) > 0 {
		// What it names but did not get: the healer rolls the workload
		// once that resolves, as the warning promises.
		mutated.Annotations[restarts.AnnotationUnresolved] = strings.Join(unresolved, ",")
	}
	fitAnnotations(mutated.Annotations)
	return injectedResponse(req, pod, mutated, w, inj, refusal, incomplete, warnings)
}

// podToInject decodes the pod of an admission request. It answers the
// request itself (ok false) for what is not a pod's creation, a pod it
// cannot decode and a pod injected already.
func podToInject(req admission.Request) (pod *corev1.Pod, resp admission.Response, ok bool) {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.SubResource != "" {
		// Only creates are mutated: a pod's spec is immutable, and a pod
		// that exists has whatever it was admitted with.
		return nil, admission.Allowed("flagplane mutates pods on creation only"), false
	}
	pod = &corev1.Pod{}
	// As the API server decodes: field names match their case, so that
	// the patch's paths (podPatch) are the keys of the pod as sent.
	if err := utiljson.Unmarshal(req.Object.Raw, pod); err != nil {
		return nil, admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err)), false
	}
	if _, done := pod.Annotations[restarts.AnnotationInjection]; done {
		return nil, admission.Allowed("injected already"), false
	}
	return pod, admission.Response{}, true
}

// workloadToInject finds the workload of a pod of namespace ns. It answers
// the request itself (ok false) when the pod has none, or when its
// workload is known only through its pods and the pod does not opt in.
func (p *PodMutator) workloadToInject(ctx context.Context, ns string, pod *corev1.Pod, optedIn bool) (topology.Key, admission.Response, bool) {
	res := p.Resolver.WorkloadOf(ctx, ns, pod)
	if !res.OK {
		if optedIn {
			return topology.Key{}, admission.Allowed("no workload: " + res.Why).WithWarnings("flagplane injects nothing into this pod: " + res.Why), false
		}
		return topology.Key{}, admission.Allowed("no workload: " + res.Why), false
	}
	if res.Workload.Kind.IsPodOwner() && !optedIn {
		// Workloads known only through their pods opt in by annotation
		// (targetRefs and selectors name Deployments, StatefulSets and DaemonSets).
		return topology.Key{}, admission.Allowed(fmt.Sprintf("not opted in: %s is known only through its pods, which do not carry %s", res.Workload, v1beta1.AnnotationEnabled)), false
	}
	return res.Workload, admission.Response{}, true
}

// nothingInjected answers for a pod of w that gets no injection: it only
// annotates the pod, with the refusal (and the fingerprint refused) when
// the sidecar was refused.
func nothingInjected(pod *corev1.Pod, w topology.Key, optedIn bool, refusal *injection.Refusal, refused string, warnings []string) admission.Response {
	if optedIn && len(warnings) == 0 {
		warnings = append(warnings, fmt.Sprintf("flagplane injects nothing: no source of %s %s/%s exists",
			w.Kind, w.Namespace, w.Name))
	}
	// The pod's record that the webhook saw it: should its workload be
	// targeted later, the Healer tells "admitted before flagplane knew"
	// from "the webhook was not reached" by it, whichever replica admitted it.
	marks := map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject}
	why := "nothing to inject: no source or in-process configuration applies to " + w.String()
	if refusal != nil {
		marks[restarts.AnnotationRefused] = refusal.String()
		why = "nothing injected into a pod of " + w.String() + ": " + refusal.String()
	}
	if refused != "" {
		// The workload's injection is not empty: the webhook refused it.
		delete(marks, restarts.AnnotationAdmitted)
		marks[restarts.AnnotationInjection] = refused
	}
	return admission.Patched(why, annotate(pod, marks)...).WithWarnings(capWarnings(warnings)...)
}

// ensureConfigMaps makes every ConfigMap inj mounts exist, and leaves out
// of inj those it cannot: it returns inj without them, the flag sets left
// out ("<namespace>/<name>") and warnings with one for each.
func (p *PodMutator) ensureConfigMaps(ctx context.Context, v *topology.View, inj *injection.Injection, ns string, pod *corev1.Pod,
	warnings []string) (*injection.Injection, []string, []string) {
	var missing []topology.Key
	var incomplete []string
	for _, cm := range inj.ConfigMaps {
		if err := p.ConfigMaps.Ensure(ctx, v, cm); err != nil {
			fs := cm.FlagSet()
			log.FromContext(ctx).Error(err, "leaving a flag set out of a pod", "FeatureFlag", klog.KRef(fs.Namespace, fs.Name),
				"Pod", klog.KRef(ns, pod.Name), "generateName", pod.GenerateName)
			missing = append(missing, cm)
			incomplete = append(incomplete, cm.FlagSet().Namespace+"/"+cm.FlagSet().Name)
			warnings = append(warnings, fmt.Sprintf("flag set %s/%s left out of this pod: %v", cm.FlagSet().Namespace, cm.FlagSet().Name, err))
		}
	}
	return inj.Without(missing...), incomplete, warnings
}

// injectedResponse is the patch from the requested pod (decoded: pod) to
// mutated (podPatch), with the warnings and, when allowed, what was
// injected for the decision's log line (loggedDecisions).
func injectedResponse(req admission.Request, pod, mutated *corev1.Pod, w topology.Key, inj *injection.Injection,
	refusal *injection.Refusal, incomplete, warnings []string) admission.Response {
	var resp admission.Response
	if ops, ok := podPatch(pod, mutated); ok {
		resp = admission.Patched("", ops...)
	} else {
		raw, err := json.Marshal(mutated)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		resp = admission.PatchResponseFromRaw(req.Object.Raw, raw)
	}
	resp = resp.WithWarnings(capWarnings(warnings)...)
	if resp.Allowed {
		msg := injectedSummary(w, inj, incomplete)
		if refusal != nil {
			msg += "; " + refusal.String()
		}
		resp.Result = &metav1.Status{Code: http.StatusOK, Message: msg}
	}
	return resp
}

// recordRefusal records a Warning Event on the workload of a pod admitted
// without its sidecar. The recorder folds repeats into a series, so a
// ReplicaSet's pods make one Event. A workload known only through its pods
// (a Job, ...) gets none: the pod's annotation and the warning say it.
func (p *PodMutator) recordRefusal(ctx context.Context, w topology.Key, r *injection.Refusal) {
	if p.Events == nil || w.Kind.IsPodOwner() || p.Resolver.Reader == nil {
		return
	}
	workflows.Warn(p.Events, workflows.WorkloadEventTarget(ctx, p.Resolver.Reader, w), EventInjectionRefused, "Inject",
		"a pod of %s %s was admitted without its flagd sidecar: %s", w.Kind, w.Name, r)
}

// maxWarnings bounds the warnings of one admission: a workload whose
// annotation names thousands of missing sources gets a readable answer,
// and the API server keeps only 4 KiB of them anyway.
const maxWarnings = 20

// capWarnings keeps the first maxWarnings warnings and says how many more
// there were.
func capWarnings(warnings []string) []string {
	if len(warnings) <= maxWarnings {
		return warnings
	}
	return append(warnings[:maxWarnings:maxWarnings], fmt.Sprintf("and %d more warnings", len(warnings)-maxWarnings))
}

// maxAnnotationsBytes is the most the API server lets an object's
// annotations hold, keys and values together (256 KiB): a pod with more is
// refused at creation, whatever made them so large.
const maxAnnotationsBytes = 256 * 1024

// maxListBytes bounds flagplane's list annotations on a pod
// (rollout.AnnotationUnresolved): a workload's annotation may name
// thousands of sources, each of which the list would name with its kind
// and namespace.
const maxListBytes = 4 * 1024

// fitAnnotations keeps flagplane's list annotations within maxListBytes
// (AnnotationUnresolved, which only says what to the healer's Event) and
// all the pod's annotations within maxAnnotationsBytes, cutting
// AnnotationUnresolved, then AnnotationIncomplete, at an item, with how
// many more there were. The healer reads the items of AnnotationIncomplete
// that remain (its "and N more" names no flag set): a pod cut so is healed
// once those exist, and its successor is admitted with what is still
// missing. What the pod's own annotations take is not flagplane's to cut.
func fitAnnotations(a map[string]string) {
	if v, ok := a[restarts.AnnotationUnresolved]; ok {
		a[restarts.AnnotationUnresolved] = cutList(v, maxListBytes)
	}
	total := 0
	for k, v := range a {
		total += len(k) + len(v)
	}
	for _, k := range []string{restarts.AnnotationUnresolved, restarts.AnnotationIncomplete} {
		v, ok := a[k]
		if !ok || total <= maxAnnotationsBytes {
			continue
		}
		cut := cutList(v, max(0, len(v)-(total-maxAnnotationsBytes)))
		total -= len(v) - len(cut)
		a[k] = cut
	}
}

// cutList cuts a comma-separated list to at most n bytes, at an item, and
// says how many items it left out: "a,b,and 3 more". The note is counted
// in n when there is room for it.
func cutList(list string, n int) string {
	if len(list) <= n {
		return list
	}
	items := strings.Split(list, ",")
	kept := 0
	size := 0
	for kept < len(items) {
		note := len(fmt.Sprintf(",and %d more", len(items)-kept-1))
		if size+len(items[kept])+1+note > n {
			break
		}
		size += len(items[kept]) + 1
		kept++
	}
	return strings.Join(append(items[:kept:kept], fmt.Sprintf("and %d more", len(items)-kept)), ",")
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
