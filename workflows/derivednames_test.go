package workflows_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// Every name, key, path and label value flagplane derives from users'
// names must pass the API server's validation of the field it goes into
// (apimachinery's own functions) and the kernel's limit on a path
// component, for every valid input; and two inputs never derive the same
// string where they would meet (one namespace's ConfigMaps, one pod's
// volumes and mount paths, the Roles of one namespace).
var (
	derivedNamesSeed   = flag.Uint64("derivednames.seed", 1, "seed of TestDerivedNames's random worlds")
	derivedNamesWorlds = flag.Int("derivednames.worlds", 300, "random worlds TestDerivedNames draws")
)

// nameMax is the longest file name (one path component) Linux takes,
// NAME_MAX: the kubelet and the container runtime make a directory per
// mount path component, and the kubelet a file per ConfigMap data key.
const nameMax = 255

// syncServer is where sidecars of flagd-proxy sources are sent.
const syncServer = "flagplane-sync.flagplane-system.svc:8015"

func TestDerivedNames(t *testing.T) {
	seen := newDerivedSeen()
	for _, w := range edgeWorlds() {
		t.Run(w.title, func(t *testing.T) { w.check(t, seen) })
	}
	r := rand.New(rand.NewPCG(*derivedNamesSeed, 0x5eed))
	for i := range *derivedNamesWorlds {
		w := drawWorld(r)
		w.title = fmt.Sprintf("seed %d world %d", *derivedNamesSeed, i)
		if !t.Run(w.title, func(t *testing.T) { w.check(t, seen) }) {
			t.Logf("world: %+v", w)
			return
		}
	}
}

// TestDerivedNamesOfCraftedNames: a name made to read like another flag
// set's shortened name (the plain form of the one is the cut form of the
// other) derives another string.
func TestDerivedNamesOfCraftedNames(t *testing.T) {
	r := rand.New(rand.NewPCG(*derivedNamesSeed, 0xc4af))
	var inputs []topology.Key
	for _, w := range edgeWorlds() {
		inputs = append(inputs, w.flagSetKeys()...)
	}
	for range 2000 {
		inputs = append(inputs, topology.FlagSetKey(drawNamespace(r), drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength))))
	}
	for _, d := range flagSetDerivations() {
		t.Run(d.field, func(t *testing.T) {
			g := NewWithT(t)
			for _, f := range inputs {
				got := d.derive(f)
				twin, ok := d.plainOf(got)
				if !ok || twin == f || !validFlagSetKey(twin) {
					continue
				}
				g.Expect(d.derive(twin)).NotTo(Equal(got), "%s of %s is the plain form of %s", d.field, f, twin)
			}
		})
	}
}

// flagSetDerivation is one string derived from a flag set's namespace and
// name, with the inverse of its plain form.
type flagSetDerivation struct {
	field  string
	derive func(topology.Key) string
	// plain is the form kept wherever it is valid (the OpenFeature
	// Operator's), plainOf its inverse.
	plain   func(topology.Key) string
	plainOf func(string) (topology.Key, bool)
	valid   func(string) []string
}

