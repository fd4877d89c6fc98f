package injection_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// limitsWorld is a namespace with flag sets, sources that each read a
// run of them and target the Deployment "web", and an
// InProcessConfiguration the Deployment's annotation names.
type limitsWorld struct {
	topo *topology.Topology
	ns   string
	web  topology.Key
}

// newLimitsWorld makes sources sources of perSource entries each with
// provider, over distinct flag sets named by name(i).
func newLimitsWorld(t *testing.T, ns string, sources, perSource int, provider v1beta1.SyncProviderType, name func(int) string) *limitsWorld {
	t.Helper()
	w := &limitsWorld{topo: topology.New(), ns: ns, web: topology.WorkloadKey(topology.KindDeployment, ns, "web")}
	for i := 0; i < sources*perSource; i++ {
		ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}
		ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
		mustEdit(t)(w.topo.UpsertFlagSet(ff))
	}
	for s := 0; s < sources; s++ {
		src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("src-%02d", s)}}
		for j := 0; j < perSource; j++ {
			src.Spec.Sources = append(src.Spec.Sources, v1beta1.Source{Source: name(s*perSource + j), Provider: provider})
		}
		src.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "web"}}
		mustEdit(t)(w.topo.UpsertSource(src))
	}
	ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "in-process"}}
	mustEdit(t)(w.topo.UpsertInProcessConfig(ipc))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	d.Spec.Template.Annotations = map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "in-process"}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
	mustEdit(t)(w.topo.UpsertWorkload(topology.WorkloadFrom(topology.KindDeployment, d, &d.Spec.Template)))
	return w
}

