package syncserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flagplane/flagplane/topology"
)

// Snapshotter gives views of the topology; *topology.Topology is one.
type Snapshotter interface {
	Snapshot() *topology.View
}

var _ Snapshotter = (*topology.Topology)(nil)

// update is one state for a subscriber: a flag set's content, or the verdict
// that the subscriber may no longer read it. Updates are immutable and
// shared by all subscribers of a flag set.
type update struct {
	// version is unique per distinct content, hub-wide, so that a subscriber
	// sends a content once however often it is offered.
	version uint64
	content string
	// revision is the revision of content, as the topology rendered it
	// (topology.Rendered.Revision): what the status of the flag set calls it.
	revision string
	// encoded is the SyncFlagsResponse of content, encoded once.
	encoded *encodedResponse
	denied  bool
}

// denied ends a subscriber's stream with PermissionDenied.
var denied = &update{denied: true}

// subscriber is one open SyncFlags stream. The hub offers it states by
// replacing latest (latest-value coalescing: a slow subscriber skips the
// states it had no time to send, never the newest) and waking it; its stream
// goroutine sends. The hub never waits for a subscriber.
//
// Everything that concerns a stream wakes it through the same channel: a
// new state, and the end of the stream (ended), so that a wake-up is one
// channel receive, not a select over several.
type subscriber struct {
	flagSet   topology.Key
	namespace string
	// conn names the connection the stream runs on (the peer's address).
	conn string
	// slot is the subscriber's place among those of its connection in its
	// flag set's subscriberSet; the hub's lock guards it.
	slot   int
	latest atomic.Pointer[update]
	// sent is the last state sent on the stream, nil until one was, and
	// sentAt when (Unix seconds, as the report keeps it). Two words set
	// by the stream's goroutine, read by the report: a send allocates
	// nothing for them.
	sent   atomic.Pointer[update]
	sentAt atomic.Int64
	ended  atomic.Int32  // why the stream must end; 0 while it lives
	wake   chan struct{} // capacity 1: a pending wake-up covers every offer after it
}

// Why a stream ends.
const (
	streamLives int32 = iota
	// streamLeft: the subscriber went away (the stream's context ended).
	streamLeft
	// streamStopping: the server is stopping.
	streamStopping
	// streamExpired: the credential that opened it expired.
	streamExpired
)

func (s *subscriber) offer(u *update) {
	s.latest.Store(u)
	s.signal()
}

