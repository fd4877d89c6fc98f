package app

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/history"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/staging"
	"github.com/flagplane/flagplane/workflows/status"
)

// Options configure the manager. DefaultOptions gives the values of the
// command line's defaults; BindFlags ties every field to a flag.
type Options struct {
	// MetricsBindAddress serves /metrics and /debug/topology; "0" disables
	// both. Port 0 listens on a port the kernel picks (Manager.Addresses,
	// and the log line "listening", say which), as for every address here.
	MetricsBindAddress string
	// MetricsSecure serves them over HTTPS, to callers that present a bearer
	// token the API server authenticates (TokenReview) and authorizes for
	// get on the path (SubjectAccessReview): controller-runtime's
	// filters.WithAuthenticationAndAuthorization. Off, they are plain HTTP
	// to anyone who reaches the address.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the secure metrics
	// server; empty, it serves a self-signed certificate.
	MetricsCertDir string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables them.
	HealthProbeBindAddress string
	// TopologyEndpoint serves the topology as Graphviz DOT at /debug/topology
	// on the metrics address.
	TopologyEndpoint bool
	// Profiling serves Go's runtime profiles (net/http/pprof) at
	// /debug/pprof/ on the metrics address, behind the same authorization
	// as /metrics when MetricsSecure is set. Off by default: a heap
	// profile names what the caches hold.
	Profiling bool

	// LeaderElection lets one replica of several write; the others keep
	// their graph built, serve admission and wait to take over.
	LeaderElection bool
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// LeaderElectionNamespace holds the Lease; in a Pod it defaults to the
	// Pod's namespace.
	LeaderElectionNamespace string

	// Namespaces restricts the manager to these namespaces (namespace-scoped
	// mode, with namespaced Roles only); empty watches the whole cluster.
	Namespaces []string

	// Workers per queue: each workflow's and the healer's.
	Workers int

	// CacheSyncPeriod is how often the informers deliver every object again
	// (a resync, which changes nothing: flagplane ignores an object it has
	// seen); zero is controller-runtime's default (about 10 hours).
	CacheSyncPeriod time.Duration

	// WebhookPort, WebhookHost and WebhookCertDir configure the admission
	// webhook server (tls.crt and tls.key in WebhookCertDir); port 0 is one
	// the kernel picks.
	WebhookPort    int
	WebhookHost    string
	WebhookCertDir string
	// WebhookDrain is how long the webhook server drains once the manager
	// stops (DefaultWebhookDrain); zero shuts it down at once.
	WebhookDrain time.Duration

	// Sidecar are the defaults of the injected flagd sidecar, which the
	// admission webhook reads.
	Sidecar injection.SidecarOptions
	// InProcess are the defaults of in-process configurations.
	InProcess injection.InProcessOptions
	// DefaultSyncProvider is the provider of a source entry that names
	// none, where its source has no defaultSyncProvider (file).
	DefaultSyncProvider v1beta1.SyncProviderType
	// Generated are the value of app.kubernetes.io/managed-by and the labels
	// and annotations put on every generated object.
	Generated workflows.GeneratedMetadata
	// StrictValidation makes FeatureFlag warnings errors: refused on
	// admission and not served.
	StrictValidation bool

	// Webhooks serves admission: the Pod injector and the FeatureFlag and
	// FeatureFlagSource validators, configured by Admission (whose sidecar
	// is Sidecar).
	Webhooks  bool
	Admission webhooks.Options

	// Sync configures the built-in flagd sync server (--sync-* flags). It is
	// off unless --sync-bind-address is set: serving it takes a Service, and
	// with namespace tokens a key Secret, that the install manifests provide.
	Sync syncserver.Config

	// Flagd are the settings of the Flagd kind (--flagd-* flags); its
	// Injection is filled in from the sidecar's, admission's and the sync
	// server's settings.
	Flagd flagds.Options
	// RevisionHistoryLimit is how many revisions of a flag set to keep
	// where its RevisionHistoryLimitAnnotation says nothing valid
	// (workflows/history).
	RevisionHistoryLimit int
	// RevisionNamespaceLimit is how many FeatureFlagRevisions a namespace
	// may hold before the history records no more there (0: no bound).
	RevisionNamespaceLimit int
	// PrometheusGates evaluates the Prometheus gates of rollout policies
	// (--prometheus-gates): the manager queries the Prometheus each names.
	PrometheusGates bool
	// ConfirmDelivery asks the consumers' flagds which revision they serve
	// (--confirm-delivery); ConfirmBound is how long a pod may take to
	// serve a revision its copy holds (--confirm-bound).
	ConfirmDelivery bool
	ConfirmBound    time.Duration
	// PrometheusNamespaceLabel is the label of a series' namespace that
	// every Prometheus gate's query is confined by
	// (--prometheus-namespace-label, default "namespace").
	PrometheusNamespaceLabel string
	// GateInterval is how often the gates of a rollout under way are read
	// (--gate-interval): a Prometheus gate's query, the EvaluationErrors
	// and PodsReady gates' pods.
	GateInterval time.Duration

	// Fleet runs the manager as a fleet hub instead (--fleet-* flags,
	// fleet_flags.go; NewHub).
	Fleet FleetOptions

	// GatewayAPIPoll is how often to look for Gateway API's CRDs
	// (ReferenceGrant, HTTPRoute) while they are not installed; 15s when
	// zero. Not a flag: tests shorten it.
	GatewayAPIPoll time.Duration

	// Registry receives flagplane's metrics; controller-runtime's
	// metrics.Registry, which the metrics endpoint serves, when nil. Tests
	// that run a second manager in one process give it a registry of its own.
	Registry prometheus.Registerer
	// PodAddress, when set, is where the manager reaches a container's port
	// of a pod, for tests whose pods have no routable IP; not a flag (nil:
	// the pod's IP).
	PodAddress func(pod *corev1.Pod, container string, port int32) (string, bool)
}

