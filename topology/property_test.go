package topology

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"gonum.org/v1/gonum/graph/topo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// The central invariant (ARCHITECTURE.md §2): for any sequence of events,
// the graph built incrementally equals the graph built from scratch over the
// final objects: same DOT bytes, same answer to every query. And every
// Delta names exactly the nodes whose desired state changed, as observed
// through the View before and after the event.
//
// Events are drawn from a small universe of names so that references,
// selectors, grants and annotations collide often.

var (
	propNamespaces = []string{"ns1", "ns2", "ns3"}
	propFlagSets   = []string{"f1", "f2"}
	propSources    = []string{"s1", "s2", "s3"}
	propIPCs       = []string{"c1", "c2"}
	propWorkloads  = []string{"w1", "w2", "w3"}
	propKinds      = []Kind{KindDeployment, KindStatefulSet, "Job.batch"}
	propFlagds     = []string{"d1", "d2"}
	propPolicies   = []string{"p1", "p2"}
)

// chooser is where random choices come from: a seeded generator, or the
// bytes of a fuzz input.
type chooser interface {
	intn(n int) int
	done() bool
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }
func (randChooser) done() bool       { return false }

// byteChooser reads a fuzz input one byte per choice; it is done when the
// input runs out.
type byteChooser struct{ data []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.data) == 0 {
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

func (c *byteChooser) done() bool { return len(c.data) == 0 }

func pick[T any](c chooser, options ...T) T { return options[c.intn(len(options))] }

// world is the set of objects that exist after some events.
type world struct {
	flagSets  map[Key]*v1beta1.FeatureFlag
	sources   map[Key]*v1beta1.FeatureFlagSource
	ipcs      map[Key]*v1beta1.InProcessConfiguration
	workloads map[Key]Workload
	grants    map[Key]Grant
	flagds    map[Key]*v1beta1.Flagd
	policies  map[Key]*policyv1alpha1.FeatureFlagSourcePolicy
}

func newWorld() *world {
	return &world{
		flagSets:  map[Key]*v1beta1.FeatureFlag{},
		sources:   map[Key]*v1beta1.FeatureFlagSource{},
		ipcs:      map[Key]*v1beta1.InProcessConfiguration{},
		workloads: map[Key]Workload{},
		grants:    map[Key]Grant{},
		flagds:    map[Key]*v1beta1.Flagd{},
		policies:  map[Key]*policyv1alpha1.FeatureFlagSourcePolicy{},
	}
}

// event is one informer event.
type event struct {
	desc  string
	apply func(*Topology) (Delta, error)
	// record updates the world the same way.
	record func(*world)
}

// propRender is the property test's rendering: the flag set's default
// variants, so that a rendering kept past an edit of them shows; a default
// variant "broken" does not load, and "huge" is too large for a ConfigMap.
func propRender(ff *v1beta1.FeatureFlag) Rendered {
	var r Rendered
	for _, key := range slices.Sorted(maps.Keys(ff.Spec.FlagSpec.Flags)) {
		f := ff.Spec.FlagSpec.Flags[key]
		r.Content += key + "=" + f.DefaultVariant + ";"
		switch f.DefaultVariant {
		case "broken":
			r.Err = fmt.Errorf("flag %s: default variant broken", key)
		case "huge":
			r.Size = ConfigMapMaxBytes + 1
		}
	}
	r.Revision = fmt.Sprintf("%x", len(r.Content))
	return r
}

func newPropTopology() *Topology { return New(WithFlagSetRendering(propRender)) }

func genFlagSet(c chooser, ns, name string) *v1beta1.FeatureFlag {
	ff := newFlagSet(ns, name, pick(c, "on", "off", "broken", "huge"))
	ff.Labels = pick(c, map[string]string(nil), map[string]string{"team": "a"})
	ff.Status.Flags = int32(c.intn(3))
	return ff
}

func genSource(c chooser, ns, name string) *v1beta1.FeatureFlagSource {
	s := newSource(ns, name)
	for range c.intn(4) {
		s.Spec.Sources = append(s.Spec.Sources, v1beta1.Source{
			Source:   pick(c, "f1", "f2", "ns1/f1", "ns2/f1", "ns3/f2", "f9", "https://flags.example/x"),
			Provider: pick[v1beta1.SyncProviderType](c, "", "file", "kubernetes", "flagd-proxy", "http"),
		})
	}
	s.Spec.DefaultSyncProvider = pick[v1beta1.SyncProviderType](c, "", "", "file", "kubernetes", "http")
	for _, w := range propWorkloads {
		if c.intn(4) == 0 {
			s.Spec.TargetRefs = append(s.Spec.TargetRefs, v1beta1.TargetRef{Group: "apps", Kind: string(pick(c, propKinds...)), Name: w})
		}
	}
	s.Spec.Selector = pick(c,
		nil, nil,
		matchLabels("app", "a"),
		matchLabels("app", "b", "tier", "x"),
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}}}},
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}},
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}},
		&metav1.LabelSelector{},
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}},
	)
	s.Spec.DebugLogging = pick(c, nil, ptrTo(true), ptrTo(false))
	s.Spec.Port = pick[int32](c, 0, 8013, 9000)
	s.Labels = pick(c, map[string]string(nil), map[string]string{"team": "a"})
	s.Annotations = pick(c, map[string]string(nil), map[string]string{"example.com/noise": "x"},
		map[string]string{v1beta1.AnnotationSidecarSecurityContext: `{"runAsUser": 1000}`})
	s.Status.TargetCount = int32(c.intn(3))
	return s
}

