package syncserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fakeReviewer answers TokenReviews from a table of token → status.
type fakeReviewer struct {
	answers map[string]authnv1.TokenReviewStatus
	fail    atomic.Bool
	calls   atomic.Int32
	delay   time.Duration
	lastAud []string
	mu      sync.Mutex
}

func (f *fakeReviewer) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	f.calls.Add(1)
	time.Sleep(f.delay)
	if f.fail.Load() {
		return errors.New("connection refused")
	}
	tr := obj.(*authnv1.TokenReview)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastAud = tr.Spec.Audiences
	tr.Status = f.answers[tr.Spec.Token]
	return nil
}

func saStatus(ns, sa string, audiences ...string) authnv1.TokenReviewStatus {
	return authnv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     audiences,
		User: authnv1.UserInfo{
			Username: "system:serviceaccount:" + ns + ":" + sa,
			Extra:    map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"web-1"}},
		},
	}
}

// namedJWT is a well-formed JWT named name (the "sub" claim), without audience
// or expiry claims: the pre-checks pass it and the fake reviewer decides.
func namedJWT(name string) string { return jwt(`{"sub":"` + name + `"}`) }

func TestTokenReviews(t *testing.T) {
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{
		namedJWT("good"):         saStatus("shop", "web", "flagplane"),
		namedJWT("api-audience"): saStatus("shop", "web", "https://kubernetes.default.svc"),
		namedJWT("no-audience"):  saStatus("shop", "web"),
		namedJWT("user"):         {Authenticated: true, Audiences: []string{"flagplane"}, User: authnv1.UserInfo{Username: "alice"}},
		namedJWT("sa-malformed"): {Authenticated: true, Audiences: []string{"flagplane"}, User: authnv1.UserInfo{Username: "system:serviceaccount:shop"}},
		namedJWT("expired"):      {Authenticated: false, Error: "token has expired"},
	}}
	for _, tc := range []struct {
		token string
		want  Identity
		code  codes.Code
	}{
		{token: "good", want: Identity{Namespace: "shop", ServiceAccount: "web", Pod: "web-1"}},
		{token: "api-audience", code: codes.Unauthenticated},
		{token: "no-audience", code: codes.Unauthenticated},
		{token: "user", code: codes.PermissionDenied},
		{token: "sa-malformed", code: codes.PermissionDenied},
		{token: "expired", code: codes.Unauthenticated},
		{token: "unknown", code: codes.Unauthenticated},
	} {
		t.Run(tc.token, func(t *testing.T) {
			g := NewWithT(t)
			a := &TokenReviews{Reviewer: reviewer}
			id, err := a.Authenticate(context.Background(), namedJWT(tc.token))
			g.Expect(status.Code(err)).To(Equal(tc.code), "error: %v", err)
			g.Expect(id).To(Equal(tc.want))
			reviewer.mu.Lock()
			g.Expect(reviewer.lastAud).To(Equal([]string{"flagplane"}))
			reviewer.mu.Unlock()
		})
	}
}

func TestTokenReviewsCache(t *testing.T) {
	g := NewWithT(t)
	good, bad := namedJWT("good"), namedJWT("bad")
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{good: saStatus("shop", "web", "flagplane")}}
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, SuccessTTL: time.Minute, FailureTTL: 10 * time.Second, now: func() time.Time { return now }}
	ctx := context.Background()

	for range 3 {
		_, err := a.Authenticate(ctx, good)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = a.Authenticate(ctx, bad)
		g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(2), "one review per token while cached")

	now = now.Add(11 * time.Second) // the refusal expired, the success not
	_, _ = a.Authenticate(ctx, good)
	_, _ = a.Authenticate(ctx, bad)
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(3))

	now = now.Add(time.Minute)
	_, _ = a.Authenticate(ctx, good)
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(4))
}

// jwt is an unsigned JWT with the given claims; the fake reviewer stands for
// the API server's signature check.
func jwt(claims string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString([]byte(claims)) + ".c2ln"
}

