package topology

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	gonum "gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/topo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// shopWorld is a small world that exercises every relation:
//
//   - shop/sidecar reads shop/flags (file), team/shared (kubernetes, granted),
//     team/secret (not granted), shop/missing, and an http URI; it selects
//     app=web in shop;
//   - shop/extra reads shop/flags with flagd-proxy and targets web by name;
//   - team/billing reads team/shared (file) and is named by the annotation
//     of shop/api (a grant lets shop's pods name it), which also names
//     shop/sidecar and a source that does not exist;
//   - shop/inproc is named by the annotation of shop/api.
func shopWorld(t *testing.T) *Topology {
	top := New()
	for _, s := range []step{
		upsert(newFlagSet("shop", "flags", "on")),
		upsert(newFlagSet("team", "shared", "on")),
		upsert(newFlagSet("team", "secret", "on")),
		upsert(flagSetGrant("team", "shop", []string{"shop"}, "shared")),
		upsert(podGrant("team", "shop-pods", []string{"shop"}, KindSource, "billing")),
		upsert(newSource("shop", "sidecar",
			ref("flags", ""), ref("team/shared", v1beta1.SyncProviderKubernetes), ref("team/secret", ""),
			ref("missing", ""), ref("https://flags.example/x", v1beta1.SyncProviderHTTP),
			selector(matchLabels("app", "web")))),
		upsert(newSource("shop", "extra", ref("flags", v1beta1.SyncProviderFlagdProxy), targetRef(KindDeployment, "web"))),
		upsert(newSource("team", "billing", ref("shared", ""))),
		upsert(newIPC("shop", "inproc", 8015)),
		upsert(deployment("shop", "web", map[string]string{"app": "web"}, nil)),
		upsert(deployment("shop", "api", map[string]string{"app": "api"}, map[string]string{
			v1beta1.AnnotationEnabled:                "true",
			v1beta1.AnnotationFeatureFlagSource:      "team/billing, nope, sidecar",
			v1beta1.AnnotationInProcessConfiguration: "inproc",
		})),
	} {
		must(t)(s(top))
	}
	return top
}

