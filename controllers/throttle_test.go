package controllers

import (
	"sync"
	"testing"
	"time"

	"github.com/flagplane/flagplane/topology"
)

// TestThrottle: a key asked for a thousand times within a window is added
// at once, then once more at the window's end; another key is not held
// back by it.
func TestThrottle(t *testing.T) {
	var mu sync.Mutex
	added := map[topology.Key]int{}
	add := func(k topology.Key) {
		mu.Lock()
		defer mu.Unlock()
		added[k]++
	}
	th := &throttle{window: 200 * time.Millisecond, add: add,
		later: func(k topology.Key, d time.Duration) { time.AfterFunc(d, func() { add(k) }) }}
	a, b := topology.FlagSetKey("ns", "a"), topology.FlagSetKey("ns", "b")
	for range 1000 {
		th.Add(a)
	}
	th.Add(b)
	mu.Lock()
	if added[a] != 1 || added[b] != 1 {
		t.Fatalf("added at once: a %d, b %d; want 1 each", added[a], added[b])
	}
	mu.Unlock()
	time.Sleep(400 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if added[a] != 2 {
		t.Fatalf("a added %d times; want 2: at once, and at the window's end", added[a])
	}
}
