package syncserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// world is a topology edited the way the controllers edit it: every Delta's
// flag sets go to the listener, as controllers.Controller.dispatch does.
type world struct {
	t        testing.TB
	topo     *topology.Topology
	listener func([]topology.Key)
}

func newWorld(t testing.TB) *world {
	return &world{t: t, topo: topology.New(flagsets.NewValidator(false).TopologyOptions()...)}
}

func (w *world) apply(d topology.Delta, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("editing the topology: %v", err)
	}
	if flagSets := d.Of(topology.KindFlagSet); w.listener != nil && len(flagSets) > 0 {
		w.listener(flagSets)
	}
}

// flagSet upserts a FeatureFlag with one boolean flag "new-checkout".
func (w *world) flagSet(ns, name, defaultVariant string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"new-checkout": {State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: defaultVariant},
	}
	w.apply(w.topo.UpsertFlagSet(ff))
	return ff
}

func (w *world) setFlagSet(ff *v1beta1.FeatureFlag) { w.apply(w.topo.UpsertFlagSet(ff)) }

func (w *world) deleteFlagSet(k topology.Key) {
	w.apply(w.topo.DeleteFlagSet(k.Namespace, k.Name), nil)
}

// source upserts a FeatureFlagSource with flagd-proxy entries for refs.
func (w *world) source(ns, name string, refs ...string) {
	s := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, r := range refs {
		s.Spec.Sources = append(s.Spec.Sources, v1beta1.Source{Source: r, Provider: v1beta1.SyncProviderFlagdProxy})
	}
	w.apply(w.topo.UpsertSource(s))
}

// grant lets the sources of the namespaces from refer to the FeatureFlags
// of ns named in to (all of them when to is empty).
func (w *world) grant(ns, name string, from, to []string) {
	g := topology.Grant{Namespace: ns, Name: name}
	for _, f := range from {
		g.From = append(g.From, topology.GrantFrom{Group: topology.GroupOpenFeature, Kind: "FeatureFlagSource", Namespace: f})
	}
	if len(to) == 0 {
		to = []string{""}
	}
	for _, n := range to {
		g.To = append(g.To, topology.GrantTo{Group: topology.GroupOpenFeature, Kind: "FeatureFlag", Name: n})
	}
	w.apply(w.topo.UpsertGrant(g))
}

func (w *world) deleteGrant(ns, name string) { w.apply(w.topo.DeleteGrant(ns, name), nil) }

func rendered(t testing.TB, ff *v1beta1.FeatureFlag) string {
	t.Helper()
	s, _, err := flagsets.Serve(ff)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withDefault returns a copy of ff whose flag new-checkout has another default variant.
func withDefault(ff *v1beta1.FeatureFlag, variant string) *v1beta1.FeatureFlag {
	ff = ff.DeepCopy()
	f := ff.Spec.FlagSpec.Flags["new-checkout"]
	f.DefaultVariant = variant
	ff.Spec.FlagSpec.Flags["new-checkout"] = f
	return ff
}

// staticAuth knows a fixed set of tokens.
type staticAuth map[string]Identity

func (a staticAuth) Authenticate(_ context.Context, token string) (Identity, error) {
	if id, ok := a[token]; ok {
		return id, nil
	}
	return Identity{}, status.Error(codes.Unauthenticated, "unknown token")
}

// harness is a server on a loopback listener over a world.
type harness struct {
	*world
	srv  *Server
	addr string
}

func newHarness(t *testing.T, mutate ...func(*Options)) *harness {
	t.Helper()
	w := newWorld(t)
	opts := Options{
		Authenticator: staticAuth{
			"shop-token":   {Namespace: "shop", ServiceAccount: "web"},
			"team-a-token": {Namespace: "team-a", ServiceAccount: "app"},
		},
		Log: testr.New(t),
	}
	for _, m := range mutate {
		m(&opts)
	}
	srv, err := New(w.topo, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.listener = srv.FlagSetsChanged
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serving: %v", err)
		}
	})
	return &harness{world: w, srv: srv, addr: lis.Addr().String()}
}

// tokenCreds sends a bearer token with every call.
type tokenCreds string

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(c)}, nil
}
func (tokenCreds) RequireTransportSecurity() bool { return false }

func (h *harness) client(t testing.TB, token string, opts ...grpc.DialOption) syncv1grpc.FlagSyncServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds(token)))
	}
	conn, err := grpc.NewClient(h.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return syncv1grpc.NewFlagSyncServiceClient(conn)
}

// subscription collects what a SyncFlags stream receives.
type subscription struct {
	msgs   chan string
	err    chan error
	stream grpc.ServerStreamingClient[syncv1.SyncFlagsResponse]
	cancel context.CancelFunc
}

// subscribe opens a stream with the selector in the request body.
func subscribe(t testing.TB, c syncv1grpc.FlagSyncServiceClient, selector string) *subscription {
	return subscribeWith(t, context.Background(), c, &syncv1.SyncFlagsRequest{Selector: selector}, true)
}

func subscribeWith(t testing.TB, ctx context.Context, c syncv1grpc.FlagSyncServiceClient, req *syncv1.SyncFlagsRequest, read bool) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	stream, err := c.SyncFlags(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	s := &subscription{msgs: make(chan string, 1000), err: make(chan error, 1), stream: stream, cancel: cancel}
	if read {
		go s.read()
	}
	return s
}

func (s *subscription) read() {
	for {
		m, err := s.stream.Recv()
		if err != nil {
			s.err <- err
			return
		}
		s.msgs <- m.GetFlagConfiguration()
	}
}

// next waits for the next message.
func (s *subscription) next(t testing.TB) string {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case err := <-s.err:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return ""
}

// ended waits for the stream to end and returns its status code.
func (s *subscription) ended(t testing.TB) codes.Code {
	t.Helper()
	for {
		select {
		case <-s.msgs:
		case err := <-s.err:
			if errors.Is(err, io.EOF) {
				return codes.OK
			}
			return status.Code(err)
		case <-time.After(10 * time.Second):
			t.Fatal("stream did not end within 10s")
			return codes.Unknown
		}
	}
}

// quiet checks that no message arrives for a while.
func (s *subscription) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case m := <-s.msgs:
		t.Fatalf("unexpected message: %s", m)
	case err := <-s.err:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(d):
	}
}

func withHeader(ctx context.Context, selector string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "flagd-selector", selector)
}