func TestTokenReviewsReadTheTokensExpiry(t *testing.T) {
	g := NewWithT(t)
	soon, later := jwt(`{"exp":1030,"sub":"system:serviceaccount:shop:web"}`), jwt(`{"exp":5000}`)
	fractional := jwt(`{"exp":1000.5}`)
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{
		soon: saStatus("shop", "web", "flagplane"), later: saStatus("shop", "web", "flagplane"),
		fractional: saStatus("shop", "web", "flagplane"), namedJWT("no-exp"): saStatus("shop", "web", "flagplane"),
	}}
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, SuccessTTL: time.Minute, now: func() time.Time { return now }}
	ctx := context.Background()

	id, err := a.Authenticate(ctx, later)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Expires).To(BeTemporally("==", time.Unix(5000, 0)))
	id, err = a.Authenticate(ctx, fractional)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Expires).To(BeTemporally("==", time.Unix(1000, 5e8)))
	id, err = a.Authenticate(ctx, namedJWT("no-exp"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Expires.IsZero()).To(BeTrue(), "a token without an exp claim has no known expiry")

	id, err = a.Authenticate(ctx, soon)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Expires).To(BeTemporally("==", time.Unix(1030, 0)))
	calls := reviewer.calls.Load()
	now = now.Add(29 * time.Second)
	_, _ = a.Authenticate(ctx, soon)
	g.Expect(reviewer.calls.Load()).To(Equal(calls), "cached until the token expires")
	now = now.Add(time.Second)
	_, _ = a.Authenticate(ctx, soon)
	g.Expect(reviewer.calls.Load()).To(Equal(calls+1), "the success is not reused past the token's expiry, though SuccessTTL is longer")
}

func TestTokenExpiryOfMalformedTokens(t *testing.T) {
	for _, token := range []string{
		"", "a.b", "a.b.c.d", "x." + base64.RawURLEncoding.EncodeToString([]byte(`not json`)) + ".s",
		jwt(`{}`), jwt(`{"exp":"soon"}`), jwt(`{"exp":-5}`), jwt(`{"exp":0}`), "x.!!!.s",
	} {
		if got := tokenExpiry(token); !got.IsZero() {
			t.Errorf("tokenExpiry(%q) = %v, want zero", token, got)
		}
	}
}

func TestTokenReviewsDoNotCacheAPIErrors(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{namedJWT("good"): saStatus("shop", "web", "flagplane")}}
	reviewer.fail.Store(true)
	a := &TokenReviews{Reviewer: reviewer}
	_, err := a.Authenticate(context.Background(), namedJWT("good"))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	reviewer.fail.Store(false)
	id, err := a.Authenticate(context.Background(), namedJWT("good"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Namespace).To(Equal("shop"))
}

func TestTokenReviewsShareConcurrentReviews(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{namedJWT("good"): saStatus("shop", "web", "flagplane")}, delay: 50 * time.Millisecond}
	a := &TokenReviews{Reviewer: reviewer}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := a.Authenticate(context.Background(), namedJWT("good"))
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
	wg.Wait()
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1))
}

func TestChain(t *testing.T) {
	g := NewWithT(t)
	ns := &NamespaceTokens{Keys: [][]byte{key(1)}}
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{namedJWT("jwt"): saStatus("shop", "web", "flagplane")}}
	chain := Chain{ns, &TokenReviews{Reviewer: reviewer}}
	tok, _ := ns.Issue("team-a")

	id, err := chain.Authenticate(context.Background(), tok)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Namespace).To(Equal("team-a"))
	g.Expect(reviewer.calls.Load()).To(BeZero(), "namespace tokens never reach the API server")

	id, err = chain.Authenticate(context.Background(), namedJWT("jwt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Namespace).To(Equal("shop"))

	_, err = chain.Authenticate(context.Background(), "nonsense")
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
	_, err = Chain{}.Authenticate(context.Background(), "x")
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
}

// reviewResults counts what a ReviewObserver hears.
type reviewResults struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *reviewResults) SyncTokenReview(result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[result]++
}

