package syncserver

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/klog/v2"

	"github.com/flagplane/flagplane/topology"
)

// Defaults of Options.
const (
	DefaultAddr                  = ":8015"
	DefaultMaxMessageSize        = topology.SyncMaxMessageBytes
	DefaultKeepaliveMinTime      = 5 * time.Second
	DefaultKeepaliveTime         = time.Minute
	DefaultKeepaliveTimeout      = 20 * time.Second
	DefaultMaxStreamsPerConn     = 100
	DefaultGracefulStopTimeout   = 10 * time.Second
	DefaultMaxConnectionAgeGrace = 30 * time.Second
	maxRequestSize               = 64 << 10
	connectionBufferSize         = 8 << 10
	unavailableWhileGraphBuilds  = "flagplane is still building its graph from the cluster; retry"
	credentialExpiredExplanation = "the credential that opened this stream expired at %s; reconnect with a fresh one"
	selectorRequiredExplanation  = "a selector " + SelectorPrefix + "<namespace>/<name> is required"
	permissionDeniedExplanation  = "namespace %q may not read %s: it is neither the flag set's namespace nor referencing it from a FeatureFlagSource with a resolved (granted) reference"
	flagSetNeverValidExplanation = "flag set %s is invalid and no valid content of it is known yet"
)

// Options configure the server. The zero value but for Authenticator is usable.
type Options struct {
	// Addr is the listen address of Start (DefaultAddr when empty).
	Addr string

	// TLSCertFile and TLSKeyFile enable TLS when both are set. They are read
	// again whenever they change on disk, so a rotated certificate is used
	// from the next connection on.
	TLSCertFile, TLSKeyFile string

	// MaxMessageSize is the largest message sent (DefaultMaxMessageSize when
	// 0). A flag set whose message is larger is not sent: its subscribers
	// keep the last content that fitted, as ConfigMaps keep theirs, and
	// FetchAllFlags answers with it. Clients must accept messages this
	// large: flagd's sync client takes topology.SyncMaxMessageBytes (4
	// MiB, gRPC's default; flagplane writes no maxMsgSize into the
	// sidecar's --sources), which is what status and admission judge
	// flag sets by.
	MaxMessageSize int

	// KeepaliveMinTime is the shortest interval between a client's keepalive
	// pings that the server tolerates (DefaultKeepaliveMinTime); pings are
	// permitted on connections without streams too. gRPC's own default
	// (5 minutes) would make the server hang up on flagd's providers, which
	// ping every 30 seconds. The default is half of the shortest interval
	// gRPC clients may use (10s), so that a ping that arrives a little early
	// never counts against its client.
	KeepaliveMinTime time.Duration
	// KeepaliveTime and KeepaliveTimeout: the server pings a connection idle
	// for KeepaliveTime and closes it when no answer comes within
	// KeepaliveTimeout, so that vanished subscribers are dropped.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxConnectionAge, when set, makes clients reconnect after about this
	// long (they resume with the current state), which spreads subscribers
	// over the replicas behind a Service again after a rollout.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace is how long a connection past MaxConnectionAge
	// is left for its streams to see their last message before it is cut
	// (DefaultMaxConnectionAgeGrace).
	MaxConnectionAgeGrace time.Duration

	// MaxStreamsPerConnection bounds the concurrent streams of one
	// connection (DefaultMaxStreamsPerConn).
	MaxStreamsPerConnection uint32

	// Authenticator proves who a subscriber is. Required.
	Authenticator Authenticator

	// Ready, when set, gates every RPC: until it returns true the server
	// answers Unavailable (clients retry), so that no subscriber is refused
	// or served from a graph that is still being built.
	Ready func() bool

	// Observer, when set, hears of every stream opening and closing.
	Observer Observer

	// Log receives the server's logs.
	Log logr.Logger
}

// Server is flagplane's flagd sync server: flagd.sync.v1.FlagSyncService
// serving the flag sets of the topology, pushing a flag set's new content to
// its subscribers as soon as the graph changes (see FlagSetsChanged).
type Server struct {
	syncv1grpc.UnimplementedFlagSyncServiceServer

	opts Options
	hub  *hub
	log  logr.Logger
	tls  *certReloader
	addr atomic.Pointer[net.Addr]
	// stopping ends when Serve begins to stop: streams end at once.
	stopping    context.Context
	stopStreams context.CancelFunc
}

