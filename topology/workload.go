package topology

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// defaultServiceAccount is what a pod runs as when its template names none.
const defaultServiceAccount = "default"

// WorkloadFrom takes what the topology needs from a Deployment, StatefulSet
// or DaemonSet: its metadata labels and its pod template's annotations and
// service account. The result shares obj's and tmpl's maps.
func WorkloadFrom(kind Kind, obj metav1.Object, tmpl *corev1.PodTemplateSpec) Workload {
	w := Workload{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Labels: obj.GetLabels()}
	if tmpl != nil {
		w.PodAnnotations = tmpl.Annotations
		w.ServiceAccountName = tmpl.Spec.ServiceAccountName
	}
	if w.ServiceAccountName == "" {
		w.ServiceAccountName = defaultServiceAccount
	}
	return w
}

// PodOwnerWorkload is what the topology keeps of a workload known only
// through its pods (Kind.IsPodOwner): the annotations and service account of
// one of its pods. It has no labels: selectors and targetRefs do not reach it.
func PodOwnerWorkload(k Key, podAnnotations map[string]string, serviceAccount string) Workload {
	if serviceAccount == "" {
		serviceAccount = defaultServiceAccount
	}
	return Workload{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, PodAnnotations: podAnnotations, ServiceAccountName: serviceAccount}
}

// workloadRec is what the topology keeps of a workload. Immutable once stored.
type workloadRec struct {
	w Workload
	// annotSources and annotIPCs are the sources and in-process
	// configurations the pod-template annotations name, in annotation order,
	// when openfeature.dev/enabled is "true".
	annotSources []Key
	annotIPCs    []Key
}

func newWorkloadRec(w Workload) *workloadRec {
	if w.ServiceAccountName == "" {
		w.ServiceAccountName = defaultServiceAccount
	}
	rec := &workloadRec{w: w}
	rec.annotSources, rec.annotIPCs = ParseAnnotations(w.Namespace, w.PodAnnotations)
	return rec
}

// OptedIn tells whether the openfeature.dev annotations of a pod (or pod
// template) count: openfeature.dev/enabled is "true", exactly as the
// OpenFeature Operator reads it.
func OptedIn(podAnnotations map[string]string) bool {
	return podAnnotations[v1beta1.AnnotationEnabled] == "true"
}

// ParseAnnotations reads the openfeature.dev annotations of a pod (or pod
// template) of namespace: the sources that openfeature.dev/featureflagsource
// names and the in-process configurations that
// openfeature.dev/inprocessconfiguration names, in annotation order, when
// the pod opted in (OptedIn), else none. Each value is a comma-separated
// list of `name` (in namespace) or `namespace/name` (ParseRef); spaces,
// empty items and repeats do not count, and a malformed reference keeps its
// parts, so that it names nothing and stays unresolved. It is the one
// reading of these annotations: the graph, the relevance of a workload
// update and the Pod webhook all go through it.
func ParseAnnotations(namespace string, podAnnotations map[string]string) (sources, inProcessConfigs []Key) {
	if !OptedIn(podAnnotations) {
		return nil, nil
	}
	return parseList(podAnnotations[v1beta1.AnnotationFeatureFlagSource], namespace, SourceKey),
		parseList(podAnnotations[v1beta1.AnnotationInProcessConfiguration], namespace, InProcessConfigKey)
}

// UpsertWorkload adds or updates a workload.
//
// Only what the graph reads counts: metadata labels (through selectors),
// the openfeature.dev pod-template annotations (parsed: reordering spaces or
// repeats that change nothing is no change), and the service account. The
// Delta: sources that gained or lost the workload; the workload itself when
// its sources (or their order), in-process configurations or ConfigMaps
// changed, or when its service account changed while a source applies to it
// (its RBAC follows the account); ConfigMaps created or no longer needed and
// their flag sets. A workload no source or configuration applies to has no
// desired state, so creating or deleting it gives an empty Delta.
//
// The topology keeps w's maps: do not modify them afterwards.
func (t *Topology) UpsertWorkload(w Workload) (Delta, error) {
	if !w.Kind.IsWorkload() {
		return Delta{}, fmt.Errorf("upserting workload %s/%s: kind %q is not a workload kind", w.Namespace, w.Name, w.Kind)
	}
	if w.Namespace == "" || w.Name == "" {
		return Delta{}, fmt.Errorf("upserting %s %q in namespace %q: namespace and name are required", w.Kind, w.Name, w.Namespace)
	}
	rec := newWorkloadRec(w)
	d, err := t.apply(rec.w.Key(), func(edit *tx) error { return edit.upsertWorkload(rec) })
	if err != nil {
		return d, fmt.Errorf("upserting %s: %w", w.Key(), err)
	}
	return d, nil
}