func ptrTo[T any](v T) *T { return &v }

func genWorkload(c chooser, kind Kind, ns, name string) Workload {
	w := Workload{Kind: kind, Namespace: ns, Name: name, Labels: map[string]string{}, PodAnnotations: map[string]string{}}
	for _, l := range []struct{ key, a, b string }{{"app", "a", "b"}, {"tier", "x", "y"}, {"noise", "1", "2"}} {
		if v := pick(c, l.a, l.b, ""); v != "" {
			w.Labels[l.key] = v
		}
	}
	if v := pick(c, "true", "false", ""); v != "" {
		w.PodAnnotations[v1beta1.AnnotationEnabled] = v
	}
	var refs []string
	for range c.intn(4) {
		refs = append(refs, pick(c, "s1", "s2", " s3", "ns2/s1", "ns3/s2", "s9", "s1"))
	}
	if len(refs) > 0 {
		w.PodAnnotations[v1beta1.AnnotationFeatureFlagSource] = strings.Join(refs, ",")
	}
	if v := pick(c, "", "c1", "c1,ns2/c2", "c9, c2"); v != "" {
		w.PodAnnotations[v1beta1.AnnotationInProcessConfiguration] = v
	}
	if v := pick(c, "", "x"); v != "" {
		w.PodAnnotations["example.com/noise"] = v
	}
	w.ServiceAccountName = pick(c, "", "sa1")
	return w
}

func genFlagd(c chooser, ns, name string) *v1beta1.Flagd {
	f := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	f.Spec.FeatureFlagSource = pick(c, "s1", "s2", "s1", "ns1/s1", "ns2/s1", "ns3/s2", "s9")
	f.Spec.ServiceAccountName = pick(c, "", "sa1")
	f.Spec.Replicas = pick(c, nil, ptrTo[int32](1), ptrTo[int32](2))
	f.Spec.Ingress.Enabled = pick(c, false, true)
	f.Annotations = pick(c, map[string]string(nil), map[string]string{"example.com/lb": "internal"})
	f.Labels = pick(c, map[string]string(nil), map[string]string{"team": "a"})
	f.Status.ReadyReplicas = int32(c.intn(3))
	return f
}

func genGrant(c chooser, ns, name string) Grant {
	g := Grant{Namespace: ns, Name: name}
	for _, from := range propNamespaces {
		if c.intn(2) == 0 {
			k := pick(c,
				GrantFrom{Group: GroupOpenFeature, Kind: "FeatureFlagSource"},
				GrantFrom{Group: GroupOpenFeature, Kind: "FeatureFlagSource"},
				GrantFrom{Group: GroupCore, Kind: KindPod},
				GrantFrom{Group: GroupApps, Kind: string(KindDeployment)},
				GrantFrom{Group: GroupApps, Kind: "ReplicaSet"},
				GrantFrom{Group: "batch", Kind: "Job"},
				GrantFrom{Group: GroupOpenFeature, Kind: "Flagd"},
				GrantFrom{Group: GroupOpenFeature, Kind: "Flagd"},
			)
			k.Namespace = from
			g.From = append(g.From, k)
		}
	}
	for range 1 + c.intn(2) {
		g.To = append(g.To, pick(c,
			GrantTo{Group: GroupOpenFeature, Kind: "FeatureFlag"},
			GrantTo{Group: GroupOpenFeature, Kind: "FeatureFlag", Name: "f1"},
			GrantTo{Group: GroupOpenFeature, Kind: "FeatureFlag", Name: "f2"},
			GrantTo{Group: GroupOpenFeature, Kind: "FeatureFlagSource"},
			GrantTo{Group: GroupOpenFeature, Kind: "FeatureFlagSource", Name: "s1"},
			GrantTo{Group: GroupOpenFeature, Kind: "InProcessConfiguration", Name: "c2"},
			GrantTo{Group: "gateway.networking.k8s.io", Kind: "FeatureFlag"},
		))
	}
	return g
}