func flagSetDerivations() []flagSetDerivation {
	split := func(s, sep string) (topology.Key, bool) {
		ns, name, ok := strings.Cut(s, sep)
		return topology.FlagSetKey(ns, name), ok
	}
	return []flagSetDerivation{{
		field:  "ConfigMap metadata.name",
		derive: topology.ConfigMapName,
		plain:  func(f topology.Key) string { return "flagd." + f.Namespace + "." + f.Name },
		plainOf: func(s string) (topology.Key, bool) {
			rest, ok := strings.CutPrefix(s, "flagd.")
			if !ok {
				return topology.Key{}, false
			}
			return split(rest, ".")
		},
		valid: validation.IsDNS1123Subdomain,
	}, {
		field:  "ConfigMap data key",
		derive: topology.ConfigMapDataKey,
		plain:  func(f topology.Key) string { return f.Namespace + "_" + f.Name + ".flagd.json" },
		plainOf: func(s string) (topology.Key, bool) {
			rest, ok := strings.CutSuffix(s, ".flagd.json")
			if !ok {
				return topology.Key{}, false
			}
			return split(rest, "_")
		},
		valid: func(s string) []string { return append(validation.IsConfigMapKey(s), fileName(s)...) },
	}, {
		field:  "sidecar mount path",
		derive: injection.FlagMountDir,
		plain:  func(f topology.Key) string { return injection.FlagMountRoot + "/" + f.Namespace + "_" + f.Name },
		plainOf: func(s string) (topology.Key, bool) {
			rest, ok := strings.CutPrefix(s, injection.FlagMountRoot+"/")
			if !ok {
				return topology.Key{}, false
			}
			return split(rest, "_")
		},
		valid: mountPath,
	}, {
		field:  "flagd --sources file uri",
		derive: injection.FlagFilePath,
		plain: func(f topology.Key) string {
			id := f.Namespace + "_" + f.Name
			return injection.FlagMountRoot + "/" + id + "/" + id + ".flagd.json"
		},
		plainOf: func(s string) (topology.Key, bool) {
			rest, ok := strings.CutPrefix(s, injection.FlagMountRoot+"/")
			if !ok {
				return topology.Key{}, false
			}
			dir, _, _ := strings.Cut(rest, "/")
			return split(dir, "_")
		},
		// The file is a data key the kubelet writes into the directory.
		valid: func(s string) []string { return append(mountPath(s), validation.IsConfigMapKey(path.Base(s))...) },
	}, {
		field:  "flagd-proxy selector",
		derive: syncserver.Selector,
		plain:  func(f topology.Key) string { return syncserver.SelectorPrefix + f.Namespace + "/" + f.Name },
		plainOf: func(s string) (topology.Key, bool) {
			f, err := syncserver.ParseSelector(s)
			return f, err == nil
		},
		valid: func(string) []string { return nil },
	}}
}

func validFlagSetKey(f topology.Key) bool {
	return len(validation.IsDNS1123Label(f.Namespace)) == 0 && len(validation.IsDNS1123Subdomain(f.Name)) == 0
}

// fileName checks one path component against the kernel's limit.
func fileName(s string) []string {
	if len(s) > nameMax {
		return []string{fmt.Sprintf("%d bytes, more than a file name may have (%d)", len(s), nameMax)}
	}
	return nil
}

// mountPath checks an absolute path the kubelet and the container runtime
// create in a container: no component longer than a file name, none "..".
func mountPath(p string) []string {
	var errs []string
	if !path.IsAbs(p) || path.Clean(p) != p {
		errs = append(errs, "not a clean absolute path")
	}
	for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if c == ".." {
			errs = append(errs, "has a .. component")
		}
		errs = append(errs, fileName(c)...)
	}
	return errs
}

// derivedSeen remembers, across worlds, which input derived each string in
// a scope where two equal strings would clash.
type derivedSeen struct {
	byScope map[string]map[string]string // scope → derived string → input
}

func newDerivedSeen() *derivedSeen { return &derivedSeen{byScope: map[string]map[string]string{}} }

// once records that input derived s in scope, and fails when another did.
func (d *derivedSeen) once(g Gomega, scope, s, input string) {
	m := d.byScope[scope]
	if m == nil {
		m = map[string]string{}
		d.byScope[scope] = m
	}
	if other, ok := m[s]; ok {
		g.Expect(other).To(Equal(input), "%s %q derived from two inputs", scope, s)
	}
	m[s] = input
}