func (r *reviewResults) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

// forged is a token that passes every pre-check (a JWT for audience
// flagplane, not expired at the tests' clock) but no review: what an
// attacker who knows the format can make up by the million.
func forged(i int) string {
	return jwt(fmt.Sprintf(`{"aud":["flagplane"],"exp":%d,"jti":"%d"}`, 1000+3600, i))
}

// valid is a token of service account shop/name for audience flagplane,
// that the fake reviewer accepts; it expires at exp, or an hour after the
// tests' clock.
func valid(reviewer *fakeReviewer, name string, exp ...int64) string {
	t := jwt(fmt.Sprintf(`{"aud":["flagplane"],"exp":%d,"sub":%q}`, append(exp, 1000+3600)[0], name))
	reviewer.mu.Lock()
	defer reviewer.mu.Unlock()
	if reviewer.answers == nil {
		reviewer.answers = map[string]authnv1.TokenReviewStatus{}
	}
	reviewer.answers[t] = saStatus("shop", name, "flagplane")
	return t
}

func from(addr string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: 40000}})
}

// A flood of distinct forged tokens costs at most the budget of reviews:
// the burst at once, then QPS a second; the rest fail with Unavailable
// without reaching the API server.
func TestTokenReviewsFloodIsBudgeted(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{}
	results := &reviewResults{}
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, Limit: ReviewLimit{QPS: 10, Burst: 20}, Observer: results, now: func() time.Time { return now }}

	codesSeen := map[codes.Code]int{}
	for i := range 1000 {
		_, err := a.Authenticate(from("10.0.0.1"), forged(i))
		codesSeen[status.Code(err)]++
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(20))
	g.Expect(codesSeen).To(Equal(map[codes.Code]int{codes.Unauthenticated: 20, codes.Unavailable: 980}))

	now = now.Add(time.Second)
	for i := range 1000 {
		_, _ = a.Authenticate(from("10.0.0.1"), forged(1000+i))
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(30), "10 more a second")

	// Garbage that is not even a JWT for flagplane costs nothing.
	for i := range 1000 {
		_, err := a.Authenticate(from("10.0.0.1"), fmt.Sprint("garbage-", i))
		g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
		_, err = a.Authenticate(from("10.0.0.1"), jwt(fmt.Sprintf(`{"aud":"kubernetes","jti":"%d"}`, i)))
		g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(30))
	g.Expect(results.counts()).To(Equal(map[string]int{
		ReviewMade: 30, ReviewLimited: 1970, ReviewRejected: 2000,
	}))
}

// A bad token presented again and again is reviewed once per FailureTTL.
func TestTokenReviewsRepeatedBadTokenIsReviewedOnce(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{}
	results := &reviewResults{}
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, FailureTTL: 10 * time.Second, Limit: ReviewLimit{QPS: 1, Burst: 1}, Observer: results, now: func() time.Time { return now }}
	for range 1000 {
		_, err := a.Authenticate(from("10.0.0.1"), forged(1))
		g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated), "refused as the review refused it, not limited")
		now = now.Add(time.Millisecond)
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1))
	g.Expect(results.counts()).To(Equal(map[string]int{ReviewMade: 1, ReviewCachedRefusal: 999}))

	now = time.Unix(1010, 0) // the refusal expired
	_, _ = a.Authenticate(from("10.0.0.1"), forged(1))
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(2))
}