var _ syncv1grpc.FlagSyncServiceServer = (*Server)(nil)

// New returns a server of the flag sets of topo.
func New(topo Snapshotter, opts Options) (*Server, error) {
	if opts.Authenticator == nil {
		return nil, errors.New("sync server: an Authenticator is required")
	}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return nil, errors.New("sync server: set both TLS certificate and key files, or neither")
	}
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	opts.MaxMessageSize = cmp.Or(opts.MaxMessageSize, DefaultMaxMessageSize)
	opts.KeepaliveMinTime = cmp.Or(opts.KeepaliveMinTime, DefaultKeepaliveMinTime)
	opts.KeepaliveTime = cmp.Or(opts.KeepaliveTime, DefaultKeepaliveTime)
	opts.KeepaliveTimeout = cmp.Or(opts.KeepaliveTimeout, DefaultKeepaliveTimeout)
	opts.MaxConnectionAgeGrace = cmp.Or(opts.MaxConnectionAgeGrace, DefaultMaxConnectionAgeGrace)
	opts.MaxStreamsPerConnection = cmp.Or(opts.MaxStreamsPerConnection, DefaultMaxStreamsPerConn)
	s := &Server{opts: opts, hub: newHub(topo), log: opts.Log.WithName("syncserver")}
	s.hub.maxMessage = opts.MaxMessageSize
	s.hub.tooLarge = func(flagSet topology.Key, size int) {
		s.log.Error(nil, "not sending a flag set larger than the maximum message size: its subscribers keep the last content that fitted",
			"FeatureFlag", klog.KRef(flagSet.Namespace, flagSet.Name), "bytes", size, "max", opts.MaxMessageSize)
	}
	if opts.Observer != nil {
		s.hub.pushed = opts.Observer.SyncPushed
	}
	s.stopping, s.stopStreams = context.WithCancel(context.Background())
	if opts.TLSCertFile != "" {
		s.tls = &certReloader{certFile: opts.TLSCertFile, keyFile: opts.TLSKeyFile}
		if _, err := s.tls.load(); err != nil {
			return nil, fmt.Errorf("sync server: %w", err)
		}
	}
	return s, nil
}

// FlagSetsChanged tells the server that the served content of these flag
// sets, or who may read them, may have changed: a topology.Delta's flag sets. It
// returns at once; subscribers are served from a view taken afterwards.
func (s *Server) FlagSetsChanged(flagSets []topology.Key) { s.hub.changed(flagSets) }

// NamespaceTokens returns the namespace tokens among the server's
// authenticators, with which the admission webhook issues the credentials
// of injected sidecars; nil when they are not enabled.
func (s *Server) NamespaceTokens() *NamespaceTokens {
	chain, ok := s.opts.Authenticator.(Chain)
	if !ok {
		chain = Chain{s.opts.Authenticator}
	}
	for _, a := range chain {
		if n, ok := a.(*NamespaceTokens); ok {
			return n
		}
	}
	return nil
}

// Subscribers is the number of open SyncFlags streams.
func (s *Server) Subscribers() int { return int(s.hub.subscribers.Load()) }

// Stats returns the server's counters.
func (s *Server) Stats() Stats { return s.hub.stats() }

// Addr is the address the server listens on, nil until it does: for
// Options.Addr with port 0.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return nil
}

// NeedLeaderElection is false: every replica serves subscribers from its own
// graph, which every replica builds from its informers.
func (s *Server) NeedLeaderElection() bool { return false }

// Start listens on Options.Addr and serves until ctx ends: a
// controller-runtime manager.Runnable.
func (s *Server) Start(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("sync server: listening on %s: %w", s.opts.Addr, err)
	}
	return s.Serve(ctx, lis)
}

