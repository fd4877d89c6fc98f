package topology

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Kind is the kind of a node.
type Kind string

// Node kinds.
const (
	KindFlagSet         Kind = "FeatureFlag"
	KindSource          Kind = "FeatureFlagSource"
	KindInProcessConfig Kind = "InProcessConfiguration"
	KindDeployment      Kind = "Deployment"
	KindStatefulSet     Kind = "StatefulSet"
	KindDaemonSet       Kind = "DaemonSet"
	KindConfigMap       Kind = "ConfigMap"
	KindGrant           Kind = "ReferenceGrant"
	// KindFlagd is declared in flagd.go.
)

// IsWorkload tells whether k is a workload kind: Deployment, StatefulSet,
// DaemonSet, or another owner of pods (see OwnerKind).
func (k Kind) IsWorkload() bool {
	switch k {
	case KindDeployment, KindStatefulSet, KindDaemonSet:
		return true
	}
	return k.IsPodOwner()
}

// IsPodOwner tells whether k is an owner of pods other than the three apps
// workload kinds (a Job, a CronJob, a bare ReplicaSet, an Argo Rollout...):
// "<Kind>.<group>", or "<Kind>" for the core group.
func (k Kind) IsPodOwner() bool {
	return k != "" && !registered(k)
}

// OwnerKind is the workload kind of an owner of pods of the given API group
// and kind: KindDeployment, KindStatefulSet or KindDaemonSet for those of
// group apps, else "<Kind>.<group>" (e.g. "Job.batch",
// "Rollout.argoproj.io"), or "<Kind>" for the core group.
func OwnerKind(group, kind string) Kind {
	if group == GroupApps {
		switch Kind(kind) {
		case KindDeployment, KindStatefulSet, KindDaemonSet:
			return Kind(kind)
		}
	}
	if group == "" {
		if k := Kind(kind); k.IsPodOwner() {
			return k
		}
		// A core kind named like a node kind of the graph (a pod owned by a
		// ConfigMap): spelt with the group's conventional name.
		group = coreGroupName
	}
	return Kind(kind + "." + group)
}

// coreGroupName stands for the core API group ("") in a workload kind.
const coreGroupName = "core"

// GroupKind splits a workload kind into its API group and kind.
func (k Kind) GroupKind() (group, kind string) {
	switch k {
	case KindDeployment, KindStatefulSet, KindDaemonSet:
		return GroupApps, string(k)
	}
	kind, group, _ = strings.Cut(string(k), ".")
	if group == coreGroupName {
		group = ""
	}
	return group, kind
}

// Key is the stable locator of a node.
//
// For a ConfigMap node, Namespace is the consuming namespace and Name is
// "<flag set namespace>/<flag set name>" (see ConfigMapKey); use FlagSet to
// get the flag set back.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

// String renders the key as a locator, e.g. "deployment:shop/web".
func (k Key) String() string {
	return fmt.Sprintf("%s:%s/%s", strings.ToLower(string(k.Kind)), k.Namespace, k.Name)
}

// Less orders keys by kind, namespace, then name.
func (k Key) Less(other Key) bool {
	if k.Kind != other.Kind {
		return k.Kind < other.Kind
	}
	if k.Namespace != other.Namespace {
		return k.Namespace < other.Namespace
	}
	return k.Name < other.Name
}

// Compare orders keys like Less: -1, 0 or +1.
func (k Key) Compare(other Key) int {
	return cmp.Or(cmp.Compare(k.Kind, other.Kind), cmp.Compare(k.Namespace, other.Namespace), cmp.Compare(k.Name, other.Name))
}

// FlagSetKey is the key of a FeatureFlag.
func FlagSetKey(namespace, name string) Key {
	return Key{Kind: KindFlagSet, Namespace: namespace, Name: name}
}

// SourceKey is the key of a FeatureFlagSource.
func SourceKey(namespace, name string) Key {
	return Key{Kind: KindSource, Namespace: namespace, Name: name}
}

// InProcessConfigKey is the key of an InProcessConfiguration.
func InProcessConfigKey(namespace, name string) Key {
	return Key{Kind: KindInProcessConfig, Namespace: namespace, Name: name}
}

// WorkloadKey is the key of a Deployment, StatefulSet or DaemonSet.
func WorkloadKey(kind Kind, namespace, name string) Key {
	return Key{Kind: kind, Namespace: namespace, Name: name}
}