// DeleteWorkload removes a workload. The Delta: the sources and in-process
// configurations that applied to it, the workload if any did, ConfigMaps no
// longer needed and their flag sets.
func (t *Topology) DeleteWorkload(key Key) Delta {
	return t.mustApply(key, func(edit *tx) error { return edit.deleteWorkload(key) })
}

func (edit *tx) upsertWorkload(rec *workloadRec) error {
	k := rec.w.Key()
	var old *workloadRec
	if n, ok := edit.state.g.node(k); ok {
		old = n.payload.workload
	}
	labelsChanged := old == nil || labelsDiffer(old, rec)
	annotChanged := old != nil && annotationsDiffer(old, rec)
	accountChanged := old != nil && accountDiffers(old, rec)
	if old != nil && !labelsChanged && !annotChanged && !accountChanged {
		edit.state.g.setPayload(edit.owner, k, payload{workload: rec})
		return nil
	}

	// The order of the same sources can change only with the annotations;
	// it is compared after the edges are settled, as are the annotation
	// references that do not resolve.
	var sourcesBefore, ipcsBefore []Key
	var annotBefore []AnnotationRef
	if annotChanged {
		sourcesBefore, ipcsBefore = edit.state.sourcesOfWorkload(k), edit.state.ipcsOfWorkload(k)
		annotBefore = edit.state.annotationRefs(k)
	}
	before := &workloadRec{}
	if old != nil {
		before = old
	}
	ns := k.Namespace
	if labelsChanged {
		indexUpdate(edit.owner, &edit.state.wlByLabel, labelKeys(ns, before.w.Labels), labelKeys(ns, rec.w.Labels), k)
	}
	if old == nil || annotChanged {
		indexUpdate(edit.owner, &edit.state.annotSources, before.annotSources, rec.annotSources, k)
		indexUpdate(edit.owner, &edit.state.annotIPCs, before.annotIPCs, rec.annotIPCs, k)
		indexUpdate(edit.owner, &edit.state.crossAnnot, crossAnnotationPairs(k, before), crossAnnotationPairs(k, rec), k)
	}
	if old == nil {
		indexAdd(edit.owner, &edit.state.wlByNs, nsKey(ns), k)
		if err := edit.state.g.addNode(edit.owner, k, layerWorkload, payload{workload: rec}); err != nil {
			return err
		}
	} else {
		edit.state.g.setPayload(edit.owner, k, payload{workload: rec})
	}

	if labelsChanged || annotChanged {
		candidates := edit.state.g.parents(k, relTargets)
		if old == nil {
			candidates = append(candidates, indexGet(edit.state.targetRefsTo, k)...)
		}
		if labelsChanged {
			candidates = append(candidates, edit.state.sourcesSelecting(ns, rec.w.Labels)...)
		}
		candidates = append(candidates, rec.annotSources...)
		candidates = append(candidates, rec.annotIPCs...)
		for _, c := range candidates {
			if err := edit.retargetKey(c, k); err != nil {
				return err
			}
		}
	}

	// Edge changes marked the workload already; what is left is a new order
	// of the same sources, and the service account.
	if old == nil || annotChanged {
		annotAfter := edit.state.annotationRefs(k)
		if !slices.Equal(unresolved(annotBefore), unresolved(annotAfter)) ||
			!slices.Equal(sourcesBefore, edit.state.sourcesOfWorkload(k)) || !slices.Equal(ipcsBefore, edit.state.ipcsOfWorkload(k)) {
			edit.mark(k)
		}
		edit.markDenied(annotBefore, annotAfter)
	}
	if accountChanged && len(edit.state.sourcesOfWorkload(k)) > 0 {
		edit.mark(k)
	}
	return nil
}

