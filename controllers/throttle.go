package controllers

import (
	"sync"
	"time"

	"github.com/flagplane/flagplane/topology"
)

// throttle puts a key on a queue at most once per window: the first time
// at once, then at the end of the window if it was asked for meanwhile. A
// wave of pods confirming a revision (thousands of answers in seconds)
// computes the status of their flag set a few times a second, not once
// per answer: each computation visits every pod of the flag set.
type throttle struct {
	window time.Duration
	// add puts a key on its queue now, later once d has passed; both
	// count as pending work at once (Idle, flagplane_pending_keys).
	add   func(topology.Key)
	later func(topology.Key, time.Duration)

	mu   sync.Mutex
	keys map[topology.Key]*throttled
}

type throttled struct {
	last    time.Time
	waiting bool
}

func (t *throttle) Add(k topology.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = map[topology.Key]*throttled{}
	}
	st, ok := t.keys[k]
	if !ok {
		st = &throttled{}
		t.keys[k] = st
	}
	if st.waiting {
		return
	}
	now := time.Now()
	if wait := st.last.Add(t.window).Sub(now); wait > 0 {
		// The window's end is when the queue takes it: the key is pending
		// work from now, as any key added.
		st.waiting, st.last = true, st.last.Add(t.window)
		t.later(k, wait)
		time.AfterFunc(wait, func() {
			t.mu.Lock()
			st.waiting = false
			t.mu.Unlock()
		})
		return
	}
	st.last = now
	t.add(k)
	// Forget keys whose window passed long ago, now and then.
	if len(t.keys) > 1024 {
		for key, s := range t.keys {
			if !s.waiting && now.Sub(s.last) > time.Minute {
				delete(t.keys, key)
			}
		}
	}
}
