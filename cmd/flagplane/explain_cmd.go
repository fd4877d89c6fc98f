package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/inspect/topodump"
	"github.com/flagplane/flagplane/workflows/injection"
)

func newExplainCmd(kube *kubeFlags) *cobra.Command {
	var output, url, tokenFile string
	graph := graphFlags{kube: kube}
	cmd := &cobra.Command{
		Use:   "explain KIND/NAME",
		Short: "Why a workload gets what it gets; what a flag set or source reaches",
		Long: `Explains, from the same graph the manager keeps, for a workload
(deployment, statefulset, daemonset): every FeatureFlagSource that applies
to it and why (targetRefs, selector, pod annotation), the flag sets its
flagd serves and by which provider, every reference that does not resolve
and why (missing, or no ReferenceGrant), its sidecar, and the settings one
source lost to another; for a featureflag, featureflagsource or
inprocessconfiguration (ff, ffs, ipc): every workload, Flagd, namespace and
generated ConfigMap it reaches, and the referrers it denies.

The graph is read from the cluster of the kubeconfig (--kubeconfig,
--context, ... as kubectl's), with your own permissions; or offline from
manifests (--from-dir, which needs no kubeconfig); or asked of a running
manager at its metrics address (--url, with --token or --token-file of an
identity bound to flagplane-metrics-reader), which answers from its own
graph with the sidecar computed with the options it really injects with. The object's namespace is
-n's, else the kubeconfig context's, as with kubectl (offline: default).`,
		Example: `  flagplane explain deployment/web -n shop
  flagplane explain ff/shop-flags -n shop -o yaml
  flagplane explain deploy/shop-web -n shop --from-dir config/samples
  flagplane explain deploy/web -n shop --url https://127.0.0.1:8443 --token-file ./token --insecure-skip-tls-verify`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: give one object as KIND/NAME, e.g. deployment/web", errUsage)
			}
			return nil
		},
		ValidArgsFunction: graph.completeObject,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
				return fmt.Errorf("%w: give the object as KIND/NAME, e.g. deployment/web (not %q)", errUsage, args[0])
			}
			if _, err := explain.LookupKind(kind); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			if err := checkOutput(output, explain.Formats); err != nil {
				return err
			}
			if url != "" {
				return explainFromManager(cmd, &graph, url, tokenFile, kind, name, output)
			}
			if tokenFile != "" {
				return fmt.Errorf("%w: --token-file goes with --url", errUsage)
			}
			if err := graph.check(cmd); err != nil {
				return err
			}
			top, namespace, err := graph.load(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			report, err := explain.Explain(top.Snapshot(), kind, namespace, name, injection.DefaultOptions())
			if err != nil {
				return err
			}
			return explain.Write(cmd.OutOrStdout(), report, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: "+strings.Join(explain.Formats, ", "))
	cmd.Flags().StringVar(&url, "url", "", "ask a manager at its metrics address, e.g. https://127.0.0.1:8443 (its /debug/explain)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "with --url: read the bearer token from this file")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(explain.Formats))
	graph.bind(cmd)
	return cmd
}

// checkOutput refuses an -o that is not one of formats.
func checkOutput(output string, formats []string) error {
	if !slices.Contains(formats, output) {
		return fmt.Errorf("%w: unknown -o %q: use one of %s", errUsage, output, strings.Join(formats, ", "))
	}
	return nil
}

// explainFromManager asks a manager's /debug/explain.
func explainFromManager(cmd *cobra.Command, graph *graphFlags, url, tokenFile, kind, name, output string) error {
	if graph.offline() || cmd.Flags().Changed("kubeconfig") || len(graph.namespaces) > 0 {
		return fmt.Errorf("%w: --url asks the manager: leave out --from-dir, --kubeconfig and --namespaces", errUsage)
	}
	kube := graph.kube
	namespace := *kube.Namespace
	if namespace == "" {
		// The kubeconfig's context, as kubectl's, when there is one.
		if ns, _, err := kube.ToRawKubeConfigLoader().Namespace(); err == nil && ns != "" {
			namespace = ns
		} else {
			namespace = "default"
		}
	}
	opts := topodump.URLOptions{Token: *kube.BearerToken, CAFile: *kube.CAFile, InsecureSkipTLSVerify: *kube.Insecure}
	if tokenFile != "" {
		if opts.Token != "" {
			return fmt.Errorf("%w: give one of --token and --token-file", errUsage)
		}
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("reading --token-file: %w", err)
		}
		opts.Token = strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), graph.timeout)
	defer cancel()
	body, err := topodump.ExplainFromURL(ctx, url, kind, namespace, name, opts)
	if err != nil {
		return err
	}
	var report explain.Report
	if err := json.Unmarshal(body, &report); err != nil {
		return fmt.Errorf("the manager at %s did not answer with an explanation: %w", url, err)
	}
	return explain.Write(cmd.OutOrStdout(), &report, output)
}
