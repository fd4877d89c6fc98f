package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/topodump"
	"github.com/flagplane/flagplane/topology"
)

// graphFlags say where topology, explain and diff read the graph from: a
// cluster, with the caller's own permissions, or manifests offline.
type graphFlags struct {
	kube                  *kubeFlags
	fromDir, syncProvider string
	namespaces            stringList
	timeout               time.Duration
}

func (g *graphFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.Var(&g.namespaces, "namespaces", "with a cluster: comma-separated namespaces to read (default: all, which takes list permissions cluster-wide; objects of other namespaces count only if read)")
	fs.StringVar(&g.fromDir, "from-dir", "", "build the graph offline from the manifests under this folder (no cluster, no kubeconfig); -n is then the namespace of manifests that name none (default: default)")
	fs.StringVar(&g.syncProvider, "sidecar-sync-provider", "", "the manager's --sidecar-sync-provider, if it has one, so that entries naming no provider are read as it reads them (default file)")
	fs.DurationVar(&g.timeout, "timeout", time.Minute, "give up reading the graph after this long")
	_ = cmd.MarkFlagDirname("from-dir")
	_ = cmd.RegisterFlagCompletionFunc("sidecar-sync-provider", fixedCompletions(syncProviders()))
	_ = cmd.RegisterFlagCompletionFunc("namespaces", g.kube.completeNamespaces)
}

func (g *graphFlags) offline() bool { return g.fromDir != "" }

// check refuses flags that go with a cluster together with --from-dir.
func (g *graphFlags) check(cmd *cobra.Command) error {
	if !g.offline() {
		return nil
	}
	given := g.kube.given(cmd)
	if len(g.namespaces) > 0 {
		given = append(given, "--namespaces")
	}
	if len(given) > 0 {
		return fmt.Errorf("%w: --from-dir reads no cluster: leave out %s", errUsage, strings.Join(given, ", "))
	}
	return nil
}

// load builds the graph, and says the namespace of -n: with --from-dir,
// that of manifests that name none.
func (g *graphFlags) load(ctx context.Context, warnings io.Writer) (*topology.Topology, string, error) {
	opts := []topology.Option{topology.WithDefaultSyncProvider(v1beta1.SyncProviderType(g.syncProvider))}
	if g.offline() {
		ns, _ := g.kube.namespace(true)
		top, err := topodump.LoadDir(g.fromDir, ns, opts...)
		return top, ns, err
	}
	cfg, err := g.kube.restConfig()
	if err != nil {
		return nil, "", err
	}
	ns, err := g.kube.namespace(false)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	top, err := topodump.LoadCluster(ctx, cfg, topodump.ClusterOptions{Namespaces: g.namespaces, Warnings: warnings, Topology: opts})
	if err != nil {
		return nil, "", unreachable(cfg, err)
	}
	return top, ns, nil
}

func syncProviders() []string {
	var out []string
	for _, p := range []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy,
		v1beta1.SyncProviderHTTP, v1beta1.SyncProviderGRPC, v1beta1.SyncProviderGCS, v1beta1.SyncProviderAzureBlob, v1beta1.SyncProviderS3} {
		out = append(out, string(p))
	}
	return out
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

func (l *stringList) Type() string { return "strings" }
