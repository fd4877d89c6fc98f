// Package operator runs flagplane's manager, as the manager binary builds it
// (cmd/manager/app), inside a test process against a control plane of
// test/controlplane: with its admission webhooks served where the API server
// calls them, and, when asked, its flagd sync server on a loopback port with
// namespace tokens. Suites that need the whole operator — pods admitted with
// their injection, the sync server's identity and entitlement — start it
// with Start and stop it with Stop.
//
// The control plane must have been started with the webhook configurations
// of config/webhook (see WebhookInstallOptions), so that the API server
// calls the webhooks at the address Start serves them on.
package operator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/controlplane"
)

// Namespace is the operator's own namespace: its webhook certificate Secret.
const Namespace = "flagplane-system"

// WebhookInstallOptions installs flagplane's webhook configurations
// (config/webhook of the repository at root) into a control plane, pointed
// at a local port that Start then serves them on.
func WebhookInstallOptions(root string) envtest.WebhookInstallOptions {
	return envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}}
}

// Options configure Start.
type Options struct {
	// SyncServer serves the built-in flagd sync server on a loopback port
	// (Operator.SyncAddress), with namespace tokens, and points the sidecars
	// of flagd-proxy sources at it.
	SyncServer bool
	// Configure changes the manager's options last, e.g. to set a flag.
	Configure func(*app.Options)
	// Dir holds the files the operator needs (the namespace token key).
	Dir string
}

// Operator is a running manager.
type Operator struct {
	*app.Manager
	// SyncAddress is the sync server's host:port, when it runs.
	SyncAddress string
	// NamespaceTokens issues the sync server's namespace tokens, when it runs.
	NamespaceTokens *syncserver.NamespaceTokens

	cancel context.CancelFunc
	done   chan error
}

// Start builds and starts the manager against cp and returns once its
// topology is built, every generated object reconciled once, and the API server calls
// its webhooks (a dry-run create passes the FeatureFlag validator).
func Start(ctx context.Context, cp *controlplane.ControlPlane, o Options) (*Operator, error) {
	opts := app.DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	w := cp.Env.WebhookInstallOptions
	if w.LocalServingPort == 0 {
		return nil, errors.New("the control plane has no webhook serving address: start it with operator.WebhookInstallOptions")
	}
	opts.WebhookHost, opts.WebhookPort = w.LocalServingHost, w.LocalServingPort
	opts.Admission.Namespace = Namespace
	opts.Admission.ExtraDNSNames = []string{w.LocalServingHost, "localhost"}
	if o.SyncServer {
		addr, err := freeAddress()
		if err != nil {
			return nil, err
		}
		keyFile, err := namespaceTokenKey(o.Dir)
		if err != nil {
			return nil, err
		}
		opts.Sync.BindAddress = addr
		opts.Sync.NamespaceTokenKeyFile = keyFile
		opts.Admission.Injection.SyncServer = addr
	}
	if o.Configure != nil {
		o.Configure(&opts)
	}
	if err := ensureNamespace(ctx, cp.Client, Namespace); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.Background())
	m, err := app.New(runCtx, cp.Config, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	op := &Operator{Manager: m, cancel: cancel, done: make(chan error, 1)}
	go func() { op.done <- m.Start(runCtx) }()

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-op.done:
			op.done <- err
			return false, fmt.Errorf("the manager exited: %w", err)
		default:
		}
		if !m.Controller.Ready() || (m.Sync != nil && m.Sync.Addr() == nil) {
			return false, nil
		}
		// The API server trusts the webhooks once it has read the caBundle
		// the manager injects.
		return cp.Client.Create(ctx, probeFlagSet(), client.DryRunAll) == nil, nil
	})
	if err != nil {
		op.Stop()
		return nil, fmt.Errorf("waiting for the operator: %w", err)
	}
	if m.Sync != nil {
		op.SyncAddress = m.Sync.Addr().String()
		op.NamespaceTokens = m.Sync.NamespaceTokens()
	}
	return op, nil
}

// Stop stops the manager and waits for it. It is safe to call twice.
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

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