// end asks the stream to end for a reason; the first reason given stays.
func (s *subscriber) end(reason int32) {
	if s.ended.CompareAndSwap(streamLives, reason) {
		s.signal()
	}
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// flagSetState is what the hub keeps of a flag set while it has subscribers.
type flagSetState struct {
	// last is the newest valid content served; nil until the flag set was
	// seen valid. An invalid edit leaves it, so subscribers keep the last
	// valid content, as ConfigMaps do.
	last *update
	// staged holds, while a rollout plan gives namespaces different
	// revisions, the update offered for each revision (publishStaged).
	staged map[string]*update
}

// hub keeps the subscribers by flag set and publishes to them. Publishing
// happens in one goroutine (run), from views taken in order, so that a
// subscriber can never be offered an older state after a newer one.
type hub struct {
	topo Snapshotter

	mu      sync.Mutex
	subs    map[topology.Key]*subscriberSet
	states  map[topology.Key]*flagSetState
	pending map[topology.Key]struct{} // changed flag sets with subscribers
	// changedAt is when a pending flag set was first told changed since its
	// last new content, for the push latency.
	changedAt map[topology.Key]time.Time
	// pushed, when set, hears how long a change took to be offered.
	pushed func(time.Duration)
	// maxMessage is the largest message the server sends (0: no limit). A
	// flag set whose message is larger is not offered: its subscribers
	// keep the last content that fitted, as ConfigMaps do, rather than
	// have their streams end on every attempt. tooLarge, when set, hears of
	// it.
	maxMessage int
	tooLarge   func(flagSet topology.Key, size int)
	joined     []*subscriber // subscribers waiting for their first state
	kick       chan struct{} // capacity 1

	version atomic.Uint64
	// reportChanged is set whenever a stream opens, closes or is sent a
	// state: the report of the streams (report) may have changed.
	reportChanged atomic.Bool
	subscribers   atomic.Int64
	sent          atomic.Uint64
	publishes     atomic.Uint64
}

func newHub(topo Snapshotter) *hub {
	return &hub{
		topo:      topo,
		subs:      map[topology.Key]*subscriberSet{},
		states:    map[topology.Key]*flagSetState{},
		pending:   map[topology.Key]struct{}{},
		changedAt: map[topology.Key]time.Time{},
		kick:      make(chan struct{}, 1),
	}
}

func (h *hub) signal() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// changed records that the served content of flag sets, or who may read
// them, may have changed. It never blocks on subscribers: it is called from
// the informers' event handlers.
func (h *hub) changed(keys []topology.Key) {
	n := 0
	h.mu.Lock()
	now := time.Now()
	for _, k := range keys {
		if _, ok := h.subs[k]; ok {
			h.pending[k] = struct{}{}
			if _, ok := h.changedAt[k]; !ok {
				h.changedAt[k] = now
			}
			n++
		}
	}
	h.mu.Unlock()
	if n > 0 {
		h.signal()
	}
}

func (h *hub) join(flagSet topology.Key, namespace, conn string) *subscriber {
	sub := &subscriber{flagSet: flagSet, namespace: namespace, conn: conn, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	set := h.subs[flagSet]
	if set == nil {
		set = newSubscriberSet()
		h.subs[flagSet] = set
	}
	set.add(sub)
	h.joined = append(h.joined, sub)
	h.mu.Unlock()
	h.subscribers.Add(1)
	h.reportChanged.Store(true)
	h.signal()
	return sub
}

func (h *hub) leave(sub *subscriber) {
	h.mu.Lock()
	if set := h.subs[sub.flagSet]; set != nil {
		set.remove(sub)
		if set.n == 0 {
			delete(h.subs, sub.flagSet)
			delete(h.states, sub.flagSet)
			delete(h.pending, sub.flagSet)
			delete(h.changedAt, sub.flagSet)
		}
	}
	h.mu.Unlock()
	h.subscribers.Add(-1)
	h.reportChanged.Store(true)
}

// sentTo records that a state was sent on a stream.
func (h *hub) sentTo(sub *subscriber, u *update) {
	sub.sentAt.Store(time.Now().Unix())
	sub.sent.Store(u)
	h.sent.Add(1)
	h.reportChanged.Store(true)
}

// run publishes until ctx ends: each round takes the flag sets changed and
// the subscribers joined since the last one, and one view taken after that.
func (h *hub) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
		}
		h.round()
	}
}

func (h *hub) round() {
	h.mu.Lock()
	// The round owns what it takes: an empty pending map stays the hub's,
	// which changed() writes while the round reads (the race detector saw
	// a round with newcomers only read it).
	var changed map[topology.Key]struct{}
	if len(h.pending) > 0 {
		changed, h.pending = h.pending, map[topology.Key]struct{}{}
	}
	joined := h.joined
	h.joined = nil
	h.mu.Unlock()
	if len(changed) == 0 && len(joined) == 0 {
		return
	}

	v := h.topo.Snapshot()
	for k := range changed {
		h.publish(v, k, nil)
	}
	// Newcomers of flag sets published above got their state there.
	byFlagSet := map[topology.Key][]*subscriber{}
	for _, s := range joined {
		if _, done := changed[s.flagSet]; !done {
			byFlagSet[s.flagSet] = append(byFlagSet[s.flagSet], s)
		}
	}
	for k, subs := range byFlagSet {
		h.publish(v, k, subs)
	}
}

