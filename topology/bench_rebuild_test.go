package topology

import (
	"slices"

	"github.com/kuadrant/policy-machinery/machinery"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The full-rebuild baseline: what a controller built on policy-machinery's
// machinery.NewTopology does on every event. From the whole object store it
// resolves every reference and target, derives the ConfigMaps, and builds a
// new topology: flag sets and workloads are Targetables, sources and
// in-process configurations Policies whose target references are the
// workloads they apply to and the flag sets they resolve, ConfigMaps and
// grants plain Objects, linked flag set → ConfigMap → workload.
//
// The wrappers reuse Key as their machinery.Object identity (GVK and
// locator), which is also what their target references are.

var (
	_ machinery.Targetable = (*pmTargetable)(nil)
	_ machinery.Policy     = (*pmPolicy)(nil)
	_ machinery.Object     = (*pmObject)(nil)
)

// pmObject is any object of the rebuild, identified by its key.
type pmObject struct{ Key }

// pmTargetable is a flag set or a workload.
type pmTargetable struct {
	pmObject
	policies []machinery.Policy
}

func (t *pmTargetable) SetPolicies(p []machinery.Policy) { t.policies = p }
func (t *pmTargetable) Policies() []machinery.Policy     { return t.policies }

// pmPolicy is a source or an in-process configuration.
type pmPolicy struct {
	pmObject
	targets []machinery.PolicyTargetReference
}

func (p *pmPolicy) GetTargetRefs() []machinery.PolicyTargetReference { return p.targets }
func (p *pmPolicy) GetMergeStrategy() machinery.MergeStrategy        { return machinery.DefaultMergeStrategy }
func (p *pmPolicy) Merge(other machinery.Policy) machinery.Policy    { return other }

func groupKind(k Kind) schema.GroupKind { return Key{Kind: k}.GroupVersionKind().GroupKind() }

// rebuildMachinery builds the policy-machinery topology of a world.
func rebuildMachinery(w *world, dagCheck bool) (*machinery.Topology, error) {
	// Index the store: what resolving references and selectors needs.
	byNs := map[string][]*workloadRec{}
	named := map[Key][]Key{} // source or in-process configuration → workloads whose annotation names it
	for _, wl := range w.workloads {
		rec := newWorkloadRec(wl)
		byNs[wl.Namespace] = append(byNs[wl.Namespace], rec)
		for _, s := range rec.annotSources {
			named[s] = append(named[s], wl.Key())
		}
		for _, c := range rec.annotIPCs {
			named[c] = append(named[c], wl.Key())
		}
	}
	grantsByNs := map[string][]Grant{}
	for _, g := range w.grants {
		grantsByNs[g.Namespace] = append(grantsByNs[g.Namespace], g)
	}
	permitted := func(from string, f Key) bool {
		if f.Namespace == from {
			return true
		}
		for _, g := range grantsByNs[f.Namespace] {
			if g.lets(GroupOpenFeature, "FeatureFlagSource", from, f, false) {
				return true
			}
		}
		return false
	}

	flagSets := make(map[Key]*pmTargetable, len(w.flagSets))
	for k := range w.flagSets {
		flagSets[k] = &pmTargetable{pmObject: pmObject{k}}
	}
	workloads := make(map[Key]*pmTargetable, len(w.workloads))
	for k := range w.workloads {
		workloads[k] = &pmTargetable{pmObject: pmObject{k}}
	}

	var policies []*pmPolicy
	mounts := map[Key][]Key{} // workload → ConfigMaps
	configMaps := map[Key]*pmObject{}
	for k, s := range w.sources {
		rec := newSourceRec(s, v1beta1.SyncProviderFile)
		p := &pmPolicy{pmObject: pmObject{k}}
		var files []Key
		for _, r := range rec.refs {
			if _, ok := w.flagSets[r.FlagSet]; ok && permitted(k.Namespace, r.FlagSet) {
				p.targets = append(p.targets, r.FlagSet)
				if r.Provider == string(v1beta1.SyncProviderFile) {
					files = append(files, r.FlagSet)
				}
			}
		}
		var targets []Key
		for _, wk := range rec.targetRefs {
			if _, ok := workloads[wk]; ok {
				targets = append(targets, wk)
			}
		}
		if rec.selector.sel != nil {
			for _, wr := range byNs[k.Namespace] {
				if rec.selector.matches(wr.w.Labels) {
					targets = append(targets, wr.w.Key())
				}
			}
		}
		targets = append(targets, named[k]...)
		slices.SortFunc(targets, compareKeys)
		targets = slices.Compact(targets)
		for _, wk := range targets {
			p.targets = append(p.targets, wk)
			for _, f := range files {
				cm := ConfigMapKey(f, wk.Namespace)
				if _, ok := configMaps[cm]; !ok {
					configMaps[cm] = &pmObject{cm}
				}
				if !slices.Contains(mounts[wk], cm) {
					mounts[wk] = append(mounts[wk], cm)
				}
			}
		}
		policies = append(policies, p)
	}
	for k := range w.ipcs {
		p := &pmPolicy{pmObject: pmObject{k}}
		for _, wk := range named[k] {
			p.targets = append(p.targets, wk)
		}
		policies = append(policies, p)
	}
	objects := make([]*pmObject, 0, len(configMaps)+len(w.grants))
	for _, cm := range configMaps {
		objects = append(objects, cm)
	}
	for k := range w.grants {
		objects = append(objects, &pmObject{k})
	}

	opts := []machinery.TopologyOptionsFunc{
		machinery.WithTargetables(mapValues(flagSets)...),
		machinery.WithTargetables(mapValues(workloads)...),
		machinery.WithPolicies(policies...),
		machinery.WithObjects(objects...),
		machinery.WithLinks(
			machinery.LinkFunc{
				From: groupKind(KindFlagSet), To: groupKind(KindConfigMap),
				Func: func(child machinery.Object) []machinery.Object {
					return []machinery.Object{flagSets[child.(*pmObject).Key.FlagSet()]}
				},
			},
			machinery.LinkFunc{
				From: groupKind(KindConfigMap), To: groupKind(KindDeployment),
				Func: func(child machinery.Object) []machinery.Object { return mountedBy(child, mounts, configMaps) },
			},
			machinery.LinkFunc{
				From: groupKind(KindConfigMap), To: groupKind(KindStatefulSet),
				Func: func(child machinery.Object) []machinery.Object { return mountedBy(child, mounts, configMaps) },
			},
			machinery.LinkFunc{
				From: groupKind(KindConfigMap), To: groupKind(KindDaemonSet),
				Func: func(child machinery.Object) []machinery.Object { return mountedBy(child, mounts, configMaps) },
			},
		),
	}
	if !dagCheck {
		opts = append(opts, machinery.AllowLoops())
	}
	return machinery.NewTopology(opts...)
}

func mountedBy(child machinery.Object, mounts map[Key][]Key, configMaps map[Key]*pmObject) []machinery.Object {
	cms := mounts[child.(*pmTargetable).Key]
	out := make([]machinery.Object, 0, len(cms))
	for _, cm := range cms {
		out = append(out, configMaps[cm])
	}
	return out
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
