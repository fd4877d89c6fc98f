package injection_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/rbac"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// podDecoder reads the workloads of a manifest stream (podTemplates); the
// graph is built by manifests.Load.
var podDecoder = clientgoscheme.Codecs.UniversalDeserializer()

// goldenInjectionOptions are the options of every injection golden: the
// defaults, with a sync server for flagd-proxy sources.
func goldenInjectionOptions() injection.Options {
	o := injection.DefaultOptions()
	// The image without its registry, so that no registry's name is written
	// into test data; TestSidecarOptions checks the default image.
	o.Sidecar.Image = "open-feature/flagd"
	o.SyncServer = "flagplane-sync.flagplane-system.svc:8015"
	o.SyncServerHeaders = func(namespace string) (map[string]string, error) {
		return map[string]string{"authorization": "Bearer token-of-" + namespace}, nil
	}
	// sidecar-settings shows a relaxed securityContext; TestSecurityContextOverride
	// shows that it takes the operator's consent.
	o.AllowSecurityContextOverride = true
	return o
}

// injectionGolden is what the golden files record per workload.
type injectionGolden struct {
	Fingerprint string                        `json:"fingerprint,omitempty"`
	ConfigMaps  []string                      `json:"configMaps,omitempty"`
	Conflicts   []string                      `json:"conflicts,omitempty"`
	Warnings    []string                      `json:"warnings,omitempty"`
	Sources     []injection.FlagdSourceConfig `json:"flagdSources,omitempty"`
	// Policies are the settings FeatureFlagSourcePolicies decided, and
	// what of them did not apply.
	Policies    []string `json:"policies,omitempty"`
	PolicyNotes []string `json:"policyNotes,omitempty"`
	// PodAnnotations are what the pod's metadata gets.
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// Pod is the workload's pod template spec with the injection applied.
	Pod corev1.PodSpec `json:"pod"`
}

// TestInjectionGolden: for testdata/<case>.in.yaml, the pod spec
// every workload's pods get, with what was mounted, overridden and left
// out, equals <case>.out.yaml (go test ./workflows/injection -run TestInjectionGolden -update).
func TestInjectionGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil || len(inputs) < 10 {
		t.Fatalf("want the injection golden inputs, found %d: %v", len(inputs), err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(in)
			g.Expect(err).NotTo(HaveOccurred())
			topo := topology.New()
			g.Expect(manifests.Load(topo, bytes.NewReader(raw))).To(Succeed())
			v := topo.Snapshot()
			out := map[string]injectionGolden{}
			for key, tmpl := range podTemplates(t, raw) {
				inj := injection.Desired(v, key, goldenInjectionOptions())
				pod := *tmpl.Spec.DeepCopy()
				_, applyWarnings := inj.ApplyTo(&pod)
				gold := injectionGolden{Fingerprint: inj.Fingerprint(), PodAnnotations: inj.PodAnnotations, Pod: pod}
				for _, cm := range inj.ConfigMaps {
					gold.ConfigMaps = append(gold.ConfigMaps, cm.Namespace+"/"+topology.ConfigMapName(cm.FlagSet()))
				}
				for _, c := range inj.Conflicts {
					gold.Conflicts = append(gold.Conflicts, c.String())
				}
				for _, d := range inj.PolicyDecisions {
					gold.Policies = append(gold.Policies, d.String())
				}
				for _, n := range inj.PolicyNotes {
					gold.PolicyNotes = append(gold.PolicyNotes, n.Policy.String()+" "+n.Block+": "+n.Message)
				}
				gold.Warnings = append(append(gold.Warnings, inj.Warnings...), applyWarnings...)
				gold.Sources = flagdSources(t, inj.Sidecar)
				out[key.String()] = gold
				validatePodSpec(t, key, pod)
			}
			got, err := yaml.Marshal(out)
			g.Expect(err).NotTo(HaveOccurred())
			outPath := filepath.Join("testdata", name+".out.yaml")
			if *update {
				g.Expect(os.WriteFile(outPath, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(outPath)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./workflows/injection -run TestInjectionGolden -update")
			g.Expect(string(got)).To(Equal(string(want)))
		})
	}
}

// podTemplates reads the workloads of a manifest stream with their pod templates.
func podTemplates(t *testing.T, raw []byte) map[topology.Key]corev1.PodTemplateSpec {
	t.Helper()
	out := map[topology.Key]corev1.PodTemplateSpec{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc runtime.RawExtension
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		obj, _, err := podDecoder.Decode(doc.Raw, nil, nil)
		if err != nil {
			continue
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			out[topology.WorkloadKey(topology.KindDeployment, o.Namespace, o.Name)] = o.Spec.Template
		case *appsv1.StatefulSet:
			out[topology.WorkloadKey(topology.KindStatefulSet, o.Namespace, o.Name)] = o.Spec.Template
		case *appsv1.DaemonSet:
			out[topology.WorkloadKey(topology.KindDaemonSet, o.Namespace, o.Name)] = o.Spec.Template
		}
	}
}

// flagdSources decodes the sidecar's --sources, so that the goldens show
// them readably as well as in the args.
func flagdSources(t *testing.T, c *corev1.Container) []injection.FlagdSourceConfig {
	if c == nil {
		return nil
	}
	for i, a := range c.Args {
		if a == "--sources" && i+1 < len(c.Args) {
			var out []injection.FlagdSourceConfig
			if err := json.Unmarshal([]byte(c.Args[i+1]), &out); err != nil {
				t.Fatalf("--sources is not JSON: %v", err)
			}
			return out
		}
	}
	t.Fatal("sidecar without --sources")
	return nil
}

// validatePodSpec checks what the API server would check of what the
// injection adds: DNS-label volume names that the mounts find, unique
// names, probes on a container port, requests within limits.
func validatePodSpec(t *testing.T, key topology.Key, pod corev1.PodSpec) {
	t.Helper()
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 {
			t.Errorf("%s: volume %q: %v", key, v.Name, msgs)
		}
		if volumes[v.Name] {
			t.Errorf("%s: volume %q twice", key, v.Name)
		}
		volumes[v.Name] = true
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s: container %s mounts missing volume %q", key, c.Name, m.Name)
			}
		}
		for name, req := range c.Resources.Requests {
			if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
				t.Errorf("%s: container %s: %s request %s above limit %s", key, c.Name, name, req.String(), lim.String())
			}
		}
		seen := map[string]bool{}
		for _, e := range c.Env {
			if seen[e.Name] {
				t.Errorf("%s: container %s: env %s twice", key, c.Name, e.Name)
			}
			seen[e.Name] = true
		}
	}
}

func TestApplyToIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	v := loadView(t, "several-sources")
	inj := injection.Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", "web"), injection.DefaultOptions())
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}
	changed, _ := inj.ApplyTo(&pod)
	g.Expect(changed).To(BeTrue())
	once := pod.DeepCopy()
	changed, warnings := inj.ApplyTo(&pod)
	g.Expect(changed).To(BeFalse())
	g.Expect(warnings).To(BeEmpty())
	g.Expect(&pod).To(Equal(once))
}

func TestApplyToLeavesAPodWithItsOwnFlagdContainerAlone(t *testing.T) {
	g := NewWithT(t)
	v := loadView(t, "targetrefs")
	inj := injection.Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", "web"), injection.DefaultOptions())
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "flagd"}}}
	changed, warnings := inj.ApplyTo(&pod)
	g.Expect(changed).To(BeFalse())
	g.Expect(warnings).To(ConsistOf(ContainSubstring(`the pod has a container named "flagd" already`)))
}

func TestFlagVolumeNameIsAUniqueDNSLabel(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("a.b-", 60) + "z"
	names := map[string]bool{}
	for _, f := range []topology.Key{
		topology.FlagSetKey("shop", "checkout"), topology.FlagSetKey("other", "checkout"),
		topology.FlagSetKey("shop", "flags.v2"), topology.FlagSetKey("shop", long), topology.FlagSetKey("shop", long+"y"),
	} {
		n := injection.FlagVolumeName(f)
		g.Expect(validation.IsDNS1123Label(n)).To(BeEmpty(), n)
		g.Expect(names).NotTo(HaveKey(n))
		names[n] = true
	}
}