// DefaultOptions are the options of a manager started without flags.
func DefaultOptions() Options {
	return Options{
		MetricsBindAddress:       ":8443",
		MetricsSecure:            true,
		HealthProbeBindAddress:   ":8081",
		TopologyEndpoint:         true,
		LeaderElectionID:         "flagplane.core.openfeature.dev",
		Workers:                  2,
		WebhookPort:              9443,
		WebhookDrain:             DefaultWebhookDrain,
		Sidecar:                  injection.DefaultSidecarOptions(),
		InProcess:                injection.DefaultInProcessOptions(),
		DefaultSyncProvider:      v1beta1.SyncProviderFile,
		Webhooks:                 true,
		Admission:                webhooks.DefaultOptions(),
		Sync:                     syncDefaults(),
		Flagd:                    flagds.DefaultOptions(),
		Generated:                workflows.GeneratedMetadata{ManagedBy: v1beta1.ManagedByValue},
		RevisionHistoryLimit:     history.DefaultLimit,
		PrometheusNamespaceLabel: staging.DefaultNamespaceLabel,
		GateInterval:             staging.DefaultInterval,
		RevisionNamespaceLimit:   history.DefaultNamespaceLimit,
		ConfirmDelivery:          true,
		ConfirmBound:             status.DefaultConfirmBound,
		Fleet:                    defaultFleetOptions(),
	}
}

// syncDefaults are the sync server's defaults, switched off.
func syncDefaults() syncserver.Config {
	c := syncserver.DefaultConfig()
	c.BindAddress = "0"
	return c
}