func TestQueries(t *testing.T) {
	g := NewWithT(t)
	v := shopWorld(t).Snapshot()
	web, api := depK("shop", "web"), depK("shop", "api")
	sidecar, extra, billing := srcK("shop", "sidecar"), srcK("shop", "extra"), srcK("team", "billing")
	flags, shared := fsK("shop", "flags"), fsK("team", "shared")

	g.Expect(v.FlagSetRefs(sidecar)).To(Equal([]FlagSetRef{
		{FlagSet: flags, Provider: "file", Index: 0, State: RefResolved},
		{FlagSet: shared, Provider: "kubernetes", Index: 1, State: RefResolved},
		{FlagSet: fsK("team", "secret"), Provider: "file", Index: 2, State: RefNotPermitted},
		{FlagSet: fsK("shop", "missing"), Provider: "file", Index: 3, State: RefNotFound},
	}), "the http entry names no flag set")
	g.Expect(v.UnresolvedRefs(sidecar)).To(Equal([]FlagSetRef{
		{FlagSet: fsK("team", "secret"), Provider: "file", Index: 2, State: RefNotPermitted},
		{FlagSet: fsK("shop", "missing"), Provider: "file", Index: 3, State: RefNotFound},
	}))
	g.Expect(v.UnresolvedRefs(extra)).To(BeEmpty())

	g.Expect(v.SourcesOfWorkload(api)).To(Equal([]Key{billing, sidecar}), "annotation order; the missing one left out")
	g.Expect(v.SourcesOfWorkload(web)).To(Equal([]Key{extra, sidecar}), "by key when no annotation orders them")
	g.Expect(v.InProcessConfigsOfWorkload(api)).To(Equal([]Key{ipcK("shop", "inproc")}))
	g.Expect(v.WorkloadsOfSource(sidecar)).To(Equal([]Key{api, web}))
	g.Expect(v.WorkloadsOfSource(billing)).To(Equal([]Key{api}), "a workload may use a source of another namespace")
	g.Expect(v.WorkloadsOfInProcessConfig(ipcK("shop", "inproc"))).To(Equal([]Key{api}))

	g.Expect(v.SourcesOfFlagSet(flags)).To(Equal([]Key{extra, sidecar}))
	g.Expect(v.SourcesOfFlagSet(shared)).To(Equal([]Key{sidecar, billing}))
	g.Expect(v.SourcesOfFlagSet(fsK("team", "secret"))).To(BeEmpty(), "a reference not permitted is no edge")
	g.Expect(v.ConsumerNamespaces(flags)).To(Equal([]string{"shop"}))
	g.Expect(v.ConsumerNamespaces(shared)).To(Equal([]string{"shop"}), "billing's file ref renders into its workload's namespace")

	cmFlags, cmShared := cmK(flags, "shop"), cmK(shared, "shop")
	g.Expect(v.ConfigMaps()).To(Equal([]Key{cmFlags, cmShared}))
	g.Expect(v.ConfigMapsOfWorkload(api)).To(Equal([]Key{cmFlags, cmShared}))
	g.Expect(v.ConfigMapsOfWorkload(web)).To(Equal([]Key{cmFlags}), "flagd-proxy and kubernetes refs mount nothing")
	g.Expect(v.WorkloadsOfConfigMap(cmFlags)).To(Equal([]Key{api, web}))
	g.Expect(v.WorkloadsOfConfigMap(cmShared)).To(Equal([]Key{api}))
	g.Expect(v.ConfigMapNeeded(cmFlags)).To(BeTrue())
	g.Expect(v.ConfigMapNeeded(cmK(fsK("team", "secret"), "shop"))).To(BeFalse())
	g.Expect(v.ConfigMapNeeded(flags)).To(BeFalse(), "not a ConfigMap key")
	byName, ok := v.ConfigMapByName("shop", ConfigMapName(shared))
	g.Expect(ok).To(BeTrue())
	g.Expect(byName).To(Equal(cmShared))
	_, ok = v.ConfigMapByName("team", ConfigMapName(shared))
	g.Expect(ok).To(BeFalse(), "nothing in team consumes it")

	g.Expect(v.FlagSets()).To(Equal([]Key{flags, fsK("team", "secret"), shared}))
	g.Expect(v.Sources()).To(Equal([]Key{extra, sidecar, billing}))
	g.Expect(v.InProcessConfigs()).To(Equal([]Key{ipcK("shop", "inproc")}))
	g.Expect(v.Workloads()).To(Equal([]Key{api, web}))
	g.Expect(v.Counts()).To(Equal(countsOf(map[Kind]int{
		KindFlagSet: 3, KindSource: 3, KindInProcessConfig: 1, KindDeployment: 2, KindConfigMap: 2, KindGrant: 2,
	})))

	// The tenancy rule: what each namespace's workloads may reach.
	g.Expect(v.AnnotationRefs(api)).To(Equal([]AnnotationRef{
		{Target: billing, State: RefResolved},
		{Target: srcK("shop", "nope"), State: RefNotFound},
		{Target: sidecar, State: RefResolved},
		{Target: ipcK("shop", "inproc"), State: RefResolved},
	}))
	g.Expect(v.DeniedReferrers(billing)).To(BeEmpty(), "shop's pods are granted")
	g.Expect(v.MayReadDirectly(web, shared)).To(BeFalse(), "a grant of one FeatureFlag to shop's sources lets no pod of shop list team's FeatureFlags")
	g.Expect(v.MayReadDirectly(web, flags)).To(BeTrue(), "its own namespace")
	g.Expect(v.MayRead("shop", shared)).To(BeTrue(), "shop's sources resolve it")
	g.Expect(v.MayRead("shop", fsK("team", "secret"))).To(BeFalse())
	g.Expect(v.MayRead("team", flags)).To(BeFalse())
	g.Expect(v.ReaderNamespaces(shared)).To(Equal([]string{"shop"}))

	w, ok := v.Workload(api)
	g.Expect(ok).To(BeTrue())
	g.Expect(w.ServiceAccountName).To(Equal("default"))
	_, ok = v.FlagSet(fsK("shop", "missing"))
	g.Expect(ok).To(BeFalse())
	_, ok = v.Source(flags)
	g.Expect(ok).To(BeFalse(), "a flag set key is no source")
	_, ok = v.InProcessConfig(ipcK("shop", "nope"))
	g.Expect(ok).To(BeFalse())
}

