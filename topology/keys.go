package topology

import (
	"hash/maphash"
	"slices"
	"strings"

	"github.com/kuadrant/policy-machinery/machinery"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Keys speak policy-machinery's vocabulary: a Key is a machinery.Object, so
// it can stand for its object wherever machinery wants a locator or a policy
// target reference.
var _ machinery.Object = Key{}

// GroupVersionKind is the API type of the object that the key names.
func (k Key) GroupVersionKind() schema.GroupVersionKind {
	if i := kindIndex(k.Kind); i >= 0 && nodeKinds[i].kind == k.Kind {
		return nodeKinds[i].gvk
	}
	if k.Kind.IsPodOwner() {
		group, kind := k.Kind.GroupKind()
		return schema.GroupVersionKind{Group: group, Kind: kind}
	}
	return schema.GroupVersionKind{Kind: string(k.Kind)}
}

// SetGroupVersionKind does nothing: a key's kind is fixed. It exists so that
// Key satisfies schema.ObjectKind and hence machinery.Object.
func (Key) SetGroupVersionKind(schema.GroupVersionKind) {}

// GetNamespace is the key's namespace.
func (k Key) GetNamespace() string { return k.Namespace }

// GetName is the key's name.
func (k Key) GetName() string { return k.Name }

// GetLocator is policy-machinery's locator of the object, e.g.
// "deployment.apps:shop/web". String is the shorter form used in DOT and logs.
func (k Key) GetLocator() string { return machinery.LocatorFromObject(k) }

// KindPodOwners is how Counts names the workloads of every kind but
// Deployment, StatefulSet and DaemonSet (see Kind.IsPodOwner).
const KindPodOwners Kind = "OtherPodOwner"

// ParseRef reads a reference to an object written as `name` or
// `namespace/name` (the form of spec.sources[].source and of the
// openfeature.dev annotations); a bare name is in defaultNamespace. ok is
// false for anything else (an empty part, a third part): such a reference
// names no object, stays unresolved, and the validating webhook refuses it.
func ParseRef(ref, defaultNamespace string) (namespace, name string, ok bool) {
	ns, n, qualified := strings.Cut(ref, "/")
	switch {
	case !qualified:
		return defaultNamespace, ref, ref != ""
	case ns == "" || n == "" || strings.Contains(n, "/"):
		return ns, n, false
	}
	return ns, n, true
}

// parseObjectRef is ParseRef for the graph: a malformed reference keeps its
// parts, so that it names an object that cannot exist and just stays
// unresolved (and is listed as such).
func parseObjectRef(ref, defaultNamespace string) (namespace, name string) {
	namespace, name, _ = ParseRef(ref, defaultNamespace)
	return namespace, name
}

// parseList splits a comma-separated annotation value into references,
// trimming spaces and dropping empty items and repeats (the first one wins,
// because the order of a workload's sources is the order of its annotation).
func parseList(value, defaultNamespace string, key func(namespace, name string) Key) []Key {
	var out []Key
	for item := range strings.SplitSeq(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k := key(parseObjectRef(item, defaultNamespace))
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Hashing for the persistent maps. The seed is per process: nothing the
// package returns depends on trie order.
var hashSeed = maphash.MakeSeed()

// mix is splitmix64's finaliser; it makes combined string hashes order-sensitive.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

func hash3(a, b, c string) uint64 {
	h := maphash.String(hashSeed, a)
	h = mix(h ^ maphash.String(hashSeed, b))
	return mix(h ^ maphash.String(hashSeed, c))
}

func (k Key) hash() uint64 { return hash3(string(k.Kind), k.Namespace, k.Name) }

// nsKey is a namespace as a map key.
type nsKey string

func (n nsKey) hash() uint64 { return maphash.String(hashSeed, string(n)) }

// labelKey is one label pair of one namespace: the unit of the selector indexes.
type labelKey struct{ namespace, key, value string }

func (l labelKey) hash() uint64 { return hash3(l.namespace, l.key, l.value) }

// nsPair is a (flag set namespace, source namespace) pair of a cross-namespace reference.
type nsPair struct{ to, from string }

func (p nsPair) hash() uint64 { return hash3(p.to, p.from, "") }

// cmName is a ConfigMap by namespace and object name.
type cmName struct{ namespace, name string }

func (c cmName) hash() uint64 { return hash3(c.namespace, c.name, "") }