// publish offers a flag set's state in v to the given subscribers, or to all
// of its subscribers when subs is nil. Content and entitlement are computed
// once for all of them.
func (h *hub) publish(v *topology.View, flagSet topology.Key, subs []*subscriber) {
	if plan := v.RolloutPlan(flagSet); plan.Staged() {
		h.publishStaged(v, flagSet, subs)
		return
	}
	content, revision, exists, valid := served(v, flagSet)
	var allowed map[string]struct{}
	if exists {
		allowed = entitledNamespaces(v, flagSet)
	}
	h.publishes.Add(1)

	oversize := 0
	defer func() { // after the lock is released
		if oversize > 0 && h.tooLarge != nil {
			h.tooLarge(flagSet, oversize)
		}
	}()
	h.mu.Lock()
	defer h.mu.Unlock()
	all := h.subs[flagSet]
	if all == nil {
		return // everyone left meanwhile
	}
	st := h.states[flagSet]
	if st == nil {
		st = &flagSetState{}
		h.states[flagSet] = st
	}
	fresh := false
	if valid && (st.last == nil || st.last.content != content) {
		encoded, err := encodeResponse(content)
		switch {
		case err != nil:
		case h.maxMessage > 0 && encoded.data.Len() > h.maxMessage:
			oversize = encoded.data.Len()
		default:
			fresh = st.last != nil // a first state is no change pushed
			st.last = &update{version: h.version.Add(1), content: content, encoded: encoded, revision: revision}
		}
	}
	if at, ok := h.changedAt[flagSet]; ok && subs == nil {
		delete(h.changedAt, flagSet)
		if fresh && h.pushed != nil {
			defer func(at time.Time) { h.pushed(time.Since(at)) }(at)
		}
	}
	offer := func(s *subscriber) {
		// Entitlement is re-decided only while the flag set exists: a missing
		// one serves EmptyFlagSet, which tells nobody anything.
		if exists && s.namespace != flagSet.Namespace {
			if _, ok := allowed[s.namespace]; !ok {
				s.offer(denied)
				return
			}
		}
		if st.last != nil {
			s.offer(st.last)
		}
	}
	if subs == nil {
		all.each(offer)
		return
	}
	for _, s := range subs {
		if all.has(s) {
			offer(s)
		}
	}
}

// publishStaged is publish for a flag set whose rollout plan may give its
// subscriber namespaces different revisions (topology.View.ServedFor):
// each namespace is offered its own, encoded once per revision. A
// namespace whose planned revision cannot be served (its content is not
// known, or invalid, or larger than a message) is offered nothing and
// keeps what it has.
func (h *hub) publishStaged(v *topology.View, flagSet topology.Key, subs []*subscriber) {
	_, exists := v.FlagSetRendered(flagSet)
	var allowed map[string]struct{}
	if exists {
		allowed = entitledNamespaces(v, flagSet)
	}
	h.publishes.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	all := h.subs[flagSet]
	if all == nil {
		return
	}
	st := h.states[flagSet]
	if st == nil {
		st = &flagSetState{}
		h.states[flagSet] = st
	}
	delete(h.changedAt, flagSet)
	byNamespace := map[string]*update{}
	updateFor := func(ns string) *update {
		if u, ok := byNamespace[ns]; ok {
			return u
		}
		var u *update
		if served, ok := v.ServedFor(flagSet, ns); ok && !served.Held && served.Valid() && served.Content != "" {
			u = st.staged[served.Revision]
			if u == nil {
				if encoded, err := encodeResponse(served.Content); err == nil && (h.maxMessage == 0 || encoded.data.Len() <= h.maxMessage) {
					u = &update{version: h.version.Add(1), content: served.Content, encoded: encoded, revision: served.Revision}
				}
			}
		}
		byNamespace[ns] = u
		return u
	}
	offer := func(s *subscriber) {
		if exists && s.namespace != flagSet.Namespace {
			if _, ok := allowed[s.namespace]; !ok {
				s.offer(denied)
				return
			}
		}
		if u := updateFor(s.namespace); u != nil {
			s.offer(u)
		}
	}
	if subs == nil {
		all.each(offer)
	} else {
		for _, s := range subs {
			if all.has(s) {
				offer(s)
			}
		}
	}
	// Keep the encodings offered, by revision, for the next round; and the
	// current revision's as the flag set's last valid state.
	next := map[string]*update{}
	for _, u := range byNamespace {
		if u != nil {
			next[u.revision] = u
		}
	}
	for rev, u := range st.staged {
		if _, ok := next[rev]; !ok && subs != nil {
			next[rev] = u // a newcomers' round keeps what others were offered
		}
	}
	st.staged = next
	if r, ok := v.FlagSetRendered(flagSet); ok && r.Valid() {
		if u, ok := next[r.Revision]; ok {
			st.last = u
		}
	}
}

