package syncserver

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Defaults of the manager's ReviewLimit (see DefaultConfig). A projected
// token is reviewed once when a subscriber first presents it to a replica
// and, being cached and exempt while it stays valid, not again until the
// kubelet rotates it; so a steady state needs a few reviews a second even
// with thousands of subscribers. The burst absorbs a replica's cold start.
const (
	DefaultTokenReviewQPS       = 50
	DefaultTokenReviewBurst     = 100
	DefaultTokenReviewPeerQPS   = 1
	DefaultTokenReviewPeerBurst = 10
)

// maxLimitedPeers bounds the per-address buckets of a reviewLimiter. Past
// it, idle addresses are forgotten, and if none is idle, all are: an
// address that comes back starts with a full bucket, and the global bucket
// still bounds the total.
const maxLimitedPeers = 4096

// ReviewLimit bounds the TokenReviews that callers can cause with tokens
// that have not passed a review: a token bucket that all callers share,
// and one per client address, so that one address cannot spend the whole
// budget. A call over either limit fails at once with Unavailable, without
// a review. Tokens that passed a review and have not expired are never
// limited.
type ReviewLimit struct {
	// QPS refills the shared bucket, Burst is its size. A QPS of zero is no
	// limit.
	QPS   float64
	Burst int
	// PeerQPS and PeerBurst are the same per client IP address. A PeerQPS
	// of zero is no per-address limit.
	PeerQPS   float64
	PeerBurst int
}

// Messages of the limited calls; Unavailable, so that clients retry with
// backoff (flagd's providers retry Unavailable, and only it and Unknown).
const (
	reviewsLimitedExplanation     = "too many new credentials are being checked; retry later"
	peerReviewsLimitedExplanation = "too many new credentials from this address are being checked; retry later"
)

// bucket is a token bucket, refilled lazily when taken from.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill brings the bucket to now; a new bucket starts full.
func (b *bucket) refill(now time.Time, qps float64, burst int) {
	if b.last.IsZero() {
		b.tokens, b.last = float64(burst), now
		return
	}
	if now.After(b.last) {
		b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*qps)
		b.last = now
	}
}

func (b *bucket) take(now time.Time, qps float64, burst int) bool {
	b.refill(now, qps, burst)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// reviewLimiter applies a ReviewLimit.
type reviewLimiter struct {
	limit  ReviewLimit
	mu     sync.Mutex
	global bucket
	peers  map[string]*bucket
}

func newReviewLimiter(l ReviewLimit) *reviewLimiter {
	l.Burst, l.PeerBurst = max(l.Burst, 1), max(l.PeerBurst, 1)
	return &reviewLimiter{limit: l, peers: map[string]*bucket{}}
}

// allow takes one review from the address's bucket, then from the shared
// one, or returns the Unavailable error of the first that is empty. The
// address's bucket goes first, so that an address over its limit spends
// nothing of the others' budget.
func (l *reviewLimiter) allow(addr string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var pb *bucket
	if l.limit.PeerQPS > 0 {
		if pb = l.peers[addr]; pb == nil {
			l.makeRoom(now)
			pb = &bucket{}
			l.peers[addr] = pb
		}
		if !pb.take(now, l.limit.PeerQPS, l.limit.PeerBurst) {
			return status.Error(codes.Unavailable, peerReviewsLimitedExplanation)
		}
	}
	if l.limit.QPS > 0 && !l.global.take(now, l.limit.QPS, l.limit.Burst) {
		if pb != nil {
			pb.tokens++ // not spent: give it back
		}
		return status.Error(codes.Unavailable, reviewsLimitedExplanation)
	}
	return nil
}

// makeRoom keeps the per-address buckets under maxLimitedPeers.
func (l *reviewLimiter) makeRoom(now time.Time) {
	if len(l.peers) < maxLimitedPeers {
		return
	}
	for addr, b := range l.peers {
		if b.refill(now, l.limit.PeerQPS, l.limit.PeerBurst); b.tokens >= float64(l.limit.PeerBurst) {
			delete(l.peers, addr) // full again: the same as a new bucket
		}
	}
	if len(l.peers) >= maxLimitedPeers {
		clear(l.peers)
	}
}

// peerAddress is the IP address of the caller of a gRPC call, without its
// port (every connection has another); empty when unknown.
func peerAddress(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return host
	}
	return p.Addr.String()
}
