package topology

import (
	"crypto/sha256"
	"encoding/hex"
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
// the same name. When that would pass the 253 characters of a DNS subdomain,
// the name is cut and ends in "-" and 16 hex digits of a SHA-256 of the flag
// set's namespace/name instead.
func ConfigMapName(flagSet Key) string {
	name := configMapPrefix + flagSet.Namespace + "." + flagSet.Name
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(flagSet.Namespace + "/" + flagSet.Name))
	suffix := "-" + hex.EncodeToString(sum[:8])
	// A DNS subdomain's labels end in an alphanumeric character.
	return strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-") + suffix
}

// FlagSetID identifies a flag set across namespaces as "<namespace>_<name>",
// the form the OpenFeature Operator uses for data keys and mount directories.
// Neither part can contain an underscore, so the ID is unambiguous.
func FlagSetID(flagSet Key) string {
	return flagSet.Namespace + "_" + flagSet.Name
}

// ConfigMapDataKey is the key under which a generated ConfigMap holds the
// flag set: "<namespace>_<name>.flagd.json", as in the OpenFeature Operator,
// so that a sidecar reads the file at the same path.
func ConfigMapDataKey(flagSet Key) string {
	return FlagSetID(flagSet) + ".flagd.json"
}

// remountLater queues a workload for flushMounts at the end of the edit.
func (x *tx) remountLater(w Key) { x.remount = append(x.remount, w) }

// flushMounts brings the ConfigMaps the queued workloads mount in line with
// their sources: one per flag set that one of them resolves with the file
// provider. It runs once per edit, when all other changes are made, and adds
// every new mount before it removes any old one, so that a ConfigMap that
// passes from one workload to another within the edit is neither removed nor
// created.
func (x *tx) flushMounts() error {
	type change struct{ w, cm Key }
	var added, removed []change
	for _, w := range slices.Compact(sortedKeys(x.remount)) {
		if !x.st.g.has(w) {
			continue
		}
		plus, minus := diff(x.st.g.parents(w, relMounts), x.wantedMounts(w))
		for _, cm := range plus {
			added = append(added, change{w: w, cm: cm})
		}
		for _, cm := range minus {
			removed = append(removed, change{w: w, cm: cm})
		}
	}
	x.remount = nil
	for _, c := range added {
		if err := x.ensureConfigMap(c.cm); err != nil {
			return err
		}
		if _, err := x.st.g.addEdge(x.o, c.cm, c.w, relMounts); err != nil {
			return err
		}
		x.mark(c.w)
	}
	for _, c := range removed {
		x.st.g.removeEdge(x.o, c.cm, c.w)
		x.mark(c.w)
		if x.st.g.countChildren(c.cm, relMounts) == 0 {
			x.removeConfigMap(c.cm)
		}
	}
	return nil
}

// wantedMounts lists the ConfigMaps a workload's sources call for.
func (x *tx) wantedMounts(w Key) []Key {
	var want []Key
	for _, s := range x.st.consumerSources(w) {
		n, _ := x.st.g.node(s)
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

func (x *tx) ensureConfigMap(cm Key) error {
	if x.st.g.has(cm) {
		return nil
	}
	if err := x.st.g.addNode(x.o, cm, layerConfigMap, payload{}); err != nil {
		return err
	}
	f := cm.FlagSet()
	if _, err := x.st.g.addEdge(x.o, f, cm, relRenders); err != nil {
		return err
	}
	x.st.cmByName.set(x.o, cmName{namespace: cm.Namespace, name: ConfigMapName(f)}, cm)
	x.mark(cm)
	x.mark(f)
	return nil
}

func (x *tx) removeConfigMap(cm Key) {
	f := cm.FlagSet()
	x.st.g.removeNode(x.o, cm)
	x.st.cmByName.del(x.o, cmName{namespace: cm.Namespace, name: ConfigMapName(f)})
	x.mark(cm)
	x.mark(f)
}