// world is one namespace's objects: flag sets in it and in another
// namespace (granted), a source reading every one of them with the file
// provider, those of its own namespace also with the kubernetes and the
// flagd-proxy provider, the workloads it applies to, and a Flagd of it.
type world struct {
	title      string
	ns, other  string
	flagSets   []string // in ns
	granted    []string // in other
	source     string
	deployment []string // Deployments, StatefulSets and DaemonSets of these names
	owner      topology.Kind
	ownerName  string // a workload known by its pods, which opt in by annotation
	sa         string
	flagd      string
}

func (w *world) flagSetKeys() []topology.Key {
	var out []topology.Key
	for _, n := range w.flagSets {
		out = append(out, topology.FlagSetKey(w.ns, n))
	}
	for _, n := range w.granted {
		out = append(out, topology.FlagSetKey(w.other, n))
	}
	return out
}

func (w *world) workloads() []topology.Key {
	var out []topology.Key
	for _, n := range w.deployment {
		for _, kind := range []topology.Kind{topology.KindDeployment, topology.KindStatefulSet, topology.KindDaemonSet} {
			out = append(out, topology.WorkloadKey(kind, w.ns, n))
		}
	}
	if w.ownerName != "" {
		out = append(out, topology.WorkloadKey(w.owner, w.ns, w.ownerName))
	}
	return out
}

func (w *world) build(t *testing.T) *topology.View {
	t.Helper()
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	must := func(_ topology.Delta, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var entries []v1beta1.Source
	for _, f := range w.flagSetKeys() {
		ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Name, UID: types.UID("uid-" + f.String())}}
		ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
			"f": {State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"},
		}
		must(topo.UpsertFlagSet(ff))
		ref := f.Name
		if f.Namespace != w.ns {
			ref = f.Namespace + "/" + f.Name
		}
		entries = append(entries, v1beta1.Source{Source: ref, Provider: v1beta1.SyncProviderFile})
		if f.Namespace == w.ns {
			entries = append(entries, v1beta1.Source{Source: ref, Provider: v1beta1.SyncProviderKubernetes},
				v1beta1.Source{Source: ref, Provider: v1beta1.SyncProviderFlagdProxy})
		}
	}
	if len(w.granted) > 0 {
		must(topo.UpsertGrant(topology.Grant{Namespace: w.other, Name: "g",
			From: []topology.GrantFrom{{Group: topology.GroupOpenFeature, Kind: string(topology.KindSource), Namespace: w.ns}},
			To:   []topology.GrantTo{{Group: topology.GroupOpenFeature, Kind: string(topology.KindFlagSet)}}}))
	}
	src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.source}}
	src.Spec.Sources = entries
	for _, n := range w.deployment {
		for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet"} {
			src.Spec.TargetRefs = append(src.Spec.TargetRefs, v1beta1.TargetRef{Group: "apps", Kind: kind, Name: n})
		}
	}
	must(topo.UpsertSource(src))
	for _, k := range w.workloads() {
		if k.Kind.IsPodOwner() {
			must(topo.UpsertWorkload(topology.PodOwnerWorkload(k, map[string]string{
				v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: w.source}, w.sa)))
			continue
		}
		must(topo.UpsertWorkload(topology.Workload{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, ServiceAccountName: w.sa}))
	}
	fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.flagd, UID: "uid-flagd"}}
	fd.Spec.FeatureFlagSource = w.source
	fd.Spec.ServiceAccountName = w.sa
	fd.Spec.Ingress.Enabled = true
	fd.Spec.Ingress.Hosts = []string{"flags.example.com"}
	fd.Spec.GatewayApiRoutes.Enabled = true
	must(topo.UpsertFlagd(fd))
	return topo.Snapshot()
}