// subscriberSet is the subscribers of a flag set, grouped by the connection
// their stream runs on. Offering a state connection by connection wakes the
// streams of one connection one after the other, so that its writer finds
// their messages together and sends them in one write; offered in random
// order, each connection's writer would wake, and write, once per message.
//
// The groups are slices, not maps: an edit walks every subscriber, and with
// a connection per subscriber a map per connection cost a map iteration per
// subscriber. Members are removed by swapping in the last one, through the
// index each keeps of its place (subscriber.slot, connSubscribers.slot).
type subscriberSet struct {
	n      int
	conns  []*connSubscribers
	byConn map[string]*connSubscribers
}

// connSubscribers is the subscribers of one flag set on one connection.
type connSubscribers struct {
	conn string
	slot int // in subscriberSet.conns
	subs []*subscriber
}

func newSubscriberSet() *subscriberSet {
	return &subscriberSet{byConn: map[string]*connSubscribers{}}
}

func (s *subscriberSet) add(sub *subscriber) {
	if s.has(sub) {
		return
	}
	c := s.byConn[sub.conn]
	if c == nil {
		c = &connSubscribers{conn: sub.conn, slot: len(s.conns)}
		s.byConn[sub.conn] = c
		s.conns = append(s.conns, c)
	}
	sub.slot = len(c.subs)
	c.subs = append(c.subs, sub)
	s.n++
}

func (s *subscriberSet) remove(sub *subscriber) {
	if !s.has(sub) {
		return
	}
	c := s.byConn[sub.conn]
	last := len(c.subs) - 1
	c.subs[sub.slot] = c.subs[last]
	c.subs[sub.slot].slot = sub.slot
	c.subs[last] = nil
	c.subs = c.subs[:last]
	s.n--
	if len(c.subs) > 0 {
		return
	}
	lastConn := len(s.conns) - 1
	s.conns[c.slot] = s.conns[lastConn]
	s.conns[c.slot].slot = c.slot
	s.conns[lastConn] = nil
	s.conns = s.conns[:lastConn]
	delete(s.byConn, sub.conn)
}

func (s *subscriberSet) has(sub *subscriber) bool {
	c := s.byConn[sub.conn]
	return c != nil && sub.slot < len(c.subs) && c.subs[sub.slot] == sub
}

// each calls f for every subscriber, connection by connection.
func (s *subscriberSet) each(f func(*subscriber)) {
	for _, c := range s.conns {
		for _, sub := range c.subs {
			f(sub)
		}
	}
}

// lastValid is the newest valid content served for a flag set, if any
// subscriber made the hub keep it.
func (h *hub) lastValid(flagSet topology.Key) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.states[flagSet]; st != nil && st.last != nil {
		return st.last.content, true
	}
	return "", false
}

// Stats are counters of the sync server, for metrics.
type Stats struct {
	// Subscribers is the number of open SyncFlags streams.
	Subscribers int
	// FlagSets is the number of flag sets with at least one subscriber.
	FlagSets int
	// Sent is the number of flag set states sent on streams since start.
	Sent uint64
	// Publishes is the number of times a flag set's state was computed and
	// offered to its subscribers.
	Publishes uint64
}

func (h *hub) stats() Stats {
	h.mu.Lock()
	flagSets := len(h.subs)
	h.mu.Unlock()
	return Stats{
		Subscribers: int(h.subscribers.Load()),
		FlagSets:    flagSets,
		Sent:        h.sent.Load(),
		Publishes:   h.publishes.Load(),
	}
}
