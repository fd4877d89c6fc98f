package syncserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Config is the sync server's part of the manager's configuration: what
// its command-line flags set.
type Config struct {
	// BindAddress is where the server listens; "0" disables it.
	BindAddress string
	// TLSCertFile and TLSKeyFile enable TLS (both, or neither).
	TLSCertFile, TLSKeyFile string
	// MaxMessageSize is the largest flag set sent, in bytes.
	MaxMessageSize int
	// ServiceAccountTokens accepts service-account tokens, checked with
	// TokenReview; that takes create on tokenreviews, which is cluster-wide
	// (a namespace-scoped install may go without, with namespace tokens only).
	ServiceAccountTokens bool
	// TokenAudience is the audience of the service-account tokens accepted.
	TokenAudience string
	// NamespaceTokenKeyFile holds the keys of namespace tokens, one per
	// line, the first signing; empty disables namespace tokens, unless
	// NamespaceTokenKeySecret is set.
	NamespaceTokenKeyFile string
	// NamespaceTokenKeySecret, "name" (in the manager's namespace, see
	// SecretNamespace) or "namespace/name", is a Secret that holds the keys
	// under NamespaceTokenKeySecretKey, generated when absent (see
	// EnsureNamespaceTokenKeys). It excludes NamespaceTokenKeyFile.
	NamespaceTokenKeySecret string
	// SecretNamespace is the namespace of a NamespaceTokenKeySecret named
	// without one: the manager's ($POD_NAMESPACE, else flagplane-system).
	SecretNamespace string
	// MaxConnectionAge makes subscribers reconnect after about this long;
	// zero never does (see Options.MaxConnectionAge).
	MaxConnectionAge time.Duration
	// TokenReviewQPS and TokenReviewBurst bound the TokenReviews made for
	// service-account tokens that have not passed one, over all callers;
	// TokenReviewPeerQPS and TokenReviewPeerBurst per client address (see
	// ReviewLimit). A QPS of zero is no limit.
	TokenReviewQPS, TokenReviewPeerQPS     float64
	TokenReviewBurst, TokenReviewPeerBurst int
	// TokenFailureTTL is how long a token that a TokenReview refused is
	// refused again without one; TokenFailureCacheSize how many such tokens
	// are remembered. Zero: the defaults of TokenReviews.
	TokenFailureTTL       time.Duration
	TokenFailureCacheSize int
}

// DefaultConfig is the configuration of a manager started without flags.
func DefaultConfig() Config {
	return Config{
		BindAddress: DefaultAddr, MaxMessageSize: DefaultMaxMessageSize, ServiceAccountTokens: true, TokenAudience: DefaultAudience,
		TokenReviewQPS: DefaultTokenReviewQPS, TokenReviewBurst: DefaultTokenReviewBurst,
		TokenReviewPeerQPS: DefaultTokenReviewPeerQPS, TokenReviewPeerBurst: DefaultTokenReviewPeerBurst,
		TokenFailureTTL: DefaultFailureTTL, TokenFailureCacheSize: DefaultFailureCacheSize,
	}
}

// BindFlags ties the configuration to "sync-*" flags, with the current
// values as defaults.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.BindAddress, "sync-bind-address", c.BindAddress, "address of the built-in flagd sync server (flagd.sync.v1); 0 disables it")
	fs.StringVar(&c.TLSCertFile, "sync-tls-cert-file", c.TLSCertFile, "TLS certificate of the sync server, reloaded when it changes (with --sync-tls-key-file; plaintext when unset)")
	fs.StringVar(&c.TLSKeyFile, "sync-tls-key-file", c.TLSKeyFile, "TLS key of the sync server")
	fs.IntVar(&c.MaxMessageSize, "sync-max-message-size", c.MaxMessageSize, "largest flag set the sync server sends, in bytes; clients must accept messages this large")
	fs.BoolVar(&c.ServiceAccountTokens, "sync-service-account-tokens", c.ServiceAccountTokens,
		"accept subscribers' service-account tokens, checked with TokenReview (needs create on tokenreviews, cluster-wide)")
	fs.StringVar(&c.TokenAudience, "sync-token-audience", c.TokenAudience, "audience that subscribers' service-account tokens must be issued for")
	fs.StringVar(&c.NamespaceTokenKeyFile, "sync-namespace-token-key-file", c.NamespaceTokenKeyFile,
		"file of keys (one per line, at least 32 characters, the first signs) for the namespace tokens of injected flagd sidecars; empty disables them")
	fs.StringVar(&c.NamespaceTokenKeySecret, "sync-namespace-token-key-secret", c.NamespaceTokenKeySecret,
		"Secret ([namespace/]name, in the manager's namespace by default) whose key \"keys\" holds the namespace-token keys, created with a fresh key when absent; instead of --sync-namespace-token-key-file")
	fs.DurationVar(&c.MaxConnectionAge, "sync-max-connection-age", c.MaxConnectionAge,
		"make subscribers reconnect after about this long (they resume with the current state), spreading them over the replicas again after a scale-up or rollout; 0 never does")
	fs.Float64Var(&c.TokenReviewQPS, "sync-token-review-qps", c.TokenReviewQPS,
		"TokenReviews per second for service-account tokens that have not passed one, over all callers (tokens that passed one are never limited); calls past it fail with Unavailable; 0 is no limit")
	fs.IntVar(&c.TokenReviewBurst, "sync-token-review-burst", c.TokenReviewBurst, "TokenReviews allowed at once above --sync-token-review-qps")
	fs.Float64Var(&c.TokenReviewPeerQPS, "sync-token-review-peer-qps", c.TokenReviewPeerQPS,
		"TokenReviews per second that one client IP address may cause, so that one address cannot spend the whole --sync-token-review-qps; 0 is no limit per address")
	fs.IntVar(&c.TokenReviewPeerBurst, "sync-token-review-peer-burst", c.TokenReviewPeerBurst, "TokenReviews one client IP address may cause at once above --sync-token-review-peer-qps")
	fs.DurationVar(&c.TokenFailureTTL, "sync-token-failure-ttl", c.TokenFailureTTL,
		"how long a token that a TokenReview refused is refused again without one")
	fs.IntVar(&c.TokenFailureCacheSize, "sync-token-failure-cache-size", c.TokenFailureCacheSize,
		"how many refused tokens (hashes) are remembered for --sync-token-failure-ttl")
}

