package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/controllers"
	"github.com/flagplane/flagplane/metrics"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/history"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The manager's own namespace: the leader election Lease, and the Events
// that leader election records on it. Kustomize puts the generated Role in
// the namespace the manager is installed to.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=flagplane-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=flagplane-system

// TopologyPath is where the manager serves its topology as Graphviz DOT.
const TopologyPath = "/debug/topology"

// Manager is a flagplane manager, built but not started.
type Manager struct {
	// Manager is the controller-runtime manager. Add further runnables
	// (webhooks, the sync server) to it before Start.
	manager.Manager
	// Controller owns the topology and the workflows.
	Controller *controllers.Controller
	// Metrics records flagplane's metrics; the sync server reports its
	// subscribers to it.
	Metrics *metrics.Recorder
	// Admission is what the admission webhooks added; nil when they are off.
	Admission *webhooks.Admission
	// Sync is the built-in flagd sync server; nil when it is off. The
	// admission webhook issues sidecar credentials with Sync.NamespaceTokens().
	Sync *syncserver.Server
	// Options are the options the manager was built with.
	Options Options

	registry prometheus.Registerer
	// injection are the options sidecars are injected with (what
	// /debug/explain computes with); set before the manager starts.
	injection injection.Options

	// The servers' listeners and the metrics server (listeners.go).
	healthListener, webhookListener net.Listener
	metricsServer                   metricsserver.Server
	// webhooks is the webhook server, when the manager serves admission
	// (the manager's GetWebhookServer would add a default one otherwise).
	webhooks *webhookServer
}

// Scheme returns a scheme with client-go's kinds and flagplane's API.
func Scheme() (*runtime.Scheme, error) {
	return api.NewScheme()
}

// New builds a manager for the cluster of cfg. ctx bounds the setup (the
// informers are created but not started); Start runs it.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	m := &Manager{Options: o, registry: o.Registry}
	if m.registry == nil {
		m.registry = ctrlmetrics.Registry
	}
	if m.Metrics, err = metrics.New(m.registry); err != nil {
		return nil, err
	}

	// Every client of the manager (cache, client, leader election, events)
	// is built from cfg: count their requests by verb and resource.
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(m.Metrics.APIRequests().WrapTransport)

	// The probes and the webhooks listen from now on, on the port asked for
	// or (port 0) one the kernel picks: Addresses reports it.
	if err := m.listen(o); err != nil {
		m.unregister()
		return nil, err
	}
	// Each step below sets up a part of the manager; the first that fails
	// closes what the others opened.
	probes, err := m.newControllerManager(cfg, scheme, o)
	if err == nil {
		var wo webhooks.Options
		if wo, err = m.setupControllers(ctx, o); err == nil {
			err = m.setupAdmission(ctx, o, wo)
		}
	}
	if err == nil {
		err = m.setupProbes(probes)
	}
	if err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// newControllerManager makes the controller-runtime manager: its cache,
