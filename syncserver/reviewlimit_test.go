package syncserver

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestBucket(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	var b bucket
	taken := 0
	for b.take(now, 2, 5) {
		taken++
	}
	g.Expect(taken).To(Equal(5), "a new bucket starts full")

	now = now.Add(time.Second)
	g.Expect(b.take(now, 2, 5)).To(BeTrue())
	g.Expect(b.take(now, 2, 5)).To(BeTrue())
	g.Expect(b.take(now, 2, 5)).To(BeFalse(), "2 per second")

	g.Expect(b.take(now.Add(-time.Hour), 2, 5)).To(BeFalse(), "a clock that goes back adds nothing")

	now = now.Add(time.Hour)
	taken = 0
	for b.take(now, 2, 5) {
		taken++
	}
	g.Expect(taken).To(Equal(5), "never more than the burst")
}

func TestReviewLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	t.Run("an address over its limit spends nothing of the shared budget", func(t *testing.T) {
		g := NewWithT(t)
		l := newReviewLimiter(ReviewLimit{QPS: 1, Burst: 10, PeerQPS: 1, PeerBurst: 3})
		for i := range 100 {
			err := l.allow("10.0.0.1", now)
			if i < 3 {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
				g.Expect(err).To(MatchError(ContainSubstring("from this address")))
			}
		}
		for i := range 7 { // 10 shared, 3 spent
			g.Expect(l.allow(fmt.Sprint("10.0.1.", i), now)).To(Succeed())
		}
		g.Expect(l.allow("10.0.2.1", now)).To(MatchError(ContainSubstring("too many new credentials are being checked")))
	})
	t.Run("a refusal of the shared bucket gives the address its token back", func(t *testing.T) {
		g := NewWithT(t)
		l := newReviewLimiter(ReviewLimit{QPS: 1, Burst: 1, PeerQPS: 1, PeerBurst: 2})
		g.Expect(l.allow("a", now)).To(Succeed())
		err := l.allow("b", now)
		g.Expect(err).To(MatchError(ContainSubstring("too many new credentials are being checked")))
		g.Expect(l.peers["b"].tokens).To(BeEquivalentTo(2))
	})
	t.Run("no limit", func(t *testing.T) {
		g := NewWithT(t)
		l := newReviewLimiter(ReviewLimit{})
		for range 1000 {
			g.Expect(l.allow("a", now)).To(Succeed())
		}
		g.Expect(l.peers).To(BeEmpty())
	})
	t.Run("the addresses are bounded", func(t *testing.T) {
		g := NewWithT(t)
		l := newReviewLimiter(ReviewLimit{PeerQPS: 1, PeerBurst: 2})
		for i := range 3 * maxLimitedPeers {
			_ = l.allow(fmt.Sprint(i), now)
			g.Expect(len(l.peers)).To(BeNumerically("<=", maxLimitedPeers))
		}
		// Idle addresses (full buckets) go first; busy ones stay.
		l = newReviewLimiter(ReviewLimit{PeerQPS: 1, PeerBurst: 2})
		for i := range maxLimitedPeers - 1 {
			_ = l.allow(fmt.Sprint(i), now)
		}
		_ = l.allow("busy", now)
		_ = l.allow("busy", now)
		later := now.Add(10 * time.Second) // the others are full again, "busy" too
		_ = l.allow("busy", later)
		_ = l.allow("busy", later)
		_ = l.allow("new", later)
		g.Expect(l.peers).To(HaveKey("busy"))
		g.Expect(l.peers).To(HaveLen(2))
		g.Expect(l.allow("busy", later)).NotTo(Succeed(), "the busy address kept its spent bucket")
	})
}

func TestPeerAddress(t *testing.T) {
	g := NewWithT(t)
	g.Expect(peerAddress(context.Background())).To(BeEmpty())
	at := func(a net.Addr) context.Context { return peer.NewContext(context.Background(), &peer.Peer{Addr: a}) }
	g.Expect(peerAddress(at(&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 4567}))).To(Equal("10.1.2.3"))
	g.Expect(peerAddress(at(&net.TCPAddr{IP: net.ParseIP("fd00::1"), Port: 4567}))).To(Equal("fd00::1"))
	g.Expect(peerAddress(at(&net.UnixAddr{Name: "/run/sock", Net: "unix"}))).To(Equal("/run/sock"))
}
