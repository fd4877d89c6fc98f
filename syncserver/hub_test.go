package syncserver

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
)

// Offers never block, and the one state a subscriber finds after any number
// of offers is the newest.
func TestOffersCoalesceToTheNewest(t *testing.T) {
	g := NewWithT(t)
	s := &subscriber{wake: make(chan struct{}, 1)}
	for i := range uint64(1000) {
		s.offer(&update{version: i + 1})
	}
	g.Expect(s.wake).To(HaveLen(1))
	g.Expect(s.latest.Load().version).To(BeEquivalentTo(1000))
}

// The hub forgets a flag set with its last subscriber, and hears of changes
// only to flag sets that have subscribers.
func TestHubBookkeeping(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	h := newHub(w.topo)
	checkout := topology.FlagSetKey("shop", "checkout")
	w.flagSet("shop", "checkout", "off")

	h.changed([]topology.Key{checkout})
	g.Expect(h.pending).To(BeEmpty())

	a, b := h.join(checkout, "shop"), h.join(checkout, "shop")
	h.round()
	g.Expect(a.latest.Load()).NotTo(BeNil())
	g.Expect(a.latest.Load()).To(BeIdenticalTo(b.latest.Load()), "one rendering shared by all subscribers")
	g.Expect(h.stats()).To(And(HaveField("Subscribers", 2), HaveField("FlagSets", 1)))

	h.changed([]topology.Key{checkout, topology.FlagSetKey("shop", "other")})
	g.Expect(h.pending).To(HaveLen(1))
	h.leave(a)
	h.leave(b)
	g.Expect(h.subs).To(BeEmpty())
	g.Expect(h.states).To(BeEmpty())
	g.Expect(h.pending).To(BeEmpty())
	h.round() // nothing left to do, and nothing to crash on
}

// Newcomers joining round after round get the rendering of the same object;
// only a new object (an edit) is rendered again.
func TestHubRendersEachObjectOnce(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	h := newHub(w.topo)
	checkout := topology.FlagSetKey("shop", "checkout")
	ff := w.flagSet("shop", "checkout", "off")
	for range 50 {
		h.join(checkout, "shop")
		h.round()
	}
	g.Expect(h.stats().Renders).To(BeEquivalentTo(1))
	g.Expect(h.stats().Publishes).To(BeEquivalentTo(50))

	w.setFlagSet(withDefault(ff, "on"))
	h.changed([]topology.Key{checkout})
	h.round()
	g.Expect(h.stats().Renders).To(BeEquivalentTo(2))
}
