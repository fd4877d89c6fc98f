package syncserver

import (
	"crypto/sha256"
	"sync"
	"time"
)

// tokenKey is the SHA-256 of a token: the caches hold no token.
type tokenKey = [sha256.Size]byte

// validTokens remembers the tokens that passed a review.
type validTokens struct {
	max int
	mu  sync.Mutex
	m   map[tokenKey]validToken
}

type validToken struct {
	id Identity
	// fresh: until then the identity is reused without a review.
	fresh time.Time
	// known: until then (the token's expiry) a review of the token is not
	// rate-limited: it passed one before, so it is no attacker's garbage.
	known time.Time
}

// lookup returns the entry of a token: fresh when it may be reused as is,
// known when it may be reviewed again without a limit.
func (c *validTokens) lookup(k tokenKey, now time.Time) (id Identity, fresh, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if !ok || !now.Before(v.known) {
		return Identity{}, false, false
	}
	return v.id, now.Before(v.fresh), true
}

func (c *validTokens) add(k tokenKey, v validToken, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[tokenKey]validToken{}
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old, e := range c.m {
			if !now.Before(e.known) {
				delete(c.m, old)
			}
		}
		// Still full of live entries: forget an arbitrary half. A forgotten
		// token costs one more review, never a wrong answer. Only tokens
		// that passed a review get here: refusals cannot push them out.
		for old := range c.m {
			if len(c.m) < c.max/2 {
				break
			}
			delete(c.m, old)
		}
	}
	c.m[k] = v
}

func (c *validTokens) forget(k tokenKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

func (c *validTokens) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// refusedTokens remembers the refusals of reviews for a fixed TTL, at most
// max of them: a token refused once is refused again without a review
// until its entry expires or is pushed out. Every entry lives equally
// long, so the oldest is the first to expire: entries leave in the order
// they came, expired first, then the oldest when full.
type refusedTokens struct {
	ttl time.Duration
	max int
	mu  sync.Mutex
	m   map[tokenKey]refusal
	// order holds the keys in the order they were added, with the expiry
	// they were added with: a key added again later has a newer one.
	order []queuedRefusal
}

type refusal struct {
	err     error
	expires time.Time
}

type queuedRefusal struct {
	key     tokenKey
	expires time.Time
}

// lookup returns the refusal cached for k while it lasts, and whether there
// is one, as a map's comma-ok index does.
func (c *refusedTokens) lookup(k tokenKey, now time.Time) (error, bool) { //nolint:revive // The error is the value looked up, not a failure.
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	if !ok || !now.Before(r.expires) {
		return nil, false
	}
	return r.err, true
}

func (c *refusedTokens) add(k tokenKey, err error, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[tokenKey]refusal{}
	}
	for len(c.order) > 0 && (!now.Before(c.order[0].expires) || len(c.m) >= c.max || len(c.order) > 2*c.max) {
		c.dropOldest()
	}
	r := refusal{err: err, expires: now.Add(c.ttl)}
	c.m[k] = r
	c.order = append(c.order, queuedRefusal{key: k, expires: r.expires})
}

// dropOldest removes the first key of order, and its entry unless the key
// was added again since.
func (c *refusedTokens) dropOldest() {
	q := c.order[0]
	c.order[0] = queuedRefusal{}
	c.order = c.order[1:]
	if r, ok := c.m[q.key]; ok && r.expires.Equal(q.expires) {
		delete(c.m, q.key)
	}
}

func (c *refusedTokens) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