// genEvent draws one event.
func genEvent(c chooser) event {
	ns := pick(c, propNamespaces...)
	del := c.intn(4) == 0
	switch c.intn(8) {
	case 0:
		name := pick(c, propFlagSets...)
		k := FlagSetKey(ns, name)
		if del {
			return event{desc: "delete " + k.String(),
				apply:  func(t *Topology) (Delta, error) { return t.DeleteFlagSet(ns, name), nil },
				record: func(w *world) { delete(w.flagSets, k) }}
		}
		ff := genFlagSet(c, ns, name)
		return event{desc: "upsert " + k.String() + " " + ff.Spec.FlagSpec.Flags["new-ui"].DefaultVariant,
			apply:  func(t *Topology) (Delta, error) { return t.UpsertFlagSet(ff) },
			record: func(w *world) { w.flagSets[k] = ff }}
	case 1, 2:
		name := pick(c, propSources...)
		k := SourceKey(ns, name)
		if del {
			return event{desc: "delete " + k.String(),
				apply:  func(t *Topology) (Delta, error) { return t.DeleteSource(ns, name), nil },
				record: func(w *world) { delete(w.sources, k) }}
		}
		s := genSource(c, ns, name)
		return event{desc: "upsert " + k.String() + " " + mustJSON(s.Spec),
			apply:  func(t *Topology) (Delta, error) { return t.UpsertSource(s) },
			record: func(w *world) { w.sources[k] = s }}
	case 3:
		name := pick(c, propIPCs...)
		k := InProcessConfigKey(ns, name)
		if del {
			return event{desc: "delete " + k.String(),
				apply:  func(t *Topology) (Delta, error) { return t.DeleteInProcessConfig(ns, name), nil },
				record: func(w *world) { delete(w.ipcs, k) }}
		}
		ipc := newIPC(ns, name, pick[int32](c, 0, 8015, 9000))
		// Its selector: none, one of a flag set of its own namespace or
		// another's, or one that names none.
		ipc.Spec.Selector = pick(c, "", SelectorPrefix+ns+"/"+pick(c, propFlagSets...),
			SelectorPrefix+pick(c, propNamespaces...)+"/"+pick(c, propFlagSets...), "core.openfeature.dev/x")
		return event{desc: "upsert " + k.String() + " " + mustJSON(ipc.Spec),
			apply:  func(t *Topology) (Delta, error) { return t.UpsertInProcessConfig(ipc) },
			record: func(w *world) { w.ipcs[k] = ipc }}
	case 4:
		k := WorkloadKey(pick(c, propKinds...), ns, pick(c, propWorkloads...))
		if del {
			return event{desc: "delete " + k.String(),
				apply:  func(t *Topology) (Delta, error) { return t.DeleteWorkload(k), nil },
				record: func(w *world) { delete(w.workloads, k) }}
		}
		wl := genWorkload(c, k.Kind, ns, k.Name)
		return event{desc: fmt.Sprintf("upsert %s %v %v %s", k, wl.Labels, wl.PodAnnotations, wl.ServiceAccountName),
			apply:  func(t *Topology) (Delta, error) { return t.UpsertWorkload(wl) },
			record: func(w *world) { w.workloads[k] = wl }}
	case 6:
		name := pick(c, propFlagds...)
		k := FlagdKey(ns, name)
		if del {
			return event{desc: "delete " + k.String(),
				apply:  func(t *Topology) (Delta, error) { return t.DeleteFlagd(ns, name), nil },
				record: func(w *world) { delete(w.flagds, k) }}
		}
		f := genFlagd(c, ns, name)
		return event{desc: "upsert " + k.String() + " " + mustJSON(f.Spec) + mustJSON(f.Annotations),
			apply:  func(t *Topology) (Delta, error) { return t.UpsertFlagd(f) },
			record: func(w *world) { w.flagds[k] = f }}
	case 7:
		name := pick(c, propPolicies...)
		k := SourcePolicyKey(ns, name)
		if del {
			return event{desc: "delete " + k.String(),
				apply:  func(t *Topology) (Delta, error) { return t.DeleteSourcePolicy(ns, name), nil },
				record: func(w *world) { delete(w.policies, k) }}
		}
		p := genPolicy(c, ns, name)
		return event{desc: "upsert " + k.String() + " " + mustJSON(p.Spec) + p.CreationTimestamp.String(),
			apply:  func(t *Topology) (Delta, error) { return t.UpsertSourcePolicy(p) },
			record: func(w *world) { w.policies[k] = p }}
	default:
		g := genGrant(c, ns, "g1")
		if del {
			return event{desc: "delete " + g.Key().String(),
				apply:  func(t *Topology) (Delta, error) { return t.DeleteGrant(ns, "g1"), nil },
				record: func(w *world) { delete(w.grants, g.Key()) }}
		}
		return event{desc: fmt.Sprintf("upsert %s %v %v", g.Key(), g.From, g.To),
			apply:  func(t *Topology) (Delta, error) { return t.UpsertGrant(g) },
			record: func(w *world) { w.grants[g.Key()] = g }}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// rebuild builds a topology from scratch over the world's objects, in the
// order given by shuffle (nil: workloads first, then the rest, so that every
// reference starts out pending).
func rebuild(t testing.TB, w *world, shuffle func([]func() (Delta, error))) *Topology {
	top := newPropTopology()
	var ops []func() (Delta, error)
	for _, wl := range sortedValues(w.workloads) {
		ops = append(ops, func() (Delta, error) { return top.UpsertWorkload(wl) })
	}
	for _, s := range sortedValues(w.sources) {
		ops = append(ops, func() (Delta, error) { return top.UpsertSource(s) })
	}
	for _, c := range sortedValues(w.ipcs) {
		ops = append(ops, func() (Delta, error) { return top.UpsertInProcessConfig(c) })
	}
	for _, ff := range sortedValues(w.flagSets) {
		ops = append(ops, func() (Delta, error) { return top.UpsertFlagSet(ff) })
	}
	for _, g := range sortedValues(w.grants) {
		ops = append(ops, func() (Delta, error) { return top.UpsertGrant(g) })
	}
	for _, f := range sortedValues(w.flagds) {
		ops = append(ops, func() (Delta, error) { return top.UpsertFlagd(f) })
	}
	for _, p := range sortedValues(w.policies) {
		ops = append(ops, func() (Delta, error) { return top.UpsertSourcePolicy(p) })
	}
	if shuffle != nil {
		shuffle(ops)
	}
	for _, op := range ops {
		if _, err := op(); err != nil {
			t.Fatal(err)
		}
	}
	return top
}

func sortedValues[V any](m map[Key]V) []V {
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortedKeys(keys)
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// universe lists every key the events can name, and every ConfigMap they can cause.
func universe() []Key {
	var out []Key
	for _, ns := range propNamespaces {
		for _, n := range propFlagSets {
			f := FlagSetKey(ns, n)
			out = append(out, f)
			for _, consumer := range propNamespaces {
				out = append(out, ConfigMapKey(f, consumer))
			}
		}
		for _, n := range propSources {
			out = append(out, SourceKey(ns, n))
		}
		for _, n := range propIPCs {
			out = append(out, InProcessConfigKey(ns, n))
		}
		for _, kind := range propKinds {
			for _, n := range propWorkloads {
				out = append(out, WorkloadKey(kind, ns, n))
			}
		}
		for _, n := range propFlagds {
			out = append(out, FlagdKey(ns, n))
		}
		for _, n := range propPolicies {
			out = append(out, SourcePolicyKey(ns, n))
		}
	}
	return out
}

// answers asks a view every question about every key of the universe.
func answers(v *View) map[string]any {
	out := map[string]any{
		"FlagSets": v.FlagSets(), "Sources": v.Sources(), "InProcessConfigs": v.InProcessConfigs(),
		"Workloads": v.Workloads(), "ConfigMaps": v.ConfigMaps(), "Counts": v.Counts(), "Flagds": v.Flagds(),
		"SourcePolicies": v.SourcePolicies(),
	}
	for _, ns := range propNamespaces {
		out[ns+" SourcePoliciesOfNamespace"] = policyNames(v.SourcePoliciesOfNamespace(ns))
		out[ns+" GovernedBySourcePolicies"] = v.GovernedBySourcePolicies(ns)
	}
	for _, k := range universe() {
		s := k.String()
		switch {
		case k.Kind == KindFlagSet:
			out[s+" FlagSetRendered"] = fmt.Sprint(v.FlagSetRendered(k))
			out[s+" SourcesOfFlagSet"] = v.SourcesOfFlagSet(k)
			out[s+" ConsumerNamespaces"] = v.ConsumerNamespaces(k)
			out[s+" ReaderNamespaces"] = v.ReaderNamespaces(k)
			out[s+" InProcessReaders"] = v.InProcessReaders(k)
		case k.Kind == KindSource:
			out[s+" WorkloadsOfSource"] = v.WorkloadsOfSource(k)
			out[s+" FlagSetRefs"] = v.FlagSetRefs(k)
			out[s+" UnresolvedRefs"] = v.UnresolvedRefs(k)
			out[s+" DeniedReferrers"] = v.DeniedReferrers(k)
			out[s+" FlagdsOfSource"] = v.FlagdsOfSource(k)
			out[s+" TargetNamespaces"] = v.TargetNamespaces(k)
		case k.Kind == KindInProcessConfig:
			out[s+" WorkloadsOfInProcessConfig"] = v.WorkloadsOfInProcessConfig(k)
			out[s+" DeniedReferrers"] = v.DeniedReferrers(k)
		case k.Kind == KindConfigMap:
			out[s+" ConfigMapNeeded"] = v.ConfigMapNeeded(k)
			out[s+" WorkloadsOfConfigMap"] = v.WorkloadsOfConfigMap(k)
			byName, ok := v.ConfigMapByName(k.Namespace, ConfigMapName(k.FlagSet()))
			out[s+" ConfigMapByName"] = fmt.Sprint(byName, ok)
		case k.Kind == KindFlagd:
			src, state, ok := v.FlagdSource(k)
			out[s+" FlagdSource"] = fmt.Sprint(src, state, ok)
			out[s+" ConfigMapsOfWorkload"] = v.ConfigMapsOfWorkload(k)
			for _, ns := range propNamespaces {
				for _, n := range propFlagSets {
					f := FlagSetKey(ns, n)
					out[s+" MayReadDirectly "+f.String()] = v.MayReadDirectly(k, f)
				}
			}
		case k.Kind.IsWorkload():
			out[s+" SourcesOfWorkload"] = v.SourcesOfWorkload(k)
			out[s+" InProcessConfigsOfWorkload"] = v.InProcessConfigsOfWorkload(k)
			out[s+" ConfigMapsOfWorkload"] = v.ConfigMapsOfWorkload(k)
			out[s+" AnnotationRefs"] = v.AnnotationRefs(k)
			for _, ns := range propNamespaces {
				for _, n := range propFlagSets {
					f := FlagSetKey(ns, n)
					out[s+" MayReadDirectly "+f.String()] = v.MayReadDirectly(k, f)
				}
			}
		}
	}
	for _, ns := range propNamespaces {
		for _, fns := range propNamespaces {
			for _, n := range propFlagSets {
				f := FlagSetKey(fns, n)
				out[ns+" MayRead "+f.String()] = v.MayRead(ns, f)
			}
		}
	}
	return out
}

// specs caches the JSON of the specs of the objects of one sequence:
// objects are never modified, and marshalling every spec of the universe
// after every event would dominate the test (and starve the fuzzer).
type specs map[any]string

// of returns the JSON of obj's spec; sidecar leaves out what only chooses a
// source's targets.
func (c specs) of(obj any, sidecar bool) string {
	key := obj
	if sidecar {
		key = [2]any{obj, "sidecar"}
	}
	if j, ok := c[key]; ok {
		return j
	}
	var j string
	switch obj := obj.(type) {
	case *v1beta1.FeatureFlag:
		j = mustJSON(obj.Spec)
	case *v1beta1.FeatureFlagSource:
		spec := obj.Spec
		if sidecar {
			spec.TargetRefs, spec.Selector = nil, nil
		}
		j = mustJSON(spec) + obj.Annotations[v1beta1.AnnotationSidecarSecurityContext]
	case *v1beta1.InProcessConfiguration:
		j = mustJSON(obj.Spec)
	case *v1beta1.Flagd:
		j = mustJSON(obj.Spec) + mustJSON(obj.Annotations)
	case *policyv1alpha1.FeatureFlagSourcePolicy:
		j = mustJSON(obj.Spec) + obj.CreationTimestamp.String()
	}
	c[key] = j
	return j
}

// fingerprint is the desired state of a node as the workflows see it
// through a View; a Delta must name exactly the nodes whose fingerprint an
// event changed. "" means the node has no desired state.
func (c specs) fingerprint(v *View, k Key) string {
	switch {
	case k.Kind == KindFlagSet:
		ff, ok := v.FlagSet(k)
		if !ok {
			return ""
		}
		return fmt.Sprint(c.of(ff, false), v.SourcesOfFlagSet(k), v.ConsumerNamespaces(k), v.ReaderNamespaces(k), v.InProcessReaders(k))
	case k.Kind == KindConfigMap:
		if !v.ConfigMapNeeded(k) {
			return ""
		}
		ff, _ := v.FlagSet(k.FlagSet())
		return c.of(ff, false)
	case k.Kind == KindSource:
		s, ok := v.Source(k)
		if !ok {
			return ""
		}
		// A source's status: its refs (and whether the flag sets they
		// resolve load, and fit their delivery modes), targets and denied
		// referrers, and its workloads' injections (the settings it loses
		// to other sources, whether everything it asks for is in place).
		var b strings.Builder
		fmt.Fprint(&b, c.of(s, false), v.FlagSetRefs(k), v.WorkloadsOfSource(k), v.DeniedReferrers(k))
		for _, r := range v.FlagSetRefs(k) {
			if r.State == RefResolved {
				rendered, _ := v.FlagSetRendered(r.FlagSet)
				fmt.Fprint(&b, r.FlagSet, v.FlagSetValid(r.FlagSet), rendered.fits())
			}
		}
		for _, w := range v.WorkloadsOfSource(k) {
			fmt.Fprint(&b, ";", w, "=", c.fingerprint(v, w))
		}
		return b.String()
	case k.Kind == KindInProcessConfig:
		ipc, ok := v.InProcessConfig(k)
		if !ok {
			return ""
		}
		return fmt.Sprint(c.of(ipc, false), v.WorkloadsOfInProcessConfig(k), v.DeniedReferrers(k))
	case k.Kind == KindFlagd:
		// A Flagd's generated objects and status: its spec and
		// annotations, its source reference's state and, when it resolves,
		// the source's settings and resolved flag sets (and whether its pods
		// may read them with the kubernetes provider), its ConfigMaps.
		f, ok := v.Flagd(k)
		if !ok {
			return ""
		}
		src, state, _ := v.FlagdSource(k)
		var b strings.Builder
		fmt.Fprint(&b, c.of(f, false), src, state, ";")
		if state == RefResolved {
			s, _ := v.Source(src)
			fmt.Fprint(&b, c.of(s, true), c.policies(v, k.Namespace))
			for _, r := range v.FlagSetRefs(src) {
				if r.State == RefResolved {
					fmt.Fprint(&b, r.FlagSet, r.Provider)
					if r.Provider == "kubernetes" {
						fmt.Fprint(&b, v.MayReadDirectly(k, r.FlagSet))
					}
				}
			}
		}
		fmt.Fprint(&b, ";", v.ConfigMapsOfWorkload(k))
		return b.String()
	case k.Kind == KindSourcePolicy:
		// A policy's status: its spec, the other policies of its namespace
		// (which of them wins a setting) and what it does to every
		// workload and Flagd there.
		p, ok := v.SourcePolicy(k)
		if !ok {
			return ""
		}
		var b strings.Builder
		fmt.Fprint(&b, c.of(p, false), SourcePolicyAccepted(p), c.policies(v, k.Namespace))
		for _, u := range universe() {
			if u.Namespace == k.Namespace && (u.Kind.IsWorkload() || u.Kind == KindFlagd) {
				fmt.Fprint(&b, ";", u, "=", c.fingerprint(v, u))
			}
		}
		return b.String()
	case k.Kind.IsWorkload():
		// A workload's injection: its sources in order with their sidecar
		// settings and resolved flag sets (and, for the kubernetes
		// provider, whether its pods may read them), its in-process
		// configurations, its ConfigMaps, its service account when it has a
		// sidecar; and the annotation references that do not resolve.
		sources, ipcs := v.SourcesOfWorkload(k), v.InProcessConfigsOfWorkload(k)
		var denied []AnnotationRef
		for _, r := range v.AnnotationRefs(k) {
			if r.State != RefResolved {
				denied = append(denied, r)
			}
		}
		if len(sources)+len(ipcs)+len(denied) == 0 {
			return ""
		}
		var b strings.Builder
		fmt.Fprint(&b, denied, ";")
		for _, sk := range sources {
			s, _ := v.Source(sk)
			fmt.Fprint(&b, sk, c.of(s, true))
			for _, r := range v.FlagSetRefs(sk) {
				if r.State == RefResolved {
					fmt.Fprint(&b, r.FlagSet, r.Provider)
					if r.Provider == "kubernetes" {
						fmt.Fprint(&b, v.MayReadDirectly(k, r.FlagSet))
					}
				}
			}
			b.WriteString(";")
		}
		for _, ck := range ipcs {
			ipc, _ := v.InProcessConfig(ck)
			fmt.Fprint(&b, ck, c.of(ipc, false), ";")
		}
		fmt.Fprint(&b, v.ConfigMapsOfWorkload(k))
		if len(sources) > 0 {
			b.WriteString(c.policies(v, k.Namespace))
			b.WriteString(" sa=")
			w, _ := v.Workload(k)
			b.WriteString(w.ServiceAccountName)
		}
		return b.String()
	}
	return ""
}

// policies is what the accepted policies of a namespace say, in the order
// they win.
func (c specs) policies(v *View, namespace string) string {
	var b strings.Builder
	for _, p := range v.SourcePoliciesOfNamespace(namespace) {
		fmt.Fprint(&b, "policy ", p.Name, c.of(p, false), ";")
	}
	return b.String()
}

func policyNames(ps []*policyv1alpha1.FeatureFlagSourcePolicy) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// genPolicy draws a FeatureFlagSourcePolicy: of its own namespace or (not
// accepted) another, created at one of two times, with defaults, overrides
// or both.
func genPolicy(c chooser, ns, name string) *policyv1alpha1.FeatureFlagSourcePolicy {
	p := &policyv1alpha1.FeatureFlagSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1+c.intn(2), 0, 0, 0, 0, time.UTC))},
		Spec: policyv1alpha1.FeatureFlagSourcePolicySpec{
			TargetRef: policyv1alpha1.PolicyTargetReference{Kind: "Namespace", Name: pick(c, ns, ns, "elsewhere")},
		},
	}
	block := func() *policyv1alpha1.SourceSettingsBlock {
		return &policyv1alpha1.SourceSettingsBlock{
			Strategy:       pick(c, policyv1alpha1.StrategyMerge, policyv1alpha1.StrategyAtomic),
			SourceSettings: policyv1alpha1.SourceSettings{LogFormat: pick(c, "", "json", "console")},
		}
	}
	switch c.intn(3) {
	case 0:
		p.Spec.Defaults = block()
	case 1:
		p.Spec.Overrides = block()
	default:
		p.Spec.Defaults, p.Spec.Overrides = block(), block()
	}
	return p
}

