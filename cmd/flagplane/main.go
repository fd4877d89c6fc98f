// Command flagplane is the operator's command-line companion, with
// kubectl's connection flags (--kubeconfig, --context, --namespace/-n,
// --cluster, --user, --server, --token, ...) on every command.
//
//	flagplane topology [--kubeconfig FILE | --url URL | --from-dir DIR] [--format dot|svg|png] [-o FILE]
//
// dumps the topology — flag sources, flag sets, generated ConfigMaps and
// workloads, and how they are connected — as Graphviz DOT, as SVG drawn
// without Graphviz (package dotsvg), or as PNG rendered by Graphviz's dot,
// from a cluster (with your own permissions), a manager's /debug/topology,
// or manifests offline.
//
//	flagplane explain KIND/NAME [-n NAMESPACE] [--from-dir DIR] [-o text|json|yaml]
//
// explains, from the graph, why a workload gets the sources, flag sets and
// sidecar it gets (and what does not resolve), or what a flag set, source or
// in-process configuration reaches (see package explain).
//
//	flagplane diff -f FILE [--from-dir DIR] [--contexts FILE] [-o text|json|yaml]
//	flagplane diff ff/NAME --revisions A..B [--contexts FILE] [-o text|json|yaml]
//
// says what applying FILE's FeatureFlags and FeatureFlagSources would reach
// and change (see package blast), before anything is applied; with
// --contexts, which flags change what flagd serves each named evaluation
// context, evaluated with flagd's own evaluator (see package evaluate);
// with --revisions, the same between two recorded revisions of a
// FeatureFlag (or one and its current spec).
//
//	flagplane migrate [--apply]
//
// finds what the OpenFeature Operator left on a cluster, says what each
// leftover means now that flagplane runs, and with --apply removes what
// flagplane replaces (see package migrate).
//
//	flagplane history ff/NAME [--revision N] [-o text|json|yaml]
//	flagplane rollback ff/NAME --to-revision N [--dry-run]
//
// list the revisions flagplane recorded of a FeatureFlag (every spec it
// accepted), print one, and write one back (see package history).
//
//	flagplane fleet status ff/NAME [-o text|json]
//
// says, from a fleet hub, where a FeatureFlag stands on each member
// cluster its FeatureFlagPlacements select (see package fleetstatus).
//
//	flagplane completion bash|zsh|fish|powershell
//
// writes a shell's completion script. Installed on PATH as kubectl-flagplane
// (make plugin), it is a kubectl plugin: kubectl flagplane explain ...; the
// same binary named kubectl_complete-flagplane completes it for kubectl.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Names under which the binary is a kubectl plugin: kubectl runs
// kubectl-flagplane for `kubectl flagplane ...`, and kubectl_complete-flagplane
// to complete it.
const (
	pluginName         = "kubectl-flagplane"
	pluginCompleteName = "kubectl_complete-flagplane"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := execute(ctx, os.Args[0], os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// errUsage marks an error of the command line (exit code 2).
var errUsage = errors.New("usage")

// run is execute as flagplane, without standard input.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, "flagplane", args, strings.NewReader(""), stdout, stderr)
}

// execute runs the command line args of the binary called argv0 and
// prints its error, if any, to stderr.
func execute(ctx context.Context, argv0 string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	display := "flagplane"
	switch filepath.Base(argv0) {
	case pluginName, pluginName + ".exe":
		display = "kubectl flagplane"
	case pluginCompleteName, pluginCompleteName + ".exe":
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	root := newRootCmd(display)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	if cmd == root && strings.HasPrefix(err.Error(), "unknown command ") {
		err = fmt.Errorf("%w: %v", errUsage, err)
	}
	fmt.Fprintln(stderr, "flagplane:", strings.TrimSuffix(err.Error(), "\n"))
	if errors.Is(err, errUsage) && cmd != nil {
		fmt.Fprintf(stderr, "See '%s --help'.\n", cmd.CommandPath())
	}
	return err
}

// newRootCmd is the command tree; display is the name its help uses:
// flagplane, or kubectl flagplane when run as a kubectl plugin.
func newRootCmd(display string) *cobra.Command {
	kube := newKubeFlags()
	root := &cobra.Command{
		Use:   "flagplane",
		Short: "The flagplane operator's command-line companion",
		Long: `flagplane: the flagplane operator's command-line companion.

It reads the graph the manager keeps — flag sources, flag sets, generated
ConfigMaps and workloads — from a cluster, with your own permissions and
kubectl's connection flags, or offline from manifests (--from-dir), and
tells what reaches what and why.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command, it prints its help, as kubectl does.
	}
	if display != "flagplane" {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: display}
	}
	kube.addFlags(root.PersistentFlags())
	root.PersistentFlags().Lookup("namespace").Usage = "the namespace of the object (explain) or of the objects that name none (diff; " +
		"with --from-dir, the manifests'); default: the kubeconfig context's, offline: default"
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %v", errUsage, err)
	})
	_ = root.RegisterFlagCompletionFunc("namespace", kube.completeNamespaces)
	for _, f := range []string{"context", "cluster", "user"} {
		_ = root.RegisterFlagCompletionFunc(f, kube.completeKubeconfig(f))
	}
	_ = root.MarkPersistentFlagFilename("kubeconfig")
	root.AddCommand(newTopologyCmd(kube), newExplainCmd(kube), newDiffCmd(kube), newMigrateCmd(kube), newRolloutCmd(kube))
	root.AddCommand(newHistoryCmd(kube), newRollbackCmd(kube), newFleetCmd(kube))
	// Examples say the command as it is run, a subcommand's too.
	var sayDisplay func(c *cobra.Command)
	sayDisplay = func(c *cobra.Command) {
		c.Example = strings.ReplaceAll(c.Example, "  flagplane ", "  "+display+" ")
		for _, sub := range c.Commands() {
			sayDisplay(sub)
		}
	}
	for _, c := range root.Commands() {
		sayDisplay(c)
	}
	return root
}

// noArgs refuses arguments.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, args)
	}
	return nil
}

var _ pflag.Value = (*stringList)(nil)
