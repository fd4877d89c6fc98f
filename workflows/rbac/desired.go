package rbac

import (
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// flagd's kubernetes sync (v0.16) lists and watches every FeatureFlag of the
// flag set's namespace (an informer without a field selector), then reads the
// one it serves, and falls back to a get of that one name. RBAC cannot narrow
// a list or a watch to one name, so the Role allows get on the names it
// serves and list and watch on the namespace's FeatureFlags: the least that
// flagd can work with. Across namespaces the tenancy rule therefore asks a
// grant of every FeatureFlag (topology.View.MayReadDirectly).
var (
	flagGetVerbs   = []string{"get"}
	flagWatchVerbs = []string{"list", "watch"}
)

// Name is the name of the Role and RoleBinding that let a workload's
// service account read the FeatureFlags it syncs with the kubernetes
// provider. One pair per workload and flag-set namespace: the name is the
// same in every namespace, so the cache finds all of a workload's pairs by
// name, and removing a workload removes exactly its grants.
func Name(workload topology.Key) string {
	kind := string(workload.Kind)
	if !workload.Kind.IsPodOwner() {
		kind = strings.ToLower(kind) // deployment, statefulset, daemonset
	}
	return namePrefix + kind + ":" + workload.Namespace + ":" + workload.Name
}

const namePrefix = "flagplane:featureflag-reader:"

// WorkloadOfName is the inverse of Name. Namespaces and workload
// names hold no colon, so the name splits unambiguously. (A pod owner of the
// core group has no dot in its kind and is not told from a foreign name.)
func WorkloadOfName(name string) (topology.Key, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return topology.Key{}, false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return topology.Key{}, false
	}
	for _, kind := range []topology.Kind{topology.KindDeployment, topology.KindStatefulSet, topology.KindDaemonSet, topology.KindFlagd} {
		if strings.ToLower(string(kind)) == parts[0] {
			return topology.WorkloadKey(kind, parts[1], parts[2]), true
		}
	}
	if kind := topology.Kind(parts[0]); kind.IsPodOwner() && strings.Contains(parts[0], ".") {
		return topology.WorkloadKey(kind, parts[1], parts[2]), true
	}
	return topology.Key{}, false
}

// Desired returns, for a workload (or a Flagd), one Role and RoleBinding in each
// namespace holding a flag set that the workload reads through the
// kubernetes provider and may read (topology.View.MayReadDirectly): the Role
// allows get on exactly those FeatureFlags and list and watch on the
// namespace's FeatureFlags (see flagWatchVerbs), the binding grants it to
// the workload's service account. It returns nothing for a workload that is
// gone or uses no kubernetes provider; never a ClusterRole.
func Desired(v *topology.View, workload topology.Key, gen workflows.GeneratedMetadata) ([]*rbacv1.Role, []*rbacv1.RoleBinding) {
	sa, sources, ok := subjectOf(v, workload)
	if !ok {
		return nil, nil
	}
	names := map[string]map[string]struct{}{} // flag-set namespace → FeatureFlag names
	for _, src := range sources {
		for _, ref := range v.FlagSetRefs(src) {
			if ref.State != topology.RefResolved || ref.Provider != string(v1beta1.SyncProviderKubernetes) ||
				!v.MayReadDirectly(workload, ref.FlagSet) {
				continue
			}
			if names[ref.FlagSet.Namespace] == nil {
				names[ref.FlagSet.Namespace] = map[string]struct{}{}
			}
			names[ref.FlagSet.Namespace][ref.FlagSet.Name] = struct{}{}
		}
	}
	if sa == "" {
		sa = "default"
	}
	name := Name(workload)
	var roles []*rbacv1.Role
	var bindings []*rbacv1.RoleBinding
	for _, ns := range slices.Sorted(maps.Keys(names)) {
		meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: gen.ObjectLabels(), Annotations: gen.ObjectAnnotations()}
		roles = append(roles, &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta,
			Rules: []rbacv1.PolicyRule{{
				APIGroups:     []string{v1beta1.GroupVersion.Group},
				Resources:     []string{"featureflags"},
				Verbs:         flagGetVerbs,
				ResourceNames: slices.Sorted(maps.Keys(names[ns])),
			}, {
				APIGroups: []string{v1beta1.GroupVersion.Group},
				Resources: []string{"featureflags"},
				Verbs:     flagWatchVerbs,
			}},
		})
		bindings = append(bindings, &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: *meta.DeepCopy(),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: workload.Namespace}},
		})
	}
	return roles, bindings
}

// subjectOf returns the service account of a workload's pods (or a
// Flagd's) and the sources whose flag sets they read.
func subjectOf(v *topology.View, k topology.Key) (serviceAccount string, sources []topology.Key, ok bool) {
	if k.Kind == topology.KindFlagd {
		f, ok := v.Flagd(k)
		if !ok {
			return "", nil, false
		}
		if src, state, _ := v.FlagdSource(k); state == topology.RefResolved {
			sources = []topology.Key{src}
		}
		return f.Spec.ServiceAccountName, sources, true
	}
	w, ok := v.Workload(k)
	if !ok {
		return "", nil, false
	}
	return w.ServiceAccountName, v.SourcesOfWorkload(k), true
}

// RoleUpToDate tells whether a Role in the cluster grants what desired
// grants, with desired's labels (the managed-by label among them: one
// adopted under another value flagplane owns is relabelled) and annotations.
func RoleUpToDate(current, desired *rbacv1.Role) bool {
	return current != nil && equality.Semantic.DeepEqual(current.Rules, desired.Rules) &&
		workflows.HasAll(current.Labels, desired.Labels) && workflows.HasAll(current.Annotations, desired.Annotations)
}

// RoleBindingUpToDate tells whether a RoleBinding in the cluster binds what
// desired binds, with desired's labels and annotations (as RoleUpToDate).
func RoleBindingUpToDate(current, desired *rbacv1.RoleBinding) bool {
	return current != nil && current.RoleRef == desired.RoleRef &&
		equality.Semantic.DeepEqual(current.Subjects, desired.Subjects) &&
		workflows.HasAll(current.Labels, desired.Labels) && workflows.HasAll(current.Annotations, desired.Annotations)
}
