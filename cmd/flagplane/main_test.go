package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("digraph topology {\n}\n"))
	}))
	defer srv.Close()

	tests := []struct {
		name       string
		args       []string
		wantOut    string
		wantStderr string
		wantErr    error
		wantErrMsg string
	}{
		{name: "no command: the help", args: nil, wantOut: "Available Commands:"},
		{name: "unknown command", args: []string{"dump"}, wantErr: errUsage, wantErrMsg: `unknown command "dump"`,
			wantStderr: "See 'flagplane --help'."},
		{name: "a misspelt command", args: []string{"explian"}, wantErr: errUsage, wantErrMsg: "Did you mean this?\n\texplain"},
		{name: "help", args: []string{"help"}, wantOut: "  topology    Dump the topology"},
		{name: "topology help", args: []string{"topology", "-h"}, wantOut: "--from-dir"},
		{name: "a default provider for a manager's graph", args: []string{"topology", "--url", srv.URL, "--sidecar-sync-provider", "kubernetes"},
			wantErr: errUsage, wantErrMsg: "--sidecar-sync-provider goes with a cluster"},
		{name: "help names migrate", args: []string{"help"}, wantOut: "  migrate     Find what the OpenFeature Operator left"},
		{name: "migrate help", args: []string{"migrate", "-h"}, wantOut: "--apply"},
		{name: "migrate: stray argument", args: []string{"migrate", "now"}, wantErr: errUsage},
		{name: "migrate: kubeconfig that does not exist", args: []string{"migrate", "--kubeconfig", "testdata-none/kubeconfig"},
			wantErrMsg: "loading kubeconfig"},
		{name: "two sources", args: []string{"topology", "--url", srv.URL, "--from-dir", "."}, wantErr: errUsage,
			wantErrMsg: "give one of --url, --kubeconfig and --from-dir"},
		{name: "bad format", args: []string{"topology", "--url", srv.URL, "--format", "jpeg"}, wantErr: errUsage,
			wantErrMsg: `unknown --format "jpeg"`},
		{name: "a token file without --url", args: []string{"topology", "--token-file", "t"}, wantErr: errUsage,
			wantErrMsg: "--token-file goes with --url"},
		{name: "two tokens", args: []string{"topology", "--url", srv.URL, "--token", "t", "--token-file", "f"}, wantErr: errUsage,
			wantErrMsg: "give one of --token and --token-file"},
		{name: "a kubeconfig context with --url", args: []string{"topology", "--url", srv.URL, "--context", "prod", "--as", "bob"}, wantErr: errUsage,
			wantErrMsg: "--as, --context go with a cluster, not --url"},
		{name: "namespaces offline", args: []string{"topology", "--from-dir", ".", "--namespaces", "shop"}, wantErr: errUsage,
			wantErrMsg: "--namespaces goes with a cluster"},
		{name: "a namespace with a cluster", args: []string{"topology", "-n", "shop"}, wantErr: errUsage,
			wantErrMsg: "to read only some namespaces of a cluster, give --namespaces"},
		{name: "a format given as the file", args: []string{"topology", "--from-dir", "../../config/samples", "-o", "svg"}, wantErr: errUsage,
			wantErrMsg: "-o names the file to write (\"svg\" here): choose the format with --format svg"},
		{name: "token file that does not exist", args: []string{"topology", "--url", srv.URL, "--token-file", "testdata-none/token"},
			wantErrMsg: "reading --token-file"},
		{name: "stray argument", args: []string{"topology", "extra"}, wantErr: errUsage},
		{name: "from a URL", args: []string{"topology", "--url", srv.URL}, wantOut: "digraph topology {\n}\n"},
		{name: "offline", args: []string{"topology", "--from-dir", "../../config/samples", "--namespace", "shop"},
			wantOut: `"featureflagsource:shop/shop" -> "deployment:shop/shop-web"`},
		{name: "offline, -n", args: []string{"topology", "--from-dir", "../../config/samples", "-n", "shop"},
			wantOut: `"featureflagsource:shop/shop" -> "deployment:shop/shop-web"`},
		{name: "kubeconfig that does not exist", args: []string{"topology", "--kubeconfig", "testdata-none/kubeconfig"},
			wantErrMsg: "loading kubeconfig"},
		{name: "no kubeconfig at all", args: []string{"topology"},
			wantErrMsg: "loading kubeconfig: there is none (give --kubeconfig, set KUBECONFIG or write ~/.kube/config; with --from-dir DIR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			switch {
			case tt.wantErr != nil:
				g.Expect(errors.Is(err, tt.wantErr)).To(BeTrue(), "error %v", err)
				g.Expect(exitCode(err)).To(Equal(2))
			case tt.wantErrMsg != "":
				g.Expect(err).To(HaveOccurred())
				g.Expect(exitCode(err)).To(Equal(1))
			default:
				g.Expect(err).NotTo(HaveOccurred())
			}
			if tt.wantErrMsg != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErrMsg)))
			}
			g.Expect(stdout.String()).To(ContainSubstring(tt.wantOut))
			if err != nil {
				g.Expect(stderr.String()).To(ContainSubstring("flagplane: "+err.Error()), "the error is printed")
			}
			g.Expect(stderr.String()).To(ContainSubstring(tt.wantStderr))
		})
	}
}

