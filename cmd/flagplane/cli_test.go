package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/flagplane/flagplane/test/freeport"
)

// TestCommandTree: every command is there, with its own flags and
// kubectl's connection flags.
func TestCommandTree(t *testing.T) {
	g := NewWithT(t)
	root := newRootCmd("flagplane")
	connection := map[string]string{"kubeconfig": "", "context": "", "cluster": "", "user": "", "namespace": "n",
		"server": "s", "token": "", "as": "", "as-group": "", "certificate-authority": "", "insecure-skip-tls-verify": "", "request-timeout": ""}
	own := map[string]map[string]string{
		"topology": {"url": "", "token-file": "", "format": "", "output": "o", "from-dir": "", "namespaces": "", "sidecar-sync-provider": "", "timeout": ""},
		"explain":  {"output": "o", "from-dir": "", "namespaces": "", "sidecar-sync-provider": "", "timeout": ""},
		"diff":     {"filename": "f", "output": "o", "from-dir": "", "namespaces": "", "sidecar-sync-provider": "", "timeout": "", "revisions": ""},
		"migrate":  {"apply": "", "timeout": ""},
		"history":  {"output": "o", "revision": "", "timeout": ""},
		"rollback": {"to-revision": "", "dry-run": "", "timeout": ""},
	}
	for name, flags := range own {
		cmd, rest, err := root.Find([]string{name})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rest).To(BeEmpty())
		g.Expect(cmd.Name()).To(Equal(name))
		g.Expect(cmd.Short).NotTo(BeEmpty())
		for flag, short := range flags {
			f := cmd.Flags().Lookup(flag)
			g.Expect(f).NotTo(BeNil(), "%s --%s", name, flag)
			g.Expect(f.Shorthand).To(Equal(short), "%s --%s", name, flag)
		}
		for flag, short := range connection {
			f := cmd.InheritedFlags().Lookup(flag)
			g.Expect(f).NotTo(BeNil(), "%s --%s", name, flag)
			g.Expect(f.Shorthand).To(Equal(short), "%s --%s", name, flag)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		var stdout, stderr bytes.Buffer
		g.Expect(run(context.Background(), []string{"completion", shell}, &stdout, &stderr)).To(Succeed())
		g.Expect(stdout.String()).To(ContainSubstring("flagplane"), shell)
		g.Expect(stdout.String()).To(ContainSubstring("__complete"), shell)
	}
}