// fingerprints takes the fingerprint of every key of the universe.
func (c specs) fingerprints(v *View) map[Key]string {
	out := map[Key]string{}
	for _, k := range universe() {
		out[k] = c.fingerprint(v, k)
	}
	return out
}

// changedNodes lists, like deltaKeys, the nodes whose fingerprint differs.
func changedNodes(before, after map[Key]string) []string {
	var d Delta
	for k, fp := range after {
		if before[k] == fp {
			continue
		}
		d.Add(k)
	}
	return deltaKeys(d)
}

// runSequence applies events until c is done or n events have run, checking
// each Delta, and returns the incremental topology and the final world.
func runSequence(t *testing.T, c chooser, n int) (*Topology, *world, []string) {
	g := NewWithT(t)
	top, w := newPropTopology(), newWorld()
	var log []string
	fp := specs{}
	before := fp.fingerprints(top.Snapshot())
	for i := 0; i < n && !c.done(); i++ {
		ev := genEvent(c)
		log = append(log, ev.desc)
		d, err := ev.apply(top)
		g.Expect(err).NotTo(HaveOccurred(), "event %d: %s", i, ev.desc)
		ev.record(w)
		after := fp.fingerprints(top.Snapshot())
		if want := changedNodes(before, after); !slices.Equal(deltaKeys(d), want) {
			t.Logf("events:\n  %s", strings.Join(log, "\n  "))
			g.Expect(deltaKeys(d)).To(Equal(want), "Delta of event %d (%s) is not exact", i, ev.desc)
		}
		before = after
	}
	return top, w, log
}

