// Package operator is the one place that starts flagplane's manager, as the
// manager binary builds it (cmd/manager/app), inside the calling process:
// the integration suites and the demo (hack/demo) start it here, so that
// none of them keeps a copy of the start-up.
//
// Start runs it against a control plane of test/controlplane: its admission
// webhooks served where the API server calls them, its certificate Secret
// in Namespace and, when asked, its flagd sync server on a loopback port
// with namespace tokens; it returns once the manager is ready and the API
// server calls its webhooks. Run only builds and runs a manager with the
// options given, for a suite that sets every option itself (test/install,
// with the installed RBAC). Stop stops either; Restart stops a manager and
// starts another with the same options.
//
// It lives beside test/controlplane, which it configures, rather than in
// cmd/manager/app, which stays what the binary runs and knows nothing of
// envtest. Because hack/demo is a command that links it, it must not import
// testing, Ginkgo or Gomega (hack/demo's TestDemoLinksNoTestFramework keeps
// it so): it returns errors, and the suites assert on them.
//
// The control plane must have been started with the webhook configurations
// of config/webhook (see WebhookInstallOptions), so that the API server
// calls the webhooks at the address Start serves them on, unless the
// manager's admission is turned off (Options.Configure sets Webhooks false).
package operator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/freeport"
)

// Namespace is the operator's own namespace: its webhook certificate
// Secret, the sync server's reports and, with Options.TokenKeySecret, its
// namespace-token keys.
const Namespace = "flagplane-system"

// WebhookInstallOptions installs flagplane's webhook configurations
// (config/webhook of the repository at root) into a control plane, pointed
// at a local port that Start then serves them on.
func WebhookInstallOptions(root string) envtest.WebhookInstallOptions {
	return envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}}
}

// Options configure Start.
type Options struct {
	// SyncServer serves the built-in flagd sync server on loopback
	// (Operator.SyncAddress), with namespace tokens. With admission on, the
	// sidecars of flagd-proxy sources are pointed at it: its port is then
	// picked before the manager is built (freeport.Address, with its race),
	// because the webhook must know it; without admission it is one the
	// kernel picks.
	SyncServer bool
	// TokenKeySecret keeps the namespace-token keys in a Secret of
	// Namespace that the manager generates, as config/default installs it,
	// instead of in a file of Dir.
	TokenKeySecret bool
	// Configure changes the manager's options last, e.g. to set a flag, to
	// serve metrics and probes (on "127.0.0.1:0": read them from
	// Addresses) or to turn admission off. Start waits for what the final
	// options turn on.
	Configure func(*app.Options)
	// PodAddress is where the manager reaches a container's port of a pod
	// (app.Options.PodAddress): on a test node, node.Addresses.PodAddress,
	// since its pods' ports are ports of this host. nil: the pod's IP, as
	// on a real node.
	PodAddress func(pod *corev1.Pod, container string, port int32) (string, bool)
	// Dir holds the files the operator needs (the namespace token key); a
	// temporary folder when empty.
	Dir string
}

// Operator is a running manager.
type Operator struct {
	*app.Manager
	// SyncAddress is the sync server's host:port, when it runs.
	SyncAddress string
	// NamespaceTokens issues the sync server's namespace tokens, when it runs.
	NamespaceTokens *syncserver.NamespaceTokens
	// Timings of Start.
	Timings Timings

	cancel context.CancelFunc
	done   chan error
}

// Timings are the measured durations of Start, from building the manager.
type Timings struct {
	// Ready is until the topology was built from the caches, every
	// generated object reconciled once, and every server asked for
	// listened.
	Ready time.Duration
	// Admission is until the API server called the webhooks: a dry-run
	// create passed the FeatureFlag validator (zero without admission).
	Admission time.Duration
}

// Start builds and starts the manager against cp and returns once its
// topology is built, every generated object reconciled once, every server
// it was asked for listens and, with admission on, the API server calls its
// webhooks. A manager that exits or does not get there within two minutes
// (or before ctx is done) is stopped, and Start returns the error.
func Start(ctx context.Context, cp *controlplane.ControlPlane, o Options) (*Operator, error) {
	opts, err := options(cp, o)
	if err != nil {
		return nil, err
	}
	if err := ensureNamespace(ctx, cp.Client, Namespace); err != nil {
		return nil, err
	}
	return runReady(ctx, cp, opts)
}

// Restart stops the manager and starts another with the same options, as
// a restarted process would: the same webhook and sync server addresses,
// the same namespace-token keys, so that sidecars injected before still
// reach it. It returns the new manager once it is ready, as Start does;
// the old one is stopped either way.
func (o *Operator) Restart(ctx context.Context, cp *controlplane.ControlPlane) (*Operator, error) {
	if err := o.Stop(); err != nil {
		return nil, fmt.Errorf("stopping the operator: %w", err)
	}
	return runReady(ctx, cp, o.Options)
}

