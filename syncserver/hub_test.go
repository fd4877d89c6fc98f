package syncserver

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

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

	a, b := h.join(checkout, "shop", ""), h.join(checkout, "shop", "")
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

// The hub serves the graph's rendering of a flag set, its content and
// revision as the topology made them when it took the edit: it renders
// nothing itself, however many subscribers join, round after round.
func TestHubServesTheGraphsRendering(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	h := newHub(w.topo)
	checkout := topology.FlagSetKey("shop", "checkout")
	ff := w.flagSet("shop", "checkout", "off")
	var subs []*subscriber
	for range 50 {
		subs = append(subs, h.join(checkout, "shop", ""))
		h.round()
	}
	g.Expect(h.stats().Publishes).To(BeEquivalentTo(50))
	r, _ := w.topo.Snapshot().FlagSetRendered(checkout)
	for _, s := range subs {
		u := s.latest.Load()
		g.Expect(unsafe.StringData(u.content)).To(Equal(unsafe.StringData(r.Content)), "the graph's string, not a copy")
		g.Expect(u.revision).To(Equal(r.Revision))
		g.Expect(u).To(BeIdenticalTo(subs[0].latest.Load()))
	}

	w.setFlagSet(withDefault(ff, "on"))
	h.changed([]topology.Key{checkout})
	h.round()
	r, _ = w.topo.Snapshot().FlagSetRendered(checkout)
	g.Expect(unsafe.StringData(subs[0].latest.Load().content)).To(Equal(unsafe.StringData(r.Content)))
	g.Expect(subs[0].latest.Load().revision).To(Equal(r.Revision))
}

// Subscribers are offered a state connection by connection, however they
// joined, so that each connection's writer finds its messages together.
func TestSubscriberSetGroupsByConnection(t *testing.T) {
	g := NewWithT(t)
	set := newSubscriberSet()
	var subs []*subscriber
	for i := range 30 {
		s := &subscriber{conn: fmt.Sprintf("10.0.0.%d:4000", i%3)}
		subs = append(subs, s)
		set.add(s)
		set.add(s) // twice changes nothing
	}
	g.Expect(set.n).To(Equal(30))

	var order []string
	set.each(func(s *subscriber) { order = append(order, s.conn) })
	g.Expect(order).To(HaveLen(30))
	switches := 0
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1] {
			switches++
		}
	}
	g.Expect(switches).To(Equal(2), "three connections, each one's subscribers together: %v", order)

	for _, s := range subs[:15] {
		set.remove(s)
		set.remove(s)
	}
	g.Expect(set.n).To(Equal(15))
	g.Expect(set.has(subs[0])).To(BeFalse())
	g.Expect(set.has(subs[29])).To(BeTrue())
	for _, s := range subs[15:] {
		set.remove(s)
	}
	g.Expect(set.n).To(BeZero())
	g.Expect(set.byConn).To(BeEmpty())
	g.Expect(set.conns).To(BeEmpty())
}

// A change offered to the streams is timed once, from when the hub was told
// of it; a first state, a join and a change that renders the same content
// are not.
func TestHubTimesPushes(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	h := newHub(w.topo)
	var pushes []time.Duration
	h.pushed = func(d time.Duration) { pushes = append(pushes, d) }
	checkout := topology.FlagSetKey("shop", "checkout")
	ff := w.flagSet("shop", "checkout", "off")
	sub := h.join(checkout, "shop", "")
	h.round()
	g.Expect(pushes).To(BeEmpty(), "a first state is no change pushed")

	w.setFlagSet(withDefault(ff, "on"))
	h.changed([]topology.Key{checkout})
	time.Sleep(5 * time.Millisecond)
	h.changed([]topology.Key{checkout}) // a second tell before the round: timed from the first
	h.round()
	g.Expect(pushes).To(HaveLen(1))
	g.Expect(pushes[0]).To(BeNumerically(">=", 5*time.Millisecond))
	g.Expect(sub.latest.Load().content).To(ContainSubstring(`"defaultVariant":"on"`))

	h.changed([]topology.Key{checkout}) // nothing new to push
	h.round()
	g.Expect(pushes).To(HaveLen(1))
	g.Expect(h.changedAt).To(BeEmpty())
}