func (w *world) check(t *testing.T, seen *derivedSeen) {
	g := NewWithT(t)
	v := w.build(t)
	settings := workflows.DefaultSettings()
	opts := injection.DefaultOptions()
	opts.SyncServer = syncServer
	opts.SyncServerHeaders = func(ns string) (map[string]string, error) {
		return map[string]string{"authorization": "Bearer token-of-" + ns}, nil
	}
	settings.Injection = opts

	for _, f := range w.flagSetKeys() {
		for _, d := range flagSetDerivations() {
			got := d.derive(f)
			g.Expect(d.valid(got)).To(BeEmpty(), "%s %q of %s", d.field, got, f)
			if plain := d.plain(f); len(d.valid(plain)) == 0 {
				g.Expect(got).To(Equal(plain), "%s of %s: the plain form where it is valid", d.field, f)
			}
			seen.once(g, d.field, got, f.String())
		}
	}

	for _, wk := range w.workloads() {
		inj := injection.Desired(v, wk, opts)
		g.Expect(inj.Warnings).To(BeEmpty(), "%s", wk)
		g.Expect(inj.Sidecar).NotTo(BeNil(), "%s", wk)
		checkPod(g, v, settings, wk.String(), wk.Namespace, []corev1.Container{*inj.Sidecar}, inj.Volumes, inj.Env)
		g.Expect(servedFlagSets(g, v, wk.Namespace, inj.Sidecar, inj.Volumes)).To(ConsistOf(w.flagSetKeys()), "%s", wk)
		checkRBAC(g, v, settings, wk, len(w.flagSets) > 0, seen)
	}

	fk := topology.FlagdKey(w.ns, w.flagd)
	fopts := flagds.DefaultOptions()
	fopts.Injection, fopts.Generated = opts, settings.Generated
	objs := flagds.Desired(v, fk, fopts)
	g.Expect(objs.Invalid).To(BeEmpty())
	g.Expect(objs.Deployment).NotTo(BeNil(), "Flagd %s: %s", fk, objs.Unservable)
	for _, m := range []metav1.ObjectMeta{objs.Deployment.ObjectMeta, objs.Service.ObjectMeta, objs.Ingress.ObjectMeta} {
		g.Expect(validation.IsDNS1123Subdomain(m.Name)).To(BeEmpty())
		checkMetadata(g, m)
	}
	g.Expect(validation.IsDNS1035Label(objs.Service.Name)).To(BeEmpty(), "a Service's name")
	g.Expect(validation.IsDNS1123Subdomain(objs.HTTPRoute.GetName())).To(BeEmpty())
	checkLabels(g, objs.Deployment.Spec.Selector.MatchLabels)
	checkLabels(g, objs.Service.Spec.Selector)
	checkMetadata(g, objs.Deployment.Spec.Template.ObjectMeta)
	for _, e := range objs.Endpoints {
		if e.Kind == "Service" {
			g.Expect(validation.IsDNS1123Subdomain(e.Host)).To(BeEmpty(), "host %q", e.Host)
		}
	}
	pod := objs.Deployment.Spec.Template.Spec
	checkPod(g, v, settings, fk.String(), w.ns, pod.Containers, pod.Volumes, nil)
	g.Expect(servedFlagSets(g, v, w.ns, &pod.Containers[0], pod.Volumes)).To(ConsistOf(w.flagSetKeys()))
	checkRBAC(g, v, settings, fk, len(w.flagSets) > 0, seen)

	for _, f := range w.flagSetKeys() {
		cm, err := configmaps.Desired(v, topology.ConfigMapKey(f, w.ns), settings)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(validation.IsDNS1123Subdomain(cm.Name)).To(BeEmpty(), "ConfigMap of %s", f)
		checkMetadata(g, cm.ObjectMeta)
		for _, o := range cm.OwnerReferences {
			g.Expect(o.Name).To(Equal(f.Name))
		}
		size := 0
		for k, val := range cm.Data {
			g.Expect(validation.IsConfigMapKey(k)).To(BeEmpty(), "data key of %s", f)
			g.Expect(fileName(k)).To(BeEmpty())
			size += len(k) + len(val)
		}
		g.Expect(size).To(BeNumerically("<=", 1<<20))
		seen.once(g, "ConfigMap in namespace "+w.ns, cm.Name, f.String())
	}
}