// Enabled tells whether the server is to run.
func (c Config) Enabled() bool { return c.BindAddress != "" && c.BindAddress != "0" }

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("--sync-tls-cert-file and --sync-tls-key-file go together"))
	}
	if c.MaxMessageSize < 0 {
		errs = append(errs, fmt.Errorf("--sync-max-message-size %d is negative", c.MaxMessageSize))
	}
	if c.MaxConnectionAge < 0 {
		errs = append(errs, fmt.Errorf("--sync-max-connection-age %s is negative", c.MaxConnectionAge))
	} else if c.MaxConnectionAge > 0 && c.MaxConnectionAge < time.Minute {
		errs = append(errs, fmt.Errorf("--sync-max-connection-age %s is under a minute: every subscriber would reconnect, and be sent its flag set again, that often", c.MaxConnectionAge))
	}
	errs = append(errs, c.validateTokenReviews()...)
	switch {
	case c.NamespaceTokenKeyFile != "" && c.NamespaceTokenKeySecret != "":
		errs = append(errs, errors.New("--sync-namespace-token-key-file and --sync-namespace-token-key-secret exclude each other"))
	case c.NamespaceTokenKeyFile != "":
		if _, err := ReadNamespaceTokenKeys(c.NamespaceTokenKeyFile); err != nil {
			errs = append(errs, err)
		}
	case c.NamespaceTokenKeySecret != "":
		ns, name := c.keySecret()
		for _, m := range append(validation.IsDNS1123Label(ns), validation.IsDNS1123Subdomain(name)...) {
			errs = append(errs, fmt.Errorf("--sync-namespace-token-key-secret %q: %s", c.NamespaceTokenKeySecret, m))
		}
	case !c.ServiceAccountTokens:
		errs = append(errs, errors.New("with --sync-service-account-tokens=false, --sync-namespace-token-key-file or --sync-namespace-token-key-secret is needed: nobody could subscribe"))
	}
	return errors.Join(errs...)
}

func (c Config) validateTokenReviews() []error {
	var errs []error
	for _, qps := range []struct {
		name, burstName string
		qps             float64
		burst           int
	}{
		{"--sync-token-review-qps", "--sync-token-review-burst", c.TokenReviewQPS, c.TokenReviewBurst},
		{"--sync-token-review-peer-qps", "--sync-token-review-peer-burst", c.TokenReviewPeerQPS, c.TokenReviewPeerBurst},
	} {
		switch {
		case qps.qps < 0 || math.IsNaN(qps.qps) || math.IsInf(qps.qps, 0):
			errs = append(errs, fmt.Errorf("%s %v is not a rate: want 0 (no limit) or more", qps.name, qps.qps))
		case qps.qps > 0 && qps.burst < 1:
			errs = append(errs, fmt.Errorf("%s %d must be at least 1 when %s is set", qps.burstName, qps.burst, qps.name))
		}
	}
	if c.TokenFailureTTL < 0 {
		errs = append(errs, fmt.Errorf("--sync-token-failure-ttl %s is negative", c.TokenFailureTTL))
	}
	if c.TokenFailureCacheSize < 0 {
		errs = append(errs, fmt.Errorf("--sync-token-failure-cache-size %d is negative", c.TokenFailureCacheSize))
	}
	return errs
}

// ReadNamespaceTokenKeys reads the keys of a key file: one per non-empty
// line, surrounding space trimmed, the first one signing.
func ReadNamespaceTokenKeys(path string) (*NamespaceTokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the namespace token keys: %w", err)
	}
	n, err := parseNamespaceTokenKeys(data)
	if err != nil {
		return nil, fmt.Errorf("namespace token keys in %s: %w", path, err)
	}
	return n, nil
}