func TestRunWritesFile(t *testing.T) {
	g := NewWithT(t)
	out := filepath.Join(t.TempDir(), "topology.dot")
	var stdout, stderr bytes.Buffer
	g.Expect(run(context.Background(), []string{"topology", "--from-dir", "../../config/samples", "-o", out}, &stdout, &stderr)).To(Succeed())
	g.Expect(stdout.Len()).To(BeZero())
	b, err := os.ReadFile(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(HavePrefix("digraph topology {"))
}

// TestTopologyDefaultProvider: with the manager's --sidecar-sync-provider,
// an entry that names no provider is read as the manager reads it.
func TestTopologyDefaultProvider(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(`
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: flags}
spec: {flagSpec: {flags: {}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: src}
spec:
  sources: [{source: flags}]
  targetRefs: [{group: apps, kind: Deployment, name: web}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {template: {spec: {containers: [{name: app, image: app}]}}}
`), 0o644)).To(Succeed())
	for provider, wantConfigMap := range map[string]bool{"": true, "kubernetes": false} {
		var stdout, stderr bytes.Buffer
		args := []string{"topology", "--from-dir", dir, "--namespace", "shop"}
		if provider != "" {
			args = append(args, "--sidecar-sync-provider", provider)
		}
		g.Expect(run(context.Background(), args, &stdout, &stderr)).To(Succeed())
		if wantConfigMap {
			g.Expect(stdout.String()).To(ContainSubstring(`"configmap:shop/shop/flags"`), "file: a generated ConfigMap")
		} else {
			g.Expect(stdout.String()).NotTo(ContainSubstring(`"configmap:`), "kubernetes: no ConfigMap")
		}
	}
}

func TestDiff(t *testing.T) {
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	args := []string{"diff", "-f", "testdata/diff-change.yaml", "--from-dir", "../../inspect/explain/testdata"}
	g.Expect(run(context.Background(), args, &stdout, &stderr)).To(Succeed(), stderr.String())
	g.Expect(stdout.String()).To(Equal(`FeatureFlagSource shop/by-label
  this source reaches 1 namespace, 1 workload and 0 Flagds; no workload's sidecar changes
FeatureFlag shop/checkout
  this flag set reaches 1 namespace, 1 workload and 0 Flagds through 2 FeatureFlagSources (shop); its flagd processes read the new content without a restart
  through:
    - FeatureFlagSource shop/by-label
    - FeatureFlagSource shop/by-name
  workloads:
    - Deployment shop/web
`), "by-label's port loses to by-name's, so no sidecar changes")

	// A source that would now also select batch: it gains a workload, whose
	// sidecar appears and which restarts (rolloutOnChange).
	wider := `apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: by-name, namespace: shop}
spec:
  rolloutOnChange: true
  sources: [{source: checkout, provider: file}]
  targetRefs: [{group: apps, kind: Deployment, name: web}, {group: apps, kind: Deployment, name: batch}]
`
	file := filepath.Join(t.TempDir(), "wider.yaml")
	g.Expect(os.WriteFile(file, []byte(wider), 0o600)).To(Succeed())
	stdout.Reset()
	g.Expect(run(context.Background(), []string{"diff", "-f", file, "--from-dir", "../../inspect/explain/testdata", "-o", "json"}, &stdout, &stderr)).To(Succeed(), stderr.String())
	var changes []struct {
		Source struct {
			Gained, Changed, Restarts []struct{ Name string }
		}
	}
	g.Expect(json.Unmarshal(stdout.Bytes(), &changes)).To(Succeed())
	g.Expect(changes).To(HaveLen(1))
	g.Expect(changes[0].Source.Gained).To(ConsistOf(HaveField("Name", "batch")))
	g.Expect(changes[0].Source.Changed).To(ContainElement(HaveField("Name", "batch")))
	g.Expect(changes[0].Source.Restarts).To(ContainElement(HaveField("Name", "batch")))

	g.Expect(run(context.Background(), []string{"diff", "-f", "../../config/samples/deployment.yaml", "--from-dir", "../../inspect/explain/testdata"}, &stdout, &stderr)).
		To(MatchError(ContainSubstring(`kind "Deployment": flagplane diff tells what FeatureFlags and FeatureFlagSources change`)))
}

