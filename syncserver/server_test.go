package syncserver

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

const checkoutSelector = "core.openfeature.dev/shop/checkout"

func TestSyncFlagsServesThenPushesEdits(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ff := h.flagSet("shop", "checkout", "off")
	h.flagSet("shop", "pricing", "off")
	sub := subscribe(t, h.client(t, "shop-token"), checkoutSelector)

	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)), "the first message is the ConfigMap content")

	edited := withDefault(ff, "on")
	h.setFlagSet(edited)
	g.Expect(sub.next(t)).To(Equal(rendered(t, edited)))

	// An edit of another flag set, and one that changes nothing served,
	// send nothing.
	h.flagSet("shop", "pricing", "on")
	h.source("shop", "flags", "checkout")
	sub.quiet(t, 300*time.Millisecond)
	g.Expect(h.srv.Stats()).To(And(HaveField("Subscribers", 1), HaveField("FlagSets", 1), HaveField("Sent", uint64(2))))
}

func TestSyncFlagsSelectorFromHeaderOrBody(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	checkout := h.flagSet("shop", "checkout", "off")
	pricing := h.flagSet("shop", "pricing", "on")
	c := h.client(t, "shop-token")

	body := subscribeWith(t, context.Background(), c, &syncv1.SyncFlagsRequest{Selector: checkoutSelector}, true)
	g.Expect(body.next(t)).To(Equal(rendered(t, checkout)))

	header := subscribeWith(t, withHeader(context.Background(), "core.openfeature.dev/shop/pricing"), c,
		&syncv1.SyncFlagsRequest{Selector: checkoutSelector}, true)
	g.Expect(header.next(t)).To(Equal(rendered(t, pricing)), "the header wins over the body")
}