// mustEdit fails the test on a refused edit of the graph.
func mustEdit(t *testing.T) func(topology.Delta, error) {
	return func(_ topology.Delta, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func limitsOptions() injection.Options {
	o := injection.DefaultOptions()
	o.SyncServer = "flagplane-sync.flagplane-system.svc:8015"
	o.SyncServerHeaders = func(namespace string) (map[string]string, error) {
		return map[string]string{"authorization": "Bearer " + strings.Repeat("t", 140)}, nil
	}
	return o
}

// sourcesArg is the --sources argument of a sidecar.
func sourcesArg(c *corev1.Container) string {
	for i, a := range c.Args {
		if a == "--sources" && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	return ""
}

// longName is a flag set name of 253 characters, numbered.
func longName(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("f", 249) }

// TestSidecarOverArgLimit: a sidecar whose --sources argument would pass
// Linux's MAX_ARG_STRLEN is left out, with what it brings to the app
// containers, and the refusal says why; the in-process configuration's env
// vars stay. Just under the limit, the sidecar is injected.
func TestSidecarOverArgLimit(t *testing.T) {
	ns := strings.Repeat("n", 63)
	for _, provider := range []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy} {
		t.Run(string(provider), func(t *testing.T) {
			g := NewWithT(t)
			// Two entries of the longest names, for the size of one among others.
			two := newLimitsWorld(t, ns, 1, 2, provider, longName)
			entry := (len(sourcesArg(injection.Desired(two.topo.Snapshot(), two.web, limitsOptions()).Sidecar)) - 3) / 2 // without [ , ]
			fits := (injection.MaxArgBytes - 2 + 1) / (entry + 1)                                                        // entries and commas

			under := newLimitsWorld(t, ns, 2, fits/2, provider, longName)
			inj, refusal := injection.DesiredWithRefusal(under.topo.Snapshot(), under.web, limitsOptions())
			g.Expect(refusal).To(BeNil())
			g.Expect(inj.Sidecar).NotTo(BeNil())
			g.Expect(len(sourcesArg(inj.Sidecar))).To(BeNumerically("<=", injection.MaxArgBytes))

			over := newLimitsWorld(t, ns, 2, fits/2+1, provider, longName)
			inj, refusal = injection.DesiredWithRefusal(over.topo.Snapshot(), over.web, limitsOptions())
			g.Expect(refusal).NotTo(BeNil())
			g.Expect(refusal.Bytes).To(BeNumerically(">", injection.MaxArgBytes))
			g.Expect(refusal.Entries).To(Equal(2 * (fits/2 + 1)))
			g.Expect(refusal.Sources).To(Equal(2))
			g.Expect(refusal.String()).To(ContainSubstring("flagd's --sources argument would be"))
			g.Expect(refusal.String()).To(ContainSubstring("MAX_ARG_STRLEN"))
			g.Expect(inj.Sidecar).To(BeNil())
			g.Expect(inj.Volumes).To(BeEmpty())
			g.Expect(inj.ConfigMaps).To(BeEmpty())
			g.Expect(inj.PodAnnotations).To(BeEmpty())
			g.Expect(inj.Warnings).To(ContainElement(refusal.String()))
			g.Expect(inj.Env).To(ContainElement(HaveField("Value", "in-process")), "the in-process configuration's env vars stay")
			g.Expect(inj.Env).NotTo(ContainElement(HaveField("Value", "rpc")), "nothing points the apps at a sidecar they do not have")
			g.Expect(injection.Desired(over.topo.Snapshot(), over.web, limitsOptions())).To(Equal(inj), "Desired gives the same injection")
		})
	}
}

// TestSidecarEnvOverArgLimit: an env var of a source longer than execve
// takes would keep flagd and the app containers from starting: the sidecar
// is left out. An in-process configuration's such env var is left out alone.
func TestSidecarEnvOverArgLimit(t *testing.T) {
	g := NewWithT(t)
	w := newLimitsWorld(t, "shop", 1, 1, v1beta1.SyncProviderFile, func(i int) string { return fmt.Sprintf("flags-%d", i) })
	v := w.topo.Snapshot()
	src, _ := v.Source(topology.SourceKey("shop", "src-00"))
	src = src.DeepCopy()
	src.Spec.EnvVars = []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", injection.MaxArgBytes)}}
	mustEdit(t)(w.topo.UpsertSource(src))
	ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "in-process"}}
	ipc.Spec.EnvVars = []corev1.EnvVar{{Name: "HUGE", Value: strings.Repeat("y", injection.MaxArgBytes)}, {Name: "SMALL", Value: "s"}}
	mustEdit(t)(w.topo.UpsertInProcessConfig(ipc))

	inj, refusal := injection.DesiredWithRefusal(w.topo.Snapshot(), w.web, limitsOptions())
	g.Expect(refusal).NotTo(BeNil())
	g.Expect(refusal.What).To(Equal("env var FLAGD_BIG"))
	g.Expect(inj.Sidecar).To(BeNil())
	g.Expect(inj.Env).To(ContainElement(HaveField("Name", "FLAGD_SMALL")))
	g.Expect(inj.Env).NotTo(ContainElement(HaveField("Name", "FLAGD_HUGE")))
	g.Expect(inj.Warnings).To(ContainElement(ContainSubstring("env var FLAGD_HUGE left out")))
}

// TestContainerOfSourceOverArgLimit: a Flagd's container is the sidecar's,
// and is not rendered when it could not start.
func TestContainerOfSourceOverArgLimit(t *testing.T) {
	g := NewWithT(t)
	ns := strings.Repeat("n", 63)
	w := newLimitsWorld(t, ns, 1, 400, v1beta1.SyncProviderKubernetes, longName)
	c := injection.ContainerOfSource(w.topo.Snapshot(), topology.Key{Kind: topology.KindFlagd, Namespace: ns, Name: "standalone"},
		topology.SourceKey(ns, "src-00"), limitsOptions())
	g.Expect(c.Container == nil).To(BeTrue(), "no container")
	g.Expect(c.Warnings).To(ContainElement(ContainSubstring("MAX_ARG_STRLEN")))
}