// Valid callers do not starve during a flood: a token that passed a review
// is answered from the cache, and reviewed again without the limit when
// the cached success has expired; refusals never push it out of the cache;
// and a new token from another address gets its review.
func TestTokenReviewsValidCallersDuringAFlood(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{}
	good, other := valid(reviewer, "web"), valid(reviewer, "api")
	now := time.Unix(1000, 0)
	a := &TokenReviews{
		Reviewer: reviewer, SuccessTTL: time.Minute, MaxEntries: 2, FailureMaxEntries: 10,
		Limit: ReviewLimit{QPS: 0.001, Burst: 30, PeerQPS: 0.001, PeerBurst: 10},
		now:   func() time.Time { return now },
	}
	_, err := a.Authenticate(from("10.0.0.2"), good)
	g.Expect(err).NotTo(HaveOccurred())

	forgeries := 0
	flood := func(from context.Context, n int) {
		for range n {
			forgeries++
			_, _ = a.Authenticate(from, forged(forgeries))
		}
	}
	flood(from("10.0.0.1"), 1000)
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1+10), "one address gets its own burst, no more")
	g.Expect(a.valid.len()).To(Equal(1), "refusals live in a cache of their own")

	id, err := a.Authenticate(from("10.0.0.2"), good)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.ServiceAccount).To(Equal("web"))
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(11), "answered from the cache")

	// Another address gets its review while the first is limited.
	id, err = a.Authenticate(from("10.0.0.3"), other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.ServiceAccount).To(Equal("api"))
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(12))

	// Many addresses spend the shared budget...
	for i := range 20 {
		flood(from(fmt.Sprint("10.0.1.", i)), 2)
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1+10+1+18), "the shared burst is spent")
	_, err = a.Authenticate(from("10.0.0.4"), valid(reviewer, "new"))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable), "a token never seen waits like any other")

	// ...but a token that passed a review is reviewed again, past its
	// cached success, without the limit.
	now = now.Add(2 * time.Minute)
	flood(from("10.0.0.1"), 100)
	calls := reviewer.calls.Load()
	id, err = a.Authenticate(from("10.0.0.2"), good)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.ServiceAccount).To(Equal("web"))
	g.Expect(reviewer.calls.Load()).To(Equal(calls+1), "reviewed again")

	// Revoked meanwhile: refused, and no longer exempt.
	reviewer.mu.Lock()
	reviewer.answers[other] = authnv1.TokenReviewStatus{Error: "the pod no longer exists"}
	reviewer.mu.Unlock()
	_, err = a.Authenticate(from("10.0.0.3"), other)
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
	_, _, known := a.valid.lookup(sha256.Sum256([]byte(other)), now)
	g.Expect(known).To(BeFalse())
}

// A concurrent flood, for the race detector: distinct forged tokens from
// many goroutines cost exactly the burst; a valid cached token is served
// throughout; concurrent presentations of one token share one review.
func TestTokenReviewsConcurrentFlood(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{}
	good := valid(reviewer, "web")
	results := &reviewResults{}
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, Limit: ReviewLimit{QPS: 0.001, Burst: 25}, Observer: results, now: func() time.Time { return now }}
	_, err := a.Authenticate(context.Background(), good)
	g.Expect(err).NotTo(HaveOccurred())

	var wg sync.WaitGroup
	var validFailures atomic.Int32
	for w := range 16 {
		wg.Go(func() {
			for i := range 100 {
				_, _ = a.Authenticate(from(fmt.Sprint("10.0.0.", w)), forged(w*1000+i))
				_, _ = a.Authenticate(from(fmt.Sprint("10.0.0.", w)), forged(-1)) // one token, everyone
				if _, err := a.Authenticate(from("10.0.9.9"), good); err != nil {
					validFailures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	g.Expect(validFailures.Load()).To(BeZero())
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(25), "the burst, the valid token's first review included")
	got := results.counts()
	g.Expect(got[ReviewMade]).To(Equal(25))
	g.Expect(got[ReviewCached]).To(Equal(16 * 100))
	g.Expect(got[ReviewMade] + got[ReviewLimited] + got[ReviewShared] + got[ReviewCachedRefusal]).To(Equal(1 + 2*16*100))
}

// The cache of refusals is bounded, whatever the flood.
func TestTokenReviewsBoundTheCaches(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{}
	good := valid(reviewer, "web")
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, MaxEntries: 10, FailureMaxEntries: 10, now: func() time.Time { return now }}
	_, err := a.Authenticate(context.Background(), good)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 1000 {
		_, _ = a.Authenticate(context.Background(), forged(i))
		g.Expect(a.refused.len()).To(BeNumerically("<=", 10))
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1001), "no limit set")
	_, err = a.Authenticate(context.Background(), good)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1001), "the success survived the refusals")

	// The last refusals are remembered, the first forgotten.
	_, _ = a.Authenticate(context.Background(), forged(999))
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1001))
	_, _ = a.Authenticate(context.Background(), forged(0))
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1002))
}