// checkPod checks what flagplane puts into a pod spec: container and port
// names, env var names, volumes (each a DNS label, none twice) and mounts
// (each path once, components the kernel takes); and that every file flagd
// reads is a data key of the ConfigMap the volume at its directory mounts.
func checkPod(g Gomega, v *topology.View, s workflows.Settings, what, ns string, containers []corev1.Container, volumes []corev1.Volume, appEnv []corev1.EnvVar) {
	vols := map[string]corev1.Volume{}
	for _, vol := range volumes {
		g.Expect(validation.IsDNS1123Label(vol.Name)).To(BeEmpty(), "%s: volume %q", what, vol.Name)
		_, twice := vols[vol.Name]
		g.Expect(twice).To(BeFalse(), "%s: two volumes named %q", what, vol.Name)
		vols[vol.Name] = vol
		if vol.ConfigMap != nil {
			g.Expect(validation.IsDNS1123Subdomain(vol.ConfigMap.Name)).To(BeEmpty(), "%s: volume %q", what, vol.Name)
		}
	}
	for _, e := range appEnv {
		g.Expect(validation.IsEnvVarName(e.Name)).To(BeEmpty(), "%s: env %q", what, e.Name)
	}
	for _, c := range containers {
		g.Expect(validation.IsDNS1123Label(c.Name)).To(BeEmpty(), "%s: container %q", what, c.Name)
		ports := map[string]bool{}
		for _, p := range c.Ports {
			g.Expect(validation.IsValidPortName(p.Name)).To(BeEmpty(), "%s: port %q", what, p.Name)
			g.Expect(ports).NotTo(HaveKey(p.Name), "%s: two ports named %q", what, p.Name)
			ports[p.Name] = true
		}
		for _, e := range c.Env {
			g.Expect(validation.IsEnvVarName(e.Name)).To(BeEmpty(), "%s: env %q", what, e.Name)
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			_, known := vols[m.Name]
			g.Expect(known).To(BeTrue(), "%s: mount of an unknown volume %q", what, m.Name)
			_, twice := mounts[m.MountPath]
			g.Expect(twice).To(BeFalse(), "%s: two mounts at %q", what, m.MountPath)
			g.Expect(mountPath(m.MountPath)).To(BeEmpty(), "%s: mount path %q", what, m.MountPath)
			mounts[m.MountPath] = m
		}
		for _, e := range sourcesOf(g, &c) {
			if e.Provider != string(v1beta1.SyncProviderFile) {
				continue
			}
			g.Expect(mountPath(e.URI)).To(BeEmpty(), "%s: file %q", what, e.URI)
			m, ok := mounts[path.Dir(e.URI)]
			g.Expect(ok).To(BeTrue(), "%s: nothing mounted where flagd reads %q", what, e.URI)
			cmName := vols[m.Name].ConfigMap.Name
			key, ok := v.ConfigMapByName(ns, cmName)
			g.Expect(ok).To(BeTrue(), "%s: volume %q mounts ConfigMap %q, which flagplane does not write", what, m.Name, cmName)
			cm, err := configmaps.Desired(v, key, s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cm.Data).To(HaveKey(path.Base(e.URI)), "%s: flagd reads %q, which ConfigMap %q does not hold", what, e.URI, cmName)
		}
	}
}

// sourcesOf reads a flagd container's --sources.
func sourcesOf(g Gomega, c *corev1.Container) []injection.FlagdSourceConfig {
	i := slices.Index(c.Args, "--sources")
	g.Expect(i).To(BeNumerically(">=", 0), "container %s has no --sources", c.Name)
	var out []injection.FlagdSourceConfig
	g.Expect(json.Unmarshal([]byte(c.Args[i+1]), &out)).To(Succeed())
	return out
}

