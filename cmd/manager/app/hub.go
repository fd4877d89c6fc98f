package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/controllers/fleet"
)

// The hub's RBAC is not in Go markers: controller-gen would add it to the
// single-cluster manager's role (config/rbac/role.yaml), which is made from
// the markers of every package. config/fleet/hub holds it, by hand.

// Hub is a manager run as a fleet hub (--fleet-hub), built but not
// started: the hub's controllers (controllers/fleet) in a
// controller-runtime manager with the single-cluster manager's leader
// election, probes and metrics server.
type Hub struct {
	// Manager is the controller-runtime manager.
	manager.Manager
	// Fleet is what fleet.Add added: the engaged members.
	Fleet *fleet.Hub
	// Options are the options the hub was built with.
	Options Options

	healthListener net.Listener
	metricsServer  metricsserver.Server
}

// HubScheme returns a scheme with client-go's kinds, flagplane's API and
// the inventory's ClusterProfile.
func HubScheme() (*runtime.Scheme, error) {
	s, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := cpv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NewHub builds a fleet hub for the cluster of cfg, with the access
// providers of o.Fleet.AccessConfig; Start runs it.
func NewHub(cfg *rest.Config, o Options) (*Hub, error) {
	if !o.Fleet.Hub {
		return nil, errors.New("NewHub builds a fleet hub: set Options.Fleet.Hub (--fleet-hub)")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	acc, err := loadAccess(o.Fleet.AccessConfig)
	if err != nil {
		return nil, err
	}
	scheme, err := HubScheme()
	if err != nil {
		return nil, err
	}
	h := &Hub{Options: o}
	if !disabled(o.HealthProbeBindAddress) {
		if h.healthListener, err = listenAddr("health probes", o.HealthProbeBindAddress); err != nil {
			return nil, err
		}
	}
	probes, err := h.newControllerManager(cfg, scheme, o)
	if err == nil {
		h.Fleet, err = fleet.Add(h.Manager, fleet.Options{InventoryNamespace: o.Fleet.InventoryNamespace, Access: acc, Heartbeat: o.Fleet.Heartbeat})
	}
	if err == nil {
		err = h.setupProbes(probes)
	}
	if err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// newControllerManager makes the controller-runtime manager: its cache,
// whose ClusterProfiles and FleetGrants are the inventory namespace's
// only, leader election, the probes' checkers and the metrics server.
func (h *Hub) newControllerManager(cfg *rest.Config, scheme *runtime.Scheme, o Options) (*probes, error) {
	cacheOpts := fleet.CacheOptions(o.Fleet.InventoryNamespace)
	if o.CacheSyncPeriod > 0 {
		cacheOpts.SyncPeriod = &o.CacheSyncPeriod
	}
	ctrlMgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		// Served by the servers of listeners.go instead.
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.hubLeaderElectionID(),
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	probes := &probes{healthz: map[string]healthz.Checker{}, readyz: map[string]healthz.Checker{}, listener: h.healthListener}
	h.Manager = probedManager{Manager: ctrlMgr, probes: probes}
	extra := map[string]http.Handler{}
	if o.Profiling {
		maps.Copy(extra, profilingHandlers())
	}
	if h.metricsServer, err = newMetricsServer(h.Manager, metricsOptions(o, extra)); err != nil {
		return nil, err
	}
	return probes, nil
}

// hubLeaderElectionID is the hub's Lease: --leader-election-id, unless it
// is the single-cluster manager's default.
func (o Options) hubLeaderElectionID() string {
	if o.LeaderElectionID == DefaultOptions().LeaderElectionID {
		return FleetHubLeaderElectionID
	}
	return o.LeaderElectionID
}

// setupProbes adds the liveness check, the readiness check (the caches
// synced) and the server of the probes on their listener.
func (h *Hub) setupProbes(probes *probes) error {
	if err := h.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the liveness check: %w", err)
	}
	if err := h.AddReadyzCheck("caches", h.cachesSynced); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if h.healthListener != nil {
		if err := h.Add(probes.server()); err != nil {
			return fmt.Errorf("adding the health probe server: %w", err)
		}
	}
	return nil
}

// cachesSynced is ready once the hub's caches hold what the API server
// holds; every replica's caches run, the leader's and a standby's.
func (h *Hub) cachesSynced(req *http.Request) error {
	ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
	defer cancel()
	if !h.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the caches have not synced yet")
	}
	return nil
}

// Addresses tells where the hub's servers listen now (no webhook or sync
// server: a hub runs neither).
func (h *Hub) Addresses() Addresses {
	a := Addresses{Health: addrOf(h.healthListener)}
	if b, ok := h.metricsServer.(interface{ GetBindAddr() string }); ok {
		a.Metrics = b.GetBindAddr()
	}
	return a
}

// Start runs the hub until ctx is done. It can be called once.
func (h *Hub) Start(ctx context.Context) error {
	defer h.close()
	ctrl.LoggerFrom(ctx).Info("starting the flagplane fleet hub",
		"inventoryNamespace", h.Options.Fleet.InventoryNamespace, "heartbeat", h.Options.Fleet.Heartbeat,
		"leaderElection", h.Options.LeaderElection, "metrics", h.Options.MetricsBindAddress,
		"metricsSecure", h.Options.MetricsSecure, "probes", h.Options.HealthProbeBindAddress)
	go logServers(ctx, func() []server {
		a := h.Addresses()
		return []server{{"health", a.Health, h.healthListener != nil}, {"metrics", a.Metrics, h.metricsServer != nil}}
	})
	return h.Manager.Start(ctx)
}

// close undoes NewHub: the listener it bound.
func (h *Hub) close() {
	if h.healthListener != nil {
		_ = h.healthListener.Close()
	}
}
