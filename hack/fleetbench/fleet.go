package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/hack/fleetbench/nsfleet"
	"github.com/flagplane/flagplane/test/fleetenv"
)

const (
	inventoryNS = fleetenv.InventoryNamespace
	teamA       = "team-a"
	// selectLabel is on every ClusterProfile of the bench, and the
	// placement selects by it.
	selectLabel = "fleetbench.flagplane.dev/member"
)

// fleet is one size's hub and members, brought up by test/fleetenv as
// test/fleet's are, and the hub process; stop ends every part of it that
// was started, in reverse.
type fleet struct {
	root, dir string
	env       *fleetenv.Fleet
	// hubC is the hub's admin client, not rate-limited.
	hubC client.Client
	// members are the real members; with sim, members[0] is the shared
	// member and clusters the virtual ones.
	members  []*fleetenv.Member
	clusters []string
	proc     *hubProc
	// hubCache is the bench's own cache of the hub (watchAll).
	hubCache cache.Cache
	// laggard is the cluster that never confirms, once the halts begin.
	laggard atomic.Value

	mu    sync.Mutex
	stops []func() error
}

func (f *fleet) onStop(fn func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, fn)
}

func (f *fleet) stop() {
	for i := len(f.stops) - 1; i >= 0; i-- {
		if err := f.stops[i](); err != nil {
			progress("stopping: %v", err)
		}
	}
	f.stops = nil
}

// laggardName is the cluster that never confirms ("" before the halts).
func (f *fleet) laggardName() string {
	name, _ := f.laggard.Load().(string)
	return name
}

func unlimited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	return cfg
}

// start starts the hub's control plane, with the fleet's and the
// inventory's CRDs, config/fleet/hub's identity and team-a, and the
// members, with test/fleetenv: two at a time, with no
// kube-controller-manager, each reached by the hub at its API server
// itself (no forwarder in this process). Then the FleetGrant of team-a.
func (f *fleet) start(ctx context.Context, members []fleetenv.MemberSpec) error {
	env, err := fleetenv.Start(ctx, fleetenv.Options{Root: f.root, Log: io.Discard, Dir: f.dir,
		Members: members, Namespaces: []string{teamA},
		Parallel: 2, Direct: true, NoControllerManager: true, Unthrottled: true})
	if err != nil {
		return err
	}
	f.onStop(env.Stop)
	f.env, f.hubC, f.members = env, env.Client, env.Members
	grant := &fleetv1alpha1.FleetGrant{ObjectMeta: metav1.ObjectMeta{Name: "team-a-everywhere", Namespace: inventoryNS},
		Spec: fleetv1alpha1.FleetGrantSpec{Namespaces: []string{teamA}}}
	return f.hubC.Create(ctx, grant)
}

// startReal starts n real members, each running flagplane (admission on,
// delivery confirmed), with the hub's identity of config/fleet/member
// granted team-a, a token of it in a hub Secret and a ClusterProfile
// whose access provider is the secretreader plugin; then the hub process.
func (f *fleet) startReal(ctx context.Context, n int) error {
	specs := make([]fleetenv.MemberSpec, n)
	for i := range specs {
		specs[i] = fleetenv.MemberSpec{Name: fmt.Sprintf("member-%02d", i),
			Labels: map[string]string{selectLabel: "true"}, Granted: []string{teamA}}
	}
	if err := f.start(ctx, specs); err != nil {
		return err
	}
	for _, m := range f.members {
		f.clusters = append(f.clusters, m.Name)
	}
	return f.startHubProc(hubConfig{Kubeconfig: f.env.HubKubeconfig, Plugin: f.env.Plugin})
}

// profile writes a labelled ClusterProfile of a simulated member, with no
// access provider.
func (f *fleet) profile(ctx context.Context, name string) error {
	return f.hubC.Create(ctx, &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: inventoryNS,
		Labels: map[string]string{selectLabel: "true", "x-k8s.io/cluster-manager": "fleetbench"}},
		Spec: cpv1alpha1.ClusterProfileSpec{DisplayName: name, ClusterManager: cpv1alpha1.ClusterManager{Name: "fleetbench"}}})
}

// startSim starts one shared member (unregistered) with a namespace per
// virtual cluster, and n ClusterProfiles on the hub, and the hub process
// with the namespace-mapping engine. The engine uses the member's admin
// credentials.
func (f *fleet) startSim(ctx context.Context, n int, stub bool) error {
	var namespaces []string
	for i := range n {
		name := fmt.Sprintf("sim-%04d", i)
		f.clusters = append(f.clusters, name)
		namespaces = append(namespaces, simNamespace(name))
	}
	if err := f.start(ctx, []fleetenv.MemberSpec{{Name: "shared", Unregistered: true, NoFlagplane: stub}}); err != nil {
		return err
	}
	m := f.members[0]
	mc, err := client.New(unlimited(m.Config), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if stub {
		if err := f.startConfirmer(mc, m.Config); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, ns := range namespaces {
		g.Go(func() error { return mc.Create(gctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	}
	for _, name := range f.clusters {
		g.Go(func() error { return f.profile(gctx, name) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return f.startHubProc(hubConfig{Kubeconfig: f.env.HubKubeconfig, SimKubeconfig: m.CP.KubeconfigPath, SimClusters: f.clusters})
}

// startConfirmer stands in for the shared member's flagplane (confirmer),
// until the fleet stops.
func (f *fleet) startConfirmer(c client.Client, cfg *rest.Config) error {
	ctx, cancel := context.WithCancel(context.Background())
	f.onStop(func() error { cancel(); return nil })
	mc, err := cache.New(unlimited(cfg), cache.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := confirm(ctx, c, mc, 16); err != nil {
		return err
	}
	go func() { _ = mc.Start(ctx) }()
	if !mc.WaitForCacheSync(ctx) {
		return fmt.Errorf("the confirmer's cache did not sync")
	}
	return nil
}

func (f *fleet) startHubProc(hc hubConfig) error {
	var err error
	if f.proc, err = startHub(f.dir, hc); err != nil {
		return err
	}
	f.onStop(f.proc.stop)
	return nil
}

// hubLogTail is the end of the hub process's log, for an error.
func (f *fleet) hubLogTail() string {
	if f.proc == nil {
		return ""
	}
	return tailFile(f.proc.log, 30)
}

// simNamespace is the shared member's namespace of a virtual cluster's
// team-a.
func simNamespace(cluster string) string { return nsfleet.NamespaceOf(cluster, teamA) }