// servedFlagSets is every flag set a flagd container reads, by each
// provider, each read back the way its reader does: the file through the
// volume mounted at its directory and the ConfigMap that volume names, the
// sync server's selector by the sync server, flagd's namespace/name.
func servedFlagSets(g Gomega, v *topology.View, ns string, c *corev1.Container, volumes []corev1.Volume) []topology.Key {
	var out []topology.Key
	for _, e := range sourcesOf(g, c) {
		var f topology.Key
		switch e.Provider {
		case string(v1beta1.SyncProviderFile):
			i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path.Dir(e.URI) })
			g.Expect(i).To(BeNumerically(">=", 0), "nothing mounted where flagd reads %q", e.URI)
			j := slices.IndexFunc(volumes, func(vol corev1.Volume) bool { return vol.Name == c.VolumeMounts[i].Name })
			g.Expect(j).To(BeNumerically(">=", 0))
			cm, ok := v.ConfigMapByName(ns, volumes[j].ConfigMap.Name)
			g.Expect(ok).To(BeTrue())
			f = cm.FlagSet()
			g.Expect(injection.FlagFilePath(f)).To(Equal(e.URI))
		case string(v1beta1.SyncProviderKubernetes):
			fns, name, _ := strings.Cut(e.URI, "/")
			f = topology.FlagSetKey(fns, name)
		case string(v1beta1.SyncProviderGRPC):
			var err error
			f, err = syncserver.ParseSelector(e.Selector)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(syncserver.Selector(f)).To(Equal(e.Selector))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// checkRBAC checks the Roles and RoleBindings of a workload (or a Flagd):
// names the RBAC API takes, one name per workload, read back to it.
func checkRBAC(g Gomega, v *topology.View, s workflows.Settings, wk topology.Key, some bool, seen *derivedSeen) {
	roles, bindings := rbac.Desired(v, wk, s.Generated)
	if some {
		g.Expect(roles).NotTo(BeEmpty(), "%s", wk)
	}
	name := rbac.Name(wk)
	g.Expect(content.IsPathSegmentName(name)).To(BeEmpty(), "Role name %q", name)
	seen.once(g, "Role name", name, wk.String())
	// A pod owner of the core group is not read back (rbac.WorkloadOfName).
	if coreOwner := wk.Kind.IsPodOwner() && !strings.Contains(string(wk.Kind), "."); !coreOwner {
		back, ok := rbac.WorkloadOfName(name)
		g.Expect(ok).To(BeTrue(), "Role name %q read back", name)
		g.Expect(back).To(Equal(wk), "Role name %q read back", name)
	}
	for i := range roles {
		g.Expect(roles[i].Name).To(Equal(name))
		checkMetadata(g, roles[i].ObjectMeta)
		checkMetadata(g, bindings[i].ObjectMeta)
		g.Expect(content.IsPathSegmentName(bindings[i].RoleRef.Name)).To(BeEmpty())
		for _, sub := range bindings[i].Subjects {
			g.Expect(validation.IsDNS1123Subdomain(sub.Name)).To(BeEmpty(), "service account %q", sub.Name)
		}
	}
}

func checkMetadata(g Gomega, m metav1.ObjectMeta) {
	checkLabels(g, m.Labels)
	for k := range m.Annotations {
		g.Expect(validation.IsQualifiedName(strings.ToLower(k))).To(BeEmpty(), "annotation %q", k)
	}
}

func checkLabels(g Gomega, labels map[string]string) {
	for k, val := range labels {
		g.Expect(validation.IsQualifiedName(k)).To(BeEmpty(), "label %q", k)
		g.Expect(validation.IsValidLabelValue(val)).To(BeEmpty(), "label %s=%q", k, val)
	}
}

// edgeWorlds are the cases drawn on purpose: the longest and the shortest
// names, names that differ only past where a shortened name is cut, digits
// first, dots everywhere, and two flag sets whose volume names would share
// the same 32-bit hash.
func edgeWorlds() []*world {
	ns63 := strings.Repeat("n", 62) + "0"
	long := func(c string) string { return strings.Repeat(c, 252) + "z" }
	dots := strings.TrimSuffix(strings.Repeat("a.", 126), ".") // 251 characters, 126 labels
	a, b := volumeNameTwins(ns63)
	return []*world{{
		title: "longest names", ns: ns63, other: "0" + strings.Repeat("o", 62),
		flagSets: []string{long("f"), long("f")[:252] + "y", long("f")[:200], long("f")[:242], long("f")[:246], long("f")[:247]},
		granted:  []string{long("g"), "g"},
		source:   long("s"), deployment: []string{long("d"), long("d")[:252] + "e"},
		owner: topology.OwnerKind("argoproj.io", "Rollout"), ownerName: long("r"),
		sa: long("a"), flagd: "f" + strings.Repeat("d", 62),
	}, {
		title: "shortest names", ns: "a", other: "b",
		flagSets: []string{"a", "b"}, granted: []string{"a"}, source: "s", deployment: []string{"d"},
		owner: topology.OwnerKind("", "ReplicationController"), ownerName: "r", sa: "a", flagd: "f",
	}, {
		title: "digits first and dots", ns: "0" + strings.Repeat("1", 62), other: "9",
		flagSets: []string{"0", "0.0", dots, dots + ".b", "1-" + strings.Repeat("2", 249)}, granted: []string{dots},
		source: dots, deployment: []string{"0", dots}, owner: topology.OwnerKind("batch", "CronJob"), ownerName: dots,
		sa: "0", flagd: "a0",
	}, {
		title: "the same name in two namespaces", ns: "ab", other: "a",
		flagSets: []string{"b-c", long("x")}, granted: []string{"b-c", long("x")},
		source: "s", deployment: []string{"d"}, sa: "default", flagd: "f",
	}, {
		title: "volume names with one hash", ns: ns63, flagSets: []string{a, b},
		source: "s", deployment: []string{"d"}, sa: "default", flagd: "f",
	}}
}

// volumeNameTwins finds two flag-set names of namespace ns that read alike
// where a volume name shows them (their first 40 characters) and whose
// 32-bit hashes of namespace/name are equal: what a tenant can search for.
func volumeNameTwins(ns string) (string, string) {
	prefix := strings.Repeat("v", 40) + "-"
	seen := map[string]string{}
	for i := 0; ; i++ {
		name := prefix + strconv.Itoa(i)
		sum := sha256.Sum256([]byte(ns + "/" + name))
		h := hex.EncodeToString(sum[:4])
		if other, ok := seen[h]; ok {
			return other, name
		}
		seen[h] = name
	}
}

// drawWorld draws a world of names as long and as odd as Kubernetes takes:
// lengths at the limits half of the time, digits first, dots anywhere,
// and names that differ only at their end.
func drawWorld(r *rand.Rand) *world {
	w := &world{ns: drawNamespace(r), other: drawNamespace(r)}
	if w.other == w.ns {
		w.other += "x"[:min(1, 63-len(w.other))]
	}
	base := drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength))
	for range 1 + r.IntN(3) {
		w.flagSets = appendNew(w.flagSets, drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength)))
		w.flagSets = appendNew(w.flagSets, endVariant(r, base))
	}
	for range r.IntN(3) {
		w.granted = appendNew(w.granted, drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength)))
	}
	if w.other == w.ns {
		w.granted = nil
	}
	w.source = drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength))
	d := drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength))
	w.deployment = appendNew([]string{d}, endVariant(r, d))
	w.owner = []topology.Kind{
		topology.OwnerKind("argoproj.io", "Rollout"), topology.OwnerKind("batch", "Job"),
		topology.OwnerKind(drawSubdomain(r, 1+r.IntN(60)), "K"+drawLabel(r, r.IntN(20), true)),
	}[r.IntN(3)]
	w.ownerName = drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength))
	w.sa = drawSubdomain(r, drawLength(r, validation.DNS1123SubdomainMaxLength))
	w.flagd = drawLabel(r, drawLength(r, validation.DNS1035LabelMaxLength), true)
	return w
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// endVariant is name with its last character changed (or one added).
func endVariant(r *rand.Rand, name string) string {
	last := string(alnum[r.IntN(len(alnum))])
	if len(name) == validation.DNS1123SubdomainMaxLength || r.IntN(2) == 0 {
		return name[:len(name)-1] + last
	}
	return name + last
}

