package topology

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// One table per kind: each case builds a small world, applies one event and
// names exactly the Delta it must give.

// step is one event.
type step func(*Topology) (Delta, error)

// upsert makes the upsert event of any object.
func upsert(obj any) step {
	return func(t *Topology) (Delta, error) {
		switch obj := obj.(type) {
		case *v1beta1.FeatureFlag:
			return t.UpsertFlagSet(obj)
		case *v1beta1.FeatureFlagSource:
			return t.UpsertSource(obj)
		case *v1beta1.InProcessConfiguration:
			return t.UpsertInProcessConfig(obj)
		case Workload:
			return t.UpsertWorkload(obj)
		case Grant:
			return t.UpsertGrant(obj)
		case *v1beta1.Flagd:
			return t.UpsertFlagd(obj)
		}
		panic(fmt.Sprintf("upsert of %T", obj))
	}
}

// remove makes the delete event of a key.
func remove(k Key) step {
	return func(t *Topology) (Delta, error) {
		switch k.Kind {
		case KindFlagSet:
			return t.DeleteFlagSet(k.Namespace, k.Name), nil
		case KindSource:
			return t.DeleteSource(k.Namespace, k.Name), nil
		case KindInProcessConfig:
			return t.DeleteInProcessConfig(k.Namespace, k.Name), nil
		case KindGrant:
			return t.DeleteGrant(k.Namespace, k.Name), nil
		case KindFlagd:
			return t.DeleteFlagd(k.Namespace, k.Name), nil
		}
		return t.DeleteWorkload(k), nil
	}
}

type deltaCase struct {
	name  string
	setup []step
	event step
	want  []string
}

func runDeltaCases(t *testing.T, cases []deltaCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			top := newPropTopology() // a default variant "broken" does not load
			for _, s := range tc.setup {
				must(t)(s(top))
			}
			d, err := tc.event(top)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(deltaKeys(d)).To(Equal(tc.want))
		})
	}
}

// with returns a copy of obj changed by f, as an informer would deliver it.
func with[T interface{ DeepCopy() T }](obj T, f func(T)) T {
	c := obj.DeepCopy()
	f(c)
	return c
}

func TestFlagSetDeltas(t *testing.T) {
	flags := newFlagSet("shop", "flags", "on")
	flags.UID = "uid-1"
	src := newSource("shop", "src", ref("flags", ""), targetRef(KindDeployment, "web"))
	web := deployment("shop", "web", nil, nil)
	world := []step{upsert(src), upsert(web), upsert(flags)}
	f, s, w, cm := fsK("shop", "flags"), srcK("shop", "src"), depK("shop", "web"), cmK(fsK("shop", "flags"), "shop")

	runDeltaCases(t, []deltaCase{
		{
			name:  "create resolves the pending reference: source status, workload volumes, new ConfigMap",
			setup: []step{upsert(src), upsert(web)},
			event: upsert(flags),
			want:  expect(f, s, w, cm),
		},
		{
			name:  "create with nobody referring to it",
			event: upsert(flags),
			want:  expect(f),
		},
		{
			name:  "spec change renders its ConfigMaps again",
			setup: world,
			event: upsert(with(flags, func(ff *v1beta1.FeatureFlag) {
				ff.Spec.FlagSpec.Flags["new-ui"] = v1beta1.Flag{State: v1beta1.FlagStateDisabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "on"}
			})),
			want: expect(f, cm),
		},
		{
			name:  "evaluators change",
			setup: world,
			event: upsert(with(flags, func(ff *v1beta1.FeatureFlag) { ff.Spec.FlagSpec.Evaluators = []byte(`{"beta":{"in":["x",["a"]]}}`) })),
			want:  expect(f, cm),
		},
		{
			name:  "new UID: recreated between two observations",
			setup: world,
			event: upsert(with(flags, func(ff *v1beta1.FeatureFlag) { ff.UID = "uid-2" })),
			want:  expect(f, cm),
		},
		{
			name:  "status only",
			setup: world,
			event: upsert(with(flags, func(ff *v1beta1.FeatureFlag) { ff.Status.Flags = 1 })),
			want:  expect(),
		},
		{
			name:  "resourceVersion only",
			setup: world,
			event: upsert(with(flags, func(ff *v1beta1.FeatureFlag) { ff.ResourceVersion = "42" })),
			want:  expect(),
		},
		{
			name:  "unrelated label",
			setup: world,
			event: upsert(with(flags, func(ff *v1beta1.FeatureFlag) { ff.Labels = map[string]string{"team": "shop"} })),
			want:  expect(),
		},
		{
			name:  "delete leaves the reference pending and removes the ConfigMap",
			setup: world,
			event: remove(f),
			want:  expect(f, s, w, cm),
		},
		{
			name:  "delete of a flag set that is not there",
			setup: world,
			event: remove(fsK("shop", "nope")),
			want:  expect(),
		},
		{
			name:  "create of a flag set referenced across namespaces without a grant",
			setup: []step{upsert(newSource("shop", "src", ref("team/flags", ""), targetRef(KindDeployment, "web"))), upsert(web)},
			event: upsert(newFlagSet("team", "flags", "on")),
			want:  expect(fsK("team", "flags")),
		},
		{
			name:  "create of a flag set read with the kubernetes provider: no ConfigMap",
			setup: []step{upsert(newSource("shop", "src", ref("flags", v1beta1.SyncProviderKubernetes), targetRef(KindDeployment, "web"))), upsert(web)},
			event: upsert(flags),
			want:  expect(f, s, w),
		},
	})
}