func (edit *tx) deleteWorkload(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok || !k.Kind.IsWorkload() {
		return nil
	}
	rec := n.payload.workload
	ns := k.Namespace
	indexUpdate(edit.owner, &edit.state.wlByLabel, labelKeys(ns, rec.w.Labels), nil, k)
	indexUpdate(edit.owner, &edit.state.annotSources, rec.annotSources, nil, k)
	indexUpdate(edit.owner, &edit.state.annotIPCs, rec.annotIPCs, nil, k)
	indexDel(edit.owner, &edit.state.wlByNs, nsKey(ns), k)

	appliers := edit.state.g.parents(k, relTargets)
	mounts := edit.state.g.parents(k, relMounts)
	annot := edit.state.annotationRefs(k)
	indexUpdate(edit.owner, &edit.state.crossAnnot, crossAnnotationPairs(k, rec), nil, k)
	readers := map[Key][]string{}
	for _, s := range appliers {
		maps.Copy(readers, edit.observeReaders(s, k))
		if s.Kind == KindSource && s.Namespace != k.Namespace {
			indexDel(edit.owner, &edit.state.crossTargets, s, k)
		}
	}
	edit.state.g.removeNode(edit.owner, k)
	edit.markReaders(readers)
	edit.markAll(appliers)
	for _, c := range appliers {
		edit.markSelected(c, k)
	}
	if len(appliers) > 0 || len(unresolved(annot)) > 0 {
		edit.mark(k)
	}
	edit.markDenied(annot, nil)
	for _, cm := range mounts {
		if edit.state.g.countChildren(cm, relMounts) == 0 {
			edit.removeConfigMap(cm)
		}
	}
	return nil
}

// sourcesOfWorkload orders a workload's sources: those its annotation
// names, in annotation order, then those that target it by targetRefs or
// selector, by key.
func (st *state) sourcesOfWorkload(w Key) []Key {
	n, ok := st.g.node(w)
	if !ok || n.payload.workload == nil {
		return nil
	}
	return annotationOrder(n.payload.workload.annotSources, st.g.parentsOfKind(w, relTargets, KindSource))
}

// ipcsOfWorkload orders a workload's in-process configurations like sourcesOfWorkload.
func (st *state) ipcsOfWorkload(w Key) []Key {
	n, ok := st.g.node(w)
	if !ok || n.payload.workload == nil {
		return nil
	}
	return annotationOrder(n.payload.workload.annotIPCs, st.g.parentsOfKind(w, relTargets, KindInProcessConfig))
}

// annotationOrder reorders all in place: the members of all that annotated
// lists first, in that order, then the rest sorted.
func annotationOrder(annotated, all []Key) []Key {
	front := 0
	for _, k := range annotated {
		if i := slices.Index(all[front:], k); i >= 0 {
			// Annotations list a reference once (ParseAnnotations): k
			// is not among the front already placed.
			all[front], all[front+i] = all[front+i], all[front]
			front++
		}
	}
	sortedKeys(all[front:])
	return all
}

// unresolved keeps the annotation references that do not resolve.
func unresolved(refs []AnnotationRef) []AnnotationRef {
	var out []AnnotationRef
	for _, r := range refs {
		if r.State != RefResolved {
			out = append(out, r)
		}
	}
	return out
}

// markDenied marks the existing sources and in-process configurations that
// a workload's annotation references, before and after an edit, deny or no
// longer deny: their status lists the referrers they deny.
func (edit *tx) markDenied(before, after []AnnotationRef) {
	denied := func(refs []AnnotationRef) []Key {
		var out []Key
		for _, r := range refs {
			if r.State == RefNotPermitted {
				out = append(out, r.Target)
			}
		}
		return out
	}
	added, removed := diff(denied(before), denied(after))
	for _, t := range slices.Concat(added, removed) {
		if edit.state.g.has(t) {
			edit.mark(t)
		}
	}
}