// TestInjectionFingerprintFollowsTheInjection: a flag edit never changes the
// fingerprint; a sidecar setting, a newly resolved flag set or the options
// the webhook injects with do.
func TestInjectionFingerprintFollowsTheInjection(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "targetrefs.in.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	topo := topology.New()
	g.Expect(manifests.Load(topo, bytes.NewReader(raw))).To(Succeed())
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	opts := injection.DefaultOptions()
	fp := func() string { f, _ := injection.Fingerprint(topo.Snapshot(), web, opts); return f }
	base := fp()
	g.Expect(base).NotTo(BeEmpty())
	api, _ := injection.Fingerprint(topo.Snapshot(), topology.WorkloadKey(topology.KindDeployment, "shop", "api"), opts)
	g.Expect(api).To(BeEmpty(), "a workload no source applies to")

	ff, _ := topo.Snapshot().FlagSet(topology.FlagSetKey("shop", "checkout"))
	edited := ff.DeepCopy()
	edited.Spec.FlagSpec.Flags["new-checkout"] = v1beta1.Flag{State: "DISABLED", Variants: json.RawMessage(`{"on":true}`), DefaultVariant: "on"}
	_, err = topo.UpsertFlagSet(edited)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fp()).To(Equal(base), "a flag edit reaches pods through the mounted file")

	src, _ := topo.Snapshot().Source(topology.SourceKey("shop", "web-flags"))
	debug := src.DeepCopy()
	debug.Spec.DebugLogging = ptr.To(true)
	_, err = topo.UpsertSource(debug)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fp()).NotTo(Equal(base), "a sidecar setting")

	withDebug := fp()
	opts.Sidecar.Tag = "v0.17.0"
	g.Expect(fp()).NotTo(Equal(withDebug), "the image the webhook injects")
}

func loadView(t *testing.T, name string) *topology.View {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	topo := topology.New()
	if err := manifests.Load(topo, f); err != nil {
		t.Fatal(err)
	}
	return topo.Snapshot()
}

func TestInjectionConflictsOfSource(t *testing.T) {
	g := NewWithT(t)
	v := loadView(t, "several-sources")
	lost := func(name string) []string {
		var out []string
		for _, c := range injection.ConflictsOfSource(v, topology.SourceKey("shop", name), 0, injection.DefaultOptions()) {
			out = append(out, c.Setting)
		}
		return out
	}
	g.Expect(lost("z-annotated")).To(ConsistOf("port", "envVars[LOG_LEVEL]", "contextValues[region]", "resources.requests[memory]"))
	g.Expect(lost("a-flags")).To(BeEmpty())
	g.Expect(lost("b-flags")).To(BeEmpty())
	g.Expect(injection.ConflictsOfSource(v, topology.SourceKey("shop", "z-annotated"), 2, injection.DefaultOptions())).To(HaveLen(2))
}

// TestOperatorDefaults: the operator's sidecar and in-process settings
// (the manager's flags, the OpenFeature Operator's Helm values) apply where
// no source or configuration sets a value other than the API's default; a
// source's own setting wins.
func TestOperatorDefaults(t *testing.T) {
	objects := `
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"flags"},"spec":{"flagSpec":{"flags":{}}}}
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"plain"},"spec":{"port":8013,"managementPort":8014,"evaluator":"json","logFormat":"json","envVarPrefix":"FLAGD","sources":[{"source":"flags"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"plain"}]}}
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"own"},"spec":{"port":9000,"logFormat":"console","probesEnabled":true,"sources":[{"source":"flags"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"own"}]}}
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"InProcessConfiguration","metadata":{"namespace":"shop","name":"inproc"},"spec":{"port":8015,"host":"localhost","envVarPrefix":"FLAGD"}}
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"plain"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"own"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"inproc"},"spec":{"template":{"metadata":{"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/inprocessconfiguration":"inproc"}},"spec":{"containers":[{"name":"app","image":"app"}]}}}}
`
	topo := topology.New()
	if err := manifests.Load(topo, strings.NewReader(objects)); err != nil {
		t.Fatal(err)
	}
	v := topo.Snapshot()
	o := injection.DefaultOptions()
	o.Sidecar.Image, o.Sidecar.Tag = "mirror/flagd", "v9"
	o.Sidecar.Port, o.Sidecar.ManagementPort = 7013, 7014
	o.Sidecar.LogFormat, o.Sidecar.EnvVarPrefix, o.Sidecar.SocketPath = "console", "", "/tmp/flagd.sock"
	o.Sidecar.ProbesEnabled, o.Sidecar.DebugLogging = false, true
	o.Sidecar.ImagePullSecrets = []string{"registry-credentials"}
	o.InProcess.Host, o.InProcess.Port, o.InProcess.EnvVarPrefix = "flagplane-sync.flagplane-system.svc", 8015, "OF"

	t.Run("the operator's values where the source keeps the API's defaults", func(t *testing.T) {
		g := NewWithT(t)
		inj := injection.Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", "plain"), o)
		c := inj.Sidecar
		g.Expect(c.Image).To(Equal("mirror/flagd:v9"))
		g.Expect(c.Args).To(ContainElements("--port", "7013", "--management-port", "7014", "--log-format", "console",
			"--socket-path", "/tmp/flagd.sock", "--debug"))
		g.Expect(c.StartupProbe).To(BeNil())
		g.Expect(c.ReadinessProbe).To(BeNil())
		g.Expect(inj.Env).To(ContainElements(
			corev1.EnvVar{Name: "PORT", Value: "7013"}, corev1.EnvVar{Name: "MANAGEMENT_PORT", Value: "7014"},
			corev1.EnvVar{Name: "SOCKET_PATH", Value: "/tmp/flagd.sock"}), "an empty prefix names the env vars without one")
		g.Expect(inj.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "registry-credentials"}}))
		pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}, ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry-credentials"}}}
		inj.ApplyTo(&pod)
		g.Expect(pod.ImagePullSecrets).To(HaveLen(1), "a secret the pod names already is not added twice")
	})
	t.Run("a source's own values win", func(t *testing.T) {
		g := NewWithT(t)
		inj := injection.Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", "own"), o)
		g.Expect(inj.Sidecar.Args).To(ContainElements("--port", "9000", "--management-port", "7014"))
		g.Expect(inj.Sidecar.ReadinessProbe).NotTo(BeNil(), "the source asks for probes")
	})
	t.Run("in-process defaults", func(t *testing.T) {
		g := NewWithT(t)
		inj := injection.Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", "inproc"), o)
		g.Expect(inj.Sidecar).To(BeNil())
		g.Expect(inj.ImagePullSecrets).To(BeEmpty(), "no sidecar, nothing to pull")
		g.Expect(inj.Env).To(ContainElements(corev1.EnvVar{Name: "OF_HOST", Value: "flagplane-sync.flagplane-system.svc"},
			corev1.EnvVar{Name: "OF_PORT", Value: "8015"}, corev1.EnvVar{Name: "OF_RESOLVER", Value: "in-process"}))
	})
}