// runReady runs a manager with opts and waits until it is ready.
func runReady(ctx context.Context, cp *controlplane.ControlPlane, opts app.Options) (*Operator, error) {
	began := time.Now()
	op, err := Run(cp.Config, opts)
	if err != nil {
		return nil, err
	}
	if err := op.waitReady(ctx, cp.Client, began); err != nil {
		_ = op.Stop()
		return nil, fmt.Errorf("waiting for the operator: %w", err)
	}
	if op.Sync != nil {
		op.SyncAddress = op.Sync.Addr().String()
		op.NamespaceTokens = op.Sync.NamespaceTokens()
	}
	return op, nil
}

// options are the manager's options for Start: its defaults, served where
// cp expects the webhooks, with o applied.
func options(cp *controlplane.ControlPlane, o Options) (app.Options, error) {
	opts := app.DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	// Stopped at once: no API server here keeps connections to a replica
	// that goes away while pods are admitted (test/realinstall drains).
	opts.WebhookDrain = 0
	// The API server calls the webhooks by URL at envtest's address; the
	// certificate covers it. Its Secret lives in the operator's namespace.
	w := cp.Env.WebhookInstallOptions
	opts.WebhookHost, opts.WebhookPort = w.LocalServingHost, w.LocalServingPort
	opts.Admission.Namespace = Namespace
	opts.Admission.ExtraDNSNames = []string{w.LocalServingHost, "localhost"}
	if o.SyncServer {
		opts.Sync.BindAddress = "127.0.0.1:0"
		if o.TokenKeySecret {
			opts.Sync.NamespaceTokenKeySecret = syncserver.DefaultNamespaceTokenKeySecret
			opts.Sync.SecretNamespace = Namespace
		} else {
			keyFile, err := namespaceTokenKey(o.Dir)
			if err != nil {
				return opts, err
			}
			opts.Sync.NamespaceTokenKeyFile = keyFile
		}
	}
	if o.PodAddress != nil {
		opts.PodAddress = o.PodAddress
	}
	if o.Configure != nil {
		o.Configure(&opts)
	}
	if opts.Webhooks && w.LocalServingPort == 0 {
		return opts, errors.New("the control plane has no webhook serving address: start it with operator.WebhookInstallOptions, or turn the manager's webhooks off")
	}
	if o.SyncServer && opts.Webhooks && opts.Admission.Injection.SyncServer == "" {
		// The webhook writes the address into sidecars from the start; the
		// sync server binds only when the manager starts.
		addr, err := freeport.Address()
		if err != nil {
			return opts, err
		}
		opts.Sync.BindAddress, opts.Admission.Injection.SyncServer = addr, addr
	}
	return opts, nil
}

// Run builds the manager with opts for the cluster of cfg and runs it until
// Stop, without waiting for anything: the caller reads readiness its own
// way (Controller.Ready, the probes at Addresses().Health).
func Run(cfg *rest.Config, opts app.Options) (*Operator, error) {
	ctx, cancel := context.WithCancel(context.Background())
	m, err := app.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	op := &Operator{Manager: m, cancel: cancel, done: make(chan error, 1)}
	go func() { op.done <- m.Start(ctx) }()
	return op, nil
}

// waitReady polls until the manager is ready (Timings.Ready) and, with
// admission on, the API server calls its webhooks (Timings.Admission).
func (o *Operator) waitReady(ctx context.Context, c client.Client, began time.Time) error {
	opts := o.Options
	metricsOn := opts.MetricsBindAddress != "" && opts.MetricsBindAddress != "0"
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := o.exited(); err != nil {
			return false, err
		}
		if o.Timings.Ready == 0 {
			a := o.Addresses()
			if !o.Controller.Ready() || (o.Sync != nil && a.Sync == "") || (metricsOn && a.Metrics == "") {
				return false, nil
			}
			o.Timings.Ready = time.Since(began)
		}
		if !opts.Webhooks {
			return true, nil
		}
		// The API server trusts the webhooks once it has read the caBundle
		// the manager injects.
		if c.Create(ctx, probeFlagSet(), client.DryRunAll) != nil {
			return false, nil
		}
		o.Timings.Admission = time.Since(began)
		return true, nil
	})
}

// exited is the error of a manager that has stopped on its own.
func (o *Operator) exited() error {
	select {
	case err := <-o.done:
		o.done <- err
		return fmt.Errorf("the manager exited: %w", err)
	default:
		return nil
	}
}

// Stop stops the manager and waits for it; it returns what the manager's
// Start returned. It is safe to call twice.
func (o *Operator) Stop() error {
	o.cancel()
	select {
	case err := <-o.done:
		o.done <- err
		return err
	case <-time.After(30 * time.Second):
		return errors.New("the manager did not stop within 30s")
	}
}

func probeFlagSet() *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "probe"}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"f": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "off"},
	}
	return ff
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// namespaceTokenKey writes a fresh key for the sync server's namespace tokens.
func namespaceTokenKey(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "flagplane-operator-"); err != nil {
			return "", err
		}
	}
	key := make([]byte, syncserver.MinKeyLen)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "namespace-token-keys")
	return path, os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600)
}
