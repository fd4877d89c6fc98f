// Command flagplane is the operator's command-line companion.
//
//	flagplane topology [source] [--format dot|svg|png] [-o FILE]
//
// dumps the topology — flag sources, flag sets, generated ConfigMaps and
// workloads, and how they are connected — as Graphviz DOT, or as SVG or PNG
// rendered by Graphviz. The source is one of:
//
//	--kubeconfig FILE     a cluster: the graph is built from its objects with your
//	                      own permissions (--namespaces to read only some), exactly
//	                      as the manager builds it
//	--url https://HOST:PORT --token T
//	                      a manager's metrics address (its /debug/topology), e.g.
//	                      through kubectl port-forward; the token's identity needs
//	                      the ClusterRole flagplane-metrics-reader
//	--from-dir DIR        no cluster: built offline from the manifests under DIR
//
// With none of them it uses the current kubeconfig context, as kubectl does.
//
//	flagplane migrate [--kubeconfig FILE] [--apply]
//
// finds what the OpenFeature Operator left on a cluster, says what each
// leftover means now that flagplane runs, and with --apply removes what
// flagplane replaces (see package migrate).
//
//	flagplane explain KIND/NAME [-n NAMESPACE] [--kubeconfig FILE | --from-dir DIR] [-o text|json|yaml]
//
// explains, from the graph, why a workload gets the sources, flag sets and
// sidecar it gets (and what does not resolve), or what a flag set, source or
// in-process configuration reaches (see package explain).
//
//	flagplane diff -f FILE [--kubeconfig FILE | --from-dir DIR] [-o text|json|yaml]
//
// says what applying FILE's FeatureFlags and FeatureFlagSources would reach
// and change (see package blast), before anything is applied.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/flagplane/topodump"
	"github.com/flagplane/flagplane/topology"
)

