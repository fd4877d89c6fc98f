package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/flagplane/flagplane/webhooks"
)

// Every server of the manager may be given port 0 and listens on a port
// the kernel picks: the manager binds the probe and webhook listeners
// itself when it is built, and reports every address it got (Addresses,
// and a log line "listening" per server). A harness that picks a "free" port and
// has the manager bind it later races with every other process of the
// machine (a loaded CI machine loses that race); one that reads the port
// the manager got cannot.

// Addresses are where a manager's servers listen: host:port, "" for a
// server that is off or does not listen yet.
type Addresses struct {
	// Health serves /healthz and /readyz; bound when the manager is built.
	Health string `json:"health,omitempty"`
	// Webhook is the admission webhook server (TLS); bound when the
	// manager is built.
	Webhook string `json:"webhook,omitempty"`
	// Metrics serves /metrics and /debug/*; bound once it starts.
	Metrics string `json:"metrics,omitempty"`
	// Sync is the built-in flagd sync server; bound once it starts.
	Sync string `json:"sync,omitempty"`
}

// Addresses tells where the manager's servers listen now.
func (m *Manager) Addresses() Addresses {
	a := Addresses{Health: addrOf(m.healthListener), Webhook: addrOf(m.webhookListener)}
	if b, ok := m.metricsServer.(interface{ GetBindAddr() string }); ok {
		a.Metrics = b.GetBindAddr()
	}
	if m.Sync != nil {
		if s := m.Sync.Addr(); s != nil {
			a.Sync = s.String()
		}
	}
	return a
}

// logListening logs the line "listening" with "server" and "address" for
// each server as it comes to listen (the probes and webhooks at once, the
// metrics and sync servers once they start), so that the harness of a
// process reads the ports it got.
func (m *Manager) logListening(ctx context.Context) {
	logServers(ctx, func() []server {
		a := m.Addresses()
		return []server{
			{"health", a.Health, m.healthListener != nil},
			{"webhook", a.Webhook, m.webhookListener != nil},
			{"metrics", a.Metrics, m.metricsServer != nil},
			{"sync", a.Sync, m.Sync != nil},
		}
	})
}

// server is one server of a manager: its name, its address ("" while it
// does not listen yet), and whether it is on at all.
type server struct {
	name, addr string
	on         bool
}