// checkEqualsRebuild compares an incremental topology with rebuilds over the same world.
func checkEqualsRebuild(t *testing.T, top *Topology, w *world, log []string, shuffles ...func([]func() (Delta, error))) {
	g := NewWithT(t)
	inc := top.Snapshot()
	_, err := topo.Sort(inc.Graph())
	g.Expect(err).NotTo(HaveOccurred(), "the graph must stay acyclic")
	// TargetNamespaces is an index-backed shortcut of the namespaces of
	// WorkloadsOfSource and FlagdsOfSource.
	for _, s := range inc.Sources() {
		var want []string
		for _, w := range append(inc.WorkloadsOfSource(s), inc.FlagdsOfSource(s)...) {
			if !slices.Contains(want, w.Namespace) {
				want = append(want, w.Namespace)
			}
		}
		slices.Sort(want)
		g.Expect(inc.TargetNamespaces(s)).To(Equal(want), "TargetNamespaces of %s\nevents:\n  %s", s, strings.Join(log, "\n  "))
		// FirstWorkloadsOfSource and ContestedWorkloadsOfSource are
		// shortcuts of WorkloadsOfSource too.
		all := inc.WorkloadsOfSource(s)
		for _, limit := range []int{1, 2, 3, 256} {
			n, first := inc.FirstWorkloadsOfSource(s, limit)
			g.Expect(n).To(Equal(len(all)), "FirstWorkloadsOfSource(%s, %d): count", s, limit)
			g.Expect(first).To(Equal(all[:min(limit, len(all))]), "FirstWorkloadsOfSource(%s, %d)", s, limit)
		}
		var contested []Key
		for _, w := range all {
			if len(inc.SourcesOfWorkload(w))+len(inc.InProcessConfigsOfWorkload(w)) >= 2 {
				contested = append(contested, w)
			}
		}
		g.Expect(inc.ContestedWorkloadsOfSource(s)).To(Equal(contested), "ContestedWorkloadsOfSource of %s", s)
	}
	// FlagdsOfConfigMap is a shortcut of the Flagds of WorkloadsOfConfigMap.
	for _, cm := range inc.ConfigMaps() {
		var flagds []Key
		for _, w := range inc.WorkloadsOfConfigMap(cm) {
			if w.Kind == KindFlagd {
				flagds = append(flagds, w)
			}
		}
		g.Expect(inc.FlagdsOfConfigMap(cm)).To(Equal(flagds), "FlagdsOfConfigMap of %s\nevents:\n  %s", cm, strings.Join(log, "\n  "))
	}
	for _, shuffle := range append([]func([]func() (Delta, error)){nil}, shuffles...) {
		reb := rebuild(t, w, shuffle).Snapshot()
		g.Expect(string(inc.DOT())).To(Equal(string(reb.DOT())), "DOT differs from a rebuild\nevents:\n  %s", strings.Join(log, "\n  "))
		g.Expect(answers(inc)).To(Equal(answers(reb)), "queries differ from a rebuild\nevents:\n  %s", strings.Join(log, "\n  "))
	}
}