func TestGraph(t *testing.T) {
	g := NewWithT(t)
	v := shopWorld(t).Snapshot()
	gr := v.Graph()
	total := 0
	for _, c := range v.Counts() {
		total += c
	}
	g.Expect(gr.Nodes().Len()).To(Equal(total))
	sorted, err := topo.Sort(gr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sorted).To(HaveLen(total))

	// Find the path from a source to a workload through its ConfigMap.
	var src, web gonum.Node
	nodes := gr.Nodes()
	for nodes.Next() {
		switch n := nodes.Node().(GraphNode); n.Key() {
		case srcK("shop", "sidecar"):
			src = n
		case depK("shop", "web"):
			web = n
		}
	}
	g.Expect(topo.PathExistsIn(gr, src, web)).To(BeTrue())
	g.Expect(topo.PathExistsIn(gr, web, src)).To(BeFalse())
	e := gr.Edge(src.ID(), web.ID()).(GraphEdge)
	g.Expect(e.Relation()).To(Equal("targets"))
	g.Expect(e.ReversedEdge().From().(GraphNode).Key()).To(Equal(depK("shop", "web")))
	g.Expect(gr.Node(int64(total))).To(BeNil())
	g.Expect(newGonumGraph(&v.state.g).Nodes().Len()).To(Equal(total), "numbering is per Graph value")
}

func TestConfigMapName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ConfigMapName(fsK("shop", "flags"))).To(Equal("flagd.shop.flags"))
	g.Expect(ConfigMapName(fsK("shop", "flags.v2"))).To(Equal("flagd.shop.flags.v2"))

	long := strings.Repeat("a", 240) + ".b-" + strings.Repeat("b", 10)
	g.Expect(validation.IsDNS1123Subdomain(long)).To(BeEmpty(), "a valid FeatureFlag name")
	name := ConfigMapName(fsK("shop", long))
	g.Expect(len(name)).To(Equal(validation.DNS1123SubdomainMaxLength))
	g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty())
	g.Expect(name).To(HavePrefix("flagd.shop-aaaa"), "shortened: no dot after the prefix")
	g.Expect(ConfigMapName(fsK("shop", long))).To(Equal(name), "deterministic")
	g.Expect(ConfigMapName(fsK("shop", long+"c"))).NotTo(Equal(name), "same prefix, other flag set")
	g.Expect(ConfigMapName(fsK("other", long))).NotTo(Equal(name))

	// A name cut at a dot or a dash still ends alphanumeric.
	for k := 220; k < 230; k++ { // the cut falls on the "-" or the "."
		ff := strings.Repeat("x", k) + "-z." + strings.Repeat("y", 20)
		g.Expect(validation.IsDNS1123Subdomain(ff)).To(BeEmpty())
		n := ConfigMapName(fsK("ns", ff))
		g.Expect(validation.IsDNS1123Subdomain(n)).To(BeEmpty(), n)
	}

	// The reverse lookup goes through the desired ConfigMaps, so it works
	// for cut names too.
	top := New()
	must(t)(top.UpsertFlagSet(newFlagSet("shop", long, "on")))
	must(t)(top.UpsertSource(newSource("shop", "src", ref(long, ""), targetRef(KindDeployment, "web"))))
	must(t)(top.UpsertWorkload(deployment("shop", "web", nil, nil)))
	k, ok := top.Snapshot().ConfigMapByName("shop", name)
	g.Expect(ok).To(BeTrue())
	g.Expect(k.FlagSet()).To(Equal(fsK("shop", long)))
}