func TestRefusals(t *testing.T) {
	h := newHarness(t, func(o *Options) {})
	h.flagSet("shop", "checkout", "off")
	h.flagSet("team-b", "secret", "off")
	for _, tc := range []struct {
		name, token, selector string
		code                  codes.Code
		message               string
	}{
		{name: "no credential", selector: checkoutSelector, code: codes.Unauthenticated},
		{name: "unknown credential", token: "stolen", selector: checkoutSelector, code: codes.Unauthenticated},
		{name: "no selector", token: "shop-token", code: codes.InvalidArgument, message: "selector"},
		{name: "malformed selector", token: "shop-token", selector: "shop/checkout", code: codes.InvalidArgument},
		{name: "another namespace's flag set", token: "team-a-token", selector: checkoutSelector, code: codes.PermissionDenied,
			message: `namespace "team-a" may not read core.openfeature.dev/shop/checkout`},
		{name: "another namespace's missing flag set", token: "team-a-token", selector: "core.openfeature.dev/team-b/missing",
			code: codes.PermissionDenied, message: `namespace "team-a" may not read core.openfeature.dev/team-b/missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := h.client(t, tc.token)
			sub := subscribe(t, c, tc.selector)
			g.Expect(sub.ended(t)).To(Equal(tc.code))

			_, err := c.FetchAllFlags(context.Background(), &syncv1.FetchAllFlagsRequest{Selector: tc.selector})
			g.Expect(status.Code(err)).To(Equal(tc.code))
			g.Expect(status.Convert(err).Message()).To(ContainSubstring(tc.message))
		})
	}
	NewWithT(t).Expect(h.srv.Subscribers()).To(BeZero())
}

func TestSubscribersOfOtherNamespacesNeedAGrantedReference(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ff := h.flagSet("shop", "checkout", "off")
	c := h.client(t, "team-a-token")

	h.source("team-a", "flags", "shop/checkout")
	g.Expect(subscribe(t, c, checkoutSelector).ended(t)).To(Equal(codes.PermissionDenied), "a reference alone is not enough")

	h.grant("shop", "to-team-a", []string{"team-a"}, nil)
	sub := subscribe(t, c, checkoutSelector)
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))

	h.deleteGrant("shop", "to-team-a")
	g.Expect(sub.ended(t)).To(Equal(codes.PermissionDenied), "losing the grant ends the stream")
}

func TestInvalidEditsKeepTheLastValidContent(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ff := h.flagSet("shop", "checkout", "off")
	c := h.client(t, "shop-token")
	first := subscribe(t, c, checkoutSelector)
	g.Expect(first.next(t)).To(Equal(rendered(t, ff)))

	h.setFlagSet(withDefault(ff, "purple"))
	first.quiet(t, 300*time.Millisecond)

	late := subscribe(t, c, checkoutSelector)
	g.Expect(late.next(t)).To(Equal(rendered(t, ff)), "a newcomer gets the last valid content")
	resp, err := c.FetchAllFlags(context.Background(), &syncv1.FetchAllFlagsRequest{Selector: checkoutSelector})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetFlagConfiguration()).To(Equal(rendered(t, ff)))

	fixed := withDefault(ff, "on")
	h.setFlagSet(fixed)
	g.Expect(first.next(t)).To(Equal(rendered(t, fixed)))
	g.Expect(late.next(t)).To(Equal(rendered(t, fixed)))
}

func TestAFlagSetInvalidFromTheStartIsNotServed(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	bad := h.flagSet("shop", "checkout", "purple")
	c := h.client(t, "shop-token")
	sub := subscribe(t, c, checkoutSelector)
	sub.quiet(t, 300*time.Millisecond)
	_, err := c.FetchAllFlags(context.Background(), &syncv1.FetchAllFlagsRequest{Selector: checkoutSelector})
	g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))

	good := withDefault(bad, "on")
	h.setFlagSet(good)
	g.Expect(sub.next(t)).To(Equal(rendered(t, good)))
}

func TestMissingFlagSetsServeAnEmptyFlagSet(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	c := h.client(t, "shop-token")
	sub := subscribe(t, c, checkoutSelector)
	g.Expect(sub.next(t)).To(Equal(EmptyFlagSet), "not created yet")

	ff := h.flagSet("shop", "checkout", "off")
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))

	h.deleteFlagSet(topology.FlagSetKey("shop", "checkout"))
	g.Expect(sub.next(t)).To(Equal(EmptyFlagSet), "deleted")

	// A subscriber of another namespace that was entitled keeps its stream
	// while the flag set is gone, and gets it back when it returns.
	h.source("team-a", "flags", "shop/checkout")
	h.grant("shop", "to-team-a", []string{"team-a"}, nil)
	h.flagSet("shop", "checkout", "off")
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))
	other := subscribe(t, h.client(t, "team-a-token"), checkoutSelector)
	g.Expect(other.next(t)).To(Equal(rendered(t, ff)))
	h.deleteFlagSet(topology.FlagSetKey("shop", "checkout"))
	g.Expect(other.next(t)).To(Equal(EmptyFlagSet))
	h.flagSet("shop", "checkout", "on")
	g.Expect(other.next(t)).To(Equal(rendered(t, withDefault(ff, "on"))))
}

func TestNothingIsServedBeforeTheGraphIsBuilt(t *testing.T) {
	g := NewWithT(t)
	ready := false
	h := newHarness(t, func(o *Options) { o.Ready = func() bool { return ready } })
	ff := h.flagSet("shop", "checkout", "off")
	c := h.client(t, "shop-token")
	g.Expect(subscribe(t, c, checkoutSelector).ended(t)).To(Equal(codes.Unavailable))
	_, err := c.GetMetadata(context.Background(), &syncv1.GetMetadataRequest{})
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	ready = true
	g.Expect(subscribe(t, c, checkoutSelector).next(t)).To(Equal(rendered(t, ff)))
}

func TestFetchAllFlagsAndGetMetadata(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ff := h.flagSet("shop", "checkout", "off")
	c := h.client(t, "shop-token")
	resp, err := c.FetchAllFlags(withHeader(context.Background(), checkoutSelector), &syncv1.FetchAllFlagsRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetFlagConfiguration()).To(Equal(rendered(t, ff)))

	md, err := c.GetMetadata(context.Background(), &syncv1.GetMetadataRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(md.GetMetadata().GetFields()).To(BeEmpty())
	_, err = h.client(t, "").GetMetadata(context.Background(), &syncv1.GetMetadataRequest{})
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
}

// bigFlagSet has n flags of about 1 KiB each.
func bigFlagSet(ns, name string, n int, variant string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name = ns, name
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
	pad := strings.Repeat("x", 1000)
	for i := range n {
		v, _ := json.Marshal(map[string]string{"a": pad + variant, "b": pad})
		ff.Spec.FlagSpec.Flags["flag-"+strings.Repeat("0", 4-len(itoa(i)))+itoa(i)] = v1beta1.Flag{
			State: v1beta1.FlagStateEnabled, Variants: v, DefaultVariant: "a"}
	}
	return ff
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// A subscriber that does not read blocks only itself: the others get every
// edit at once, and when it reads again it gets the newest state, not the
// backlog.
func TestASlowSubscriberNeverHoldsOthersBack(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ff := bigFlagSet("shop", "checkout", 200, "v0") // about 400 KiB: far more than a stream's flow-control window
	h.setFlagSet(ff)
	small := grpc.WithInitialWindowSize(64 << 10) // fixed windows, no BDP growth
	slow := subscribeWith(t, context.Background(), h.client(t, "shop-token", small, grpc.WithInitialConnWindowSize(64<<10)),
		&syncv1.SyncFlagsRequest{Selector: checkoutSelector}, false)
	fast := subscribe(t, h.client(t, "shop-token"), checkoutSelector)
	g.Expect(fast.next(t)).To(Equal(rendered(t, ff)))

	const edits = 20
	var last *v1beta1.FeatureFlag
	for i := 1; i <= edits; i++ {
		last = bigFlagSet("shop", "checkout", 200, "v"+itoa(i))
		h.setFlagSet(last)
		// The fast subscriber keeps up with every single edit.
		g.Expect(fast.next(t)).To(Equal(rendered(t, last)))
	}

	go slow.read()
	received := 0
	for {
		m := slow.next(t)
		received++
		if m == rendered(t, last) {
			break
		}
	}
	g.Expect(received).To(BeNumerically("<", edits/2), "the slow subscriber skipped the states it had no time for")
	slow.quiet(t, 300*time.Millisecond)
}

// A flag set whose message is larger than the server sends is not sent:
// its streams keep the last content that fitted, as ConfigMaps keep
// theirs, rather than end on every attempt (flagd would reconnect, and
// fail again); FetchAllFlags answers with that content, or
// FailedPrecondition when none fitted. Once it fits again it is pushed.
func TestMaxMessageSize(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, func(o *Options) { o.MaxMessageSize = 4 << 10 })
	h.flagSet("shop", "small", "off")
	h.setFlagSet(bigFlagSet("shop", "big", 10, "v"))
	c := h.client(t, "shop-token")
	g.Expect(subscribe(t, c, "core.openfeature.dev/shop/small").next(t)).To(ContainSubstring("new-checkout"))
	never := subscribe(t, c, "core.openfeature.dev/shop/big")
	never.quiet(t, 300*time.Millisecond)
	_, err := c.FetchAllFlags(context.Background(), &syncv1.FetchAllFlagsRequest{Selector: "core.openfeature.dev/shop/big"})
	g.Expect(status.Code(err)).To(Equal(codes.FailedPrecondition))

	ff := h.flagSet("shop", "checkout", "off")
	sub := subscribe(t, c, checkoutSelector)
	fitted := sub.next(t)
	g.Expect(fitted).To(Equal(rendered(t, ff)))
	grown := bigFlagSet("shop", "checkout", 10, "v")
	h.setFlagSet(grown)
	sub.quiet(t, 300*time.Millisecond)
	resp, err := c.FetchAllFlags(context.Background(), &syncv1.FetchAllFlagsRequest{Selector: checkoutSelector})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetFlagConfiguration()).To(Equal(fitted), "the last content that fitted")

	h.setFlagSet(withDefault(ff, "on"))
	g.Expect(sub.next(t)).To(Equal(rendered(t, withDefault(ff, "on"))), "fits again: pushed")
}

// The topology's figure for a sync message is the size of the message the
// server encodes, at every varint length of the content's size.
func TestSyncMessageSize(t *testing.T) {
	g := NewWithT(t)
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 2097151, 2097152, topology.SyncMaxMessageBytes - 5} {
		content := strings.Repeat("x", n)
		encoded, err := encodeResponse(content)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(topology.Rendered{Content: content}.SyncMessageSize()).To(Equal(encoded.data.Len()), "%d bytes", n)
	}
	g.Expect(DefaultMaxMessageSize).To(Equal(topology.SyncMaxMessageBytes), "flagd's own limit")
}

// Stopping ends open streams at once with Unavailable, so that clients
// reconnect elsewhere, instead of waiting for them to leave.
func TestStopEndsStreams(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	srv, err := New(w.topo, Options{Authenticator: staticAuth{"shop-token": {Namespace: "shop"}}})
	g.Expect(err).NotTo(HaveOccurred())
	w.listener = srv.FlagSetsChanged
	ff := w.flagSet("shop", "checkout", "off")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	h := &harness{world: w, srv: srv, addr: lis.Addr().String()}

	sub := subscribe(t, h.client(t, "shop-token"), checkoutSelector)
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))
	stopped := time.Now()
	cancel()
	g.Expect(sub.ended(t)).To(Equal(codes.Unavailable))
	g.Eventually(done, 5*time.Second).Should(Receive(BeNil()))
	g.Expect(time.Since(stopped)).To(BeNumerically("<", 2*time.Second))
	g.Expect(srv.Subscribers()).To(BeZero())
}

func TestAStreamEndsWhenItsCredentialExpires(t *testing.T) {
	g := NewWithT(t)
	expires := time.Now().Add(700 * time.Millisecond)
	h := newHarness(t, func(o *Options) {
		o.Authenticator = staticAuth{
			"expiring": {Namespace: "shop", ServiceAccount: "web", Expires: expires},
			"lasting":  {Namespace: "shop", ServiceAccount: "web"},
		}
	})
	ff := h.flagSet("shop", "checkout", "off")
	expiring := subscribe(t, h.client(t, "expiring"), checkoutSelector)
	lasting := subscribe(t, h.client(t, "lasting"), checkoutSelector)
	g.Expect(expiring.next(t)).To(Equal(rendered(t, ff)))
	g.Expect(lasting.next(t)).To(Equal(rendered(t, ff)))

	select {
	case err := <-expiring.err:
		g.Expect(time.Now()).To(BeTemporally(">=", expires), "not before its credential expired")
		g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
		g.Expect(status.Convert(err).Message()).To(Equal(
			"the credential that opened this stream expired at " + expires.UTC().Format(time.RFC3339) + "; reconnect with a fresh one"))
	case m := <-expiring.msgs:
		t.Fatalf("unexpected message: %s", m)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its credential")
	}
	g.Eventually(h.srv.Subscribers).Should(Equal(1))

	edited := withDefault(ff, "on")
	h.setFlagSet(edited)
	g.Expect(lasting.next(t)).To(Equal(rendered(t, edited)), "a credential without expiry keeps its stream")
}