// TestInotifyWarning: more file sources than Linux's default inotify
// instances is a warning, not a refusal.
func TestInotifyWarning(t *testing.T) {
	g := NewWithT(t)
	name := func(i int) string { return fmt.Sprintf("f%d", i) }
	at := newLimitsWorld(t, "shop", 4, injection.InotifyInstances/4, v1beta1.SyncProviderFile, name)
	inj := injection.Desired(at.topo.Snapshot(), at.web, limitsOptions())
	g.Expect(inj.Sidecar).NotTo(BeNil())
	g.Expect(inj.Warnings).NotTo(ContainElement(ContainSubstring("inotify")))

	over := newLimitsWorld(t, "shop", 3, 43, v1beta1.SyncProviderFile, name)
	inj = injection.Desired(over.topo.Snapshot(), over.web, limitsOptions())
	g.Expect(inj.Sidecar).NotTo(BeNil())
	g.Expect(inj.Warnings).To(ContainElement(ContainSubstring("reads 129 flag sets with the file provider")))
}

// TestEntryOfSource: the entries the FeatureFlagSource webhook measures
// from a spec alone are the ones the sidecar gets.
func TestEntryOfSource(t *testing.T) {
	for _, provider := range []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy} {
		t.Run(string(provider), func(t *testing.T) {
			g := NewWithT(t)
			w := newLimitsWorld(t, "shop", 1, 3, provider, func(i int) string { return fmt.Sprintf("flags-%d", i) })
			v := w.topo.Snapshot()
			src, _ := v.Source(topology.SourceKey("shop", "src-00"))
			var entries []injection.FlagdSourceConfig
			for _, e := range src.Spec.Sources {
				cfg, ok := injection.EntryOfSource("shop", e, provider, limitsOptions())
				g.Expect(ok).To(BeTrue())
				entries = append(entries, cfg)
			}
			got := sourcesArg(injection.Desired(v, w.web, limitsOptions()).Sidecar)
			g.Expect(injection.SourcesArgBytes(entries)).To(Equal(len(got)))
		})
	}
}

// TestPodRefusal: an injection that makes a pod larger than the API
// server stores is refused; one that leaves it under is not, and a pod too
// large without it is not flagplane's to refuse.
func TestPodRefusal(t *testing.T) {
	g := NewWithT(t)
	w := newLimitsWorld(t, "shop", 1, 100, v1beta1.SyncProviderFile, func(i int) string { return fmt.Sprintf("flags-%03d", i) })
	inj := injection.Desired(w.topo.Snapshot(), w.web, limitsOptions())
	added := func() int {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		before := p.Size()
		inj.ApplyTo(&p.Spec)
		return p.Size() - before
	}()
	pod := func(size int) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		p.Spec.Containers[0].Args = []string{strings.Repeat("a", size-p.Size())}
		return p
	}
	g.Expect(injection.PodRefusal(pod(100_000), inj)).To(BeNil())
	r := injection.PodRefusal(pod(injection.MaxPodBytes-added), inj)
	g.Expect(r).NotTo(BeNil())
	g.Expect(r.String()).To(ContainSubstring("the pod would be"))
	g.Expect(r.Entries).To(Equal(100))
	g.Expect(injection.PodRefusal(pod(injection.MaxPodBytes), inj)).To(BeNil(), "too large without flagplane")

	without := inj.WithoutSidecar()
	g.Expect(without.Sidecar).To(BeNil())
	g.Expect(without.Volumes).To(BeEmpty())
	g.Expect(without.Env).To(ConsistOf(HaveField("Value", "in-process"), HaveField("Name", "FLAGD_HOST"), HaveField("Name", "FLAGD_PORT"),
		HaveField("Name", "FLAGD_TLS"), HaveField("Name", "FLAGD_CACHE"), HaveField("Name", "FLAGD_MAX_CACHE_SIZE")))
}

