package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/inspect/topodump"
	"github.com/flagplane/flagplane/topology"
)

// completionTimeout bounds what a completion asks the cluster: a shell
// waits on it.
const completionTimeout = 3 * time.Second

// resources are where the kinds explain takes are listed in a cluster.
var resources = map[topology.Kind]schema.GroupVersionResource{
	topology.KindDeployment:      {Group: "apps", Version: "v1", Resource: "deployments"},
	topology.KindStatefulSet:     {Group: "apps", Version: "v1", Resource: "statefulsets"},
	topology.KindDaemonSet:       {Group: "apps", Version: "v1", Resource: "daemonsets"},
	topology.KindFlagSet:         v1beta1.GroupVersion.WithResource("featureflags"),
	topology.KindSource:          v1beta1.GroupVersion.WithResource("featureflagsources"),
	topology.KindInProcessConfig: v1beta1.GroupVersion.WithResource("inprocessconfigurations"),
}

// fixedCompletions completes a flag with those of values that start with
// what is typed.
func fixedCompletions(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, toComplete) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeObject completes explain's KIND/NAME: the kinds offline (their
// names, else their short names), then the names of the objects of that
// kind in the namespace: from --from-dir's manifests, or from the cluster
// when its kubeconfig reaches it; nothing, quietly, when it does not.
func (g *graphFlags) completeObject(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	kindName, prefix, slash := strings.Cut(toComplete, "/")
	if !slash {
		return completeKinds(toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	kind, err := explain.LookupKind(kindName)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, name := range g.objectNames(cmd, kind.Kind) {
		if strings.HasPrefix(name, prefix) {
			out = append(out, kindName+"/"+name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeKinds are the kinds that start with prefix, each followed by a
// slash; their short names when no name does.
func completeKinds(prefix string) []cobra.Completion {
	var names, short []cobra.Completion
	for _, k := range explain.Kinds {
		if strings.HasPrefix(k.Name, strings.ToLower(prefix)) {
			names = append(names, k.Name+"/")
		}
		if strings.HasPrefix(k.Short, strings.ToLower(prefix)) {
			short = append(short, k.Short+"/")
		}
	}
	if len(names) > 0 {
		return names
	}
	return short
}

// objectNames lists the names of the objects of kind in the namespace of
// -n (its default as the command's), quietly empty on any error.
func (g *graphFlags) objectNames(cmd *cobra.Command, kind topology.Kind) []string {
	if g.offline() {
		ns, _ := g.kube.namespace(true)
		top, err := topodump.LoadDir(g.fromDir, ns)
		if err != nil {
			cobra.CompDebugln("loading --from-dir: "+err.Error(), false)
			return nil
		}
		var out []string
		for _, k := range explain.Objects(top.Snapshot(), kind) {
			if k.Namespace == ns {
				out = append(out, k.Name)
			}
		}
		return out
	}
	ns, err := g.kube.namespace(false)
	if err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil
	}
	return g.kube.listNames(cmd.Context(), resources[kind], ns)
}

// listNames lists the names of gvr's objects in ns (all namespaces: ""),
// sorted; nil, quietly, when the cluster cannot be read.
func (k *kubeFlags) listNames(ctx context.Context, gvr schema.GroupVersionResource, ns string) []string {
	cfg, err := k.restConfig()
	if err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil
	}
	cfg.Timeout = completionTimeout
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	var list *metav1.PartialObjectMetadataList
	if ns == "" {
		list, err = mc.Resource(gvr).List(ctx, metav1.ListOptions{})
	} else {
		list, err = mc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		cobra.CompDebugln("listing "+gvr.Resource+": "+err.Error(), false)
		return nil
	}
	var out []string
	for _, o := range list.Items {
		out = append(out, o.Name)
	}
	slices.Sort(out)
	return out
}

// completeNamespaces completes -n and --namespaces from the cluster.
func (k *kubeFlags) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, ns := range k.listNames(cmd.Context(), schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "") {
		if strings.HasPrefix(ns, toComplete) {
			out = append(out, ns)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeKubeconfig completes --context, --cluster and --user from the
// kubeconfig.
func (k *kubeFlags) completeKubeconfig(flag string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		raw, err := k.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		switch flag {
		case "context":
			for n := range raw.Contexts {
				names = append(names, n)
			}
		case "cluster":
			for n := range raw.Clusters {
				names = append(names, n)
			}
		case "user":
			for n := range raw.AuthInfos {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
