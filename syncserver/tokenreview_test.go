package syncserver

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
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
	f.lastAud = tr.Spec.Audiences
	f.mu.Unlock()
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

func TestTokenReviews(t *testing.T) {
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{
		"good":         saStatus("shop", "web", "flagplane"),
		"api-audience": saStatus("shop", "web", "https://kubernetes.default.svc"),
		"no-audience":  saStatus("shop", "web"),
		"user":         {Authenticated: true, Audiences: []string{"flagplane"}, User: authnv1.UserInfo{Username: "alice"}},
		"sa-malformed": {Authenticated: true, Audiences: []string{"flagplane"}, User: authnv1.UserInfo{Username: "system:serviceaccount:shop"}},
		"expired":      {Authenticated: false, Error: "token has expired"},
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
			id, err := a.Authenticate(context.Background(), tc.token)
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
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{"good": saStatus("shop", "web", "flagplane")}}
	now := time.Unix(1000, 0)
	a := &TokenReviews{Reviewer: reviewer, SuccessTTL: time.Minute, FailureTTL: 10 * time.Second, now: func() time.Time { return now }}
	ctx := context.Background()

	for range 3 {
		_, err := a.Authenticate(ctx, "good")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = a.Authenticate(ctx, "bad")
		g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
	}
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(2), "one review per token while cached")

	now = now.Add(11 * time.Second) // the refusal expired, the success not
	_, _ = a.Authenticate(ctx, "good")
	_, _ = a.Authenticate(ctx, "bad")
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(3))

	now = now.Add(time.Minute)
	_, _ = a.Authenticate(ctx, "good")
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
		fractional: saStatus("shop", "web", "flagplane"), "opaque": saStatus("shop", "web", "flagplane"),
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
	id, err = a.Authenticate(ctx, "opaque")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Expires.IsZero()).To(BeTrue(), "a token that is not a JWT has no known expiry")

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
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{"good": saStatus("shop", "web", "flagplane")}}
	reviewer.fail.Store(true)
	a := &TokenReviews{Reviewer: reviewer}
	_, err := a.Authenticate(context.Background(), "good")
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	reviewer.fail.Store(false)
	id, err := a.Authenticate(context.Background(), "good")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Namespace).To(Equal("shop"))
}

func TestTokenReviewsShareConcurrentReviews(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{"good": saStatus("shop", "web", "flagplane")}, delay: 50 * time.Millisecond}
	a := &TokenReviews{Reviewer: reviewer}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := a.Authenticate(context.Background(), "good")
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
	wg.Wait()
	g.Expect(reviewer.calls.Load()).To(BeEquivalentTo(1))
}

func TestTokenReviewsBoundTheCache(t *testing.T) {
	g := NewWithT(t)
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{}}
	a := &TokenReviews{Reviewer: reviewer, MaxEntries: 10}
	for i := range 100 {
		_, _ = a.Authenticate(context.Background(), string(rune('a'+i)))
	}
	g.Expect(len(a.cache)).To(BeNumerically("<=", 10))
}

func TestChain(t *testing.T) {
	g := NewWithT(t)
	ns := &NamespaceTokens{Keys: [][]byte{key(1)}}
	reviewer := &fakeReviewer{answers: map[string]authnv1.TokenReviewStatus{"jwt": saStatus("shop", "web", "flagplane")}}
	chain := Chain{ns, &TokenReviews{Reviewer: reviewer}}
	tok, _ := ns.Issue("team-a")

	id, err := chain.Authenticate(context.Background(), tok)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Namespace).To(Equal("team-a"))
	g.Expect(reviewer.calls.Load()).To(BeZero(), "namespace tokens never reach the API server")

	id, err = chain.Authenticate(context.Background(), "jwt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Namespace).To(Equal("shop"))

	_, err = chain.Authenticate(context.Background(), "nonsense")
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
	_, err = Chain{}.Authenticate(context.Background(), "x")
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
}
