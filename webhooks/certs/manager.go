package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The Secret and the webhook configurations, and only they.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=flagplane-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;update,resourceNames=flagplane-webhook-cert,namespace=flagplane-system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;patch,resourceNames=flagplane-injector;flagplane-validator

// Options configure a Manager.
type Options struct {
	// Namespace and SecretName locate the certificate Secret.
	Namespace, SecretName string
	// Policy says what certificates to keep (DNS names, lifetimes, renewal).
	Policy Policy
	// MutatingWebhooks and ValidatingWebhooks are the names of the webhook
	// configurations whose every webhook gets the CA bundle.
	MutatingWebhooks, ValidatingWebhooks []string
	// CheckInterval is how often the Secret and the configurations are
	// checked (and repaired: someone re-applying the manifests resets the
	// caBundle). Default one minute.
	CheckInterval time.Duration
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// DefaultPolicy is the Policy for dnsNames that flagplane runs with: a CA
// for ten years, serving certificates for one, each renewed with a third of
// its lifetime left.
func DefaultPolicy(dnsNames []string) Policy {
	return Policy{CommonName: "flagplane-webhook-ca", DNSNames: dnsNames,
		CAValidity: 10 * 365 * 24 * time.Hour, ServingValidity: 365 * 24 * time.Hour, RenewFraction: 1.0 / 3}
}

// Manager keeps the certificates and serves the current one. It is a
// manager.Runnable that runs on every replica (not only the leader): every
// replica serves admission.
type Manager struct {
	opts   Options
	reader client.Reader
	writer client.Writer

	current atomic.Pointer[tls.Certificate]
	bundle  atomic.Pointer[[]byte]
}

var (
	_ manager.Runnable               = (*Manager)(nil)
	_ manager.LeaderElectionRunnable = (*Manager)(nil)
)

// New returns a Manager that reads with reader (an uncached API reader: the
// Secret is not cached, and no Secret informer is started) and writes with writer.
func New(reader client.Reader, writer client.Writer, opts Options) *Manager {
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{opts: opts, reader: reader, writer: writer}
}

// NeedLeaderElection is false: every replica serves admission.
func (m *Manager) NeedLeaderElection() bool { return false }

// GetCertificate is a tls.Config.GetCertificate serving the current certificate.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.current.Load(); c != nil {
		return c, nil
	}
	return nil, errNoCertificate
}

// CABundle is the bundle last injected, or nil.
func (m *Manager) CABundle() []byte {
	if b := m.bundle.Load(); b != nil {
		return *b
	}
	return nil
}

// ReadyCheck is a healthz.Checker: ready once a certificate is served.
func (m *Manager) ReadyCheck(*http.Request) error {
	if m.current.Load() == nil {
		return errNoCertificate
	}
	return nil
}

// Start keeps the certificates until ctx is done: at once (retrying with
// backoff until it succeeds), then every CheckInterval.
func (m *Manager) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("webhook-certs")
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 8, Cap: 30 * time.Second}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := m.Ensure(ctx); err != nil {
			logger.Error(err, "keeping the webhook certificates, will retry")
			return false, nil
		}
		return true, nil
	})
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := m.Ensure(ctx); err != nil {
			logger.Error(err, "keeping the webhook certificates")
		}
	}, m.opts.CheckInterval)
	return nil
}

// Ensure makes one pass: the Secret holds valid certificates (created,
// renewed or repaired), the webhook configurations trust its CAs, and the
// server serves its certificate, in that order, so that a new certificate is
// trusted before it is served.
func (m *Manager) Ensure(ctx context.Context) error {
	b, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	bundle := b.CABundle()
	if err := m.injectCABundle(ctx, bundle); err != nil {
		return err
	}
	m.bundle.Store(&bundle)
	return m.serve(b)
}

func (m *Manager) ensureSecret(ctx context.Context) (*Bundle, error) {
	key := client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.SecretName}
	for attempt := 0; ; attempt++ {
		now := m.opts.Now()
		secret := &corev1.Secret{}
		err := m.reader.Get(ctx, key, secret)
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		current := Decode(secret.Data)
		action, why := Decide(current, m.opts.Policy, now)
		if action == Keep {
			return current, nil
		}
		next, err := Apply(current, action, m.opts.Policy, now)
		if err != nil {
			return nil, err
		}
		data, err := Encode(next)
		if err != nil {
			return nil, err
		}
		log.FromContext(ctx).Info("renewing the webhook certificates", "action", action.String(), "reason", why, "Secret", klog.KRef(key.Namespace, key.Name))
		if exists {
			secret.Data = data
			err = m.writer.Update(ctx, secret)
		} else {
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "flagplane"}},
				Type: corev1.SecretTypeTLS,
				Data: data,
			}
			err = m.writer.Create(ctx, secret)
		}
		switch {
		case err == nil:
			return next, nil
		case (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 5:
			continue // another replica was faster: use what it wrote
		default:
			return nil, fmt.Errorf("writing Secret %s: %w", key, err)
		}
	}
}

// injectCABundle sets the bundle on every webhook of the configurations
// that lacks it. A configuration that does not exist yet is skipped (the
// next pass finds it).
func (m *Manager) injectCABundle(ctx context.Context, bundle []byte) error {
	var errs []error
	for _, name := range m.opts.MutatingWebhooks {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		cfg.Name = name
		errs = append(errs, m.injectCABundleInto(ctx, cfg, "MutatingWebhookConfiguration", bundle, func() []*admissionregistrationv1.WebhookClientConfig {
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(cfg.Webhooks))
			for i := range cfg.Webhooks {
				out[i] = &cfg.Webhooks[i].ClientConfig
			}
			return out
		}))
	}
	for _, name := range m.opts.ValidatingWebhooks {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		cfg.Name = name
		errs = append(errs, m.injectCABundleInto(ctx, cfg, "ValidatingWebhookConfiguration", bundle, func() []*admissionregistrationv1.WebhookClientConfig {
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(cfg.Webhooks))
			for i := range cfg.Webhooks {
				out[i] = &cfg.Webhooks[i].ClientConfig
			}
			return out
		}))
	}
	return errors.Join(errs...)
}

// injectCABundleInto sets the bundle on the webhooks of one configuration,
// read into cfg; clientConfigs points into cfg's webhooks once it is read.
// A configuration that does not exist is skipped.
func (m *Manager) injectCABundleInto(ctx context.Context, cfg client.Object, kind string, bundle []byte,
	clientConfigs func() []*admissionregistrationv1.WebhookClientConfig) error {
	if err := m.reader.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading %s %s: %w", kind, cfg.GetName(), err)
	}
	orig := cfg.DeepCopyObject().(client.Object)
	changed := false
	for _, cc := range clientConfigs() {
		if !bytes.Equal(cc.CABundle, bundle) {
			cc.CABundle = bundle
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := m.writer.Patch(ctx, cfg, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("injecting the CA bundle into %s %s: %w", kind, cfg.GetName(), err)
	}
	return nil
}

func (m *Manager) serve(b *Bundle) error {
	data, err := Encode(b)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(data[KeyTLSCert], data[KeyTLSKey])
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	if c := m.current.Load(); c == nil || !bytes.Equal(c.Certificate[0], cert.Certificate[0]) {
		m.current.Store(&cert)
	}
	return nil
}
