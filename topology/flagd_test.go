package topology

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

func newFlagd(ns, name, source string) *v1beta1.Flagd {
	f := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	f.Spec.FeatureFlagSource = source
	return f
}

func flagdK(ns, name string) Key { return FlagdKey(ns, name) }

// flagdGrant lets the Flagds of the namespaces from refer to the sources of
// namespace (those named, or all).
func flagdGrant(namespace, name string, from []string, names ...string) Grant {
	return grantOf(namespace, name, GroupOpenFeature, "Flagd", from, KindSource, names...)
}

func TestFlagdDeltas(t *testing.T) {
	flags := newFlagSet("shop", "flags", "on")
	src := newSource("shop", "src", ref("flags", "file"))
	fd := newFlagd("shop", "flagd", "src")
	world := []step{upsert(flags), upsert(src), upsert(fd)}
	f, s, d, cm := fsK("shop", "flags"), srcK("shop", "src"), flagdK("shop", "flagd"), cmK(fsK("shop", "flags"), "shop")

	// A Flagd of namespace app using shop's source.
	other := newFlagd("app", "flagd", "shop/src")
	od, ocm := flagdK("app", "flagd"), cmK(fsK("shop", "flags"), "app")

	runDeltaCases(t, []deltaCase{
		{
			name:  "create before its source: nothing to serve yet",
			event: upsert(fd),
			want:  expect(d),
		},
		{
			name:  "create with its source: mounts the file provider's ConfigMap",
			setup: []step{upsert(flags), upsert(src)},
			event: upsert(fd),
			want:  expect(d, cm, f),
		},
		{
			name:  "the source appears: the pending reference resolves",
			setup: []step{upsert(flags), upsert(fd)},
			event: upsert(src),
			want:  expect(s, f, d, cm),
		},
		{
			name:  "a setting of the source changes",
			setup: world,
			event: upsert(with(src, func(s *v1beta1.FeatureFlagSource) { s.Spec.Port = 9000 })),
			want:  expect(s, d),
		},
		{
			name:  "the source's targeting changes: nothing the Flagd reads",
			setup: world,
			event: upsert(with(src, func(s *v1beta1.FeatureFlagSource) { targetRef(KindDeployment, "web")(s) })),
			want:  expect(s),
		},
		{
			name:  "the source switches to the kubernetes provider: the ConfigMap goes",
			setup: world,
			event: upsert(with(src, func(s *v1beta1.FeatureFlagSource) { s.Spec.Sources[0].Provider = "kubernetes" })),
			want:  expect(s, f, d, cm),
		},
		{
			name:  "a flag set edit reaches the Flagd through its ConfigMap",
			setup: world,
			event: upsert(with(flags, func(ff *v1beta1.FeatureFlag) {
				ff.Spec.FlagSpec.Flags["new-ui"] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "off"}
			})),
			want: expect(f, cm),
		},
		{
			name:  "the source goes",
			setup: world,
			event: remove(s),
			want:  expect(s, f, d, cm),
		},
		{
			name:  "replicas",
			setup: world,
			event: upsert(with(fd, func(f *v1beta1.Flagd) { f.Spec.Replicas = ptrTo[int32](3) })),
			want:  expect(d),
		},
		{
			name:  "annotations (the Service's)",
			setup: world,
			event: upsert(with(fd, func(f *v1beta1.Flagd) { f.Annotations = map[string]string{"example.com/lb": "internal"} })),
			want:  expect(d),
		},
		{
			name:  "labels and status only",
			setup: world,
			event: upsert(with(fd, func(f *v1beta1.Flagd) { f.Labels = map[string]string{"team": "a"}; f.Status.ReadyReplicas = 1 })),
			want:  expect(),
		},
		{
			name:  "another source",
			setup: append(world, upsert(newSource("shop", "other", ref("flags", "kubernetes")))),
			event: upsert(with(fd, func(f *v1beta1.Flagd) { f.Spec.FeatureFlagSource = "other" })),
			want:  expect(d, f, cm),
		},
		{
			name:  "delete: its ConfigMap goes",
			setup: world,
			event: remove(d),
			want:  expect(d, f, cm),
		},
		{
			name:  "a source of another namespace without a grant: denied, and the source says so",
			setup: []step{upsert(flags), upsert(src)},
			event: upsert(other),
			want:  expect(od, s),
		},
		{
			name:  "a grant for kind Flagd resolves it: a ConfigMap in the Flagd's namespace",
			setup: []step{upsert(flags), upsert(src), upsert(other)},
			event: upsert(flagdGrant("shop", "g", []string{"app"}, "src")),
			want:  expect(od, s, f, ocm),
		},
		{
			name:  "a grant for pods does not",
			setup: []step{upsert(flags), upsert(src), upsert(other)},
			event: upsert(podGrant("shop", "g", []string{"app"}, KindSource)),
			want:  expect(),
		},
		{
			name:  "the grant goes",
			setup: []step{upsert(flags), upsert(src), upsert(other), upsert(flagdGrant("shop", "g", []string{"app"}))},
			event: remove(Grant{Namespace: "shop", Name: "g"}.Key()),
			want:  expect(od, s, f, ocm),
		},
	})
}

func TestFlagdTenancy(t *testing.T) {
	g := NewWithT(t)
	top := newPropTopology()
	// app's Flagd runs shop's source, which reads team's flag sets with the
	// file and kubernetes providers.
	must(t)(top.UpsertFlagSet(newFlagSet("team", "flags", "on")))
	must(t)(top.UpsertGrant(flagSetGrant("team", "sources", []string{"shop"})))
	must(t)(top.UpsertSource(newSource("shop", "src", ref("team/flags", "file"), ref("team/flags", "kubernetes"))))
	must(t)(top.UpsertFlagd(newFlagd("app", "flagd", "shop/src")))
	d, team := flagdK("app", "flagd"), fsK("team", "flags")

	v := top.Snapshot()
	source, state, ok := v.FlagdSource(d)
	g.Expect(ok).To(BeTrue())
	g.Expect(source).To(Equal(srcK("shop", "src")))
	g.Expect(state).To(Equal(RefNotPermitted))
	g.Expect(v.DeniedReferrers(source)).To(Equal([]Key{d}))
	g.Expect(v.ConfigMapsOfWorkload(d)).To(BeEmpty())
	g.Expect(v.MayRead("app", team)).To(BeFalse())

	must(t)(top.UpsertGrant(flagdGrant("shop", "flagds", []string{"app"})))
	v = top.Snapshot()
	_, state, _ = v.FlagdSource(d)
	g.Expect(state).To(Equal(RefResolved))
	g.Expect(v.FlagdsOfSource(source)).To(Equal([]Key{d}))
	g.Expect(v.DeniedReferrers(source)).To(BeEmpty())
	g.Expect(v.ConfigMapsOfWorkload(d)).To(Equal([]Key{cmK(team, "app")}), "the file provider's copy, in the Flagd's namespace")
	g.Expect(v.MayRead("app", team)).To(BeTrue(), "the sync server serves app what flagplane copies into it")
	g.Expect(v.MayReadDirectly(d, team)).To(BeFalse(), "the kubernetes provider needs a grant of every FeatureFlag of team to app's pods")

	delta := must(t)(top.UpsertGrant(grantOf("team", "readers", GroupOpenFeature, "Flagd", []string{"app"}, KindFlagSet)))
	g.Expect(deltaKeys(delta)).To(Equal(expect(d)))
	g.Expect(top.Snapshot().MayReadDirectly(d, team)).To(BeTrue())
}