// TestCommandLines: what each command line says, from usage errors (exit
// code 2, with where to find help) to the errors of a cluster.
func TestCommandLines(t *testing.T) {
	unreachableAddr := closedAddress(t)
	unreachable := writeKubeconfig(t, unreachableAddr, "shop")
	tests := []struct {
		name    string
		args    []string
		usage   bool   // a usage error (exit code 2)
		wantErr string // the error, printed
		wantOut string
	}{
		{name: "explain: no object", args: []string{"explain"}, usage: true, wantErr: "give one object as KIND/NAME, e.g. deployment/web"},
		{name: "explain: two objects", args: []string{"explain", "deploy/a", "deploy/b"}, usage: true, wantErr: "give one object as KIND/NAME"},
		{name: "explain: no kind", args: []string{"explain", "web"}, usage: true, wantErr: `give the object as KIND/NAME, e.g. deployment/web (not "web")`},
		{name: "explain: unknown kind", args: []string{"explain", "pod/web-1", "--from-dir", "../../inspect/explain/testdata"}, usage: true,
			wantErr: `cannot explain kind "pod": use deployment, statefulset, daemonset, featureflag, featureflagsource, inprocessconfiguration or featureflagsourcepolicy`},
		{name: "explain: unknown -o", args: []string{"explain", "deploy/web", "-o", "wide", "--from-dir", "../../inspect/explain/testdata"}, usage: true,
			wantErr: `unknown -o "wide": use one of text, json, yaml`},
		{name: "explain: unknown flag", args: []string{"explain", "deploy/web", "--bogus"}, usage: true, wantErr: "unknown flag: --bogus"},
		{name: "explain: a cluster's flags offline", args: []string{"explain", "deploy/web", "--from-dir", "../../inspect/explain/testdata", "--context", "prod", "--kubeconfig", "k"},
			usage: true, wantErr: "--from-dir reads no cluster: leave out --context, --kubeconfig"},
		{name: "explain: --namespaces offline", args: []string{"explain", "deploy/web", "--from-dir", "../../inspect/explain/testdata", "--namespaces", "shop"},
			usage: true, wantErr: "--from-dir reads no cluster: leave out --namespaces"},
		{name: "explain: the wrong namespace", args: []string{"explain", "deploy/web", "--from-dir", "../../inspect/explain/testdata"},
			wantErr: "Deployment default/web is not in the graph (it does not exist, or you may not list it); there is one in namespace shop: give -n shop"},
		{name: "explain: --namespace", args: []string{"explain", "deploy/web", "--namespace", "shop", "--from-dir", "../../inspect/explain/testdata"},
			wantOut: "Deployment shop/web\n"},
		{name: "explain: no kubeconfig", args: []string{"explain", "deploy/web", "-n", "shop"},
			wantErr: "loading kubeconfig: there is none (give --kubeconfig, set KUBECONFIG or write ~/.kube/config; with --from-dir DIR the command reads manifests offline and needs none)"},
		{name: "explain: a context that does not exist", args: []string{"explain", "deploy/web", "--kubeconfig", unreachable, "--context", "prod"},
			wantErr: `loading kubeconfig: context "prod" does not exist`},
		{name: "explain: an unreachable cluster", args: []string{"explain", "deploy/web", "--kubeconfig", unreachable},
			wantErr: "cannot reach the cluster at " + unreachableAddr + " (is the kubeconfig's context, or --context, the right one?): "},
		{name: "diff: no file", args: []string{"diff", "--from-dir", "../../inspect/explain/testdata"}, usage: true, wantErr: "give the manifests with -f FILE"},
		{name: "diff: unknown -o", args: []string{"diff", "-f", "testdata/diff-change.yaml", "-o", "table"}, usage: true,
			wantErr: `unknown -o "table": use one of text, json, yaml`},
		{name: "diff: --filename", args: []string{"diff", "--filename", "testdata/diff-change.yaml", "--from-dir", "../../inspect/explain/testdata"},
			wantOut: "FeatureFlagSource shop/by-label\n"},
		{name: "diff: an unreachable cluster", args: []string{"diff", "-f", "testdata/diff-change.yaml", "--kubeconfig", unreachable},
			wantErr: "cannot reach the cluster at " + unreachableAddr},
		{name: "migrate: an unreachable cluster", args: []string{"migrate", "--kubeconfig", unreachable},
			wantErr: "cannot reach the cluster at " + unreachableAddr},
		{name: "topology: --server overrides the kubeconfig", args: []string{"topology", "--kubeconfig", unreachable, "--server", "https://127.0.0.1:1"},
			wantErr: "cannot reach the cluster at https://127.0.0.1:1 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred(), stderr.String())
				g.Expect(stdout.String()).To(HavePrefix(tt.wantOut))
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(stderr.String()).To(ContainSubstring(tt.wantErr), "printed")
			if tt.usage {
				g.Expect(exitCode(err)).To(Equal(2))
				g.Expect(stderr.String()).To(ContainSubstring("See 'flagplane " + tt.args[0] + " --help'."))
			} else {
				g.Expect(exitCode(err)).To(Equal(1))
				g.Expect(stderr.String()).NotTo(ContainSubstring("--help"))
			}
		})
	}
}

// TestOfflineIgnoresKubeconfig: --from-dir reads no kubeconfig, not even a
// broken one, and takes default, not the context's, as the namespace.
func TestOfflineIgnoresKubeconfig(t *testing.T) {
	g := NewWithT(t)
	broken := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(broken, []byte("this: [is not a kubeconfig"), 0o600)).To(Succeed())
	t.Setenv("KUBECONFIG", broken)
	var stdout, stderr bytes.Buffer
	g.Expect(run(context.Background(), []string{"explain", "deploy/web", "-n", "shop", "--from-dir", "../../inspect/explain/testdata"}, &stdout, &stderr)).
		To(Succeed(), stderr.String())
	want, err := os.ReadFile("testdata/golden/explain-deploy-web.txt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout.String()).To(Equal(string(want)))

	err = run(context.Background(), []string{"explain", "deploy/web", "-n", "shop"}, &stdout, &stderr)
	g.Expect(err).To(MatchError(ContainSubstring("loading kubeconfig: ")), "online, the kubeconfig is read")
}