// A token that passed a review is exempt from the limit only until it
// expires; after that the pre-checks refuse it without a review.
func TestTokenReviewsExemptionEndsWithTheToken(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{}
	soon := jwt(`{"aud":"flagplane","exp":1100}`)
	reviewer.answers = map[string]authnv1.TokenReviewStatus{soon: saStatus("shop", "web", "flagplane")}
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, SuccessTTL: time.Minute, Limit: ReviewLimit{QPS: 0.001, Burst: 1}, now: func() time.Time { return now }}
	_, err := a.Authenticate(context.Background(), soon)
	g.Expect(err).NotTo(HaveOccurred())

	now = time.Unix(1070, 0) // past SuccessTTL, before exp; the bucket is empty
	_, err = a.Authenticate(context.Background(), soon)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(2))

	now = time.Unix(1100, 0) // expired, within the leeway: no longer exempt
	_, err = a.Authenticate(context.Background(), soon)
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	now = time.Unix(1161, 0) // past the leeway: refused before any limit
	_, err = a.Authenticate(context.Background(), soon)
	g.Expect(err).To(MatchError(ContainSubstring("expired at")))
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(2))
}

// Over gRPC: a client that floods the sync server with made-up tokens from
// one address gets Unavailable past its budget, which the API server never
// sees, while a subscriber at another address with a new token subscribes.
func TestSyncServerUnderATokenFlood(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{}
	exp := time.Now().Add(time.Hour).Unix()
	newToken := func(name string, accepted bool) string {
		if accepted {
			return valid(reviewer, name, exp)
		}
		return jwt(fmt.Sprintf(`{"aud":["flagplane"],"exp":%d,"sub":%q}`, exp, name))
	}
	good := newToken("web", true)
	obs := newRecordingObserver()
	h := newHarness(t, func(o *Options) {
		o.Observer = obs
		o.Authenticator = Chain{&TokenReviews{
			Reviewer: reviewer,
			Limit:    ReviewLimit{QPS: 100, Burst: 100, PeerQPS: 0.001, PeerBurst: 5},
			Observer: obs,
		}}
	})
	ff := h.flagSet("shop", "checkout", "off")

	// 127.0.0.1 subscribes with a good token, then floods.
	attacker := h.client(t, "")
	sub := subscribe(t, h.client(t, good), checkoutSelector)
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))
	for i := range 200 {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+newToken(fmt.Sprint("forged-", i), false))
		_, err := attacker.FetchAllFlags(ctx, &syncv1.FetchAllFlagsRequest{Selector: checkoutSelector})
		g.Expect(status.Code(err)).To(BeElementOf(codes.Unauthenticated, codes.Unavailable))
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1+4), "the good token, then what is left of the address's burst")
	_, refused := obs.counts()
	g.Expect(refused).To(Equal(map[string]int{"Unauthenticated": 4, "Unavailable": 196}))
	g.Expect(obs.reviewResults.counts()).To(Equal(map[string]int{ReviewMade: 5, ReviewLimited: 196}))

	// The first subscriber still gets every change; its token is cached.
	ff = withDefault(ff, "on")
	h.setFlagSet(ff)
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))
	resp, err := h.client(t, good).FetchAllFlags(context.Background(), &syncv1.FetchAllFlagsRequest{Selector: checkoutSelector})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetFlagConfiguration()).To(Equal(rendered(t, ff)))

	// A new token from another address is reviewed and served.
	fromElsewhere := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		return d.DialContext(ctx, "tcp", addr)
	})
	other := subscribe(t, h.client(t, newToken("api", true), fromElsewhere), checkoutSelector)
	g.Expect(other.next(t)).To(Equal(rendered(t, ff)))
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(6))
}