var propertySeeds = flag.Uint64("property-seeds", 60, "how many seeded event sequences TestIncrementalEqualsRebuild runs")

func TestIncrementalEqualsRebuild(t *testing.T) {
	for seed := range *propertySeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			top, w, log := runSequence(t, randChooser{r}, 150)
			checkEqualsRebuild(t, top, w, log, func(ops []func() (Delta, error)) {
				r.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
			})
			// Deleting everything leaves nothing behind: no node, no pending
			// edge that could resurrect one, no index entry.
			for _, k := range sortedKeys(slices.Collect(keysOf(w.workloads))) {
				top.DeleteWorkload(k)
			}
			for k := range w.sources {
				top.DeleteSource(k.Namespace, k.Name)
			}
			for k := range w.ipcs {
				top.DeleteInProcessConfig(k.Namespace, k.Name)
			}
			for k := range w.flagSets {
				top.DeleteFlagSet(k.Namespace, k.Name)
			}
			for k := range w.grants {
				top.DeleteGrant(k.Namespace, k.Name)
			}
			for k := range w.flagds {
				top.DeleteFlagd(k.Namespace, k.Name)
			}
			for k := range w.policies {
				top.DeleteSourcePolicy(k.Namespace, k.Name)
			}
			left := *top.Snapshot().state
			left.renderFlagSet = nil // an option, not an object
			NewWithT(t).Expect(left).To(Equal(state{}))
		})
	}
}