// BindFlags ties the options to command-line flags, with the current values
// of o as defaults. The names of the sidecar flags are the OpenFeature
// Operator's.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of the metrics and /debug/topology endpoint; 0 disables it")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve /metrics and /debug/topology over HTTPS to callers whose bearer token the API server authenticates and authorizes (get on the path); false serves plain HTTP to anyone")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "directory of the secure metrics server's tls.crt and tls.key (default: a self-signed certificate)")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "address of the /healthz and /readyz probes; 0 disables them")
	fs.BoolVar(&o.TopologyEndpoint, "topology-endpoint", o.TopologyEndpoint, "serve the topology as Graphviz DOT at /debug/topology on the metrics address")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve Go's runtime profiles (pprof) at /debug/pprof/ on the metrics address")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect a leader, so that only one replica writes")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease (default: the namespace of the Pod)")
	fs.Var((*stringList)(&o.Namespaces), "namespaces", "comma-separated namespaces to watch (namespace-scoped mode); empty watches the whole cluster")
	fs.IntVar(&o.Workers, "workers", o.Workers, "workers per queue (each workflow's and the healer's)")
	fs.BoolVar(&o.ConfirmDelivery, "confirm-delivery", o.ConfirmDelivery, "ask the flagd of every pod that reads a flag set through an injected sidecar or a Flagd which revision it serves (its sync port, from the manager's pod): a FeatureFlag is Ready, and a rollout step served, once they answer with it (off: once flagplane's own write succeeded)")
	fs.DurationVar(&o.ConfirmBound, "confirm-bound", o.ConfirmBound, "how long a pod may take to serve a revision its copy holds (the kubelet projects a ConfigMap at its sync) before its FeatureFlag is Stalled, naming the pod and what its flagd answered")
	fs.BoolVar(&o.PrometheusGates, "prometheus-gates", o.PrometheusGates, "evaluate the Prometheus gates of FeatureFlagRolloutPolicies: the manager queries the Prometheus each one names (off: a policy naming one is refused)")
	fs.DurationVar(&o.GateInterval, "gate-interval", o.GateInterval, "how often the gates of a rollout under way are read: each Prometheus gate's query, and the metrics and readiness of the pods that serve the new revision (at least 1s)")
	fs.StringVar(&o.PrometheusNamespaceLabel, "prometheus-namespace-label", o.PrometheusNamespaceLabel, "the label that names a series' namespace in the Prometheus that gates query: every series selector of a gate's query is confined to the namespaces that serve the new revision by this label")
	fs.IntVar(&o.RevisionHistoryLimit, "revision-history-limit", o.RevisionHistoryLimit, "revisions of each FeatureFlag to keep where its annotation "+
		deliveryv1alpha1.RevisionHistoryLimitAnnotation+" sets none, at most "+strconv.Itoa(history.MaxLimit)+
		" (the one served and those a rollout names are kept beyond it)")
	fs.IntVar(&o.RevisionNamespaceLimit, "revision-namespace-limit", o.RevisionNamespaceLimit, "FeatureFlagRevisions a namespace may hold: "+
		"at it, a revision that would add one is not recorded, and its FeatureFlag says so (0: no bound)")
	fs.DurationVar(&o.CacheSyncPeriod, "cache-sync-period", o.CacheSyncPeriod, "how often the informers deliver every object again (0: controller-runtime's default, about 10h); a resync writes nothing")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "port of the admission webhook server (0: a free one, logged in the line \"listening\")")
	fs.StringVar(&o.WebhookHost, "webhook-host", o.WebhookHost, "address the admission webhook server listens on (default: all)")
	fs.DurationVar(&o.WebhookDrain, "webhook-drain", o.WebhookDrain, "how long the admission webhook server keeps answering once the manager stops, closing each connection after its answer, before it shuts down (the API server's connections to a stopping replica then end after a complete answer, never during a request); 0 shuts it down at once")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "directory of the webhook server's tls.crt and tls.key (default: controller-runtime's)")
	fs.StringVar(&o.Sidecar.Image, "sidecar-image", o.Sidecar.Image, "flagd image of the injected sidecar, without tag; prefix it with your registry")
	fs.StringVar(&o.Sidecar.Tag, "sidecar-tag", o.Sidecar.Tag, "tag of --sidecar-image")
	o.bindQuantity(fs, "sidecar-cpu-request", corev1.ResourceCPU, false, "CPU request of the sidecar where a source sets none")
	o.bindQuantity(fs, "sidecar-ram-request", corev1.ResourceMemory, false, "memory request of the sidecar where a source sets none")
	o.bindQuantity(fs, "sidecar-cpu-limit", corev1.ResourceCPU, true, "CPU limit of the sidecar where a source sets none")
	o.bindQuantity(fs, "sidecar-ram-limit", corev1.ResourceMemory, true, "memory limit of the sidecar where a source sets none")
	o.bindOFOFlags(fs)
	o.bindFlagdFlags(fs)
	fs.BoolVar(&o.Webhooks, "webhooks", o.Webhooks, "serve the admission webhooks (Pod injection, FeatureFlag and FeatureFlagSource validation)")
	o.Admission.BindFlags(fs)
	// A namespace-scoped manager's webhook configurations are its team's
	// (flagplane-injector-<namespace>, ...): several teams' configurations
	// live side by side in the cluster.
	fs.StringVar(&o.Admission.MutatingWebhookConfiguration, "mutating-webhook-configuration", o.Admission.MutatingWebhookConfiguration,
		"MutatingWebhookConfiguration whose caBundle the manager keeps (self-managed certificates)")
	fs.StringVar(&o.Admission.ValidatingWebhookConfiguration, "validating-webhook-configuration", o.Admission.ValidatingWebhookConfiguration,
		"ValidatingWebhookConfiguration whose caBundle the manager keeps (self-managed certificates)")
	o.Sync.BindFlags(fs)
	o.bindFleetFlags(fs)
}

