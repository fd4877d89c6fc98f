package topology

import (
	"maps"
	"reflect"
	"slices"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Relevance: whether an update of an object can change anything the graph
// or a workflow reads. The topology's edits use these same comparisons, so
// an informer handler that drops the updates they call irrelevant drops
// exactly the updates whose Delta would be empty (the controllers do, so as
// not to take the graph's lock for every status write). Nothing else
// decides relevance.

// FlagSetChanged tells whether a FeatureFlag update matters: its flag
// definitions, or a new UID (recreated between two observations).
func FlagSetChanged(old, new *v1beta1.FeatureFlag) bool {
	return old.UID != new.UID || !flagSpecEqual(old.Spec.FlagSpec, new.Spec.FlagSpec)
}

// SourceChanged tells whether a FeatureFlagSource update matters: its spec,
// the annotations the injection reads, or a new UID.
func SourceChanged(old, new *v1beta1.FeatureFlagSource) bool {
	return old.UID != new.UID || !sidecarSpecEqual(old.Spec, new.Spec) || !targetingEqual(old.Spec, new.Spec) ||
		!sourceAnnotationsEqual(old, new)
}

// InProcessConfigChanged tells whether an InProcessConfiguration update
// matters: its spec, or a new UID.
func InProcessConfigChanged(old, new *v1beta1.InProcessConfiguration) bool {
	return old.UID != new.UID || !reflect.DeepEqual(old.Spec, new.Spec)
}

// WorkloadChanged tells whether a workload update matters: its labels, its
// openfeature.dev pod-template annotations as the graph parses them, or its
// service account.
func WorkloadChanged(old, new Workload) bool {
	before, after := newWorkloadRec(old), newWorkloadRec(new)
	return labelsDiffer(before, after) || annotationsDiffer(before, after) || accountDiffers(before, after)
}

func labelsDiffer(before, after *workloadRec) bool {
	return !maps.Equal(before.w.Labels, after.w.Labels)
}

func annotationsDiffer(before, after *workloadRec) bool {
	return !slices.Equal(before.annotSources, after.annotSources) || !slices.Equal(before.annotIPCs, after.annotIPCs)
}

func accountDiffers(before, after *workloadRec) bool {
	return before.w.ServiceAccountName != after.w.ServiceAccountName
}

// SameAnnotationRefs tells whether two sets of pod annotations of a workload
// of namespace name the same sources and in-process configurations, in the
// same order, as the graph parses them.
func SameAnnotationRefs(namespace string, a, b map[string]string) bool {
	sourcesA, ipcsA := ParseAnnotations(namespace, a)
	sourcesB, ipcsB := ParseAnnotations(namespace, b)
	return slices.Equal(sourcesA, sourcesB) && slices.Equal(ipcsA, ipcsB)
}