func TestSourceDeltas(t *testing.T) {
	flags := newFlagSet("shop", "flags", "on")
	web := deployment("shop", "web", map[string]string{"app": "web"}, nil)
	api := deployment("shop", "api", map[string]string{"app": "api"}, nil)
	worker := deployment("shop", "worker", nil, optIn("src"))
	src := newSource("shop", "src", ref("flags", ""), selector(matchLabels("app", "web")))
	src.UID = "uid-1"
	world := []step{upsert(flags), upsert(web), upsert(api), upsert(src)}
	f, s := fsK("shop", "flags"), srcK("shop", "src")
	w, a, wk, cm := depK("shop", "web"), depK("shop", "api"), depK("shop", "worker"), cmK(fsK("shop", "flags"), "shop")

	runDeltaCases(t, []deltaCase{
		{
			name:  "create targets by selector, renders its flag set",
			setup: []step{upsert(flags), upsert(web), upsert(api)},
			event: upsert(src),
			want:  expect(s, f, w, cm),
		},
		{
			name:  "create materialises the workloads' pending annotations",
			setup: []step{upsert(flags), upsert(worker)},
			event: upsert(newSource("shop", "src", ref("flags", ""))),
			want:  expect(s, f, wk, cm),
		},
		{
			name:  "create with a missing flag set: only the source (NotFound)",
			setup: []step{upsert(web)},
			event: upsert(src),
			want:  expect(s, w),
		},
		{
			name:  "sidecar setting: debugLogging",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { debugLogging(true)(x) })),
			want:  expect(s, w),
		},
		{
			name:  "sidecar setting: port",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { port(9090)(x) })),
			want:  expect(s, w),
		},
		{
			name:  "sidecar setting: env vars",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) {
				x.Spec.EnvVars = append(x.Spec.EnvVars, corev1EnvVar("LOG_LEVEL", "debug"))
			})),
			want: expect(s, w),
		},
		{
			name:  "sidecar setting: an http source entry",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { ref("https://flags.example/x", v1beta1.SyncProviderHTTP)(x) })),
			want:  expect(s, w),
		},
		{
			name:  "selector moves to another workload; the ConfigMap stays",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.Spec.Selector = matchLabels("app", "api") })),
			want:  expect(s, w, a),
		},
		{
			name:  "targetRefs adds a workload",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { targetRef(KindDeployment, "api")(x) })),
			want:  expect(s, a),
		},
		{
			name:  "targetRefs names a workload that does not exist",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { targetRef(KindStatefulSet, "web")(x) })),
			want:  expect(s),
		},
		{
			name:  "selector that matches nothing: the last consumer goes, so does the ConfigMap",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.Spec.Selector = matchLabels("app", "none") })),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "selector that does not parse selects nothing",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) {
				x.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
			})),
			want: expect(s, w, cm, f),
		},
		{
			name:  "ref to a missing flag set",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.Spec.Sources[0].Source = "nope" })),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "provider file → kubernetes: the ConfigMap goes, the reference stays",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.Spec.Sources[0].Provider = v1beta1.SyncProviderKubernetes })),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "defaultSyncProvider applies to entries without one",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { defaultProvider(v1beta1.SyncProviderFlagdProxy)(x) })),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "new UID only",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.UID = "uid-2" })),
			want:  expect(s),
		},
		{
			name:  "unrelated label",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.Labels = map[string]string{"team": "shop"} })),
			want:  expect(),
		},
		{
			name:  "status only",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.Status.TargetCount = 1 })),
			want:  expect(),
		},
		{
			name:  "generation bump with the same spec",
			setup: world,
			event: upsert(with(src, func(x *v1beta1.FeatureFlagSource) { x.Generation = 7 })),
			want:  expect(),
		},
		{
			name:  "delete",
			setup: world,
			event: remove(s),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "delete of a source that is not there",
			setup: world,
			event: remove(srcK("shop", "nope")),
			want:  expect(),
		},
		{
			name:  "cross-namespace reference without a grant is not permitted: only the source",
			setup: []step{upsert(newFlagSet("team", "flags", "on")), upsert(web)},
			event: upsert(newSource("shop", "src", ref("team/flags", ""), selector(matchLabels("app", "web")))),
			want:  expect(s, w),
		},
		{
			name:  "cross-namespace reference with a grant renders into the source's workloads' namespace",
			setup: []step{upsert(newFlagSet("team", "flags", "on")), upsert(web), upsert(flagSetGrant("team", "g", []string{"shop"}))},
			event: upsert(newSource("shop", "src", ref("team/flags", ""), selector(matchLabels("app", "web")))),
			want:  expect(s, w, fsK("team", "flags"), cmK(fsK("team", "flags"), "shop")),
		},
	})
}

