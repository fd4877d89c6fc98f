package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flagplane/flagplane/inspect/topodump"
)

// urlFlags are the connection flags that, with --url, say how to reach the
// manager rather than the API server.
var urlFlags = []string{"token", "certificate-authority", "insecure-skip-tls-verify"}

func newTopologyCmd(kube *kubeFlags) *cobra.Command {
	var url, tokenFile, format, output string
	graph := graphFlags{kube: kube}
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "Dump the topology as Graphviz DOT, SVG or PNG",
		Long: `Dumps flagplane's topology: sources, flag sets, generated ConfigMaps and
workloads, and their edges, from one of:

  the cluster of the kubeconfig (--kubeconfig, --context, ... as kubectl's;
      the default): built from its objects with your own permissions,
      exactly as the manager builds it: you need list on FeatureFlags,
      FeatureFlagSources, InProcessConfigurations, Deployments,
      StatefulSets, DaemonSets (and ReferenceGrants) in the namespaces you
      read (--namespaces), not access to the manager;
  --url https://HOST:PORT: a manager's metrics address (its /debug/topology),
      e.g. through kubectl port-forward; --token (or --token-file),
      --certificate-authority and --insecure-skip-tls-verify then apply to
      the manager, and the token's identity needs the ClusterRole
      flagplane-metrics-reader;
  --from-dir DIR: no cluster, no kubeconfig: built offline from the
      manifests under DIR, -n being the namespace of those that name none.

--format svg draws the graph in this command, left to right by layer,
without Graphviz; --format png runs Graphviz's dot, which must be in PATH.
For Graphviz's own layout, pipe the DOT to it:
  flagplane topology --from-dir config/samples -n shop | dot -Tsvg > samples.svg`,
		Example: `  flagplane topology --kubeconfig ~/.kube/config > topology.dot
  flagplane topology --namespaces shop,platform --format svg -o topology.svg
  flagplane topology --url https://127.0.0.1:8443 --token "$(kubectl create token prometheus -n monitoring)" \
      --insecure-skip-tls-verify > topology.dot     # a manager's own graph, through kubectl port-forward
  flagplane topology --from-dir config/samples -n shop --format svg -o samples.svg
  flagplane topology --from-dir config/samples -n shop --format png -o samples.png   # runs Graphviz's dot`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flags := cmd.Flags()
			if url != "" && (graph.offline() || flags.Changed("kubeconfig")) || graph.offline() && flags.Changed("kubeconfig") {
				return fmt.Errorf("%w: give one of --url, --kubeconfig and --from-dir", errUsage)
			}
			if url != "" {
				if given := kube.given(cmd, urlFlags...); len(given) > 0 {
					return fmt.Errorf("%w: %s go with a cluster, not --url", errUsage, strings.Join(given, ", "))
				}
			}
			if url == "" && tokenFile != "" {
				return fmt.Errorf("%w: --token-file goes with --url (for the API server, give --token or use the kubeconfig's credentials)", errUsage)
			}
			if *kube.BearerToken != "" && tokenFile != "" {
				return fmt.Errorf("%w: give one of --token and --token-file", errUsage)
			}
			if len(graph.namespaces) > 0 && (url != "" || graph.offline()) {
				return fmt.Errorf("%w: --namespaces goes with a cluster (--kubeconfig or the current context)", errUsage)
			}
			if flags.Changed("namespace") && !graph.offline() {
				return fmt.Errorf("%w: -n is the namespace of manifests that name none, with --from-dir; to read only some namespaces of a cluster, give --namespaces", errUsage)
			}
			if graph.syncProvider != "" && url != "" {
				return fmt.Errorf("%w: --sidecar-sync-provider goes with a cluster or --from-dir (a manager's graph has its own)", errUsage)
			}
			if !slices.Contains(topodump.Formats, format) {
				return fmt.Errorf("%w: unknown --format %q: use one of %s", errUsage, format, strings.Join(topodump.Formats, ", "))
			}
			if slices.Contains(topodump.Formats, output) && !flags.Changed("format") {
				return fmt.Errorf("%w: -o names the file to write (%q here): choose the format with --format %s (or give -o ./%s)", errUsage, output, output, output)
			}
			if err := graph.check(cmd); err != nil {
				return err
			}
			dot, err := topologyDOT(cmd, &graph, url, tokenFile)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), graph.timeout)
			defer cancel()
			out, err := topodump.Render(ctx, dot, format)
			if err != nil {
				return err
			}
			if output == "" {
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			if err := os.WriteFile(output, out, 0o644); err != nil {
				return fmt.Errorf("writing %s: %w", output, err)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&url, "url", "", "a manager's metrics address, e.g. https://127.0.0.1:8443 (its /debug/topology)")
	fs.StringVar(&tokenFile, "token-file", "", "with --url: read the bearer token from this file")
	fs.StringVar(&format, "format", "dot", "output format: "+strings.Join(topodump.Formats, ", ")+" (png runs Graphviz's dot)")
	fs.StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	graph.bind(cmd)
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletions(topodump.Formats))
	return cmd
}

// topologyDOT reads the topology from where the flags say.
func topologyDOT(cmd *cobra.Command, graph *graphFlags, url, tokenFile string) ([]byte, error) {
	if url == "" {
		top, _, err := graph.load(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return nil, err
		}
		return top.DOT(), nil
	}
	kube := graph.kube
	opts := topodump.URLOptions{Token: *kube.BearerToken, CAFile: *kube.CAFile, InsecureSkipTLSVerify: *kube.Insecure}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading --token-file: %w", err)
		}
		opts.Token = strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), graph.timeout)
	defer cancel()
	return topodump.FromURL(ctx, url, opts)
}