func (o *Options) bindQuantity(fs *flag.FlagSet, name string, res corev1.ResourceName, limit bool, usage string) {
	fs.Var(&quantityFlag{opts: &o.Sidecar, name: res, limit: limit}, name, usage+` ("0" or "" leaves it unset)`)
}

// Validate reports options that cannot work together.
func (o Options) Validate() error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, not %d", o.Workers))
	}
	if o.RevisionHistoryLimit < 0 {
		errs = append(errs, fmt.Errorf("--revision-history-limit must not be negative, not %d", o.RevisionHistoryLimit))
	}
	if o.GateInterval < time.Second {
		errs = append(errs, fmt.Errorf("--gate-interval must be at least 1s, not %s", o.GateInterval))
	}
	if o.ConfirmDelivery && o.ConfirmBound < 10*time.Second {
		errs = append(errs, fmt.Errorf("--confirm-bound must be at least 10s (a pod reads a new revision in no less), not %s", o.ConfirmBound))
	}
	if o.RevisionHistoryLimit > history.MaxLimit {
		errs = append(errs, fmt.Errorf("--revision-history-limit must be at most %d (the most revisions flagplane keeps of a flag set), not %d",
			history.MaxLimit, o.RevisionHistoryLimit))
	}
	if o.RevisionNamespaceLimit < 0 {
		errs = append(errs, fmt.Errorf("--revision-namespace-limit must not be negative, not %d", o.RevisionNamespaceLimit))
	}
	if o.CacheSyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--cache-sync-period must not be negative, not %s", o.CacheSyncPeriod))
	}
	if o.WebhookDrain < 0 {
		errs = append(errs, fmt.Errorf("--webhook-drain %s is negative", o.WebhookDrain))
	}
	if o.WebhookPort < 0 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port %d is not a port", o.WebhookPort))
	}
	if o.MetricsCertDir != "" && !o.MetricsSecure {
		errs = append(errs, errors.New("--metrics-cert-dir needs --metrics-secure"))
	}
	if o.LeaderElection && o.LeaderElectionID == "" {
		errs = append(errs, errors.New("--leader-election-id is empty"))
	}
	if !model.LegacyValidation.IsValidLabelName(o.PrometheusNamespaceLabel) {
		errs = append(errs, fmt.Errorf("--prometheus-namespace-label %q is not a Prometheus label name", o.PrometheusNamespaceLabel))
	}
	for _, ns := range o.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	if err := o.Sidecar.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sidecar flags: %w", err))
	}
	errs = append(errs, o.validateOFO()...)
	errs = append(errs, o.validateFlagd()...)
	errs = append(errs, o.validateFleet()...)
	if o.Webhooks {
		wo := o.Admission
		wo.Injection.Sidecar = injection.DefaultSidecarOptions() // o.Sidecar is checked above
		if err := wo.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("webhook flags: %w", err))
		}
	}
	if err := o.Sync.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sync server flags: %w", err))
	}
	return errors.Join(errs...)
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

// quantityFlag sets one request or limit of the sidecar's resources.
type quantityFlag struct {
	opts  *injection.SidecarOptions
	name  corev1.ResourceName
	limit bool
}

func (q *quantityFlag) list() *corev1.ResourceList {
	if q.limit {
		return &q.opts.Resources.Limits
	}
	return &q.opts.Resources.Requests
}

func (q *quantityFlag) String() string {
	if q.opts == nil {
		return ""
	}
	if v, ok := (*q.list())[q.name]; ok {
		return v.String()
	}
	return ""
}

func (q *quantityFlag) Set(v string) error {
	l := q.list()
	if v == "" || v == "0" {
		delete(*l, q.name)
		return nil
	}
	qty, err := resource.ParseQuantity(v)
	if err != nil {
		return err
	}
	if *l == nil {
		*l = corev1.ResourceList{}
	}
	(*l)[q.name] = qty
	return nil
}
