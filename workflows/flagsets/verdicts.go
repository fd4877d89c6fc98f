package flagsets

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// verdict is what ValidateFlagSpec finds in a flag set: its errors, and
// its warnings (which a strict Validator makes errors when read).
type verdict struct {
	errs     error
	warnings []string
}

// verdictCache remembers a Validator's answers by the content of the flag
// set. One flag set is validated for its own status, for every ConfigMap
// that renders it and for the status of every source that reads it, and the
// JSON-schema layer costs milliseconds per flag set; its content (not its
// name or generation, which offline and test objects do not keep honest) is
// what the verdict depends on.
type verdictCache struct {
	mu    sync.Mutex
	max   int
	byKey map[[32]byte]verdict
	order [][32]byte // insertion order, for eviction
}

func newVerdictCache(max int) *verdictCache {
	return &verdictCache{max: max, byKey: make(map[[32]byte]verdict, max)}
}

// validate returns the verdict on spec, computing it when not known.
func (c *verdictCache) validate(spec *v1beta1.FlagSpec, compute func() verdict) verdict {
	b, err := json.Marshal(spec)
	if err != nil {
		return compute()
	}
	key := sha256.Sum256(b)
	c.mu.Lock()
	v, ok := c.byKey[key]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = compute()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; !ok {
		if len(c.order) >= c.max {
			delete(c.byKey, c.order[0])
			c.order = c.order[1:]
		}
		c.byKey[key] = v
		c.order = append(c.order, key)
	}
	return v
}