func keysOf[V any](m map[Key]V) func(func(Key) bool) {
	return func(yield func(Key) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// FuzzIncrementalEqualsRebuild runs the property on event sequences drawn
// from the fuzzer's bytes (make fuzz).
func FuzzIncrementalEqualsRebuild(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("a source, a flag set and a workload walk into a cluster"))
	for seed := range uint64(8) {
		b := make([]byte, 256)
		r := rand.New(rand.NewPCG(seed, 1))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Long inputs add little but time (every event checks its Delta
		// against the whole universe); the seeded test runs longer ones.
		top, w, log := runSequence(t, &byteChooser{data: data}, 60)
		checkEqualsRebuild(t, top, w, log)
	})
}

// TestWhatIfEqualsEdit: the views the webhooks compute an edit's reach
// from (WithSource, WithFlagSet, WithWorkload), which skip the Delta, are
// the graph the edit itself makes, and leave the graph they start from as
// it was.
func TestWhatIfEqualsEdit(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := NewWithT(t)
			r := rand.New(rand.NewPCG(seed, 0x3a7))
			c := randChooser{r}
			top, _, _ := runSequence(t, c, 80)
			for range 30 {
				ns := pick(c, propNamespaces...)
				var whatIf func(*View) (*View, error)
				var edit func(*Topology) (Delta, error)
				var desc string
				switch c.intn(3) {
				case 0:
					s := genSource(c, ns, pick(c, propSources...))
					whatIf = func(v *View) (*View, error) { return v.WithSource(s) }
					edit = func(t *Topology) (Delta, error) { return t.UpsertSource(s) }
					desc = "source " + mustJSON(s)
				case 1:
					ff := genFlagSet(c, ns, pick(c, propFlagSets...))
					whatIf = func(v *View) (*View, error) { return v.WithFlagSet(ff) }
					edit = func(t *Topology) (Delta, error) { return t.UpsertFlagSet(ff) }
					desc = "flag set " + mustJSON(ff)
				default:
					wl := genWorkload(c, pick(c, propKinds...), ns, pick(c, propWorkloads...))
					whatIf = func(v *View) (*View, error) { return v.WithWorkload(wl) }
					edit = func(t *Topology) (Delta, error) { return t.UpsertWorkload(wl) }
					desc = "workload " + mustJSON(wl)
				}
				before := top.Snapshot()
				wantBefore := answers(before)
				seen, err := whatIf(before)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(answers(before)).To(Equal(wantBefore), "a what-if of %s changed the view it started from", desc)
				_, err = edit(top)
				g.Expect(err).NotTo(HaveOccurred())
				done := top.Snapshot()
				g.Expect(string(seen.DOT())).To(Equal(string(done.DOT())), "what-if of %s: DOT", desc)
				g.Expect(answers(seen)).To(Equal(answers(done)), "what-if of %s: queries", desc)
			}
		})
	}
}