// Serve serves on lis until ctx ends, then stops: open streams end at once
// with Unavailable, so that their clients reconnect (to another replica, if
// there is one), and unary calls in flight get a moment to finish. A server
// serves once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	srv := grpc.NewServer(s.serverOptions()...)
	syncv1grpc.RegisterFlagSyncServiceServer(srv, s)

	hubCtx, stopHub := context.WithCancel(context.Background())
	defer stopHub()
	go s.hub.run(hubCtx)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	addr := lis.Addr()
	s.addr.Store(&addr)
	s.log.Info("serving flagd sync", "address", lis.Addr().String(), "tls", s.tls != nil)

	select {
	case err := <-served:
		return fmt.Errorf("sync server: %w", err)
	case <-ctx.Done():
	}
	// Streams never end by themselves: GracefulStop alone would wait for
	// every subscriber to leave. End them, give unary calls a moment, then cut.
	s.stopStreams()
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(DefaultGracefulStopTimeout):
	}
	srv.Stop()
	// Serve returns nil once stopped, or ErrServerStopped if the stop came
	// first; anything else is an error of its own.
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("sync server: %w", err)
	}
	return nil
}

func (s *Server) serverOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxSendMsgSize(s.opts.MaxMessageSize),
		grpc.MaxRecvMsgSize(maxRequestSize),
		grpc.MaxConcurrentStreams(s.opts.MaxStreamsPerConnection),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             s.opts.KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  s.opts.KeepaliveTime,
			Timeout:               s.opts.KeepaliveTimeout,
			MaxConnectionAge:      s.opts.MaxConnectionAge,
			MaxConnectionAgeGrace: s.opts.MaxConnectionAgeGrace,
		}),
		// A subscriber sends one small request and then only reads: small
		// per-connection buffers, and a write buffer that is released
		// between writes (gRPC's default), keep memory per subscriber low.
		grpc.ReadBufferSize(connectionBufferSize),
		grpc.WriteBufferSize(64 << 10),
		// Responses are encoded once per flag set state, not per subscriber.
		grpc.ForceServerCodecV2(newSharedCodec()),
		grpc.ChainUnaryInterceptor(s.unaryGate),
		grpc.ChainStreamInterceptor(s.streamGate),
	}
	if s.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: s.tls.get,
		})))
	}
	return opts
}

// gate admits a call: the graph must be built and the caller authenticated.
func (s *Server) gate(ctx context.Context) (context.Context, error) {
	if s.opts.Ready != nil && !s.opts.Ready() {
		return nil, status.Error(codes.Unavailable, unavailableWhileGraphBuilds)
	}
	token, err := bearerToken(ctx)
	if err != nil {
		return nil, err
	}
	id, err := s.opts.Authenticator.Authenticate(ctx, token)
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			err = status.Error(codes.Unauthenticated, err.Error())
		}
		s.log.V(1).Info("refused a caller", "reason", err.Error())
		return nil, err
	}
	return withIdentity(ctx, id), nil
}

func (s *Server) unaryGate(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := s.gate(ctx)
	if err != nil {
		s.refused(err)
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) streamGate(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := s.gate(ss.Context())
	if err != nil {
		s.refused(err)
		return err
	}
	return handler(srv, &identifiedStream{ServerStream: ss, ctx: ctx})
}

// refused tells the observer of a call refused before it was served.
func (s *Server) refused(err error) {
	if o := s.opts.Observer; o != nil {
		o.SyncRefused(status.Code(err).String())
	}
}

type identifiedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identifiedStream) Context() context.Context { return s.ctx }