func TestWorkloadDeltas(t *testing.T) {
	flags := newFlagSet("shop", "flags", "on")
	src := newSource("shop", "src", ref("flags", ""), selector(matchLabels("app", "web")))
	k8s := newSource("shop", "k8s", ref("flags", v1beta1.SyncProviderKubernetes))
	web := deployment("shop", "web", map[string]string{"app": "web"}, nil)
	web.ServiceAccountName = "web"
	world := []step{upsert(flags), upsert(src), upsert(k8s), upsert(web)}
	f, s, k, w, cm := fsK("shop", "flags"), srcK("shop", "src"), srcK("shop", "k8s"), depK("shop", "web"), cmK(fsK("shop", "flags"), "shop")
	other := WorkloadKey(KindStatefulSet, "shop", "other")
	withLabels := func(l map[string]string) Workload { c := web; c.Labels = l; return c }
	withAnnotations := func(a map[string]string) Workload { c := web; c.PodAnnotations = a; return c }

	runDeltaCases(t, []deltaCase{
		{
			name:  "create matched by a selector, into an existing ConfigMap",
			setup: world,
			event: upsert(Workload{Kind: KindStatefulSet, Namespace: "shop", Name: "other", Labels: map[string]string{"app": "web"}}),
			want:  expect(s, other),
		},
		{
			name:  "create of the first consumer creates the ConfigMap",
			setup: []step{upsert(flags), upsert(src)},
			event: upsert(web),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "create that nothing targets",
			setup: world,
			event: upsert(Workload{Kind: KindDaemonSet, Namespace: "shop", Name: "agent", Labels: map[string]string{"app": "agent"}}),
			want:  expect(),
		},
		{
			name:  "create opted in by annotation to a source read with the kubernetes provider",
			setup: world,
			event: upsert(deployment("shop", "api", nil, optIn("k8s"))),
			want:  expect(k, depK("shop", "api")),
		},
		{
			name:  "create opted in to a source that does not exist yet: the workload, to say so",
			setup: world,
			event: upsert(deployment("shop", "api", nil, optIn("later"))),
			want:  expect(depK("shop", "api")),
		},
		{
			name:  "create opted in to a source of another namespace without a grant: the workload and the source that denies it",
			setup: append(world, upsert(newSource("team", "shared", ref("flags", "")))),
			event: upsert(deployment("shop", "api", nil, optIn("team/shared"))),
			want:  expect(depK("shop", "api"), srcK("team", "shared")),
		},
		{
			name:  "create opted in to a source of another namespace with a grant for its pods",
			setup: append(world, upsert(newSource("team", "shared", ref("flags", ""))), upsert(podGrant("team", "pods", []string{"shop"}, KindSource, "shared"))),
			event: upsert(deployment("shop", "api", nil, optIn("team/shared"))),
			want:  expect(depK("shop", "api"), srcK("team", "shared")),
		},
		{
			name:  "labels no longer selected: the last consumer of the ConfigMap",
			setup: world,
			event: upsert(withLabels(map[string]string{"app": "api"})),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "label that no selector reads",
			setup: world,
			event: upsert(withLabels(map[string]string{"app": "web", "revision": "2"})),
			want:  expect(),
		},
		{
			name:  "annotation that flagplane does not read",
			setup: world,
			event: upsert(withAnnotations(map[string]string{"kubectl.kubernetes.io/restartedAt": "now"})),
			want:  expect(),
		},
		{
			name:  "openfeature.dev annotation adds a source: the workload, and its sources (their status reads its injection)",
			setup: world,
			event: upsert(withAnnotations(optIn("k8s"))),
			want:  expect(w, k, s),
		},
		{
			name:  "annotation names the selecting source too: same sources, new order",
			setup: append(world, upsert(withAnnotations(optIn("k8s")))),
			event: upsert(withAnnotations(optIn("src, k8s"))),
			want:  expect(w, k, s),
		},
		{
			name:  "annotation with spaces and a repeat: same list",
			setup: append(world, upsert(withAnnotations(optIn("k8s")))),
			event: upsert(withAnnotations(optIn(" k8s ,k8s"))),
			want:  expect(),
		},
		{
			name:  "annotations without openfeature.dev/enabled do not count",
			setup: world,
			event: upsert(withAnnotations(map[string]string{v1beta1.AnnotationFeatureFlagSource: "k8s"})),
			want:  expect(),
		},
		{
			name:  "opting out removes the annotation's source",
			setup: append(world, upsert(withAnnotations(optIn("k8s")))),
			event: upsert(withAnnotations(map[string]string{v1beta1.AnnotationEnabled: "false", v1beta1.AnnotationFeatureFlagSource: "k8s"})),
			want:  expect(w, k, s),
		},
		{
			name:  "service account of a targeted workload (its RBAC)",
			setup: world,
			event: upsert(func() Workload { c := web; c.ServiceAccountName = "other"; return c }()),
			want:  expect(w, s),
		},
		{
			name:  "service account of a workload nothing targets",
			setup: world,
			event: upsert(deployment("shop", "web", map[string]string{"app": "none"}, nil)),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "delete of the last consumer",
			setup: world,
			event: remove(w),
			want:  expect(s, w, cm, f),
		},
		{
			name:  "delete of a workload nothing targets",
			setup: append(world, upsert(Workload{Kind: KindDaemonSet, Namespace: "shop", Name: "agent"})),
			event: remove(WorkloadKey(KindDaemonSet, "shop", "agent")),
			want:  expect(),
		},
		{
			name:  "a StatefulSet is not the Deployment of the same name",
			setup: world,
			event: remove(WorkloadKey(KindStatefulSet, "shop", "web")),
			want:  expect(),
		},
	})
	// A service account change matters only where there is RBAC to write.
	runDeltaCases(t, []deltaCase{{
		name:  "service account of an untargeted workload",
		setup: []step{upsert(deployment("shop", "agent", nil, nil))},
		event: upsert(Workload{Kind: KindDeployment, Namespace: "shop", Name: "agent", ServiceAccountName: "agent"}),
		want:  expect(),
	}})
}

