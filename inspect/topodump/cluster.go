package topodump

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/pager"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// ClusterOptions say what FromCluster reads.
type ClusterOptions struct {
	// Namespaces to read; empty reads every namespace, which takes list
	// permissions cluster-wide.
	Namespaces []string
	// Warnings receives what was left out of the graph and why (nil: dropped).
	Warnings io.Writer
	// Topology are the options the manager builds its topology with
	// (its --sidecar-sync-provider).
	Topology []topology.Option
}

// clusterInput is one kind the topology is built from.
type clusterInput struct {
	gk schema.GroupKind
	// optional kinds may be absent from the cluster (their CRD is not
	// installed) or not readable; the graph then lacks them and a warning says so.
	optional bool
	// effect says what the graph misses without it, for the warning.
	effect string
}

// clusterInputs are the kinds the controllers build the topology from
// (manifests.Load reads the same ones).
var clusterInputs = []clusterInput{
	{gk: schema.GroupKind{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind}},
	{gk: schema.GroupKind{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind}},
	{gk: schema.GroupKind{Group: v1beta1.GroupVersion.Group, Kind: "InProcessConfiguration"}},
	{gk: schema.GroupKind{Group: "apps", Kind: "Deployment"}},
	{gk: schema.GroupKind{Group: "apps", Kind: "StatefulSet"}},
	{gk: schema.GroupKind{Group: "apps", Kind: "DaemonSet"}},
	{gk: schema.GroupKind{Group: manifests.ReferenceGrantGroup, Kind: manifests.ReferenceGrantKind}, optional: true,
		effect: "cross-namespace references to those namespaces show as not permitted"},
	{gk: schema.GroupKind{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FlagdKind}, optional: true,
		effect: "Flagds are left out"},
	{gk: schema.GroupKind{Group: policyv1alpha1.GroupVersion.Group, Kind: policyv1alpha1.FeatureFlagSourcePolicyKind}, optional: true,
		effect: "FeatureFlagSourcePolicies are left out: sidecar settings show without their defaults and overrides"},
}

// FromCluster builds the topology from the objects of a cluster, read with
// cfg's credentials — the caller's own permissions — exactly as the
// controllers build it from their informers (the same code as FromDir), and
// returns its DOT. Over the same objects it is the graph a manager serves at
// /debug/topology, without reading the manager: the CLI needs no access to
// the manager's metrics endpoint, only list on the kinds the topology is made
// of, in the namespaces asked for.
func FromCluster(ctx context.Context, cfg *rest.Config, o ClusterOptions) ([]byte, error) {
	t, err := LoadCluster(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	return t.DOT(), nil
}

// LoadCluster is FromCluster's graph.
func LoadCluster(ctx context.Context, cfg *rest.Config, o ClusterOptions) (*topology.Topology, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	// The served version of each kind, as the manager's REST mapper finds it.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var stream bytes.Buffer
	for _, in := range clusterInputs {
		mapping, err := mapper.RESTMapping(in.gk)
		switch {
		case in.optional && meta.IsNoMatchError(err):
			continue // not installed: the manager has none of them either
		case err != nil:
			return nil, fmt.Errorf("looking up %s: %w", in.gk, err)
		}
		for _, ns := range namespaces {
			err := listInto(ctx, dc, mapping.Resource, in.gk.Kind, ns, &stream)
			if err == nil {
				continue
			}
			gr, where := mapping.Resource.GroupResource(), "in every namespace"
			if ns != metav1.NamespaceAll {
				where = "in namespace " + ns
			}
			switch {
			case in.optional && apierrors.IsForbidden(err):
				warn(o.Warnings, "not reading %s %s (%v): %s", gr, where, err, in.effect)
			case apierrors.IsForbidden(err) && ns == metav1.NamespaceAll:
				return nil, fmt.Errorf("listing %s %s: %w (read only some namespaces with --namespaces)", gr, where, err)
			default:
				return nil, fmt.Errorf("listing %s %s: %w", gr, where, err)
			}
		}
	}
	t := topology.New(append(flagsets.NewValidator(false).TopologyOptions(), o.Topology...)...)
	if err := manifests.Load(t, &stream); err != nil {
		return nil, fmt.Errorf("building the topology from the cluster's objects: %w", err)
	}
	return t, nil
}

// listInto lists one kind, page by page, and appends its objects to a JSON stream.
func listInto(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource, kind, ns string, w *bytes.Buffer) error {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return dc.Resource(gvr).Namespace(ns).List(ctx, opts)
	})
	p.PageSize = 500
	return p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("listing %s: unexpected %T", gvr.GroupResource(), obj)
		}
		// List items may come without their kind.
		u.SetAPIVersion(gvr.GroupVersion().String())
		u.SetKind(kind)
		b, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
		return nil
	})
}

func warn(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "flagplane: warning: "+format+"\n", args...)
	}
}