// Observer hears of streams opening and closing, by selector, of refused
// calls, and of how service-account tokens were checked; the manager's
// metrics recorder is one.
type Observer interface {
	ReviewObserver
	SyncSubscribed(selector string)
	// SyncUnsubscribed is called once for every SyncSubscribed, with why
	// the stream ended: one of the End* reasons.
	SyncUnsubscribed(selector, reason string)
	// SyncRefused is called for every call refused before it was served,
	// with its gRPC status code ("Unauthenticated", "PermissionDenied",
	// "InvalidArgument", "Unavailable").
	SyncRefused(code string)
	// SyncPushed is called when a flag set's new content is offered to its
	// streams, with the time since the server was told of the change.
	SyncPushed(d time.Duration)
}

// Why a stream ended, as Observer.SyncUnsubscribed reports it.
const (
	// EndLeft: the subscriber closed the stream or went away.
	EndLeft = "left"
	// EndShutdown: the server stopped (the subscriber reconnects elsewhere).
	EndShutdown = "shutdown"
	// EndCredentialExpired: the credential that opened the stream expired.
	EndCredentialExpired = "credential_expired"
	// EndPermissionDenied: the subscriber's namespace lost the flag set.
	EndPermissionDenied = "permission_denied"
	// EndSendFailed: a message could not be sent (too large, connection broken).
	EndSendFailed = "send_failed"
)

// keySecret is the namespace and name of NamespaceTokenKeySecret.
func (c Config) keySecret() (namespace, name string) {
	if ns, n, ok := strings.Cut(c.NamespaceTokenKeySecret, "/"); ok {
		return ns, n
	}
	return c.Namespace(), c.NamespaceTokenKeySecret
}

// Namespace is the manager's own namespace: SecretNamespace, else
// $POD_NAMESPACE, else flagplane-system. It holds the replicas' sync
// reports (Reporter).
func (c Config) Namespace() string {
	ns := c.SecretNamespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if ns == "" {
		ns = "flagplane-system"
	}
	return ns
}

// AddToManager builds the server of c over topo and adds it to mgr, where it
// runs on every replica (leader or not); it serves the flag sets as topo
// renders them (flagsets.Validator.TopologyOptions). ready gates it (see
// Options.Ready); observer may be nil. It returns the server, to be given
// to the controllers as their controllers.Options.FlagSetListener. With
// NamespaceTokenKeySecret it reads (or creates) the Secret with mgr's
// API reader and client, within ctx. The server and its sync report log
// through the logger of ctx.
func AddToManager(ctx context.Context, mgr manager.Manager, topo Snapshotter, c Config, ready func() bool, observer Observer) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var chain Chain
	switch {
	case c.NamespaceTokenKeyFile != "":
		keys, err := ReadNamespaceTokenKeys(c.NamespaceTokenKeyFile)
		if err != nil {
			return nil, err
		}
		// First: it recognises its own tokens without asking the API server.
		chain = append(chain, keys)
	case c.NamespaceTokenKeySecret != "":
		ns, name := c.keySecret()
		keys, created, err := EnsureNamespaceTokenKeys(ctx, mgr.GetAPIReader(), mgr.GetClient(), ns, name)
		if err != nil {
			return nil, err
		}
		if created {
			log.FromContext(ctx).Info("generated the sync server's namespace-token key", "Secret", klog.KRef(ns, name))
		}
		chain = append(chain, keys)
	}
	if c.ServiceAccountTokens {
		chain = append(chain, &TokenReviews{
			Reviewer:          mgr.GetClient(),
			Audience:          c.TokenAudience,
			FailureTTL:        c.TokenFailureTTL,
			FailureMaxEntries: c.TokenFailureCacheSize,
			Limit: ReviewLimit{
				QPS: c.TokenReviewQPS, Burst: c.TokenReviewBurst,
				PeerQPS: c.TokenReviewPeerQPS, PeerBurst: c.TokenReviewPeerBurst,
			},
			Observer: observer,
		})
	}
	srv, err := New(topo, Options{
		Addr:             c.BindAddress,
		TLSCertFile:      c.TLSCertFile,
		TLSKeyFile:       c.TLSKeyFile,
		MaxMessageSize:   c.MaxMessageSize,
		MaxConnectionAge: c.MaxConnectionAge,
		Authenticator:    chain,
		Ready:            ready,
		Observer:         observer,
		Log:              log.FromContext(ctx),
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(srv); err != nil {
		return nil, fmt.Errorf("adding the sync server to the manager: %w", err)
	}
	replica, uid := ReplicaIdentity()
	reporter := &Reporter{Server: srv, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: c.Namespace(), Replica: replica, Owner: uid,
		Log: log.FromContext(ctx).WithName("syncreport")}
	if err := mgr.Add(reporter); err != nil {
		return nil, fmt.Errorf("adding the sync report to the manager: %w", err)
	}
	return srv, nil
}