func TestUpsertRefusesInvalidInput(t *testing.T) {
	g := NewWithT(t)
	top := New()
	before := string(top.DOT())
	for name, s := range map[string]step{
		"nil flag set":               func(t *Topology) (Delta, error) { return t.UpsertFlagSet(nil) },
		"nil source":                 func(t *Topology) (Delta, error) { return t.UpsertSource(nil) },
		"nil configuration":          func(t *Topology) (Delta, error) { return t.UpsertInProcessConfig(nil) },
		"flag set without namespace": upsert(newFlagSet("", "flags", "on")),
		"source without name":        upsert(newSource("shop", "")),
		"configuration without name": upsert(newIPC("shop", "", 1)),
		"workload of another kind":   upsert(Workload{Kind: KindConfigMap, Namespace: "shop", Name: "web"}),
		"workload without namespace": upsert(Workload{Kind: KindDeployment, Name: "web"}),
		"grant without name":         upsert(Grant{Namespace: "team"}),
	} {
		d, err := s(top)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(d.Empty()).To(BeTrue(), name)
	}
	g.Expect(string(top.DOT())).To(Equal(before))
}

func TestWorkloadFrom(t *testing.T) {
	g := NewWithT(t)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: optIn("sidecar")},
		}},
	}
	w := WorkloadFrom(KindDeployment, d, &d.Spec.Template)
	g.Expect(w).To(Equal(Workload{Kind: KindDeployment, Namespace: "shop", Name: "web",
		Labels: map[string]string{"app": "web"}, PodAnnotations: optIn("sidecar"), ServiceAccountName: "default"}))
	d.Spec.Template.Spec.ServiceAccountName = "web"
	g.Expect(WorkloadFrom(KindDeployment, d, &d.Spec.Template).ServiceAccountName).To(Equal("web"))
	g.Expect(WorkloadFrom(KindDeployment, d, nil).PodAnnotations).To(BeNil())
}

func TestKeys(t *testing.T) {
	g := NewWithT(t)
	g.Expect(depK("shop", "web").String()).To(Equal("deployment:shop/web"))
	g.Expect(depK("shop", "web").GetLocator()).To(Equal("deployment.apps:shop/web"))
	g.Expect(fsK("shop", "flags").GetLocator()).To(Equal("featureflag.core.openfeature.dev:shop/flags"))
	g.Expect(cmK(fsK("team", "flags"), "shop").GetLocator()).To(Equal("configmap:shop/team/flags"))
	g.Expect(Grant{Namespace: "team", Name: "g"}.Key().GetLocator()).To(Equal("referencegrant.gateway.networking.k8s.io:team/g"))
	g.Expect(cmK(fsK("team", "flags"), "shop").FlagSet()).To(Equal(fsK("team", "flags")))
}

// TestFlagSpecEqualKnowsEveryField fails when FlagSpec or Flag gains a
// field, so that flagSpecEqual learns to compare it: a field it ignored
// would be a flag edit that renders no ConfigMap.
func TestFlagSpecEqualKnowsEveryField(t *testing.T) {
	g := NewWithT(t)
	fields := func(v any) []string {
		var out []string
		for f := range reflect.TypeOf(v).Fields() {
			out = append(out, f.Name)
		}
		return out
	}
	g.Expect(fields(v1beta1.FlagSpec{})).To(Equal([]string{"Flags", "Evaluators", "Metadata"}))
	g.Expect(fields(v1beta1.Flag{})).To(Equal([]string{"State", "Variants", "DefaultVariant", "Targeting", "Metadata"}))

	base := newFlagSet("shop", "flags", "on").Spec.FlagSpec
	for name, change := range map[string]func(*v1beta1.FlagSpec){
		"evaluators":      func(s *v1beta1.FlagSpec) { s.Evaluators = []byte(`{}`) },
		"metadata":        func(s *v1beta1.FlagSpec) { s.Metadata = []byte(`{"a":1}`) },
		"a flag more":     func(s *v1beta1.FlagSpec) { s.Flags["x"] = v1beta1.Flag{} },
		"another flag":    func(s *v1beta1.FlagSpec) { f := s.Flags["new-ui"]; delete(s.Flags, "new-ui"); s.Flags["old-ui"] = f },
		"state":           func(s *v1beta1.FlagSpec) { f := s.Flags["new-ui"]; f.State = "DISABLED"; s.Flags["new-ui"] = f },
		"variants":        func(s *v1beta1.FlagSpec) { f := s.Flags["new-ui"]; f.Variants = []byte(`{}`); s.Flags["new-ui"] = f },
		"default variant": func(s *v1beta1.FlagSpec) { f := s.Flags["new-ui"]; f.DefaultVariant = "off"; s.Flags["new-ui"] = f },
		"targeting":       func(s *v1beta1.FlagSpec) { f := s.Flags["new-ui"]; f.Targeting = []byte(`{}`); s.Flags["new-ui"] = f },
		"flag metadata":   func(s *v1beta1.FlagSpec) { f := s.Flags["new-ui"]; f.Metadata = []byte(`{}`); s.Flags["new-ui"] = f },
	} {
		changed := *base.DeepCopy()
		change(&changed)
		g.Expect(flagSpecEqual(base, changed)).To(BeFalse(), name)
		g.Expect(flagSpecEqual(base, *base.DeepCopy())).To(BeTrue())
	}
}