const (
	alnum      = "abcdefghijklmnopqrstuvwxyz0123456789"
	labelChars = alnum + "-"
)

// drawLength draws a length in [1, max], at or near max half of the time.
func drawLength(r *rand.Rand, max int) int {
	switch r.IntN(8) {
	case 0:
		return 1
	case 1, 2:
		return max
	case 3, 4:
		return max - r.IntN(min(max, 24))
	default:
		return 1 + r.IntN(max)
	}
}

func drawNamespace(r *rand.Rand) string {
	return drawLabel(r, drawLength(r, validation.DNS1123LabelMaxLength), false)
}

// drawLabel draws a DNS-1123 label of n characters (a DNS-1035 label, a
// letter first, when letterFirst; n may then be 0 for a lone letter).
func drawLabel(r *rand.Rand, n int, letterFirst bool) string {
	n = max(n, 1)
	b := make([]byte, n)
	for i := range b {
		switch {
		case i == 0 && letterFirst:
			b[i] = alnum[r.IntN(26)]
		case i == 0 || i == n-1:
			b[i] = alnum[r.IntN(len(alnum))]
		default:
			b[i] = labelChars[r.IntN(len(labelChars))]
		}
	}
	return string(b)
}

// drawSubdomain draws a DNS-1123 subdomain of n characters: labels, short
// or long, joined by dots.
func drawSubdomain(r *rand.Rand, n int) string {
	longest := []int{1, 3, 63}[r.IntN(3)]
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			if n-sb.Len() < 2 {
				sb.WriteByte(alnum[r.IntN(len(alnum))])
				continue
			}
			sb.WriteByte('.')
		}
		sb.WriteString(drawLabel(r, 1+r.IntN(min(longest, n-sb.Len())), false))
	}
	return sb.String()
}

