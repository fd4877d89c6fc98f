// Command flagplane is the operator's command-line companion.
//
//	flagplane topology [source] [--format dot|svg|png] [-o FILE]
//
// dumps the topology — flag sources, flag sets, generated ConfigMaps and
// workloads, and how they are connected — as Graphviz DOT, or as SVG or PNG
// rendered by Graphviz. The source is one of:
//
//	--url http://HOST:PORT        a manager's metrics address (its /debug/topology)
//	--kubeconfig FILE             a manager in a cluster, through the API server's
//	                              service proxy (--service, default flagplane-system/flagplane-metrics:metrics)
//	--from-dir DIR                no cluster: built offline from the manifests under DIR
//
// With none of them it uses the current kubeconfig context, as kubectl does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/flagplane/flagplane/cmd/flagplane/topodump"
)

const usage = `flagplane: the flagplane operator's command-line companion

Usage:
  flagplane topology [flags]   dump the topology as Graphviz DOT, SVG or PNG
  flagplane help               this text

Run 'flagplane topology -h' for its flags.
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
		url, kubeconfig, kubeContext, fromDir, namespace, service, format, output string
		timeout                                                                   time.Duration
	)
	fs.StringVar(&url, "url", "", "a manager's metrics address, e.g. http://127.0.0.1:8080 (its /debug/topology)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of a cluster that runs flagplane; read through the API server's service proxy")
	fs.StringVar(&kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&service, "service", topodump.DefaultService.String(), "the manager's metrics Service, as namespace/name:port")
	fs.StringVar(&fromDir, "from-dir", "", "build the topology offline from the manifests under this folder (no cluster)")
	fs.StringVar(&namespace, "namespace", "default", "with --from-dir: the namespace of manifests that name none")
	fs.StringVar(&format, "format", "dot", "output format: "+strings.Join(topodump.Formats, ", ")+" (svg and png need Graphviz)")
	fs.StringVar(&output, "o", "", "write to this file instead of standard output")
	fs.DurationVar(&timeout, "timeout", time.Minute, "give up reading the topology after this long")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: flagplane topology [--url URL | --kubeconfig FILE | --from-dir DIR] [--format dot|svg|png] [-o FILE]

Dumps flagplane's topology: sources, flag sets, generated ConfigMaps and
workloads, and their edges. With no source flag, reads the running manager of
the current kubeconfig context.

Examples:
  flagplane topology --url http://127.0.0.1:8080 --format svg -o topology.svg
  flagplane topology --kubeconfig ~/.kube/config > topology.dot
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
		dot, err = topodump.FromURL(ctx, url)
	case fromDir != "":
		dot, err = topodump.FromDir(fromDir, namespace)
	default:
		svc, perr := parseService(service)
		if perr != nil {
			return perr
		}
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		cfg, cerr := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
		if cerr != nil {
			return fmt.Errorf("loading kubeconfig: %w", cerr)
		}
		dot, err = topodump.FromService(ctx, cfg, svc)
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

// parseService parses namespace/name:port.
func parseService(s string) (topodump.Service, error) {
	ns, rest, ok := strings.Cut(s, "/")
	name, port, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || name == "" || port == "" {
		return topodump.Service{}, fmt.Errorf("%w: --service %q is not namespace/name:port", errUsage, s)
	}
	return topodump.Service{Namespace: ns, Name: name, Port: port}, nil
}
