package syncserver

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func keyOf(s string) tokenKey { return sha256.Sum256([]byte(s)) }

func TestRefusedTokens(t *testing.T) {
	now := time.Unix(1000, 0)
	refused := errors.New("refused")
	t.Run("bounded, the oldest out first", func(t *testing.T) {
		g := NewWithT(t)
		c := &refusedTokens{ttl: time.Minute, max: 10}
		for i := range 100 {
			c.add(keyOf(fmt.Sprint(i)), refused, now.Add(time.Duration(i)*time.Millisecond))
			g.Expect(c.len()).To(BeNumerically("<=", 10))
			g.Expect(len(c.order)).To(BeNumerically("<=", 20))
		}
		for i := range 100 {
			_, ok := c.lookup(keyOf(fmt.Sprint(i)), now.Add(time.Second))
			g.Expect(ok).To(Equal(i >= 90), "token %d", i)
		}
	})
	t.Run("entries expire", func(t *testing.T) {
		g := NewWithT(t)
		c := &refusedTokens{ttl: 10 * time.Second, max: 10}
		c.add(keyOf("a"), refused, now)
		err, ok := c.lookup(keyOf("a"), now.Add(9*time.Second))
		g.Expect(ok).To(BeTrue())
		g.Expect(err).To(Equal(refused))
		_, ok = c.lookup(keyOf("a"), now.Add(10*time.Second))
		g.Expect(ok).To(BeFalse())

		// Expired entries make room before live ones go.
		c.add(keyOf("b"), refused, now.Add(10*time.Second))
		g.Expect(c.len()).To(Equal(1))
	})
	t.Run("a token refused twice is not forgotten with its first refusal", func(t *testing.T) {
		// Two reviews of one token can end one after the other (a second
		// call that missed the cache just before the first stored).
		g := NewWithT(t)
		c := &refusedTokens{ttl: 10 * time.Second, max: 3}
		c.add(keyOf("a"), refused, now)
		c.add(keyOf("a"), refused, now.Add(time.Second))
		c.add(keyOf("b"), refused, now.Add(10*time.Second)) // drops the first "a" from the queue
		_, ok := c.lookup(keyOf("a"), now.Add(10*time.Second))
		g.Expect(ok).To(BeTrue())
		_, ok = c.lookup(keyOf("a"), now.Add(11*time.Second))
		g.Expect(ok).To(BeFalse())
	})
}

func TestValidTokens(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	c := &validTokens{max: 4}
	id := Identity{Namespace: "shop"}
	c.add(keyOf("a"), validToken{id: id, fresh: now.Add(time.Minute), known: now.Add(time.Hour)}, now)

	got, fresh, known := c.lookup(keyOf("a"), now)
	g.Expect([]any{got, fresh, known}).To(Equal([]any{id, true, true}))
	_, fresh, known = c.lookup(keyOf("a"), now.Add(time.Minute))
	g.Expect([]any{fresh, known}).To(Equal([]any{false, true}), "reviewed again, without a limit")
	_, fresh, known = c.lookup(keyOf("a"), now.Add(time.Hour))
	g.Expect([]any{fresh, known}).To(Equal([]any{false, false}), "an expired token is a stranger")

	for i := range 20 {
		c.add(keyOf(fmt.Sprint(i)), validToken{id: id, fresh: now.Add(time.Minute), known: now.Add(time.Hour)}, now)
		g.Expect(c.len()).To(BeNumerically("<=", 4))
	}
	c.forget(keyOf("19"))
	_, _, known = c.lookup(keyOf("19"), now)
	g.Expect(known).To(BeFalse())
}
