package injection_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// appOnlyEnv are env vars flagplane gives the sidecar for the app
// containers' flagd providers (they share one list), which flagd itself
// must not read, and the source's own env vars of flagd-versions.yaml.
var appOnlyEnv = []string{"FLAGD_EVALUATOR", "FLAGD_RESOLVER", "FLAGD_CUSTOM"}

// TestEveryVouchedRelease: for every flagd release flagplane vouches for,
// everything it writes into a sidecar — for every provider, with every
// setting a source can make, syncProviderArgs passed or not — is taken by
// that release as the table says (flagdversion.Facts.Check); what the
// release lacks is left out with a gap that names it, and nothing it takes
// is left out.
func TestEveryVouchedRelease(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "flagd-versions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	topo := topology.New()
	if err := manifests.Load(topo, bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	v := topo.Snapshot()
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	source := topology.SourceKey("shop", "everything")
	for _, release := range flagdversion.Vouched() {
		for _, pass := range []bool{false, true} {
			t.Run(release.String()+map[bool]string{false: "", true: "/sync-provider-args"}[pass], func(t *testing.T) {
				g := NewWithT(t)
				facts, _ := flagdversion.For(release)
				o := goldenInjectionOptions()
				o.Sidecar.Tag = release.String()
				o.PassSyncProviderArgs = pass
				inj := injection.Desired(v, web, o)
				g.Expect(inj.Sidecar).NotTo(BeNil())
				g.Expect(facts.Check(inj.Sidecar.Args, inj.Sidecar.Env, appOnlyEnv...)).To(BeEmpty())

				// Left out is exactly what the release lacks.
				var wantGaps []string
				has := func(flag string) bool { return slices.Contains(inj.Sidecar.Args, "--"+flag) }
				for _, flag := range []string{"context-value", "context-from-header", "sync-provider-args"} {
					switch {
					case facts.HasFlag(flag):
						g.Expect(has(flag) || (flag == "sync-provider-args" && !pass)).To(BeTrue(), "--%s written", flag)
					default:
						g.Expect(has(flag)).To(BeFalse())
						wantGaps = append(wantGaps, "--"+flag)
					}
				}
				// The keepalive settings are flagd's env vars, the sidecar's
				// alone, written for a release that reads them.
				for flag, value := range map[string]string{"keep-alive-min-time": "45s", "keep-alive-permit-without-stream": "false"} {
					name := flagdversion.EnvVar(flag)
					if facts.HasFlag(flag) {
						g.Expect(inj.Sidecar.Env).To(ContainElement(corev1.EnvVar{Name: name, Value: value}))
					} else {
						g.Expect(inj.Sidecar.Env).NotTo(ContainElement(HaveField("Name", name)))
						wantGaps = append(wantGaps, "--"+flag)
					}
					g.Expect(inj.Env).NotTo(ContainElement(HaveField("Name", name)), "the apps' SDKs do not read %s", name)
				}
				sources := flagdSources(t, inj.Sidecar)
				for _, p := range []string{"gcs", "azblob", "s3"} {
					written := slices.ContainsFunc(sources, func(s injection.FlagdSourceConfig) bool { return s.Provider == p })
					g.Expect(written).To(Equal(facts.HasProvider(p)), "provider %s", p)
					if !facts.HasProvider(p) {
						wantGaps = append(wantGaps, "provider "+p)
					}
				}
				proxied := slices.ContainsFunc(sources, func(s injection.FlagdSourceConfig) bool {
					return strings.HasPrefix(s.Selector, injection.FlagdProxySelectorPrefix)
				})
				g.Expect(proxied).To(Equal(facts.HasSourceField("headers")), "the flagd-proxy entry needs headers for the sync server's credential")
				if !facts.HasSourceField("headers") {
					wantGaps = append(wantGaps, "field headers")
				}
				g.Expect(len(sources)).To(Equal(9-len(wantGaps)+countFlagGaps(wantGaps)), "every other entry is written")

				gaps := injection.VersionGapsOfSource(v, source, o)
				g.Expect(gaps).To(HaveLen(len(wantGaps)), "%v", gaps)
				for _, want := range wantGaps {
					g.Expect(gaps).To(ContainElement(HaveField("Why", ContainSubstring(want))))
				}
				for _, gap := range gaps {
					g.Expect(gap.Source).To(Equal(source))
					g.Expect(gap.Why).To(HavePrefix("flagd " + release.String() + " (--sidecar-tag) "))
					g.Expect(inj.Warnings).To(ContainElement(gap.String()))
				}
				g.Expect(inj.FlagdVersionGaps).To(ConsistOf(gaps))
			})
		}
	}
}

func countFlagGaps(gaps []string) int {
	n := 0
	for _, g := range gaps {
		if strings.HasPrefix(g, "--") {
			n++
		}
	}
	return n
}

// TestEveryVouchedReleaseGoldenInputs: the sidecar of every workload of
// every injection golden input is taken by every vouched release.
func TestEveryVouchedReleaseGoldenInputs(t *testing.T) {
	inputs, _ := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	for _, in := range inputs {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		topo := topology.New()
		if err := manifests.Load(topo, bytes.NewReader(raw)); err != nil {
			t.Fatal(err)
		}
		v := topo.Snapshot()
		for key := range podTemplates(t, raw) {
			for _, release := range flagdversion.Vouched() {
				facts, _ := flagdversion.For(release)
				o := goldenInjectionOptions()
				o.Sidecar.Tag = release.String()
				inj := injection.Desired(v, key, o)
				if inj.Sidecar == nil {
					continue
				}
				// The sources' own env vars are theirs to name.
				appOnly := slices.Clone(appOnlyEnv)
				for _, e := range inj.Sidecar.Env {
					if _, reads := facts.EnvFlag(e.Name); !reads {
						appOnly = append(appOnly, e.Name)
					}
				}
				if problems := facts.Check(inj.Sidecar.Args, inj.Sidecar.Env, appOnly...); len(problems) > 0 {
					t.Errorf("%s, %s, flagd %s: %v", filepath.Base(in), key, release, problems)
				}
			}
		}
	}
}
