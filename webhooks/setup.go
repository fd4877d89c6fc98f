package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/webhooks/certs"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// Paths the webhooks are served at; config/webhook points the
// configurations there.
const (
	PodMutatorPath        = "/mutate-v1-pod"
	FlagSetValidatorPath  = "/validate-core-openfeature-dev-v1beta1-featureflag"
	SourceValidatorPath   = "/validate-core-openfeature-dev-v1beta1-featureflagsource"
	defaultNamespace      = "flagplane-system"
	defaultServiceName    = "flagplane-webhook"
	defaultSecretName     = "flagplane-webhook-cert"
	defaultMutatingName   = "flagplane-injector"
	defaultValidatingName = "flagplane-validator"
)

// Certificate modes.
const (
	// CertsSelfManaged: flagplane keeps its own CA and serving certificate
	// (see package certs) and injects the CA bundle. The default.
	CertsSelfManaged = "self-managed"
	// CertsExternal: tls.crt and tls.key are provided in the webhook server's
	// certificate directory (cert-manager, see config/webhook/certmanager),
	// which also injects the CA bundle.
	CertsExternal = "external"
)

// Graph is what admission needs of the controllers: the topology they keep,
// and whether it holds the whole cache yet. *controllers.Controller is one.
type Graph interface {
	Topology() *topology.Topology
	GraphBuilt() bool
}

// Options configure admission.
type Options struct {
	// Injection is what the Pod webhook injects with; Sidecar is normally
	// the manager's sidecar options.
	Injection injection.Options
	// PrometheusGates says that the manager evaluates the Prometheus gates
	// of rollout policies (--prometheus-gates).
	PrometheusGates bool
	// FlagdTag is the flagd image tag of Flagd Deployments (--flagd-tag);
	// empty, the sidecar's. The FeatureFlag webhook warns of what that
	// release, as the sidecar's, evaluates otherwise than flagd v0.16.0.
	FlagdTag string

	// Namespace is the operator's namespace, which holds the certificate
	// Secret (default: $POD_NAMESPACE, else flagplane-system).
	Namespace string
	// Certificates is CertsSelfManaged or CertsExternal.
	Certificates string
	// ServiceName is the webhook Service; the serving certificate covers
	// its DNS names in Namespace.
	ServiceName string
	// ExtraDNSNames are further names (or IP addresses) the serving
	// certificate covers, e.g. for a webhook reached by URL.
	ExtraDNSNames []string
	// SecretName is the certificate Secret.
	SecretName string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration are
	// the configurations that get the CA bundle.
	MutatingWebhookConfiguration, ValidatingWebhookConfiguration string

	// WorkloadWait bounds how long the Pod webhook waits for the graph to
	// know a pod's workload (the workload informer may lag the pod by a few
	// milliseconds). Default 2s.
	WorkloadWait time.Duration
	// Heal rolls workloads whose pods were admitted without their injection.
	Heal bool
	// HealResync is how often every pod is checked again (default 1m); pod
	// events are checked as they come.
	HealResync time.Duration
	// HealBackoff is the least time between two heals of one workload
	// (default 5m), so that pods admitted while the webhook is still
	// unreachable do not roll a workload in a loop.
	HealBackoff time.Duration
	// HealWorkers is how many workloads are healed at once (default 2; the
	// manager passes --workers, as to every queue).
	HealWorkers int

	// AdmissionBytes bounds the bytes of FeatureFlags the webhook judges
	// at once, a namespace half of them, and AdmissionWait how long an
	// admission waits for its bytes before it is refused (budget.go).
	// Zero is the default of each.
	AdmissionBytes int64
	AdmissionWait  time.Duration

	// FlagsValidation validates FeatureFlags on admission (default true;
	// the OpenFeature Operator's managerConfig.flagsValidationEnabled).
	FlagsValidation bool
	// FlagSets validates flag sets: the FeatureFlag webhook refuses those
	// with warnings when it is strict (--strict-validation), and the
	// ConfigMaps written on admission hold only valid content. The manager
	// passes the controllers' validator; nil is a non-strict one.
	FlagSets *flagsets.Validator
	// Generated are the labels and annotations of the ConfigMaps written on
	// admission (--labels, --annotations), as the controllers write them.
	Generated workflows.GeneratedMetadata
}

