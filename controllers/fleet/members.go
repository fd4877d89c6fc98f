package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/multicluster-runtime/pkg/clusters"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/flagplane/flagplane/api/v1beta1"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

// member is one engaged member cluster.
type member struct {
	cluster.Cluster
	// fingerprint is what it was engaged with (endpoint, CA, provider,
	// granted namespaces): a change engages it anew.
	fingerprint string
	probe       *probe
}

// probe is what the hub heard from a member's API server.
type probe struct {
	mu        sync.Mutex
	reachable bool
	lastHeard time.Time
	err       string
}

func (p *probe) reach() fleetwf.Reach {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fleetwf.Reach{Engaged: true, Reachable: p.reachable, LastHeard: p.lastHeard, Err: p.err}
}

// record notes one probe's outcome and says whether reachability changed.
func (p *probe) record(err error, at time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.reachable
	p.reachable = err == nil
	if err == nil {
		p.lastHeard, p.err = at, ""
	} else {
		p.err = err.Error()
	}
	return was != p.reachable
}

// Members engages the inventory's clusters and answers the placement
// workflow's questions about them (fleetwf.Members).
type Members struct {
	access    *access.Config
	scheme    *runtime.Scheme
	heartbeat time.Duration
	timeout   time.Duration
	// changed receives an event for every member FeatureFlag event and
	// every change of a member's reach, for the placement queue.
	changed chan<- event.GenericEvent

	registry clusters.Clusters[*member]

	mu sync.Mutex
	// failed holds why a profile's cluster could not be engaged.
	failed map[string]fleetwf.Reach
}

func newMembers(cfg *access.Config, scheme *runtime.Scheme, o Options, changed chan<- event.GenericEvent) *Members {
	m := &Members{access: cfg, scheme: scheme, heartbeat: o.Heartbeat, timeout: o.ProbeTimeout,
		changed: changed, registry: clusters.New[*member](), failed: map[string]fleetwf.Reach{}}
	m.registry.EqualClusters = func(a, b *member) bool { return a.fingerprint == b.fingerprint }
	m.registry.WaitCacheTimeout = o.ProbeTimeout * 5
	return m
}

// Member implements fleetwf.Members.
func (m *Members) Member(name string) (client.Client, fleetwf.Reach) {
	cl, err := m.registry.GetTyped(context.Background(), multicluster.ClusterName(name))
	if err != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		return nil, m.failed[name]
	}
	return cl.GetClient(), cl.probe.reach()
}

// Engaged implements fleetwf.Members.
func (m *Members) Engaged() []string {
	var out []string
	for _, n := range m.registry.ClusterNames() {
		out = append(out, string(n))
	}
	return out
}

// engage brings the member of profile in line with the namespaces granted
// to it: engaged with a cache of those namespaces, engaged anew when its
// access or its namespaces change, let go when it has none.
func (m *Members) engage(ctx context.Context, cp *cpv1alpha1.ClusterProfile, namespaces []string) error {
	name := cp.Name
	if len(namespaces) == 0 {
		m.disengage(name, "no FleetGrant grants this cluster a namespace")
		return nil
	}
	cfg, err := m.access.BuildConfigFromCP(cp)
	if err != nil {
		m.fail(name, fmt.Errorf("building its access from the ClusterProfile: %w", err))
		return nil // nothing to retry until the profile or the provider file changes
	}
	fp := fingerprint(cfg, namespaces)
	if cur, err := m.registry.GetTyped(ctx, multicluster.ClusterName(name)); err == nil && cur.fingerprint == fp {
		return nil
	}
	mem, err := m.newMember(cfg, namespaces, fp)
	if err != nil {
		m.fail(name, err)
		return err
	}
	// The member runs until disengaged, not until this reconcile ends.
	runCtx := log.IntoContext(context.WithoutCancel(ctx), log.FromContext(ctx).WithValues("cluster", name))
	if err := m.registry.AddOrReplace(runCtx, multicluster.ClusterName(name), mem, nil); err != nil {
		m.fail(name, fmt.Errorf("engaging: %w", err))
		return err
	}
	if err := m.watch(runCtx, name, mem); err != nil {
		m.registry.Remove(multicluster.ClusterName(name))
		m.fail(name, err)
		return err
	}
	m.mu.Lock()
	delete(m.failed, name)
	m.mu.Unlock()
	go m.runProbe(runCtx, name, mem, cfg)
	m.notify(nil)
	return nil
}

func (m *Members) newMember(cfg *rest.Config, namespaces []string, fp string) (*member, error) {
	defaults := map[string]cache.Config{}
	for _, ns := range namespaces {
		defaults[ns] = cache.Config{}
	}
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = m.scheme
		o.Cache.DefaultNamespaces = defaults
	})
	if err != nil {
		return nil, fmt.Errorf("building the member's client: %w", err)
	}
	return &member{Cluster: cl, fingerprint: fp, probe: &probe{}}, nil
}

// watch feeds the member's FeatureFlag events to the placement queue.
func (m *Members) watch(ctx context.Context, name string, mem *member) error {
	wait, cancel := context.WithTimeout(ctx, m.registry.WaitCacheTimeout)
	defer cancel()
	inf, err := mem.GetCache().GetInformer(wait, &v1beta1.FeatureFlag{})
	if err != nil {
		return fmt.Errorf("watching the member's FeatureFlags: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.notifyObject(obj) },
		UpdateFunc: func(_, obj any) { m.notifyObject(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m.notifyObject(obj)
		},
	})
	return err
}

func (m *Members) notifyObject(obj any) {
	if ff, ok := obj.(*v1beta1.FeatureFlag); ok {
		m.notify(ff)
	}
}

// notify queues the placements of ff, or every placement when ff is nil.
func (m *Members) notify(ff *v1beta1.FeatureFlag) {
	var obj client.Object = &v1beta1.FeatureFlag{}
	if ff != nil {
		obj = ff
	}
	m.changed <- event.GenericEvent{Object: obj}
}

// runProbe asks the member's API server for /readyz every heartbeat until
// the member is disengaged, and queues every placement when the member
// turns reachable or unreachable.
func (m *Members) runProbe(ctx context.Context, name string, mem *member, cfg *rest.Config) {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		mem.probe.record(err, time.Now())
		return
	}
	rc := cs.Discovery().RESTClient()
	t := time.NewTicker(m.heartbeat)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, m.timeout)
		err := rc.Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if mem.probe.record(err, time.Now()) {
			log.FromContext(ctx).Info("member reachability changed", "reachable", err == nil)
			m.notify(nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Members) fail(name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed[name] = fleetwf.Reach{Err: err.Error()}
}

func (m *Members) disengage(name, why string) {
	if _, err := m.registry.GetTyped(context.Background(), multicluster.ClusterName(name)); err == nil {
		m.registry.Remove(multicluster.ClusterName(name))
		m.notify(nil)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if why == "" {
		delete(m.failed, name)
		return
	}
	m.failed[name] = fleetwf.Reach{Err: why}
}

// fingerprint identifies how a member is reached and what it caches.
func fingerprint(cfg *rest.Config, namespaces []string) string {
	h := sha256.New()
	fmt.Fprintln(h, cfg.Host)
	h.Write(cfg.CAData)
	if e := cfg.ExecProvider; e != nil {
		fmt.Fprintln(h, e.Command, strings.Join(e.Args, " "))
		if raw, err := json.Marshal(e.Config); err == nil {
			h.Write(raw)
		}
	}
	ns := slices.Clone(namespaces)
	slices.Sort(ns)
	fmt.Fprintln(h, strings.Join(ns, ","))
	return hex.EncodeToString(h.Sum(nil))
}
