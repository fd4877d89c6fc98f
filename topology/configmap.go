package topology

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// configMapPrefix starts every generated ConfigMap's name, so that names say
// what they are and cannot clash with a user's ConfigMap of the flag set's name.
const configMapPrefix = "flagd."

// ConfigMapName is the object name of the ConfigMap that renders flagSet in
// any consuming namespace: "flagd.<namespace>.<name>". A namespace is a DNS
// label, so the first dot after the prefix ends it and no two flag sets get
// the same name. When that would pass the 253 characters of a DNS
// subdomain, it is FitName's shortened form, "flagd.<namespace>-<name, its
// dots as dashes, cut>-<hash>": no dot after the prefix, so it is never
// another flag set's plain name. (No ConfigMap of a shortened name could be
// written before: its data key did not fit either.)
func ConfigMapName(flagSet Key) string {
	return FitName(configMapPrefix, flagSet.Namespace, ".", flagSet.Name, "", validation.DNS1123SubdomainMaxLength)
}

// IsConfigMapName tells whether name is of the form ConfigMapName gives,
// which no ConfigMap flagplane generates lacks.
func IsConfigMapName(name string) bool { return strings.HasPrefix(name, configMapPrefix) }

// FlagSetID identifies a flag set across namespaces as "<namespace>_<name>",
// the form the OpenFeature Operator uses for mount directories. Neither part
// can contain an underscore, so the ID is unambiguous. It is a file name: when
// that would pass FileNameMaxLength, it is FitName's shortened form, which
// has no underscore.
func FlagSetID(flagSet Key) string {
	return FitName("", flagSet.Namespace, "_", flagSet.Name, "", FileNameMaxLength)
}

// dataKeySuffix ends every data key: flagd reads a file by its extension.
const dataKeySuffix = ".flagd.json"

// ConfigMapDataKey is the key under which a generated ConfigMap holds the
// flag set: "<namespace>_<name>.flagd.json", as in the OpenFeature Operator,
// so that a sidecar reads the file at the same path. When that would pass
// the 253 characters of a ConfigMap key, it is FitName's shortened form,
// which keeps the suffix.
func ConfigMapDataKey(flagSet Key) string {
	return FitName("", flagSet.Namespace, "_", flagSet.Name, dataKeySuffix, validation.DNS1123SubdomainMaxLength)
}

// remountLater queues a workload for flushMounts at the end of the edit.
func (edit *tx) remountLater(w Key) { edit.remount = append(edit.remount, w) }

// flushMounts brings the ConfigMaps the queued workloads mount in line with
// their sources: one per flag set that one of them resolves with the file
// provider. It runs once per edit, when all other changes are made, and adds
// every new mount before it removes any old one, so that a ConfigMap that
// passes from one workload to another within the edit is neither removed nor
// created.
func (edit *tx) flushMounts() error {
	type change struct{ w, cm Key }
	var added, removed []change
	for _, w := range slices.Compact(sortedKeys(edit.remount)) {
		if !edit.state.g.has(w) {
			continue
		}
		plus, minus := diff(edit.state.g.parents(w, relMounts), edit.wantedMounts(w))
		for _, cm := range plus {
			added = append(added, change{w: w, cm: cm})
		}
		for _, cm := range minus {
			removed = append(removed, change{w: w, cm: cm})
		}
	}
	edit.remount = nil
	for _, c := range added {
		if err := edit.ensureConfigMap(c.cm); err != nil {
			return err
		}
		if _, err := edit.state.g.addEdge(edit.owner, c.cm, c.w, relMounts); err != nil {
			return err
		}
		edit.mark(c.w)
	}
	for _, c := range removed {
		edit.state.g.removeEdge(edit.owner, c.cm, c.w)
		edit.mark(c.w)
		if edit.state.g.countChildren(c.cm, relMounts) == 0 {
			edit.removeConfigMap(c.cm)
		}
	}
	return nil
}

// wantedMounts lists the ConfigMaps a workload's sources call for.
func (edit *tx) wantedMounts(w Key) []Key {
	var want []Key
	for _, s := range edit.state.consumerSources(w) {
		n, _ := edit.state.g.node(s)
		if n.payload.source == nil {
			continue
		}
		for _, f := range resolvedFlagSets(n.payload.source.refs, v1beta1.SyncProviderFile) {
			if cm := ConfigMapKey(f, w.Namespace); !slices.Contains(want, cm) {
				want = append(want, cm)
			}
		}
	}
	return want
}

func (edit *tx) ensureConfigMap(cm Key) error {
	if edit.state.g.has(cm) {
		return nil
	}
	if err := edit.state.g.addNode(edit.owner, cm, layerConfigMap, payload{}); err != nil {
		return err
	}
	f := cm.FlagSet()
	if _, err := edit.state.g.addEdge(edit.owner, f, cm, relRenders); err != nil {
		return err
	}
	edit.state.cmByName.set(edit.owner, cmName{namespace: cm.Namespace, name: ConfigMapName(f)}, cm)
	edit.mark(cm)
	edit.mark(f)
	return nil
}

func (edit *tx) removeConfigMap(cm Key) {
	f := cm.FlagSet()
	edit.state.g.removeNode(edit.owner, cm)
	edit.state.cmByName.del(edit.owner, cmName{namespace: cm.Namespace, name: ConfigMapName(f)})
	edit.mark(cm)
	edit.mark(f)
}

// ConfigMapFacts is all the graph says of one generated ConfigMap: what its
// writer reads, at once, so that it goes back to the graph for nothing.
type ConfigMapFacts struct {
	// Key is the ConfigMap's (ConfigMapKey).
	Key Key
	// Needed is false when no workload mounts it: it is to be deleted, and
	// the other fields are empty.
	Needed bool
	// Name and DataKey are ConfigMapName and ConfigMapDataKey of its flag set.
	Name, DataKey string
	// FlagSet is the flag set it renders; nil, when Needed, only through a
	// bug (a ConfigMap node exists only under a resolved flag set).
	FlagSet *v1beta1.FeatureFlag
	// Served is what its namespace is to serve (ServedFor).
	Served Served
	// Overflow is set when Served is more than a ConfigMap may hold.
	Overflow *Overflow

	// view is the snapshot the facts were read from, for Copies.
	view *View
}

// ConfigMapFacts gathers what the graph says of the generated ConfigMap cm.
func (v *View) ConfigMapFacts(cm Key) ConfigMapFacts {
	facts := ConfigMapFacts{Key: cm, Needed: v.ConfigMapNeeded(cm)}
	if !facts.Needed {
		return facts
	}
	f := cm.FlagSet()
	facts.Name, facts.DataKey = ConfigMapName(f), ConfigMapDataKey(f)
	facts.FlagSet, _ = v.FlagSet(f)
	facts.Served, _ = v.ServedFor(f, cm.Namespace)
	if o, over := facts.Served.Overflow(string(v1beta1.SyncProviderFile)); over {
		facts.Overflow = &o
	}
	facts.view = v
	return facts
}

// Copies are the other namespaces that consume the ConfigMap's flag set,
// sorted, from the snapshot the facts were read from: where a new copy
// that cannot take Served as it is (held, invalid or too large) takes the
// content of an existing one. They are listed on demand, as that rare
// case asks for them: listing them for every ConfigMap of a flag set
// consumed in n namespaces would cost n² per edit.
func (f ConfigMapFacts) Copies() []string {
	if !f.Needed || f.view == nil {
		return nil
	}
	var out []string
	for _, ns := range f.view.ConsumerNamespaces(f.Key.FlagSet()) {
		if ns != f.Key.Namespace {
			out = append(out, ns)
		}
	}
	return out
}