func TestInProcessConfigDeltas(t *testing.T) {
	c := newIPC("shop", "inproc", 8015)
	c.UID = "uid-1"
	app := deployment("shop", "app", nil, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "inproc"})
	world := []step{upsert(app), upsert(c)}
	ck, a := ipcK("shop", "inproc"), depK("shop", "app")

	runDeltaCases(t, []deltaCase{
		{name: "create materialises the workloads' annotations", setup: []step{upsert(app)}, event: upsert(c), want: expect(ck, a)},
		{name: "create that no workload names", event: upsert(c), want: expect(ck)},
		{name: "spec change", setup: world, event: upsert(newIPC("shop", "inproc", 9000)), want: expect(ck, a)},
		{name: "new UID", setup: world, event: upsert(with(c, func(x *v1beta1.InProcessConfiguration) { x.UID = "uid-2" })), want: expect(ck, a)},
		{name: "unrelated label", setup: world, event: upsert(with(c, func(x *v1beta1.InProcessConfiguration) { x.Labels = map[string]string{"a": "b"} })), want: expect()},
		{name: "status only", setup: world, event: upsert(with(c, func(x *v1beta1.InProcessConfiguration) { x.Status.TargetCount = 3 })), want: expect()},
		{name: "delete", setup: world, event: remove(ck), want: expect(ck, a)},
		{name: "workload names it from another namespace", setup: []step{upsert(c)},
			event: upsert(deployment("web", "app", nil, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "shop/inproc"})),
			want:  expect(ck, depK("web", "app"))},
	})
}

