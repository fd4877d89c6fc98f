package webhooks

import (
	"maps"
	"slices"
	"strconv"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// The Pod webhook answers with a JSON patch made from the pod as decoded
// and the pod as the injection left it, field by field, rather than from
// the two pods encoded whole and decoded again into trees of values to be
// compared: a pod of 1.5 MB cost that tens of MiB. The patch touches only
// what the injection changes (the annotations, the volumes, the init
// containers, the image pull secrets, the app containers' env), so every
// other field reaches the API server as the pod was sent, also those this
// build's API types do not know, which encoding the decoded pod would drop.

// podPatch is the JSON patch from pod to mutated, a copy of pod that only
// the injection and its annotations changed. The injection appends, and
// what it appends is added at the end of its list; a list changed
// otherwise is replaced whole, so the patch is right whatever changed in
// these fields. ok is false when mutated differs from pod elsewhere: the
// caller then diffs the pods whole.
func podPatch(pod, mutated *corev1.Pod) (ops []jsonpatch.JsonPatchOperation, ok bool) {
	ops = annotationOps(pod.Annotations, mutated.Annotations)
	ops = append(ops, listOps("/spec/volumes", pod.Spec.Volumes, mutated.Spec.Volumes)...)
	ops = append(ops, listOps("/spec/initContainers", pod.Spec.InitContainers, mutated.Spec.InitContainers)...)
	ops = append(ops, listOps("/spec/imagePullSecrets", pod.Spec.ImagePullSecrets, mutated.Spec.ImagePullSecrets)...)
	if len(pod.Spec.Containers) != len(mutated.Spec.Containers) {
		ops = append(ops, listOps("/spec/containers", pod.Spec.Containers, mutated.Spec.Containers)...)
	} else {
		for i := range pod.Spec.Containers {
			ops = append(ops, containerOps("/spec/containers/"+strconv.Itoa(i), &pod.Spec.Containers[i], &mutated.Spec.Containers[i])...)
		}
	}
	// The rest must be the same: shallow copies without the fields above.
	rest := func(p *corev1.Pod) corev1.Pod {
		c := *p
		c.Annotations = nil
		c.Spec.Volumes, c.Spec.InitContainers, c.Spec.ImagePullSecrets, c.Spec.Containers = nil, nil, nil, nil
		return c
	}
	a, b := rest(pod), rest(mutated)
	return ops, equality.Semantic.DeepEqual(a, b)
}

// containerOps patches container i of a pod: its env, appended to or
// replaced, or the whole container when anything else changed (replace:
// an add at an index of a list inserts).
func containerOps(path string, orig, mutated *corev1.Container) []jsonpatch.JsonPatchOperation {
	a, b := *orig, *mutated
	a.Env, b.Env = nil, nil
	if !equality.Semantic.DeepEqual(a, b) {
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("replace", path, mutated)}
	}
	return listOps(path+"/env", orig.Env, mutated.Env)
}

// listOps patches a list of a pod: nothing when it is unchanged, an add of
// each element appended when mutated is orig with elements appended, and
// an add of the whole list (which replaces it) otherwise.
func listOps[T any](path string, orig, mutated []T) []jsonpatch.JsonPatchOperation {
	n := len(orig)
	switch {
	case n == len(mutated) && equality.Semantic.DeepEqual(orig, mutated):
		return nil
	case n == 0 || len(mutated) < n || !equality.Semantic.DeepEqual(orig, mutated[:n]):
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", path, mutated)}
	}
	ops := make([]jsonpatch.JsonPatchOperation, 0, len(mutated)-n)
	for i := range mutated[n:] {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/-", mutated[n+i]))
	}
	return ops
}

// annotationOps patches a pod's annotations from orig to mutated: each key
// set or changed, each key removed; the map whole when the pod had none.
func annotationOps(orig, mutated map[string]string) []jsonpatch.JsonPatchOperation {
	if len(orig) == 0 {
		if len(mutated) == 0 {
			return nil
		}
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/annotations", mutated)}
	}
	var ops []jsonpatch.JsonPatchOperation
	for _, k := range slices.Sorted(maps.Keys(mutated)) {
		if v, had := orig[k]; !had || v != mutated[k] {
			ops = append(ops, jsonpatch.NewOperation("add", annotationPath(k), mutated[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(orig)) {
		if _, kept := mutated[k]; !kept {
			ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "remove", Path: annotationPath(k)})
		}
	}
	return ops
}

// annotate is the patch that sets annotations on pod (rollout.AnnotationAdmitted,
// and rollout.AnnotationRefused when the sidecar was refused).
func annotate(pod *corev1.Pod, annotations map[string]string) []jsonpatch.JsonPatchOperation {
	if pod.Annotations == nil {
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/annotations", annotations)}
	}
	out := make([]jsonpatch.JsonPatchOperation, 0, len(annotations))
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		out = append(out, jsonpatch.NewOperation("add", annotationPath(k), annotations[k]))
	}
	return out
}