// TestNamespace: -n, else the kubeconfig context's namespace, else
// default, as kubectl's; offline, -n else default.
func TestNamespace(t *testing.T) {
	g := NewWithT(t)
	inShop := writeKubeconfig(t, "https://127.0.0.1:1", "shop")
	noNamespace := writeKubeconfig(t, "https://127.0.0.1:1", "")
	for _, tt := range []struct {
		args    []string
		offline bool
		want    string
	}{
		{args: []string{"--kubeconfig", inShop}, want: "shop"},
		{args: []string{"--kubeconfig", inShop, "-n", "platform"}, want: "platform"},
		{args: []string{"--kubeconfig", noNamespace}, want: "default"},
		{args: []string{"--kubeconfig", inShop}, offline: true, want: "default"},
		{args: []string{"--namespace", "platform"}, offline: true, want: "platform"},
	} {
		kube := newKubeFlags()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		kube.addFlags(fs)
		g.Expect(fs.Parse(tt.args)).To(Succeed())
		g.Expect(kube.namespace(tt.offline)).To(Equal(tt.want), "%v offline=%v", tt.args, tt.offline)
	}
}

// TestCompletion: the kinds of explain's KIND/NAME offline, names from
// --from-dir or from the cluster, and nothing, quietly, from a cluster
// that cannot be reached; -o's values.
func TestCompletion(t *testing.T) {
	// An API server that lists Deployments web and worker in shop.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/apps/v1/namespaces/shop/deployments" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":[`+
			`{"metadata":{"name":"worker","namespace":"shop"}},{"metadata":{"name":"web","namespace":"shop"}}]}`)
	}))
	defer api.Close()
	cluster := writeKubeconfig(t, api.URL, "shop")
	unreachable := writeKubeconfig(t, closedAddress(t), "shop")

	tests := []struct {
		args []string
		want []string // the completions, then the directive
	}{
		{[]string{"explain", ""}, []string{"deployment/", "statefulset/", "daemonset/", "featureflag/", "featureflagsource/", "inprocessconfiguration/", "featureflagsourcepolicy/", ":6"}},
		{[]string{"explain", "dep"}, []string{"deployment/", ":6"}},
		{[]string{"explain", "-n", "shop", "featureflags"}, []string{"featureflagsource/", "featureflagsourcepolicy/", ":6"}},
		{[]string{"explain", "ff"}, []string{"ff/", "ffs/", "ffsp/", ":6"}},
		{[]string{"explain", "sts"}, []string{"sts/", ":6"}},
		{[]string{"explain", "pod/"}, []string{":4"}},
		{[]string{"explain", "--from-dir", "../../inspect/explain/testdata", "-n", "shop", "deploy/"}, []string{"deploy/batch", "deploy/web", ":4"}},
		{[]string{"explain", "--from-dir", "../../inspect/explain/testdata", "-n", "shop", "ff/c"}, []string{"ff/checkout", ":4"}},
		{[]string{"explain", "--from-dir", "../../inspect/explain/testdata", "deploy/"}, []string{":4"}},
		{[]string{"explain", "--kubeconfig", cluster, "deployment/w"}, []string{"deployment/web", "deployment/worker", ":4"}},
		{[]string{"explain", "--kubeconfig", cluster, "deployment/wo"}, []string{"deployment/worker", ":4"}},
		{[]string{"explain", "--kubeconfig", cluster, "-n", "platform", "deployment/"}, []string{":4"}},
		{[]string{"explain", "--kubeconfig", unreachable, "deployment/"}, []string{":4"}},
		{[]string{"explain", "deployment/"}, []string{":4"}},
		{[]string{"explain", "deploy/web", ""}, []string{":4"}},
		{[]string{"explain", "-o", ""}, []string{"text", "json", "yaml", ":4"}},
		{[]string{"diff", "-o", "j"}, []string{"json", ":4"}},
		{[]string{"topology", "--format", ""}, []string{"dot", "svg", "png", ":4"}},
		{[]string{"topology", "--sidecar-sync-provider", "f"}, []string{"file", "flagd-proxy", ":4"}},
		{[]string{"explain", "--kubeconfig", cluster, "--context", ""}, []string{"test", ":4"}},
		{[]string{"explain", "--kubeconfig", unreachable, "-n", ""}, []string{":4"}},
		{[]string{"ex"}, []string{"explain\tWhy a workload gets what it gets; what a flag set or source reaches", ":4"}},
		{[]string{"history", ""}, []string{"ff/", "featureflag/", ":6"}},
		{[]string{"rollback", "feat"}, []string{"featureflag/", ":6"}},
		{[]string{"rollback", "--kubeconfig", unreachable, "ff/"}, []string{":4"}},
		{[]string{"history", "-o", "y"}, []string{"yaml", ":4"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			g.Expect(run(context.Background(), append([]string{"__complete"}, tt.args...), &stdout, &stderr)).To(Succeed())
			g.Expect(strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")).To(Equal(tt.want))
		})
	}
}