// DefaultOptions are the options of a manager started without flags.
func DefaultOptions() Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = defaultNamespace
	}
	return Options{
		Injection:                      injection.DefaultOptions(),
		Namespace:                      ns,
		Certificates:                   CertsSelfManaged,
		ServiceName:                    defaultServiceName,
		SecretName:                     defaultSecretName,
		MutatingWebhookConfiguration:   defaultMutatingName,
		ValidatingWebhookConfiguration: defaultValidatingName,
		WorkloadWait:                   2 * time.Second,
		Heal:                           true,
		HealResync:                     time.Minute,
		HealBackoff:                    5 * time.Minute,
		HealWorkers:                    2,
		FlagsValidation:                true,
		AdmissionBytes:                 DefaultAdmissionBytes,
		AdmissionWait:                  DefaultAdmissionWait,
	}
}

// BindFlags ties the options that are not the sidecar's to flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Certificates, "webhook-certificates", o.Certificates, "self-managed (flagplane keeps its own CA and serving certificate) or external (tls.crt and tls.key in --webhook-cert-dir, e.g. from cert-manager)")
	fs.StringVar(&o.Namespace, "webhook-namespace", o.Namespace, "namespace of the webhook Service and certificate Secret")
	fs.StringVar(&o.ServiceName, "webhook-service", o.ServiceName, "name of the webhook Service")
	fs.StringVar(&o.SecretName, "webhook-secret", o.SecretName, "name of the self-managed certificate Secret")
	fs.StringVar(&o.Injection.SyncServer, "sync-server-address", o.Injection.SyncServer, "host:port of flagplane's sync server, which sidecars of flagd-proxy sources sync from")
	fs.BoolVar(&o.Injection.SyncServerTLS, "sync-server-tls", o.Injection.SyncServerTLS, "sidecars connect to the sync server with TLS")
	fs.StringVar(&o.Injection.SyncServerCertPath, "sync-server-ca-path", o.Injection.SyncServerCertPath, "CA bundle in the sidecar that signs the sync server's certificate (system roots when empty)")
	fs.BoolVar(&o.Injection.PassSyncProviderArgs, "sidecar-sync-provider-args", o.Injection.PassSyncProviderArgs, "pass spec.syncProviderArgs as --sync-provider-args (flagd v0.16 has no such flag)")
	fs.BoolVar(&o.Heal, "heal-uninjected-pods", o.Heal, "roll workloads whose pods were admitted without their flagd injection")
	fs.BoolVar(&o.FlagsValidation, "flags-validation", o.FlagsValidation,
		"validate FeatureFlags on admission (the OpenFeature Operator's managerConfig.flagsValidationEnabled); false admits every FeatureFlag, and what flagd cannot load is still not served")
	fs.Int64Var(&o.AdmissionBytes, "flagset-admission-bytes", o.AdmissionBytes,
		"bytes of FeatureFlags the webhook judges at once, one namespace's at most half (judging one holds up to about 200 times its bytes; 0 is the default)")
	fs.DurationVar(&o.AdmissionWait, "flagset-admission-wait", o.AdmissionWait,
		"how long a FeatureFlag admission waits for its bytes before it is refused with 429 Too Many Requests (less than the webhook's timeout; 0 is the default)")
	fs.BoolVar(&o.Injection.AllowSecurityContextOverride, "allow-sidecar-security-context-override", o.Injection.AllowSecurityContextOverride,
		"honour the "+injection.AnnotationSidecarSecurityContext+" annotation of FeatureFlagSources (for workloads of their own namespace); off, the hardened securityContext always applies")
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.Certificates != CertsSelfManaged && o.Certificates != CertsExternal {
		errs = append(errs, fmt.Errorf("--webhook-certificates must be %s or %s, not %q", CertsSelfManaged, CertsExternal, o.Certificates))
	}
	if o.Certificates == CertsSelfManaged && (o.Namespace == "" || o.SecretName == "" || o.ServiceName == "") {
		errs = append(errs, errors.New("self-managed certificates need --webhook-namespace, --webhook-service and --webhook-secret"))
	}
	if o.AdmissionBytes < 0 {
		errs = append(errs, fmt.Errorf("--flagset-admission-bytes must not be negative, not %d", o.AdmissionBytes))
	}
	if o.AdmissionWait < 0 {
		errs = append(errs, fmt.Errorf("--flagset-admission-wait must not be negative, not %s", o.AdmissionWait))
	}
	if err := o.Injection.Sidecar.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Flagd are the flagd releases flagplane injects: the sidecar's, and
