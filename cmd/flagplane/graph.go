package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/flagplane/topodump"
	"github.com/flagplane/flagplane/topology"
)

// restConfig loads a kubeconfig as kubectl does: the file given (else
// $KUBECONFIG or ~/.kube/config) and the context given (else the current).
func restConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// graphFlags say where explain and diff read the graph from: a cluster,
// with the caller's own permissions, or manifests offline.
type graphFlags struct {
	kubeconfig, kubeContext, fromDir, syncProvider string
	namespaces                                     stringList
	timeout                                        time.Duration
}

func (g *graphFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig of a cluster: the graph is built from its objects with your own permissions")
	fs.StringVar(&g.kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.Var(&g.namespaces, "namespaces", "with a cluster: comma-separated namespaces to read (default: all; objects of other namespaces count only if read)")
	fs.StringVar(&g.fromDir, "from-dir", "", "build the graph offline from the manifests under this folder (no cluster); -n is also the namespace of manifests that name none")
	fs.StringVar(&g.syncProvider, "sidecar-sync-provider", "", "the manager's --sidecar-sync-provider, if it has one (default file)")
	fs.DurationVar(&g.timeout, "timeout", time.Minute, "give up reading the graph after this long")
}

func (g *graphFlags) check() error {
	if g.fromDir != "" && (g.kubeconfig != "" || len(g.namespaces) > 0) {
		return fmt.Errorf("%w: --from-dir reads no cluster: leave out --kubeconfig and --namespaces", errUsage)
	}
	return nil
}

// load builds the graph; namespace is that of manifests that name none.
func (g *graphFlags) load(ctx context.Context, namespace string, warnings io.Writer) (*topology.Topology, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	opts := []topology.Option{topology.WithDefaultSyncProvider(v1beta1.SyncProviderType(g.syncProvider))}
	if g.fromDir != "" {
		return topodump.LoadDir(g.fromDir, namespace, opts...)
	}
	cfg, err := restConfig(g.kubeconfig, g.kubeContext)
	if err != nil {
		return nil, err
	}
	return topodump.LoadCluster(ctx, cfg, topodump.ClusterOptions{Namespaces: g.namespaces, Warnings: warnings, Topology: opts})
}