// leader election, the webhook server on the webhook listener, the
// probes' checkers and the metrics server.
func (m *Manager) newControllerManager(cfg *rest.Config, scheme *runtime.Scheme, o Options) (*probes, error) {
	cacheOpts := cache.Options{}
	if o.CacheSyncPeriod > 0 {
		cacheOpts.SyncPeriod = &o.CacheSyncPeriod
	}
	if len(o.Namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	extra := map[string]http.Handler{}
	if o.TopologyEndpoint {
		extra[TopologyPath] = topologyHandler(m)
		extra[ExplainPath] = explainHandler(m)
	}
	if o.Profiling {
		maps.Copy(extra, profilingHandlers())
	}
	mgrOpts := ctrl.Options{
		Scheme: scheme,
		Cache:  controllers.CacheOptions(cacheOpts, o.Generated),
		// Served by the servers of listeners.go instead.
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // the process ends right after: let a standby take over at once
	}
	if m.webhookListener != nil {
		m.webhooks = &webhookServer{listener: m.webhookListener, drain: o.WebhookDrain, DefaultServer: webhook.NewServer(webhook.Options{
			Host: o.WebhookHost, Port: m.webhookListener.Addr().(*net.TCPAddr).Port, CertDir: o.WebhookCertDir,
		}).(*webhook.DefaultServer)}
		mgrOpts.WebhookServer = m.webhooks
	}
	ctrlMgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	probes := &probes{healthz: map[string]healthz.Checker{}, readyz: map[string]healthz.Checker{}, listener: m.healthListener}
	m.Manager = probedManager{Manager: ctrlMgr, probes: probes}
	if m.metricsServer, err = newMetricsServer(m.Manager, metricsOptions(o, extra)); err != nil {
		return nil, err
	}
	return probes, nil
}

// setupControllers makes the controllers, the sync server that shares
// their graph and the revision history, and returns the options admission
// is set up with.
func (m *Manager) setupControllers(ctx context.Context, o Options) (webhooks.Options, error) {
	// --- sync server (issue 7): shares the controllers' graph, hears their Deltas ---
	// The operator-wide settings of the workflows, one value shared by the
	// controllers, the sync server and admission: whether warnings about a
	// flag set are errors (and the verdicts on flag sets, remembered once),
	// what generated objects carry.
	flagSets := flagsets.NewValidator(o.StrictValidation)
	settings := workflows.Settings{FlagSets: flagSets, Generated: o.Generated,
		// Rollouts follow what this process's webhook injects; without
		// webhooks, the options of an operator started without flags.
		Injection: injection.DefaultOptions()}
	ctrlOpts := controllers.Options{Workers: o.Workers, Metrics: m.Metrics, Settings: &settings,
		// The start-up lists every object and reconciles each once: a
		// heap at its peak, most of it garbage once the pass is over,
		// which the runtime would return to the system only slowly.
		StartedUp:       func() { releaseStartupMemory(log.FromContext(ctx).WithName("startup")) },
		PodAddress:      o.PodAddress,
		PrometheusGates: o.PrometheusGates, PrometheusNamespaceLabel: o.PrometheusNamespaceLabel,
		GateInterval: o.GateInterval,
		NoConfirm:    !o.ConfirmDelivery, ConfirmBound: o.ConfirmBound,
		Topology: topology.New(append(flagSets.TopologyOptions(), topology.WithDefaultSyncProvider(o.DefaultSyncProvider))...)}
	if o.Sync.Enabled() {
		if o.Sync.SecretNamespace == "" {
			o.Sync.SecretNamespace = o.Admission.Namespace
		}
		graphBuilt := func() bool { return m.Controller != nil && m.Controller.GraphBuilt() }
		var err error
		if m.Sync, err = syncserver.AddToManager(ctx, m.Manager, ctrlOpts.Topology, o.Sync, graphBuilt, m.Metrics); err != nil {
			return webhooks.Options{}, fmt.Errorf("setting up the sync server: %w", err)
		}
		ctrlOpts.FlagSetListener = m.Sync
		ctrlOpts.SyncReportNamespace = o.Sync.Namespace()
	}
	// --- end sync server ---
	wo := m.admissionOptions(o, flagSets)
	if o.Webhooks {
		settings.Injection = wo.Injection
	}
	m.injection = settings.Injection
	ctrlOpts.Flagd = flagdOptions(o, m.Sync)
	ctrlOpts.GrantCRDPoll = o.GatewayAPIPoll
	ctrlOpts.Namespaces = o.Namespaces
	// What the history did not record, which the status of FeatureFlags says.
	unrecorded := &workflows.UnrecordedRevisions{}
	ctrlOpts.Unrecorded = unrecorded
	// The revision history (issue 30): every accepted FeatureFlag spec
	// recorded, on the leader, from the cache and the graph.
	ctrlOpts.History = &history.Reconciler{Client: client.WithFieldOwner(m.GetClient(), v1beta1.FieldManager), Graph: ctrlOpts.Topology,
		Events: m.GetEventRecorder("flagplane"), DefaultLimit: o.RevisionHistoryLimit, NamespaceLimit: o.RevisionNamespaceLimit,
		Unrecorded: unrecorded,
		// Its spec-author webhook vouches for the annotation a revision's
		// createdBy is read from; without webhooks, nothing does.
		TrustSpecAuthor: o.Webhooks}
	var err error
	if m.Controller, err = controllers.New(ctx, m.Manager, ctrlOpts); err != nil {
		return webhooks.Options{}, err
	}
	m.Metrics.WatchTopology(func() map[topology.Kind]int { return m.Controller.Topology().Snapshot().Counts() })
	m.Metrics.WatchPending(m.Controller.Pending)
	return wo, nil
}

// admissionOptions are the options the webhook injects with, which
// rollouts follow.
func (m *Manager) admissionOptions(o Options, flagSets *flagsets.Validator) webhooks.Options {
	wo := o.Admission
	wo.Injection.Sidecar = o.Sidecar
	wo.Injection.InProcess = o.InProcess
	wo.FlagSets, wo.Generated = flagSets, o.Generated
	wo.PrometheusGates = o.PrometheusGates
	// The FeatureFlag webhook warns of what a Flagd's flagd release
	// evaluates otherwise, as the sidecar's.
	wo.FlagdTag = o.Flagd.Tag
	// The healer's queue has as many workers as every other.
	wo.HealWorkers = o.Workers
	// Sidecars of flagd-proxy sources prove their namespace to the sync
	// server with a token the webhook writes into their arguments.
	if m.Sync != nil && wo.Injection.SyncServerHeaders == nil {
		if tokens := m.Sync.NamespaceTokens(); tokens != nil {
			wo.Injection.SyncServerHeaders = tokens.HeadersFor
		}
	}
	return wo
}

// setupAdmission sets up the Pod injector and the validators, on every
// replica: a standby serves them too, from its own graph.
func (m *Manager) setupAdmission(ctx context.Context, o Options, wo webhooks.Options) error {
	if !o.Webhooks {
		return nil
	}
	var err error
	if m.Admission, err = webhooks.Setup(ctx, m.Manager, m.Controller, wo); err != nil {
		return fmt.Errorf("setting up admission: %w", err)
	}
	if h := m.Admission.Healer; h != nil {
		m.Controller.AddHealer(h, h.Resync, h.Workers)
	}
	// Ready only once the webhook server answers TLS: with certificates
	// from a Secret (cert-manager) it starts only when they are there.
	// An update then waits for a replica that serves admission before
	// it stops an old one.
	if err := m.AddReadyzCheck("webhook-server", m.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook server's readiness check: %w", err)
	}
	return nil
}

// setupProbes adds the liveness and readiness checks, and the server of
// the probes on their listener.
func (m *Manager) setupProbes(probes *probes) error {
	if err := m.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the liveness check: %w", err)
	}
	if err := m.AddReadyzCheck("topology", m.readyCheck); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if m.healthListener != nil {
		if err := m.Add(probes.server()); err != nil {
			return fmt.Errorf("adding the health probe server: %w", err)
		}
	}
	return nil
}