// TestDefaultSyncProvider: an entry that names no provider, of a source
// with no defaultSyncProvider, syncs with the operator's default provider.
func TestDefaultSyncProvider(t *testing.T) {
	objects := `
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"flags"},"spec":{"flagSpec":{"flags":{}}}}
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"src"},"spec":{"sources":[{"source":"flags"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"web"}]}}
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}
`
	for _, tc := range []struct {
		def      v1beta1.SyncProviderType
		provider string
		cms      int
		roles    int
	}{{"", "file", 1, 0}, {v1beta1.SyncProviderKubernetes, "kubernetes", 0, 1}} {
		t.Run(string(tc.def), func(t *testing.T) {
			g := NewWithT(t)
			topo := topology.New(topology.WithDefaultSyncProvider(tc.def))
			g.Expect(manifests.Load(topo, strings.NewReader(objects))).To(Succeed())
			v := topo.Snapshot()
			web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
			inj := injection.Desired(v, web, injection.DefaultOptions())
			g.Expect(flagdSources(t, inj.Sidecar)).To(ConsistOf(HaveField("Provider", tc.provider)))
			g.Expect(inj.ConfigMaps).To(HaveLen(tc.cms))
			roles, _ := rbac.Desired(v, web, workflows.GeneratedMetadata{})
			g.Expect(roles).To(HaveLen(tc.roles))
			if tc.roles > 0 {
				g.Expect(inj.PodAnnotations).To(HaveKeyWithValue(injection.AnnotationAllowKubernetesSync, "true"))
			}
		})
	}
}

// TestContextArgs: what ContextArgs reads back from a sidecar's args is the
// merged contextValues and headerToContextMappings the sidecar was given:
// a source's own, and those a FeatureFlagSourcePolicy sets over them.
func TestContextArgs(t *testing.T) {
	for _, c := range []struct {
		golden, workload       string
		wantValues, wantHeader map[string]string
	}{
		{"sidecar-settings", "web", map[string]string{"env": "prod", "region": "eu"}, map[string]string{"X-User-Id": "userId"}},
		{"policy-merge", "web", map[string]string{"region": "eu-west-1", "tier": "gold"}, map[string]string{"x-user-tier": "tier"}},
		{"several-sources", "web", map[string]string{"region": "us", "tier": "gold"}, nil},
		{"selector", "storefront", nil, nil},
	} {
		t.Run(c.golden, func(t *testing.T) {
			g := NewWithT(t)
			v := loadView(t, c.golden)
			inj := injection.Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", c.workload), injection.DefaultOptions())
			g.Expect(inj.Sidecar).NotTo(BeNil())
			values, headers := injection.ContextArgs(inj.Sidecar.Args)
			g.Expect(values).To(Equal(c.wantValues))
			g.Expect(headers).To(Equal(c.wantHeader))
		})
	}
}
