package topology

import (
	"fmt"
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
	switch k {
	case KindFlagSet, KindSource, KindInProcessConfig, KindConfigMap, KindGrant, KindDeployment, KindStatefulSet, KindDaemonSet, KindFlagd, KindSourcePolicy, "":
		return false
	}
	return true
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

// Delta lists the nodes whose desired state may have changed by an edit,
// by the output that has to be recomputed.
type Delta struct {
	// ConfigMaps to render (when the node exists) or delete (when it no longer does).
	ConfigMaps KeySet
	// Workloads whose injection (sidecar, volumes, env, RBAC) may have changed.
	Workloads KeySet
	// Sources whose status may have changed.
	Sources KeySet
	// FlagSets whose status or served content may have changed.
	FlagSets KeySet
	// InProcessConfigs whose status may have changed.
	InProcessConfigs KeySet
	// Flagds whose generated objects (Deployment, Service, Ingress,
	// HTTPRoute, RBAC) or status may have changed.
	Flagds KeySet
	// SourcePolicies whose status may have changed.
	SourcePolicies KeySet
}

// Empty tells whether the delta names no node.
func (d Delta) Empty() bool {
	return len(d.ConfigMaps) == 0 && len(d.Workloads) == 0 && len(d.Sources) == 0 &&
		len(d.FlagSets) == 0 && len(d.InProcessConfigs) == 0 && len(d.Flagds) == 0 &&
		len(d.SourcePolicies) == 0
}

// Merge adds every key of other to d.
func (d *Delta) Merge(other Delta) {
	for k := range other.ConfigMaps {
		d.ConfigMaps.Add(k)
	}
	for k := range other.Workloads {
		d.Workloads.Add(k)
	}
	for k := range other.Sources {
		d.Sources.Add(k)
	}
	for k := range other.FlagSets {
		d.FlagSets.Add(k)
	}
	for k := range other.InProcessConfigs {
		d.InProcessConfigs.Add(k)
	}
	for k := range other.Flagds {
		d.Flagds.Add(k)
	}
	for k := range other.SourcePolicies {
		d.SourcePolicies.Add(k)
	}
}

// Size is the number of keys in the delta.
func (d Delta) Size() int {
	return len(d.ConfigMaps) + len(d.Workloads) + len(d.Sources) + len(d.FlagSets) + len(d.InProcessConfigs) + len(d.Flagds) +
		len(d.SourcePolicies)
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