// TestDrawnNamesAreValid: the generators draw only names the API server
// takes, so that what TestDerivedNames finds is flagplane's.
func TestDrawnNamesAreValid(t *testing.T) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(*derivedNamesSeed, 1))
	for range 2000 {
		w := drawWorld(r)
		for _, ns := range []string{w.ns, w.other} {
			g.Expect(validation.IsDNS1123Label(ns)).To(BeEmpty(), ns)
		}
		for _, n := range slices.Concat(w.flagSets, w.granted, w.deployment, []string{w.source, w.ownerName, w.sa}) {
			g.Expect(validation.IsDNS1123Subdomain(n)).To(BeEmpty(), n)
		}
		g.Expect(validation.IsDNS1035Label(w.flagd)).To(BeEmpty(), w.flagd)
	}
	for _, w := range edgeWorlds() {
		g.Expect(validation.IsDNS1123Label(w.ns)).To(BeEmpty(), w.ns)
		for _, n := range slices.Concat(w.flagSets, w.granted, w.deployment, []string{w.source, w.sa}) {
			g.Expect(validation.IsDNS1123Subdomain(n)).To(BeEmpty(), "%q", n)
		}
		if w.ownerName != "" {
			g.Expect(validation.IsDNS1123Subdomain(w.ownerName)).To(BeEmpty(), "%q", w.ownerName)
		}
		g.Expect(validation.IsDNS1035Label(w.flagd)).To(BeEmpty(), w.flagd)
	}
}