func TestGrantDeltas(t *testing.T) {
	shared := newFlagSet("team", "flags", "on")
	src := newSource("shop", "src", ref("team/flags", ""), targetRef(KindDeployment, "web"))
	web := deployment("shop", "web", nil, nil)
	grant := flagSetGrant("team", "shop", []string{"shop", "billing"})
	world := []step{upsert(shared), upsert(src), upsert(web)}
	s, f, w, cm := srcK("shop", "src"), fsK("team", "flags"), depK("shop", "web"), cmK(fsK("team", "flags"), "shop")

	runDeltaCases(t, []deltaCase{
		{name: "grant permits the reference", setup: world, event: upsert(grant), want: expect(s, f, w, cm)},
		{name: "grant of other names", setup: world, event: upsert(flagSetGrant("team", "shop", []string{"shop"}, "other")), want: expect()},
		{name: "grant of this name", setup: world, event: upsert(flagSetGrant("team", "shop", []string{"shop"}, "flags")), want: expect(s, f, w, cm)},
		{name: "grant to other namespaces", setup: world, event: upsert(flagSetGrant("team", "shop", []string{"billing"})), want: expect()},
		{name: "same grant, namespaces in another order", setup: append(world, upsert(grant)),
			event: upsert(flagSetGrant("team", "shop", []string{"billing", "shop", "shop"})), want: expect()},
		{name: "a second grant permitting the same", setup: append(world, upsert(grant)),
			event: upsert(flagSetGrant("team", "again", []string{"shop"})), want: expect()},
		{name: "delete takes the permission back", setup: append(world, upsert(grant)), event: remove(grant.Key()), want: expect(s, f, w, cm)},
		{name: "grant for a flag set that does not exist: NotPermitted becomes NotFound", setup: []step{upsert(src), upsert(web)}, event: upsert(grant), want: expect(s)},
	})
}

// TestInputsOfWorkflowsDeltas: the Delta covers what the workflows read
// beyond the specs: flag-set validity and size (a source says whether its
// flag sets are served, and fit its delivery modes) and the source
// annotations the injection honours.
func TestInputsOfWorkflowsDeltas(t *testing.T) {
	flags := newFlagSet("shop", "flags", "on")
	src := newSource("shop", "src", ref("flags", ""), selector(matchLabels("app", "web")))
	web := deployment("shop", "web", map[string]string{"app": "web"}, nil)
	world := []step{upsert(flags), upsert(src), upsert(web)}
	f, s, w, cm := fsK("shop", "flags"), srcK("shop", "src"), depK("shop", "web"), cmK(fsK("shop", "flags"), "shop")
	broken := newFlagSet("shop", "flags", "broken")
	runDeltaCases(t, []deltaCase{
		{name: "an edit that keeps the flag set valid: its ConfigMaps", setup: world,
			event: upsert(newFlagSet("shop", "flags", "off")), want: expect(f, cm)},
		{name: "an edit that makes it invalid: also the sources that resolve it", setup: world,
			event: upsert(broken), want: expect(f, cm, s)},
		{name: "an edit that makes it too large for a ConfigMap: also the sources that resolve it", setup: world,
			event: upsert(newFlagSet("shop", "flags", "huge")), want: expect(f, cm, s)},
		{name: "an edit that makes it fit again: also the sources", setup: append(world, upsert(newFlagSet("shop", "flags", "huge"))),
			event: upsert(newFlagSet("shop", "flags", "off")), want: expect(f, cm, s)},
		{name: "an invalid one edited into another invalid one: no source", setup: append(world, upsert(broken)),
			event: upsert(with(broken, func(ff *v1beta1.FeatureFlag) { ff.Spec.FlagSpec.Metadata = []byte(`{"x":1}`) })), want: expect(f, cm)},
		{name: "the security-context annotation of a source: its workloads (and it)", setup: world,
			event: upsert(with(src, func(s *v1beta1.FeatureFlagSource) {
				s.Annotations = map[string]string{v1beta1.AnnotationSidecarSecurityContext: `{"runAsUser": 1000}`}
			})), want: expect(s, w)},
		{name: "another annotation of a source: nothing", setup: world,
			event: upsert(with(src, func(s *v1beta1.FeatureFlagSource) { s.Annotations = map[string]string{"team": "a"} })), want: expect()},
		{name: "a co-source's setting: the other sources of the workload too (the settings they lose)",
			setup: append(world, upsert(newSource("shop", "other", ref("flags", ""), selector(matchLabels("app", "web"))))),
			event: upsert(newSource("shop", "other", ref("flags", ""), selector(matchLabels("app", "web")), func(s *v1beta1.FeatureFlagSource) {
				s.Spec.Port = 9000
			})), want: expect(s, srcK("shop", "other"), w)},
	})
}