// ConfigMapKey is the key of the ConfigMap that renders flagSet into namespace.
func ConfigMapKey(flagSet Key, namespace string) Key {
	return Key{Kind: KindConfigMap, Namespace: namespace, Name: flagSet.Namespace + "/" + flagSet.Name}
}

// FlagSet returns the flag set that a ConfigMap key renders.
func (k Key) FlagSet() Key {
	ns, name, _ := strings.Cut(k.Name, "/")
	return FlagSetKey(ns, name)
}

// KeySet is a set of keys.
type KeySet map[Key]struct{}

// Add adds keys to the set, allocating it when nil.
func (s *KeySet) Add(keys ...Key) {
	if *s == nil {
		*s = make(KeySet, len(keys))
	}
	for _, k := range keys {
		(*s)[k] = struct{}{}
	}
}

// Has tells whether k is in the set.
func (s KeySet) Has(k Key) bool { _, ok := s[k]; return ok }

// Sorted returns the keys in Key.Less order.
func (s KeySet) Sorted() []Key {
	out := make([]Key, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// Delta is the set of nodes whose desired state may have changed by an
// edit. A key's kind says what has to be recomputed: a ConfigMap to render
// (when the node exists) or delete (when it no longer does); a workload's
// injection (sidecar, volumes, env, RBAC); the status, and for a flag set
// the served content, of a flag set, source, in-process configuration or
// policy; a Flagd's generated objects and status. Read it by kind (Of,
// Workloads) or whole (All); the zero Delta is empty.
type Delta struct {
	keys KeySet
}

// Add puts keys in the delta.
func (d *Delta) Add(keys ...Key) { d.keys.Add(keys...) }

// Has tells whether k is in the delta.
func (d Delta) Has(k Key) bool { return d.keys.Has(k) }

// Empty tells whether the delta names no node.
func (d Delta) Empty() bool { return len(d.keys) == 0 }

// Size is the number of keys in the delta.
func (d Delta) Size() int { return len(d.keys) }

// Merge adds every key of other to d.
func (d *Delta) Merge(other Delta) {
	for k := range other.keys {
		d.keys.Add(k)
	}
}

// All yields every key of the delta, in no order.
func (d Delta) All() iter.Seq[Key] { return maps.Keys(d.keys) }

// Of returns the keys of the given kind, sorted.
func (d Delta) Of(kind Kind) []Key {
	return d.sorted(func(k Key) bool { return k.Kind == kind })
}

// Workloads returns the keys of every workload kind (Kind.IsWorkload), sorted.
func (d Delta) Workloads() []Key {
	return d.sorted(func(k Key) bool { return k.Kind.IsWorkload() })
}

func (d Delta) sorted(keep func(Key) bool) []Key {
	out := d.filter(keep)
	slices.SortFunc(out, Key.Compare)
	return out
}

// filter returns the keys keep keeps, in no order.
func (d Delta) filter(keep func(Key) bool) []Key {
	var out []Key
	for k := range d.keys {
		if keep(k) {
			out = append(out, k)
		}
	}
	return out
}

// Workload is what the topology keeps of a Deployment, StatefulSet or DaemonSet.
type Workload struct {
	Kind      Kind
	Namespace string
	Name      string
	// Labels are the workload's own metadata.labels, matched by source selectors.
	Labels map[string]string
	// PodAnnotations are spec.template.metadata.annotations, where a workload
	// opts in with openfeature.dev/enabled and names its sources.
	PodAnnotations map[string]string
	// ServiceAccountName is spec.template.spec.serviceAccountName ("default" when empty).
	ServiceAccountName string
}

// Key returns the workload's key.
func (w Workload) Key() Key { return WorkloadKey(w.Kind, w.Namespace, w.Name) }

// RefState says whether a source's reference to a flag set resolves.
type RefState string

// Reference states.
const (
	RefResolved     RefState = "Resolved"
	RefNotFound     RefState = "NotFound"
	RefNotPermitted RefState = "NotPermitted"
)

// FlagSetRef is one spec.sources[] entry of a source that names a flag set,
// with the provider in force (the entry's, else the source's default, else file).
type FlagSetRef struct {
	FlagSet  Key
	Provider string
	// Index is the position of the entry in spec.sources.
	Index int
	State RefState
}