// listen binds the listeners of the probes and of the webhooks (when on).
func (m *Manager) listen(o Options) error {
	var err error
	if !disabled(o.HealthProbeBindAddress) {
		if m.healthListener, err = listenAddr("health probes", o.HealthProbeBindAddress); err != nil {
			return err
		}
	}
	if o.Webhooks {
		if m.webhookListener, err = listen("admission webhooks", o.WebhookHost, o.WebhookPort); err != nil {
			m.close()
			return err
		}
	}
	return nil
}

// close undoes New: the listeners it bound, the metrics it registered.
func (m *Manager) close() {
	for _, l := range []net.Listener{m.healthListener, m.webhookListener} {
		if l != nil {
			_ = l.Close()
		}
	}
	m.unregister()
}

// flagdOptions are the settings of Flagds: the --flagd-* flags, over the
// settings the sidecar is injected with (a Flagd's container is computed as
// the sidecar is), whether or not the webhooks run.
func flagdOptions(o Options, sync *syncserver.Server) flagds.Options {
	fo := o.Flagd
	fo.Injection = o.Admission.Injection
	fo.Injection.Sidecar = o.Sidecar
	fo.Injection.InProcess = o.InProcess
	if sync != nil && fo.Injection.SyncServerHeaders == nil {
		if tokens := sync.NamespaceTokens(); tokens != nil {
			fo.Injection.SyncServerHeaders = tokens.HeadersFor
		}
	}
	return fo
}

// Start runs the manager until ctx is done. It can be called once.
func (m *Manager) Start(ctx context.Context) error {
	defer m.close()
	ctrl.LoggerFrom(ctx).Info("starting flagplane",
		"namespaces", m.Options.Namespaces, "leaderElection", m.Options.LeaderElection,
		"metrics", m.Options.MetricsBindAddress, "metricsSecure", m.Options.MetricsSecure, "probes", m.Options.HealthProbeBindAddress)
	// A flagd release flagplane cannot vouch for is said once here, and in
	// the FlagdVersionSupported condition of every source and Flagd.
	for _, in := range m.flagdReleases() {
		if msg := in.Unvouched(); msg != "" {
			ctrl.LoggerFrom(ctx).Info("the injected flagd is not a release flagplane vouches for", "flagd", in.String(), "detail", msg)
		}
	}
	if sidecar := m.Options.Sidecar.Flagd(); m.Options.Admission.Injection.PassSyncProviderArgs && sidecar.Vouched && !sidecar.Facts.HasFlag("sync-provider-args") {
		ctrl.LoggerFrom(ctx).Info("--sidecar-sync-provider-args does nothing: the injected flagd has no --sync-provider-args", "flagd", sidecar.String())
	}
	go m.logListening(ctx)
	if ws := m.webhooks; ws != nil {
		go func() {
			<-ctx.Done()
			ws.beginDrain()
		}()
	}
	return m.Manager.Start(ctx)
}

// flagdReleases are the flagd releases the manager injects: the sidecar's
// and Flagd Deployments'.
func (m *Manager) flagdReleases() []flagdversion.Injected {
	return flagdversion.Distinct(m.Options.Sidecar.Flagd(), flagdOptions(m.Options, nil).Flagd())
}

// readyCheck is ready once the topology holds everything in the caches.
// Without leader election it also waits until every node was reconciled
// once. With leader election a standby replica never runs that pass, but it
// keeps its graph built, which is what serving admission needs and what
// taking over quickly needs: it is ready then.
func (m *Manager) readyCheck(req *http.Request) error {
	// A replica whose sync server does not listen yet is not ready: its
	// Service would send subscribers to a closed port.
	if m.Sync != nil && m.Sync.Addr() == nil {
		return errSyncNotListening
	}
	if !m.Options.LeaderElection {
		return m.Controller.ReadyCheck(req)
	}
	if !m.Controller.GraphBuilt() {
		return errTopologyNotBuilt
	}
	return nil
}

var errSyncNotListening = errors.New("the sync server does not listen yet")

// unregister removes flagplane's metrics from the registry, so that a
// process can run managers one after the other (tests, the demo).
func (m *Manager) unregister() {
	if m.Metrics != nil {
		m.Metrics.Unregister(m.registry)
	}
}