// authorize resolves the selector of a request and checks that the caller
// may read the flag set it names.
func (s *Server) authorize(ctx context.Context, bodySelector string) (_ topology.Key, _ Identity, _ *topology.View, err error) {
	defer func() {
		if err != nil {
			s.refused(err)
		}
	}()
	id, ok := IdentityFrom(ctx)
	if !ok {
		return topology.Key{}, id, nil, status.Error(codes.Unauthenticated, "no identity")
	}
	sel := requestSelector(ctx, bodySelector)
	if sel == "" {
		return topology.Key{}, id, nil, status.Error(codes.InvalidArgument, selectorRequiredExplanation)
	}
	flagSet, err := ParseSelector(sel)
	if err != nil {
		return topology.Key{}, id, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v := s.hub.topo.Snapshot()
	if !Entitled(v, id.Namespace, flagSet) {
		s.log.V(1).Info("refused a subscriber", "FeatureFlag", klog.KRef(flagSet.Namespace, flagSet.Name), "identity", id.String())
		return flagSet, id, v, status.Errorf(codes.PermissionDenied, permissionDeniedExplanation, id.Namespace, sel)
	}
	return flagSet, id, v, nil
}

// SyncFlags streams a flag set: its current content first, then every new
// content as the graph changes, until the client leaves, the server stops,
// or the caller may no longer read it (PermissionDenied).
func (s *Server) SyncFlags(req *syncv1.SyncFlagsRequest, stream grpc.ServerStreamingServer[syncv1.SyncFlagsResponse]) error {
	ctx := stream.Context()
	flagSet, id, _, err := s.authorize(ctx, req.GetSelector())
	if err != nil {
		return err
	}
	log := s.log.WithValues("FeatureFlag", klog.KRef(flagSet.Namespace, flagSet.Name), "identity", id.String())
	conn := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		conn = p.Addr.String()
	}
	sub := s.hub.join(flagSet, id.Namespace, conn)
	defer s.hub.leave(sub)
	reason := EndLeft
	if o := s.opts.Observer; o != nil {
		sel := Selector(flagSet)
		o.SyncSubscribed(sel)
		defer func() { o.SyncUnsubscribed(sel, reason) }()
	}
	log.V(1).Info("subscriber joined", "providerID", req.GetProviderId())

	// The stream ends when its subscriber leaves, when the server stops,
	// and when the credential that opened it expires.
	defer context.AfterFunc(ctx, func() { sub.end(streamLeft) })()
	defer context.AfterFunc(s.stopping, func() { sub.end(streamStopping) })()
	if !id.Expires.IsZero() {
		defer time.AfterFunc(time.Until(id.Expires), func() { sub.end(streamExpired) }).Stop()
	}
	var sent uint64
	for {
		<-sub.wake
		switch sub.ended.Load() {
		case streamLeft:
			log.V(1).Info("subscriber left")
			return nil
		case streamStopping:
			reason = EndShutdown
			return status.Error(codes.Unavailable, "flagplane is shutting down; reconnect")
		case streamExpired:
			reason = EndCredentialExpired
			log.V(1).Info("ending a stream: its credential expired", "expired", id.Expires)
			return status.Errorf(codes.Unauthenticated, credentialExpiredExplanation, id.Expires.UTC().Format(time.RFC3339))
		}
		u := sub.latest.Load()
		if u == denied {
			reason = EndPermissionDenied
			log.Info("ending a stream: the subscriber's namespace may no longer read the flag set")
			return status.Errorf(codes.PermissionDenied, permissionDeniedExplanation, id.Namespace, Selector(flagSet))
		}
		if u == nil || u.version == sent {
			continue
		}
		if err := stream.SendMsg(u.encoded); err != nil {
			if ctx.Err() != nil {
				return nil // the subscriber went away while we sent
			}
			reason = EndSendFailed
			if status.Code(err) == codes.ResourceExhausted {
				log.Error(err, "flag set is larger than the maximum message size", "bytes", len(u.content), "max", s.opts.MaxMessageSize)
			}
			return err
		}
		sent = u.version
		s.hub.sentTo(sub, u)
	}
}

// FetchAllFlags returns a flag set's current content once.
func (s *Server) FetchAllFlags(ctx context.Context, req *syncv1.FetchAllFlagsRequest) (*syncv1.FetchAllFlagsResponse, error) {
	flagSet, id, v, err := s.authorize(ctx, req.GetSelector())
	if err != nil {
		return nil, err
	}
	content, _, _, valid := servedIn(v, flagSet, id.Namespace)
	if valid && (topology.Rendered{Content: content}).SyncMessageSize() > s.opts.MaxMessageSize {
		// Not sendable: the last content that fitted, as streams get.
		valid = false
	}
	if !valid {
		var ok bool
		if content, ok = s.hub.lastValid(flagSet); !ok {
			return nil, status.Errorf(codes.FailedPrecondition, flagSetNeverValidExplanation, Selector(flagSet))
		}
	}
	return &syncv1.FetchAllFlagsResponse{FlagConfiguration: content}, nil
}

// GetMetadata returns no metadata. flagd merges sync metadata into every
// evaluation context, and flagplane has none to add. (The RPC is deprecated
// in flagd in favour of a stream's sync context.)
func (s *Server) GetMetadata(context.Context, *syncv1.GetMetadataRequest) (*syncv1.GetMetadataResponse, error) {
	return &syncv1.GetMetadataResponse{Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{}}}, nil
}