const usage = `flagplane: the flagplane operator's command-line companion

Usage:
  flagplane topology [flags]   dump the topology as Graphviz DOT, SVG or PNG
  flagplane migrate [flags]    find what the OpenFeature Operator left, and remove what flagplane replaces
  flagplane explain KIND/NAME  why a workload gets what it gets; what a flag set or source reaches
  flagplane diff -f FILE       what applying FILE's flag sets and sources would reach and change
  flagplane help               this text

Run 'flagplane <command> -h' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "flagplane:", err)
		}
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "topology":
		return topologyCmd(ctx, args[1:], stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, args[1:], stdout, stderr)
	case "explain":
		return explainCmd(ctx, args[1:], stdout, stderr)
	case "diff":
		return diffCmd(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
}

func topologyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flagplane topology", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		url, kubeconfig, kubeContext, fromDir, namespace, format, output string
		tokenFile, syncProvider                                          string
		namespaces                                                       stringList
		urlOpts                                                          topodump.URLOptions
		timeout                                                          time.Duration
	)
	fs.StringVar(&url, "url", "", "a manager's metrics address, e.g. https://127.0.0.1:8443 (its /debug/topology)")
	fs.StringVar(&urlOpts.Token, "token", "", "with --url: bearer token of an identity that may get /debug/topology (ClusterRole flagplane-metrics-reader)")
	fs.StringVar(&tokenFile, "token-file", "", "with --url: read the bearer token from this file")
	fs.StringVar(&urlOpts.CAFile, "certificate-authority", "", "with --url: PEM file of the CA of the manager's serving certificate")
	fs.BoolVar(&urlOpts.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "with --url: accept any serving certificate (a manager without --metrics-cert-dir serves a self-signed one)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of a cluster: the topology is built from its objects with your own permissions")
	fs.StringVar(&kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.Var(&namespaces, "namespaces", "with a cluster: comma-separated namespaces to read (default: all, which takes list permissions cluster-wide)")
	fs.StringVar(&fromDir, "from-dir", "", "build the topology offline from the manifests under this folder (no cluster)")
	fs.StringVar(&namespace, "namespace", "default", "with --from-dir: the namespace of manifests that name none")
	fs.StringVar(&format, "format", "dot", "output format: "+strings.Join(topodump.Formats, ", ")+" (svg and png need Graphviz)")
	fs.StringVar(&output, "o", "", "write to this file instead of standard output")
	fs.DurationVar(&timeout, "timeout", time.Minute, "give up reading the topology after this long")
	fs.StringVar(&syncProvider, "sidecar-sync-provider", "", "with a cluster or --from-dir: the manager's --sidecar-sync-provider, if it has one, so that entries naming no provider are read as it reads them (default file)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: flagplane topology [--kubeconfig FILE | --url URL | --from-dir DIR] [--format dot|svg|png] [-o FILE]

Dumps flagplane's topology: sources, flag sets, generated ConfigMaps and
workloads, and their edges. With no source flag, builds it from the cluster
of the current kubeconfig context, with your own permissions, exactly as the
manager builds it: you need list on FeatureFlags, FeatureFlagSources,
InProcessConfigurations, Deployments, StatefulSets, DaemonSets (and
ReferenceGrants) in the namespaces you read, not access to the manager.

Examples:
  flagplane topology --kubeconfig ~/.kube/config > topology.dot
  flagplane topology --namespaces shop,platform --format svg -o topology.svg
  flagplane topology --url https://127.0.0.1:8443 --token "$(kubectl create token prometheus -n monitoring)" \
      --insecure-skip-tls-verify > topology.dot     # a manager's own graph, through kubectl port-forward
  flagplane topology --from-dir config/samples --namespace shop --format png -o samples.png

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	sources := 0
	for _, s := range []string{url, kubeconfig, fromDir} {
		if s != "" {
			sources++
		}
	}
	if sources > 1 {
		return fmt.Errorf("%w: give one of --url, --kubeconfig and --from-dir", errUsage)
	}
	if url == "" && (urlOpts.Token != "" || tokenFile != "" || urlOpts.CAFile != "" || urlOpts.InsecureSkipTLSVerify) {
		return fmt.Errorf("%w: --token, --token-file, --certificate-authority and --insecure-skip-tls-verify go with --url", errUsage)
	}
	if urlOpts.Token != "" && tokenFile != "" {
		return fmt.Errorf("%w: give one of --token and --token-file", errUsage)
	}
	if len(namespaces) > 0 && (url != "" || fromDir != "") {
		return fmt.Errorf("%w: --namespaces goes with a cluster (--kubeconfig or the current context)", errUsage)
	}
	if syncProvider != "" && url != "" {
		return fmt.Errorf("%w: --sidecar-sync-provider goes with a cluster or --from-dir (a manager's graph has its own)", errUsage)
	}
	if !validFormat(format) {
		return fmt.Errorf("%w: unknown --format %q: use one of %s", errUsage, format, strings.Join(topodump.Formats, ", "))
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		dot []byte
		err error
	)
	switch {
	case url != "":
		if tokenFile != "" {
			b, rerr := os.ReadFile(tokenFile)
			if rerr != nil {
				return fmt.Errorf("reading --token-file: %w", rerr)
			}
			urlOpts.Token = strings.TrimSpace(string(b))
		}
		dot, err = topodump.FromURL(ctx, url, urlOpts)
	case fromDir != "":
		dot, err = topodump.FromDir(fromDir, namespace, topology.WithDefaultSyncProvider(v1beta1.SyncProviderType(syncProvider)))
	default:
		cfg, cerr := restConfig(kubeconfig, kubeContext)
		if cerr != nil {
			return cerr
		}
		dot, err = topodump.FromCluster(ctx, cfg, topodump.ClusterOptions{Namespaces: namespaces, Warnings: stderr,
			Topology: []topology.Option{topology.WithDefaultSyncProvider(v1beta1.SyncProviderType(syncProvider))}})
	}
	if err != nil {
		return err
	}
	out, err := topodump.Render(ctx, dot, format)
	if err != nil {
		return err
	}
	if output == "" {
		_, err = stdout.Write(out)
		return err
	}
	if err := os.WriteFile(output, out, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", output, err)
	}
	return nil
}

func validFormat(f string) bool {
	for _, v := range topodump.Formats {
		if f == v {
			return true
		}
	}
	return false
}

// stringList is a comma-separated flag; repeating the flag appends.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(*l, s) {
			*l = append(*l, s)
		}
	}
	return nil
}