// TestRefusalsOfSource: a source whose sidecar is refused alone has every
// workload refused; two that pass the limit only together each name the
// workloads they share; none when it fits.
func TestRefusalsOfSource(t *testing.T) {
	g := NewWithT(t)
	ns := strings.Repeat("n", 63)
	opts := limitsOptions()
	one := newLimitsWorld(t, ns, 1, 1, v1beta1.SyncProviderKubernetes, longName)
	entry := len(sourcesArg(injection.Desired(one.topo.Snapshot(), one.web, opts).Sidecar)) - 2
	fits := (injection.MaxArgBytes - 2 + 1) / (entry + 1)

	alone := newLimitsWorld(t, ns, 1, fits+1, v1beta1.SyncProviderKubernetes, longName)
	r := injection.RefusalsOfSource(alone.topo.Snapshot(), topology.SourceKey(ns, "src-00"), 5, opts)
	g.Expect(r).NotTo(BeNil())
	g.Expect(r.Count).To(Equal(1))
	g.Expect(r.String()).To(HavePrefix("1 workload(s) get no flagd sidecar (Deployment " + ns + "/web): flagd sidecar not injected"))

	together := newLimitsWorld(t, ns, 2, fits/2+1, v1beta1.SyncProviderKubernetes, longName)
	for _, s := range []string{"src-00", "src-01"} {
		r := injection.RefusalsOfSource(together.topo.Snapshot(), topology.SourceKey(ns, s), 5, opts)
		g.Expect(r).NotTo(BeNil(), s)
		g.Expect(r.Workloads).To(ConsistOf(together.web))
	}
	g.Expect(injection.RefusalsOfSource(one.topo.Snapshot(), topology.SourceKey(ns, "src-00"), 5, opts)).To(BeNil())
}

// TestDistinctGRPCSources: flagd v0.16 keeps a source's flags under its
// URI, so two flagd-proxy entries (one sync server, two selectors) get
// URIs of their own, the same target to the gRPC dialer; a lone one, and a
// URI with a scheme, are left as they are. flagd marks only its first gRPC
// source ready: with two, the readiness probe asks /healthz.
func TestDistinctGRPCSources(t *testing.T) {
	g := NewWithT(t)
	opts := limitsOptions()
	two := newLimitsWorld(t, "shop", 1, 2, v1beta1.SyncProviderFlagdProxy, func(i int) string { return fmt.Sprintf("flags-%d", i) })
	got := flagdSources(t, injection.Desired(two.topo.Snapshot(), two.web, opts).Sidecar)
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].URI).To(Equal("dns:///" + opts.SyncServer + "?selector=core.openfeature.dev%2Fshop%2Fflags-0"))
	g.Expect(got[1].URI).To(Equal("dns:///" + opts.SyncServer + "?selector=core.openfeature.dev%2Fshop%2Fflags-1"))
	g.Expect(got[0].Selector).To(Equal("core.openfeature.dev/shop/flags-0"), "the selector is still sent")
	g.Expect(injection.Desired(two.topo.Snapshot(), two.web, opts).Sidecar.ReadinessProbe.HTTPGet.Path).To(Equal("/healthz"),
		"flagd marks only its first gRPC source ready")

	one := newLimitsWorld(t, "shop", 1, 1, v1beta1.SyncProviderFlagdProxy, func(i int) string { return fmt.Sprintf("flags-%d", i) })
	g.Expect(flagdSources(t, injection.Desired(one.topo.Snapshot(), one.web, opts).Sidecar)[0].URI).To(Equal(opts.SyncServer))
	g.Expect(injection.Desired(one.topo.Snapshot(), one.web, opts).Sidecar.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))

	opts.SyncServer = "dns:///flagplane-sync.flagplane-system.svc:8015"
	g.Expect(flagdSources(t, injection.Desired(two.topo.Snapshot(), two.web, opts).Sidecar)).To(HaveEach(HaveField("URI", opts.SyncServer)))
}