// TestDiffContexts: diff --contexts, on what the golden files do not show:
// a flag that changes type, a flag set flagd would not load, an unchanged
// one, and contexts files that are refused.
func TestDiffContexts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	contexts := write("contexts.yaml", "- {name: gold, context: {tier: gold}}\n- name: anyone\n")
	checkout := func(flag string) string {
		return write("checkout.yaml", `apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: checkout, namespace: shop}
spec: {flagSpec: {flags: {new-checkout: `+flag+`}}}
`)
	}
	diff := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"diff", "--from-dir", "../../inspect/explain/testdata"}, args...), &stdout, &stderr)
		return stdout.String(), err
	}

	t.Run("unchanged", func(t *testing.T) {
		g := NewWithT(t)
		out, err := diff("-f", checkout(`{state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}`), "--contexts", contexts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(HaveSuffix(`  evaluated with flagd v0.16.0's evaluator: 1 flag in 2 contexts
    gold: no flag changes
    anyone: no flag changes
`))
	})
	t.Run("a flag that changes type", func(t *testing.T) {
		g := NewWithT(t)
		out, err := diff("-f", checkout(`{state: ENABLED, variants: {"v1": "classic", "v2": "express"}, defaultVariant: v1,
  targeting: {if: [{"==": [{var: tier}, gold]}, v2, null]}}`), "--contexts", contexts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(HaveSuffix(`  evaluated with flagd v0.16.0's evaluator: 1 flag in 2 contexts
    gold: 1 flag changes
      - new-checkout: off (false, STATIC) -> v2 ("express", TARGETING_MATCH) (now a string flag: clients asking for a boolean get TYPE_MISMATCH)
    anyone: 1 flag changes
      - new-checkout: off (false, STATIC) -> v1 ("classic", DEFAULT) (now a string flag: clients asking for a boolean get TYPE_MISMATCH)
`))
	})
	t.Run("disabled", func(t *testing.T) {
		g := NewWithT(t)
		out, err := diff("-f", checkout(`{state: DISABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}`), "--contexts", contexts, "-o", "json")
		g.Expect(err).NotTo(HaveOccurred())
		var changes []change
		g.Expect(json.Unmarshal([]byte(out), &changes)).To(Succeed())
		g.Expect(changes).To(HaveLen(1))
		g.Expect(changes[0].Evaluations[0].Contexts).To(HaveLen(2))
		g.Expect(changes[0].Evaluations[0].Contexts[0].Changed).To(ConsistOf(HaveField("After.Reason", "DISABLED")))
	})
	t.Run("a flag set flagd would not load", func(t *testing.T) {
		g := NewWithT(t)
		out, err := diff("-f", checkout(`{state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "blue"}`), "--contexts", contexts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(HaveSuffix("  flagd v0.16.0 would not load this flag set (default variant: 'blue' isn't a valid variant of flag: 'new-checkout'): it keeps serving the current one\n"))
	})
	t.Run("a source has nothing to evaluate", func(t *testing.T) {
		g := NewWithT(t)
		out, err := diff("-f", "testdata/diff-change.yaml", "--contexts", contexts, "-o", "json")
		g.Expect(err).NotTo(HaveOccurred())
		var changes []change
		g.Expect(json.Unmarshal([]byte(out), &changes)).To(Succeed())
		g.Expect(changes).To(HaveLen(2))
		g.Expect(changes[0].Source).NotTo(BeNil())
		g.Expect(changes[0].Evaluations).To(BeNil())
		g.Expect(changes[1].Evaluations).NotTo(BeNil(), "the file's FeatureFlag")
		g.Expect(changes[1].Evaluations[0].Contexts[1].Changed).To(ConsistOf(And(
			HaveField("Flag", "new-checkout"), HaveField("Before.Variant", "off"), HaveField("After.Variant", "on"))))
	})

	t.Run("consumers whose flagds add to the context", func(t *testing.T) {
		g := NewWithT(t)
		graph := t.TempDir()
		manifest := func(name, content string) {
			g.Expect(os.WriteFile(filepath.Join(graph, name), []byte(content), 0o600)).To(Succeed())
		}
		flagSet := `apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: checkout, namespace: shop}
spec: {flagSpec: {flags: {new-checkout: %s}}}
`
		manifest("flags.yaml", fmt.Sprintf(flagSet, `{state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}`))
		workloads := ""
		for _, name := range []string{"eu-web", "web", "tiered-web"} {
			workloads += `---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: ` + name + `}
spec:
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec: {containers: [{name: app, image: app}]}
`
		}
		manifest("workloads.yaml", workloads+`---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: eu}
spec:
  sources: [{source: checkout}]
  contextValues: {region: eu}
  targetRefs: [{group: apps, kind: Deployment, name: eu-web}]
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: plain}
spec:
  sources: [{source: checkout}]
  targetRefs: [{group: apps, kind: Deployment, name: web}]
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: tiered}
spec:
  sources: [{source: checkout}]
  headerToContextMappings: {X-Tier: tier}
  targetRefs: [{group: apps, kind: Deployment, name: tiered-web}]
`)
		// on for region eu (which a request cannot override: flagd's
		// static values win), or for tier gold (which the X-Tier header sets
		// where flagd maps it, over the request's own tier).
		edited := write("edited.yaml", fmt.Sprintf(flagSet, `{state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off",
  targeting: {if: [{or: [{"==": [{var: region}, eu]}, {"==": [{var: tier}, gold]}]}, "on", "off"]}}`))
		ctxs := write("headers.yaml", `- {name: us-bronze, context: {region: us, tier: bronze}, headers: {x-tier: gold}}
- {name: us, context: {region: us}}
`)
		var stdout, stderr bytes.Buffer
		g.Expect(run(context.Background(), []string{"diff", "--from-dir", graph, "-f", edited, "--contexts", ctxs}, &stdout, &stderr)).To(Succeed())
		g.Expect(stdout.String()).To(HaveSuffix(`  evaluated with flagd v0.16.0's evaluator: 1 flag in 2 contexts
  as Deployment shop/eu-web serve it with --context-value region=eu:
      us-bronze: 1 flag changes
        - new-checkout: off (false, STATIC) -> on (true, TARGETING_MATCH)
      us: 1 flag changes
        - new-checkout: off (false, STATIC) -> on (true, TARGETING_MATCH)
  as Deployment shop/tiered-web serve it with --context-from-header X-Tier=tier:
      us-bronze: 1 flag changes
        - new-checkout: off (false, STATIC) -> on (true, TARGETING_MATCH)
      us: 1 flag changes
        - new-checkout: off (false, STATIC) -> off (false, TARGETING_MATCH)
  as Deployment shop/web serve it, adding nothing to the context:
      us-bronze: 1 flag changes
        - new-checkout: off (false, STATIC) -> off (false, TARGETING_MATCH)
      us: 1 flag changes
        - new-checkout: off (false, STATIC) -> off (false, TARGETING_MATCH)
`))
	})

	t.Run("a flagd that serves another flag set after this one", func(t *testing.T) {
		g := NewWithT(t)
		graph := t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(graph, "all.yaml"), []byte(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: checkout, namespace: shop}
spec: {flagSpec: {flags: {new-checkout: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"},
  fast-pay: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: pinned, namespace: shop}
spec: {flagSpec: {flags: {new-checkout: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: web}
spec:
  sources: [{source: checkout}, {source: pinned}, {source: "https://flags.example.com/extra.json", provider: http}]
  targetRefs: [{group: apps, kind: Deployment, name: web}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
`), 0o600)).To(Succeed())
		edited := write("both-on.yaml", `apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: checkout, namespace: shop}
spec: {flagSpec: {flags: {new-checkout: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "on"},
  fast-pay: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "on"}}}}
`)
		var stdout, stderr bytes.Buffer
		g.Expect(run(context.Background(), []string{"diff", "--from-dir", graph, "-f", edited, "--contexts", contexts}, &stdout, &stderr)).To(Succeed())
		g.Expect(stdout.String()).To(HaveSuffix(`  evaluated with flagd v0.16.0's evaluator: 2 flags in 2 contexts
  as Deployment shop/web serve it, adding nothing to the context:
      answered from a later source of the same flagd (FeatureFlag shop/pinned), not from this flag set: new-checkout
      also serves sources flagplane cannot see into, whose keys may hide or be hidden by these: http https://flags.example.com/extra.json
      gold: 1 flag changes
        - fast-pay: off (false, STATIC) -> on (true, STATIC)
      anyone: 1 flag changes
        - fast-pay: off (false, STATIC) -> on (true, STATIC)
`))
	})

	for _, tt := range []struct {
		name, contexts, wantErr string
		usage                   bool
	}{
		{name: "no file named", contexts: "", wantErr: "--contexts names the file of evaluation contexts", usage: true},
		{name: "a file that does not exist", contexts: filepath.Join(dir, "none.yaml"), wantErr: "reading --contexts: open"},
		{name: "empty", contexts: write("empty.yaml", "# nothing\n"), wantErr: "no evaluation contexts: give a list of {name, context}"},
		{name: "not a list", contexts: write("map.yaml", "name: a\ncontext: {}\n"), wantErr: "want a list of {name, context}"},
		{name: "no name", contexts: write("noname.yaml", "- context: {a: 1}\n"), wantErr: "context 1 has no name"},
		{name: "twice", contexts: write("twice.yaml", "- name: a\n- name: a\n"), wantErr: `context "a" is given twice`},
		{name: "a misspelt field", contexts: write("ctx.yaml", "- name: a\n  ctx: {tier: gold}\n"), wantErr: `context 1: want {name, context, headers} with context an object and headers a map of strings: json: unknown field "ctx"`},
		{name: "a context that is not an object", contexts: write("list.yaml", "- name: a\n  context: [1]\n"), wantErr: "context 1: want {name, context, headers} with context an object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := diff("-f", "testdata/diff-change.yaml", "--contexts", tt.contexts)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(errors.Is(err, errUsage)).To(Equal(tt.usage))
		})
	}
}

// TestDiffSaysWhatThePodsServe: a FeatureFlag whose status says what its
// pods serve (as read from a cluster) has it in its diff, per namespace.
func TestDiffSaysWhatThePodsServe(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	ff := `apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: flags}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: %s}}}}
`
	status := `status:
  confirmed: 1/2
  serving:
  - {namespace: shop, revision: 0123456789abcdef0123456789abcdef, pods: 2, confirmed: 1, others: [{pods: 1}], reason: "pod web-2: its flagd cannot be read: connection refused"}
`
	g.Expect(os.WriteFile(filepath.Join(dir, "ff.yaml"), []byte(fmt.Sprintf(ff, `"on"`)+status), 0o600)).To(Succeed())
	change := filepath.Join(t.TempDir(), "change.yaml")
	g.Expect(os.WriteFile(change, []byte(fmt.Sprintf(ff, `"off"`)), 0o600)).To(Succeed())
	var stdout, stderr bytes.Buffer
	g.Expect(execute(context.Background(), "flagplane", []string{"diff", "-f", change, "--from-dir", dir}, nil, &stdout, &stderr)).To(Succeed(), stderr.String())
	g.Expect(stdout.String()).To(ContainSubstring(`  now 1/2 pods serve what is planned for them, as their flagd answers (status):
    - shop: 1 of 2 pods serve 0123456789ab; 1 not known; pod web-2: its flagd cannot be read: connection refused
`))
}