func TestWithWorkload(t *testing.T) {
	g := NewWithT(t)
	top := shopWorld(t)
	v := top.Snapshot()
	job := Workload{Kind: OwnerKind("batch", "Job"), Namespace: "shop", Name: "backfill",
		PodAnnotations: map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "sidecar"}}
	forked, err := v.WithWorkload(job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(forked.SourcesOfWorkload(job.Key())).To(Equal([]Key{srcK("shop", "sidecar")}))
	g.Expect(forked.ConfigMapsOfWorkload(job.Key())).NotTo(BeEmpty())
	_, known := v.Workload(job.Key())
	g.Expect(known).To(BeFalse(), "the view it came from is unchanged")
	_, known = top.Snapshot().Workload(job.Key())
	g.Expect(known).To(BeFalse(), "and so is the topology")
	g.Expect(string(top.Snapshot().DOT())).To(Equal(string(v.DOT())))
}

func TestTargetNamespaces(t *testing.T) {
	g := NewWithT(t)
	v := shopWorld(t).Snapshot()
	g.Expect(v.TargetNamespaces(srcK("shop", "sidecar"))).To(Equal([]string{"shop"}))
	g.Expect(v.TargetNamespaces(srcK("team", "billing"))).To(Equal([]string{"shop"}), "only a workload of shop names it")
	g.Expect(v.TargetNamespaces(srcK("shop", "nope"))).To(BeNil())
	// The answer agrees with the workloads, which it does not iterate.
	for _, s := range v.Sources() {
		var want []string
		for _, w := range v.WorkloadsOfSource(s) {
			if !slices.Contains(want, w.Namespace) {
				want = append(want, w.Namespace)
			}
		}
		slices.Sort(want)
		g.Expect(v.TargetNamespaces(s)).To(Equal(want), s.String())
	}
}

// TestWithServedFlagSet: a what-if with the rendering given renders
// nothing, and its view serves what it was given; WithFlagSet renders.
func TestWithServedFlagSet(t *testing.T) {
	g := NewWithT(t)
	renders := 0
	top := New(WithFlagSetRendering(func(ff *v1beta1.FeatureFlag) Rendered {
		renders++
		return Rendered{Content: "rendered", Revision: "r1"}
	}))
	must(t)(top.UpsertFlagSet(newFlagSet("shop", "flags", "on")))
	g.Expect(renders).To(Equal(1))
	v := top.Snapshot()

	edited := newFlagSet("shop", "flags", "off")
	given := Rendered{Content: "given", Revision: "r2", Warnings: []string{"a warning"}}
	after, err := v.WithServedFlagSet(edited, given)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renders).To(Equal(1), "the given rendering is used, not made again")
	served, ok := after.FlagSetRendered(FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	g.Expect(served).To(Equal(given))
	before, _ := v.FlagSetRendered(FlagSetKey("shop", "flags"))
	g.Expect(before).To(Equal(Rendered{Content: "rendered", Revision: "r1"}), "the view it came from is as it was")

	_, err = v.WithFlagSet(edited)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renders).To(Equal(2), "WithFlagSet renders the edit")
}

// countsOf is what Counts says of a graph with these nodes: every kind of
// nodeKinds, those not given at 0.
func countsOf(nonZero map[Kind]int) map[Kind]int {
	counts := map[Kind]int{}
	for _, k := range nodeKinds {
		counts[k.kind] = nonZero[k.kind]
	}
	return counts
}
