package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// kubeFlags are kubectl's flags of the connection to a cluster, from
// k8s.io/cli-runtime: --kubeconfig, --context, --cluster, --user,
// --namespace/-n, --server/-s, --token, --as, ... Every command loads its
// kubeconfig through them, as kubectl does.
type kubeFlags struct {
	*genericclioptions.ConfigFlags
	// connection are the names of the flags that choose or reach a
	// cluster: all but --namespace.
	connection []string
}

func newKubeFlags() *kubeFlags {
	f := genericclioptions.NewConfigFlags(false)
	f.CacheDir = nil // no discovery cache on disk: the CLI asks for its kinds by name
	return &kubeFlags{ConfigFlags: f}
}

// addFlags adds the flags to fs (the root command's persistent flags).
func (k *kubeFlags) addFlags(fs *pflag.FlagSet) {
	own := pflag.NewFlagSet("kube", pflag.ContinueOnError)
	k.AddFlags(own)
	own.VisitAll(func(f *pflag.Flag) {
		if f.Name != "namespace" {
			k.connection = append(k.connection, f.Name)
		}
	})
	fs.AddFlagSet(own)
}

// given lists, as "--name", the connection flags given on cmd's command
// line, but for those named in except.
func (k *kubeFlags) given(cmd *cobra.Command, except ...string) []string {
	var out []string
	for _, name := range k.connection {
		if cmd.Flags().Changed(name) && !slices.Contains(except, name) {
			out = append(out, "--"+name)
		}
	}
	return out
}

// restConfig loads the kubeconfig as kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config (in a pod, its service account), with
// --context, --server, --token, ... over it. Unlike kubectl it does not fall
// back on http://localhost:8080 when there is no kubeconfig at all.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	raw, err := k.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	if len(raw.Clusters) == 0 && *k.APIServer == "" && !inCluster() {
		return nil, errors.New("loading kubeconfig: there is none (give --kubeconfig, set KUBECONFIG or write ~/.kube/config; " +
			"with --from-dir DIR the command reads manifests offline and needs none)")
	}
	cfg, err := k.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// namespace is the namespace of -n, else that of the kubeconfig's context
// (default if it names none), as kubectl's. offline (--from-dir) reads no
// kubeconfig: its default is default.
func (k *kubeFlags) namespace(offline bool) (string, error) {
	if *k.Namespace != "" {
		return *k.Namespace, nil
	}
	if offline {
		return "default", nil
	}
	ns, _, err := k.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	return ns, nil
}

func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

// unreachable rewords an error of cfg's cluster that never reached it.
func unreachable(cfg *rest.Config, err error) error {
	var netErr net.Error
	if err == nil || !(errors.As(err, &netErr) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "no such host") || strings.Contains(err.Error(), "i/o timeout")) {
		return err
	}
	return fmt.Errorf("cannot reach the cluster at %s (is the kubeconfig's context, or --context, the right one?): %w", cfg.Host, err)
}