// Flagd Deployments' when FlagdTag sets another, merged by release.
func (o Options) Flagd() []flagdversion.Injected {
	ins := []flagdversion.Injected{o.Injection.Sidecar.Flagd()}
	if o.FlagdTag != "" {
		ins = append(ins, flagdversion.Resolve(flagds.TagSetting, o.FlagdTag))
	}
	return flagdversion.Distinct(ins...)
}

// DNSNames are the names the serving certificate covers.
func (o Options) DNSNames() []string {
	svc, ns := o.ServiceName, o.Namespace
	return append([]string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local", svc + "." + ns, svc}, o.ExtraDNSNames...)
}

// Admission is what Setup added to the manager.
type Admission struct {
	PodMutator       *PodMutator
	FlagSetValidator *FlagSetValidator
	SourceValidator  *SourceValidator
	// RolloutPolicyValidator judges FeatureFlagRolloutPolicies.
	RolloutPolicyValidator *RolloutPolicyValidator
	// SpecAuthor keeps who wrote a FeatureFlag's spec.
	SpecAuthor SpecAuthor
	// Budget bounds the bytes of the FeatureFlag requests that the spec
	// author and the validator read at once (budget.go, budget_http.go).
	Budget *Budget
	// PodBudget bounds those of the pods the Pod webhook reads and
	// mutates at once: a budget of its own, so that a burst of pods does
	// not hold FeatureFlag writes back, nor the other way round.
	PodBudget *Budget
	Healer    *Healer
	// Certificates is nil with external certificates.
	Certificates *certs.Manager
}

// TLSConfigurable is a webhook server other than controller-runtime's
// DefaultServer whose TLS configuration can be added to, as its
// Options.TLSOpts are (the manager's, which serves on a listener bound in
// advance).
type TLSConfigurable interface {
	AddTLSOpts(opts ...func(*tls.Config))
}

// Setup registers flagplane's admission with mgr: its webhooks on mgr's
// webhook server (the Pod injector, the FeatureFlag spec author, the
// validators), the certificate manager (self-managed mode), the
// healer (Admission.Healer, which the caller runs on the controllers'
// queue: controllers.Controller.AddHealer), and a readiness check that
// the certificate is served. The graph g
// is the controllers', which must have been given the same injection
// options (workflows.Settings.Injection) so that rollouts follow what the
// webhook injects.
func Setup(ctx context.Context, mgr manager.Manager, g Graph, o Options) (*Admission, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	def := DefaultOptions()
	if o.WorkloadWait <= 0 {
		o.WorkloadWait = def.WorkloadWait
	}
	if o.HealResync <= 0 {
		o.HealResync = def.HealResync
	}
	if o.HealBackoff <= 0 {
		o.HealBackoff = def.HealBackoff
	}
	if o.HealWorkers <= 0 {
		o.HealWorkers = def.HealWorkers
	}
	if o.AdmissionBytes == 0 {
		o.AdmissionBytes = def.AdmissionBytes
	}
	if o.AdmissionWait == 0 {
		o.AdmissionWait = def.AdmissionWait
	}
	a := &Admission{}
	srv := mgr.GetWebhookServer()

	if o.Certificates == CertsSelfManaged {
		var addTLSOpts func(...func(*tls.Config))
		switch s := srv.(type) {
		case *webhook.DefaultServer:
			addTLSOpts = func(opts ...func(*tls.Config)) { s.Options.TLSOpts = append(s.Options.TLSOpts, opts...) }
		case TLSConfigurable:
			addTLSOpts = s.AddTLSOpts
		default:
			return nil, fmt.Errorf("self-managed webhook certificates need a webhook server whose TLS options can be set, not %T", srv)
		}
		a.Certificates = certs.New(mgr.GetAPIReader(), mgr.GetClient(), certs.Options{
			Namespace: o.Namespace, SecretName: o.SecretName,
			Policy:             certs.DefaultPolicy(o.DNSNames()),
			MutatingWebhooks:   []string{o.MutatingWebhookConfiguration},
			ValidatingWebhooks: []string{o.ValidatingWebhookConfiguration},
		})
		addTLSOpts(func(c *tls.Config) { c.GetCertificate = a.Certificates.GetCertificate })
		// A first pass now, so that the server has a certificate as soon as
		// it listens; the runnable retries if this one fails.
		first, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := a.Certificates.Ensure(first); err != nil {
			log.FromContext(ctx).Error(err, "the webhook certificates are not ready yet, retrying in the background")
		}
		cancel()
		if err := mgr.Add(a.Certificates); err != nil {
			return nil, fmt.Errorf("adding the webhook certificate manager: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", a.Certificates.ReadyCheck); err != nil {
			return nil, err
		}
	}

	resolver := restarts.Owners{Reader: mgr.GetCache()}
	a.PodMutator = &PodMutator{
		Graph:    g,
		Resolver: resolver,
		ConfigMaps: NewConfigMapEnsurer(mgr.GetCache(), mgr.GetClient(), mgr.GetAPIReader(),
			workflows.Settings{FlagSets: o.FlagSets, Generated: o.Generated, Injection: o.Injection}),
		Options:      o.Injection,
		WorkloadWait: o.WorkloadWait,
		Events:       mgr.GetEventRecorder("flagplane"),
	}
	a.FlagSetValidator = &FlagSetValidator{Strict: o.FlagSets.Strict(), Disabled: !o.FlagsValidation, Graph: g, Flagd: o.Flagd()}
	// The FeatureFlag webhooks share one budget, taken before a request
	// is read whole: both read the same requests, the spec author first.
	a.Budget = NewBudget(o.AdmissionBytes, o.AdmissionWait)
	a.PodBudget = NewBudget(o.AdmissionBytes, o.AdmissionWait).For("pods")
	a.SourceValidator = &SourceValidator{Graph: g, Injection: o.Injection}
	a.RolloutPolicyValidator = &RolloutPolicyValidator{Graph: g, PrometheusGates: o.PrometheusGates}
	// Every decision is logged (loggedDecisions): allowed at V(1), denied at V(0).
	srv.Register(PodMutatorPath, budgeted{a.PodBudget, &admission.Webhook{Handler: loggedDecisions{a.PodMutator}, LogConstructor: requestLogger}})
	srv.Register(FlagSetValidatorPath, budgeted{a.Budget, &admission.Webhook{Handler: loggedDecisions{a.FlagSetValidator}, LogConstructor: requestLogger}})
	srv.Register(SourceValidatorPath, &admission.Webhook{Handler: loggedDecisions{a.SourceValidator}, LogConstructor: requestLogger})
	srv.Register(RolloutPolicyValidatorPath, &admission.Webhook{Handler: loggedDecisions{a.RolloutPolicyValidator}, LogConstructor: requestLogger})
	srv.Register(SpecAuthorPath, budgeted{a.Budget, &admission.Webhook{Handler: loggedDecisions{a.SpecAuthor}, LogConstructor: requestLogger}})

	if o.Heal {
		a.Healer = &Healer{
			Graph:     g,
			Resolver:  resolver,
			Cache:     mgr.GetCache(),
			Client:    mgr.GetClient(),
			Events:    mgr.GetEventRecorder("flagplane"),
			Options:   o.Injection,
			Generated: o.Generated,
			Resync:    o.HealResync,
			Backoff:   o.HealBackoff,
			Workers:   o.HealWorkers,
		}
	}
	return a, nil
}
