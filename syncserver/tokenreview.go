package syncserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// DefaultAudience is the audience that service-account tokens for the sync
// server must be issued for (a projected token's `audience`). A token for
// another audience, the API server's in particular, is refused: a subscriber
// never hands flagplane a credential that would work anywhere else.
const DefaultAudience = "flagplane"

// TokenReviewer creates TokenReviews; a controller-runtime client is one.
type TokenReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// TokenReviews authenticates Kubernetes service-account tokens (typically a
// projected, audience-bound token that the kubelet rotates) with the API
// server's TokenReview. The identity is the token's service account and its
// namespace; tokens of other users are refused.
//
// Results are cached by a hash of the token: successes for SuccessTTL,
// refusals for FailureTTL. Concurrent reviews of the same token share one
// request. Errors reaching the API server are not cached.
type TokenReviews struct {
	Reviewer TokenReviewer
	// Audience the tokens must be issued for; DefaultAudience when empty.
	Audience string
	// SuccessTTL (default 1m) and FailureTTL (default 10s) bound how long a
	// result is reused, and a success is never reused past the token's own
	// expiry. A revoked token keeps working for at most SuccessTTL when it
	// opens a new stream; a stream already open ends when its token expires
	// (Identity.Expires, the token's "exp" claim).
	SuccessTTL, FailureTTL time.Duration
	// MaxEntries bounds the cache (default 4096).
	MaxEntries int

	now    func() time.Time
	flight singleflight.Group
	mu     sync.Mutex
	cache  map[[sha256.Size]byte]reviewResult
}

type reviewResult struct {
	id      Identity
	err     error
	expires time.Time
}

var _ Authenticator = (*TokenReviews)(nil)

// serviceAccountPrefix starts the user name of every service account.
const serviceAccountPrefix = "system:serviceaccount:"

// podNameExtra is the TokenReview extra that names the pod a token is bound to.
const podNameExtra = "authentication.kubernetes.io/pod-name"

// Authenticate implements Authenticator.
func (t *TokenReviews) Authenticate(ctx context.Context, token string) (Identity, error) {
	key := sha256.Sum256([]byte(token))
	if r, ok := t.cached(key); ok {
		return r.id, r.err
	}
	v, err, _ := t.flight.Do(string(key[:]), func() (any, error) {
		r, err := t.review(ctx, token)
		if err != nil {
			return nil, err // not cached: the next request tries again
		}
		t.store(key, r)
		return r, nil
	})
	if err != nil {
		return Identity{}, err
	}
	r := v.(reviewResult)
	return r.id, r.err
}

func (t *TokenReviews) audience() string {
	if t.Audience == "" {
		return DefaultAudience
	}
	return t.Audience
}

// review asks the API server. The error is only for a failed request; the
// verdict on the token is in the result.
func (t *TokenReviews) review(ctx context.Context, token string) (reviewResult, error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{t.audience()}}}
	if err := t.Reviewer.Create(ctx, tr); err != nil {
		return reviewResult{}, status.Errorf(codes.Unavailable, "checking the token with a TokenReview: %v", err)
	}
	now := t.clock()
	refuse := func(code codes.Code, format string, args ...any) (reviewResult, error) {
		return reviewResult{err: status.Errorf(code, format, args...), expires: now.Add(ttl(t.FailureTTL, 10*time.Second))}, nil
	}
	st := tr.Status
	if !st.Authenticated {
		msg := "the token is not valid"
		if st.Error != "" {
			msg += ": " + st.Error
		}
		return refuse(codes.Unauthenticated, "%s", msg)
	}
	// An authenticator that ignores audiences answers without any; only an
	// explicit match proves the token was meant for flagplane.
	if !slices.Contains(st.Audiences, t.audience()) {
		return refuse(codes.Unauthenticated, "the token is not issued for audience %q", t.audience())
	}
	ns, sa, ok := strings.Cut(strings.TrimPrefix(st.User.Username, serviceAccountPrefix), ":")
	if !strings.HasPrefix(st.User.Username, serviceAccountPrefix) || !ok || ns == "" || sa == "" {
		return refuse(codes.PermissionDenied, "user %q is not a service account: only workloads may subscribe", st.User.Username)
	}
	id := Identity{Namespace: ns, ServiceAccount: sa, Expires: tokenExpiry(token)}
	if pods := st.User.Extra[podNameExtra]; len(pods) == 1 {
		id.Pod = pods[0]
	}
	expires := now.Add(ttl(t.SuccessTTL, time.Minute))
	if !id.Expires.IsZero() && id.Expires.Before(expires) {
		expires = id.Expires
	}
	return reviewResult{id: id, expires: expires}, nil
}

// tokenExpiry reads the "exp" claim of a JWT, zero when the token is not a
// JWT or has none. The signature is not checked here: it is only called on
// a token the API server has just accepted, and only to learn when that
// acceptance ends.
func tokenExpiry(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == "" {
		return time.Time{}
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 {
		return time.Time{}
	}
	sec, frac := math.Modf(exp)
	return time.Unix(int64(sec), int64(frac*1e9))
}

func (t *TokenReviews) cached(key [sha256.Size]byte) (reviewResult, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.cache[key]
	if !ok || !t.clock().Before(r.expires) {
		return reviewResult{}, false
	}
	return r, true
}

func (t *TokenReviews) store(key [sha256.Size]byte, r reviewResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cache == nil {
		t.cache = map[[sha256.Size]byte]reviewResult{}
	}
	limit := t.MaxEntries
	if limit <= 0 {
		limit = 4096
	}
	if len(t.cache) >= limit {
		now := t.clock()
		for k, old := range t.cache {
			if !now.Before(old.expires) {
				delete(t.cache, k)
			}
		}
		// Still full of live entries: forget an arbitrary half. A forgotten
		// token costs one more review, never a wrong answer.
		for k := range t.cache {
			if len(t.cache) < limit/2 {
				break
			}
			delete(t.cache, k)
		}
	}
	t.cache[key] = r
}

func (t *TokenReviews) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

func ttl(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// String describes the authenticator for logs.
func (t *TokenReviews) String() string {
	return fmt.Sprintf("service-account tokens for audience %q (TokenReview)", t.audience())
}
