package syncserver

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
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

// Defaults of TokenReviews.
const (
	DefaultSuccessTTL       = time.Minute
	DefaultFailureTTL       = 10 * time.Second
	DefaultCacheSize        = 4096
	DefaultFailureCacheSize = 4096
)

// TokenReviewer creates TokenReviews; a controller-runtime client is one.
type TokenReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// TokenReviews authenticates Kubernetes service-account tokens (typically a
// projected, audience-bound token that the kubelet rotates) with the API
// server's TokenReview. The identity is the token's service account and its
// namespace; tokens of other users are refused.
//
// Anyone who can reach the sync port can present tokens, so what a caller
// can make it ask the API server is bounded:
//
//   - a token that passed a review is reused for SuccessTTL, and until it
//     expires it is reviewed again without any limit (valid callers never
//     wait for the others);
//   - a token that failed one is refused for FailureTTL without a review,
//     from a cache of its own (FailureMaxEntries), so that refusals never
//     push successes out;
//   - a token that no review could accept (longer than MaxTokenBytes, not a
//     JWT, expired, for another audience: see precheck) is refused at once;
//   - concurrent reviews of the same token share one request;
//   - the other reviews are bounded by Limit, past which calls fail with
//     Unavailable.
//
// Caches are keyed by a hash of the token. Errors reaching the API server
// are not cached. The fields must not change once Authenticate is called.
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
	// MaxEntries bounds the cache of successes, FailureMaxEntries that of
	// refusals (default 4096 each).
	MaxEntries, FailureMaxEntries int
	// MaxTokenBytes: longer tokens are refused without a review
	// (DefaultMaxTokenBytes).
	MaxTokenBytes int
	// Limit bounds the reviews of tokens that have not passed one; the zero
	// value does not limit them.
	Limit ReviewLimit
	// Observer, when set, hears how each token was answered.
	Observer ReviewObserver

	now     func() time.Time
	flight  singleflight.Group
	init    sync.Once
	valid   *validTokens
	refused *refusedTokens
	limiter *reviewLimiter
}

// ReviewObserver hears how TokenReviews answered each token presented to
// it: one of the Review* results.
type ReviewObserver interface {
	SyncTokenReview(result string)
}

// How TokenReviews answered a token, as ReviewObserver hears it.
const (
	// ReviewMade: a TokenReview was sent to the API server.
	ReviewMade = "reviewed"
	// ReviewCached: a success of an earlier review was reused.
	ReviewCached = "cached"
	// ReviewCachedRefusal: a refusal of an earlier review was reused.
	ReviewCachedRefusal = "cached_refusal"
	// ReviewShared: a concurrent review of the same token answered it.
	ReviewShared = "shared"
	// ReviewLimited: refused by ReviewLimit, without a review.
	ReviewLimited = "limited"
	// ReviewRejected: refused by the checks of the token's form, without a
	// review.
	ReviewRejected = "rejected"
)

var _ Authenticator = (*TokenReviews)(nil)

// serviceAccountPrefix starts the user name of every service account.
const serviceAccountPrefix = "system:serviceaccount:"

// podNameExtra is the TokenReview extra that names the pod a token is bound to.
const podNameExtra = "authentication.kubernetes.io/pod-name"

// Authenticate implements Authenticator.
func (t *TokenReviews) Authenticate(ctx context.Context, token string) (Identity, error) {
	t.init.Do(t.setUp)
	now := t.clock()
	// Before hashing: the header may be megabytes long.
	if len(token) > t.MaxTokenBytes {
		t.observe(ReviewRejected)
		return Identity{}, status.Errorf(codes.Unauthenticated, "the token is longer than %d bytes", t.MaxTokenBytes)
	}
	key := sha256.Sum256([]byte(token))
	if id, fresh, _ := t.valid.lookup(key, now); fresh {
		t.observe(ReviewCached)
		return id, nil
	}
	if err, ok := t.refused.lookup(key, now); ok {
		t.observe(ReviewCachedRefusal)
		return Identity{}, err
	}
	if err := precheck(token, t.audience(), t.MaxTokenBytes, now); err != nil {
		t.observe(ReviewRejected)
		return Identity{}, status.Error(codes.Unauthenticated, err.Error())
	}
	addr := peerAddress(ctx)
	led := false
	v, err, _ := t.flight.Do(string(key[:]), func() (any, error) {
		led = true
		if _, _, known := t.valid.lookup(key, now); !known {
			if err := t.limiter.allow(addr, now); err != nil {
				t.observe(ReviewLimited)
				return nil, err
			}
		}
		t.observe(ReviewMade)
		id, verdict, err := t.review(ctx, token)
		if err != nil {
			return nil, err // not cached: the next request tries again
		}
		t.store(key, id, verdict)
		return reviewResult{id: id, err: verdict}, nil
	})
	if !led {
		t.observe(ReviewShared)
	}
	if err != nil {
		return Identity{}, err
	}
	r := v.(reviewResult)
	return r.id, r.err
}

type reviewResult struct {
	id  Identity
	err error
}

// setUp applies the defaults.
func (t *TokenReviews) setUp() {
	t.SuccessTTL = ttl(t.SuccessTTL, DefaultSuccessTTL)
	t.FailureTTL = ttl(t.FailureTTL, DefaultFailureTTL)
	t.MaxTokenBytes = cmp.Or(max(t.MaxTokenBytes, 0), DefaultMaxTokenBytes)
	t.valid = &validTokens{max: cmp.Or(max(t.MaxEntries, 0), DefaultCacheSize)}
	t.refused = &refusedTokens{ttl: t.FailureTTL, max: cmp.Or(max(t.FailureMaxEntries, 0), DefaultFailureCacheSize)}
	t.limiter = newReviewLimiter(t.Limit)
}

func (t *TokenReviews) observe(result string) {
	if t.Observer != nil {
		t.Observer.SyncTokenReview(result)
	}
}

func (t *TokenReviews) audience() string {
	if t.Audience == "" {
		return DefaultAudience
	}
	return t.Audience
}

// review asks the API server. err is only for a failed request; the verdict
// on the token is id, or the refusal.
func (t *TokenReviews) review(ctx context.Context, token string) (id Identity, verdict, err error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{t.audience()}}}
	if err = t.Reviewer.Create(ctx, tr); err != nil {
		return Identity{}, nil, status.Errorf(codes.Unavailable, "checking the token with a TokenReview: %v", err)
	}
	refuse := func(code codes.Code, format string, args ...any) (Identity, error, error) {
		return Identity{}, status.Errorf(code, format, args...), nil
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
	id = Identity{Namespace: ns, ServiceAccount: sa, Expires: tokenExpiry(token)}
	if pods := st.User.Extra[podNameExtra]; len(pods) == 1 {
		id.Pod = pods[0]
	}
	return id, nil, nil
}

// store caches the verdict of a review: a success until SuccessTTL or the
// token's expiry, whichever is first, and known until the token's expiry;
// a refusal for FailureTTL, forgetting any success of the token.
func (t *TokenReviews) store(key tokenKey, id Identity, verdict error) {
	now := t.clock()
	if verdict != nil {
		t.valid.forget(key)
		t.refused.add(key, verdict, now)
		return
	}
	v := validToken{id: id, fresh: now.Add(t.SuccessTTL)}
	if !id.Expires.IsZero() && id.Expires.Before(v.fresh) {
		v.fresh = id.Expires
	}
	// Without an expiry, nothing says how long the review holds: known
	// only while fresh.
	v.known = v.fresh
	if id.Expires.After(v.known) {
		v.known = id.Expires
	}
	t.valid.add(key, v, now)
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