// TestPluginNames: run as kubectl-flagplane, the help says kubectl
// flagplane; run as kubectl_complete-flagplane, it completes.
func TestPluginNames(t *testing.T) {
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	g.Expect(execute(context.Background(), filepath.Join("some", "dir", "kubectl-flagplane"), []string{"--help"}, nil, &stdout, &stderr)).To(Succeed())
	g.Expect(stdout.String()).To(And(ContainSubstring("Usage:\n  kubectl flagplane [command]"), ContainSubstring(`Use "kubectl flagplane [command] --help"`)))

	stdout.Reset()
	g.Expect(execute(context.Background(), "kubectl-flagplane", []string{"explain", "-h"}, nil, &stdout, &stderr)).To(Succeed())
	g.Expect(stdout.String()).To(And(ContainSubstring("  kubectl flagplane explain KIND/NAME [flags]"),
		ContainSubstring("  kubectl flagplane explain deployment/web -n shop")))

	stderr.Reset()
	err := execute(context.Background(), "kubectl-flagplane", []string{"explain", "deploy/web", "-o", "xml"}, nil, &stdout, &stderr)
	g.Expect(errors.Is(err, errUsage)).To(BeTrue())
	g.Expect(stderr.String()).To(ContainSubstring("See 'kubectl flagplane explain --help'."))

	stdout.Reset()
	g.Expect(execute(context.Background(), "kubectl_complete-flagplane", []string{"explain", "daem"}, nil, &stdout, &stderr)).To(Succeed())
	g.Expect(stdout.String()).To(Equal("daemonset/\n:6\n"))
}

// writeKubeconfig writes a kubeconfig of one context, test, of the API
// server at server, with namespace (none if empty).
func writeKubeconfig(t *testing.T, server, namespace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	ns := ""
	if namespace != "" {
		ns = ", namespace: " + namespace
	}
	b := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: test, user: {token: t}}]
contexts: [{name: test, context: {cluster: test, user: test%s}}]
current-context: test
`, server, ns)
	if err := os.WriteFile(path, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// closedAddress is the https:// address of a loopback port nothing listens
// on (free a moment ago).
func closedAddress(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Address()
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + addr
}

// TestDiffStdin: diff -f - reads standard input.
func TestDiffStdin(t *testing.T) {
	g := NewWithT(t)
	in, err := os.Open("testdata/diff-change.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	defer in.Close()
	var stdout, stderr bytes.Buffer
	g.Expect(execute(context.Background(), "flagplane", []string{"diff", "-f", "-", "--from-dir", "../../inspect/explain/testdata"}, in, &stdout, &stderr)).
		To(Succeed(), stderr.String())
	want, err := os.ReadFile("testdata/golden/diff-change.txt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout.String()).To(Equal(string(want)))
}