// logServers logs "listening" once for each server that is on, as it
// comes to listen, until every one did or ctx is done.
func logServers(ctx context.Context, servers func() []server) {
	logger := log.FromContext(ctx)
	logged := map[string]bool{}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		pending := false
		for _, s := range servers() {
			switch {
			case !s.on || logged[s.name]:
			case s.addr == "":
				pending = true
			default:
				logger.Info("listening", "server", s.name, "address", s.addr)
				logged[s.name] = true
			}
		}
		if !pending {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func addrOf(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// disabled is the address that turns a server off.
func disabled(addr string) bool { return addr == "" || addr == "0" }

// --- health probes ---

// probes serves /healthz and /readyz on a listener bound when the manager
// is built, with the checks registered through the manager (probedManager).
type probes struct {
	mu              sync.Mutex
	healthz, readyz map[string]healthz.Checker
	listener        net.Listener
	started         bool
}

// probedManager is the controller-runtime manager with its health checks
// served by probes: every part of flagplane registers its checks through it.
type probedManager struct {
	manager.Manager
	probes *probes
}

// AddHealthzCheck implements manager.Manager.
func (p probedManager) AddHealthzCheck(name string, check healthz.Checker) error {
	return p.probes.add(p.probes.healthz, name, check)
}

// AddReadyzCheck implements manager.Manager.
func (p probedManager) AddReadyzCheck(name string, check healthz.Checker) error {
	return p.probes.add(p.probes.readyz, name, check)
}

func (p *probes) add(checks map[string]healthz.Checker, name string, check healthz.Checker) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return fmt.Errorf("adding check %q: the probes are served already", name)
	}
	if _, ok := checks[name]; ok {
		return fmt.Errorf("adding check %q: a check of that name exists", name)
	}
	checks[name] = check
	return nil
}

// server is the probes' runnable, started with the manager's HTTP servers
// (before the caches), as controller-runtime serves its own probes.
func (p *probes) server() *manager.Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = true
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{"/healthz": p.healthz, "/readyz": p.readyz} {
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
	shutdown := 10 * time.Second
	return &manager.Server{Name: "health probe", Server: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		Listener: p.listener, ShutdownTimeout: &shutdown}
}

// --- admission webhooks ---

// webhookServer is controller-runtime's webhook server (its mux and
// handlers) served on a listener bound when the manager is built, with the
// certificate in CertDir (tls.crt, tls.key), reloaded when it changes, as
// the DefaultServer serves it.
//
// When its context ends it drains for drain before it shuts down.
type webhookServer struct {
	*webhook.DefaultServer
	listener net.Listener
	// drain is how long it drains (Options.WebhookDrain); see
	// DefaultWebhookDrain.
	drain    time.Duration
	draining atomic.Bool
	mu       sync.Mutex
	started  bool
	// drainFrom is when the drain began (beginDrain).
	drainFrom time.Time
}

// DefaultWebhookDrain is how long the webhook server keeps answering once
// the manager stops, closing each connection after its answer, before it
// shuts down.
//
// The API server calls a webhook over HTTP/1.1 with keep-alive, through
// the Service's cluster IP: a connection it opened to this replica stays
// with this replica, whatever kube-proxy does once the Pod is deleted,
// and the API server keeps sending admission requests down it. A
// shutdown closes the connections that are idle; a request the API
// server is writing to one at that moment fails, is not retried (a POST),
// and the Pod webhook fails open: a pod admitted without its flagd. The
// pod's preStop sleep keeps the replica serving while it leaves the
// Service; draining then answers every request that still arrives on an
// old connection with "Connection: close", so that the API server's
// connections leave this replica one by one, each after a complete
// answer, and the shutdown finds none in use.
const DefaultWebhookDrain = 3 * time.Second

var (
	_ webhook.Server           = (*webhookServer)(nil)
	_ webhooks.TLSConfigurable = (*webhookServer)(nil)
)

// AddTLSOpts adds to the server's TLS configuration (the self-managed
// certificates); call it before Start.
func (s *webhookServer) AddTLSOpts(opts ...func(*tls.Config)) {
	s.Options.TLSOpts = append(s.Options.TLSOpts, opts...)
}

// Start serves until ctx is done.
func (s *webhookServer) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("webhook")
	cfg := &tls.Config{NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	for _, op := range s.Options.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		// The certificate of a mounted Secret (cert-manager), reloaded when it changes.
		certDir := s.Options.CertDir
		if certDir == "" {
			certDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
		}
		watcher, err := certwatcher.New(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("reading the webhook certificate in %s: %w", certDir, err)
		}
		cfg.GetCertificate = watcher.GetCertificate
		go func() {
			if err := watcher.Start(ctx); err != nil {
				logger.Error(err, "watching the webhook certificate")
			}
		}()
	}
	srv := &http.Server{Handler: s.drainable(s.WebhookMux()), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		if s.drain > 0 {
			s.beginDrain()
			s.mu.Lock()
			left := time.Until(s.drainFrom.Add(s.drain))
			s.mu.Unlock()
			logger.Info("draining the webhook server before it shuts down", "for", max(left, 0).Round(time.Millisecond).String())
			time.Sleep(left)
		}
		shutdown, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			logger.Error(err, "shutting the webhook server down")
		}
	}()
	logger.Info("serving webhooks", "address", s.listener.Addr().String())
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	if err := srv.Serve(tls.NewListener(s.listener, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving webhooks: %w", err)
	}
	<-done
	return nil
}

// beginDrain starts the drain, if it has not begun: the manager calls it
// as soon as it is told to stop, so that the drain runs while the
// controllers and caches stop (the webhook server is stopped last, and
// the leader's Lease is released only after it).
func (s *webhookServer) beginDrain() {
	if s.drain <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drainFrom.IsZero() {
		s.drainFrom = time.Now()
		s.draining.Store(true)
	}
}

// drainable answers with "Connection: close" while the server drains, so
// that the client's connection is closed after a complete answer.
func (s *webhookServer) drainable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// StartedChecker is ready once the server answers TLS.
func (s *webhookServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if !started {
			return errors.New("the webhook server has not started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", s.listener.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it answers TLS
		if err != nil {
			return fmt.Errorf("the webhook server does not answer: %w", err)
		}
		return conn.Close()
	}
}

// listen binds host:port (port 0: one the kernel picks).
func listen(what, host string, port int) (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listening for the %s: %w", what, err)
	}
	return l, nil
}

// listenAddr binds addr (host:port, port 0 allowed).
func listenAddr(what, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the %s on %s: %w", what, addr, err)
	}
	return l, nil
}

// --- metrics ---

// newMetricsServer is controller-runtime's metrics server, made here rather
// than by the manager so that the address it binds can be read
// (GetBindAddr); nil when it is off.
func newMetricsServer(m manager.Manager, mo metricsserver.Options) (metricsserver.Server, error) {
	if disabled(mo.BindAddress) {
		return nil, nil
	}
	srv, err := metricsserver.NewServer(mo, m.GetConfig(), m.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating the metrics server: %w", err)
	}
	if err := m.Add(srv); err != nil {
		return nil, fmt.Errorf("adding the metrics server: %w", err)
	}
	return srv, nil
}
