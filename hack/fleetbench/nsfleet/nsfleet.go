// Package nsfleet simulates many member clusters on one real member: each
// virtual cluster is a set of namespaces of the shared member's API
// server, named after the cluster and the hub's namespace (NamespaceOf),
// where the member's one flagplane serves the copies as it would serve
// them in a cluster of their own. It implements the fleet hub's Engine
// (controllers/fleet), in the manner of multicluster-runtime's namespace
// provider: one connection and one cache of the member's FeatureFlags,
// shared by every virtual cluster, whose clients rewrite namespaces both
// ways, and whose events are mapped back to the hub's namespaces.
//
// It is a harness for hack/fleetbench, not a way to run a fleet: a
// virtual cluster costs the hub a client wrapper, not a connection, a
// cache and a probe of its own, and all of them are reachable or not
// together.
package nsfleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/flagplane/flagplane/api/v1beta1"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

// separator joins a virtual cluster's name and a hub namespace into a
// namespace of the shared member.
const separator = "--"

// NamespaceOf is the shared member's namespace that holds the hub
// namespace ns of virtual cluster name.
func NamespaceOf(name, ns string) string { return name + separator + ns }

// Split is the inverse of NamespaceOf.
func Split(memberNS string) (name, ns string, ok bool) {
	return strings.Cut(memberNS, separator)
}

// Engine is the virtual clusters of one shared member.
type Engine struct {
	names     []string
	known     map[string]*nsClient
	cluster   cluster.Cluster
	probe     rest.Interface
	heartbeat time.Duration

	mu        sync.Mutex
	synced    bool
	reachable bool
	lastHeard time.Time
	err       string
}

// New is an engine of the virtual clusters names on the member that cfg
// reaches. Its one client is not rate-limited: each real member would
// have a limiter of its own, which one write per edit never reaches.
func New(cfg *rest.Config, scheme *runtime.Scheme, names []string, heartbeat time.Duration) (*Engine, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cl, err := cluster.New(cfg, func(o *cluster.Options) { o.Scheme = scheme })
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{names: names, known: map[string]*nsClient{}, cluster: cl,
		probe: cs.Discovery().RESTClient(), heartbeat: heartbeat}
	for _, n := range names {
		e.known[n] = &nsClient{Client: cl.GetClient(), name: n}
	}
	return e, nil
}

// Member implements fleetwf.Members.
func (e *Engine) Member(name string) (client.Client, fleetwf.Reach) {
	c, ok := e.known[name]
	e.mu.Lock()
	defer e.mu.Unlock()
	if !ok {
		return nil, fleetwf.Reach{Err: "not a simulated cluster"}
	}
	if !e.synced {
		return nil, fleetwf.Reach{Err: "not connected yet"}
	}
	return c, fleetwf.Reach{Engaged: true, Reachable: e.reachable, LastHeard: e.lastHeard, Err: e.err}
}

// Engaged implements fleetwf.Members.
func (e *Engine) Engaged() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.synced {
		return nil
	}
	return e.names
}

// Start implements the hub's Engine: it runs the shared cache, maps its
// FeatureFlag events to the hub's namespaces, and probes the member.
func (e *Engine) Start(ctx context.Context, changed chan<- event.GenericEvent) error {
	errc := make(chan error, 1)
	go func() { errc <- e.cluster.Start(ctx) }()
	inf, err := e.cluster.GetCache().GetInformer(ctx, &v1beta1.FeatureFlag{})
	if err != nil {
		return fmt.Errorf("watching the shared member's FeatureFlags: %w", err)
	}
	send := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		ff, ok := obj.(*v1beta1.FeatureFlag)
		if !ok {
			return
		}
		name, ns, ok := Split(ff.Namespace)
		if _, known := e.known[name]; !ok || !known {
			return
		}
		out := &v1beta1.FeatureFlag{}
		out.Namespace, out.Name, out.Labels = ns, ff.Name, ff.Labels
		changed <- event.GenericEvent{Object: out}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: send,
		UpdateFunc: func(_, obj any) { send(obj) }, DeleteFunc: send}); err != nil {
		return err
	}
	if !e.cluster.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the shared member's cache did not sync")
	}
	e.mu.Lock()
	e.synced = true
	e.mu.Unlock()
	e.runProbe(ctx, changed)
	return <-errc
}

// runProbe asks the shared member for /readyz every heartbeat: every
// virtual cluster's reach is its.
func (e *Engine) runProbe(ctx context.Context, changed chan<- event.GenericEvent) {
	t := time.NewTicker(e.heartbeat)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, e.heartbeat)
		err := e.probe.Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		if ctx.Err() != nil {
			return
		}
		e.mu.Lock()
		was := e.reachable
		e.reachable = err == nil
		if err == nil {
			e.lastHeard, e.err = time.Now(), ""
		} else {
			e.err = err.Error()
		}
		e.mu.Unlock()
		if was != (err == nil) {
			changed <- event.GenericEvent{Object: &v1beta1.FeatureFlag{}}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
