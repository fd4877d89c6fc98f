package confirm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flagplane/flagplane/topology"
)

// fakeFlagds answers reads by address, counting them; an address in hang
// answers only when release is closed.
type fakeFlagds struct {
	mu      sync.Mutex
	serves  map[string]string // address -> revision of flag set "ns/ff"
	reads   map[string]int
	hang    map[string]bool
	release chan struct{}
}

func newFakeFlagds() *fakeFlagds {
	return &fakeFlagds{serves: map[string]string{}, reads: map[string]int{}, hang: map[string]bool{}, release: make(chan struct{})}
}

func (f *fakeFlagds) read(ctx context.Context, address string) (Served, error) {
	f.mu.Lock()
	f.reads[address]++
	hang := f.hang[address]
	rev, ok := f.serves[address]
	f.mu.Unlock()
	if hang {
		select {
		case <-f.release:
		case <-ctx.Done():
		}
		return Served{}, errors.New("no answer within 2s")
	}
	if !ok {
		return Served{}, errors.New("connection refused")
	}
	return Served{FlagSets: map[string]FlagSet{"ns/ff": {Flags: 1, Revisions: []string{rev}}}}, nil
}

func (f *fakeFlagds) set(address, rev string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serves[address] = rev
}

func (f *fakeFlagds) count(address string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[address]
}

var ff = topology.FlagSetKey("ns", "ff")

func newProber(f *fakeFlagds, notified chan []topology.Key) *Prober {
	p := &Prober{Read: f.read, MinDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond, MaxFailureDelay: 80 * time.Millisecond,
		Notify: func(fs []topology.Key) {
			select {
			case notified <- fs:
			default:
			}
		}}
	return p
}

func waitReading(t *testing.T, p *Prober, uid string, ok func(Reading) bool) Reading {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if r, read := p.Reading(uid); read && ok(r) {
			return r
		}
		time.Sleep(5 * time.Millisecond)
	}
	r, _ := p.Reading(uid)
	t.Fatalf("pod %s: no such reading; last %+v", uid, r)
	return r
}

// A pod nobody wants is never read; one wanted is read at once, and the
// flag set that wanted it hears of its answer.
func TestProberReadsOnlyWhatIsWanted(t *testing.T) {
	f := newFakeFlagds()
	f.set("a:8015", "r1")
	f.set("b:8015", "r1")
	notified := make(chan []topology.Key, 8)
	p := newProber(f, notified)
	p.Start(t.Context())
	p.Want(Pod{UID: "a", Namespace: "ns", Address: "a:8015"}, ff, time.Time{})
	r := waitReading(t, p, "a", func(r Reading) bool { return true })
	if ok, why := r.Served.Confirm("ns/ff", "r1", 1); !ok {
		t.Fatalf("reading of a does not confirm r1: %s", why)
	}
	select {
	case got := <-notified:
		if len(got) != 1 || got[0] != ff {
			t.Fatalf("notified %v, want [%v]", got, ff)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the flag set that wanted the pod was not told of its answer")
	}
	time.Sleep(100 * time.Millisecond)
	if n := f.count("b:8015"); n != 0 {
		t.Fatalf("pod b, which nobody wants, was read %d times", n)
	}
	// Its answer told, a's want is spent: it is not read again until a
	// flag set wants it again.
	before := f.count("a:8015")
	time.Sleep(200 * time.Millisecond)
	if n := f.count("a:8015"); n != before {
		t.Fatalf("pod a was read %d more times after its answer was told and nobody wanted it again", n-before)
	}
}

// A pod's address given again while it is read (a pod's IP is set once it
// runs): the read in flight keeps the address it started with, and a read
// wanted after it takes the new one. Under the race detector (make
// test-unit), this failed while the read took the address from the pod's
// state without the lock that Want writes it under.
func TestProberTakesANewAddressWhileReading(t *testing.T) {
	f := newFakeFlagds()
	f.set("old:8015", "r1")
	f.set("new:8015", "r2")
	p := newProber(f, make(chan []topology.Key, 8))
	p.Start(t.Context())
	moved := Pod{UID: "a", Namespace: "ns", Address: "new:8015"}
	p.Want(Pod{UID: "a", Namespace: "ns", Address: "old:8015"}, ff, time.Time{})
	p.Want(moved, ff, time.Time{})
	waitReading(t, p, "a", func(Reading) bool { return true })
	// Wanted again, as the Confirmer does until the pod confirms.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		p.Want(moved, ff, time.Time{})
		if r, _ := p.Reading("a"); r.Err == "" {
			if ok, _ := r.Served.Confirm("ns/ff", "r2", 1); ok {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pod a was not read at its new address; reads: old %d, new %d", f.count("old:8015"), f.count("new:8015"))
}

// A pod whose answer stays the same is read again while it is wanted, ever
// less often; once its answer changes, it is told.
func TestProberBacksOffOnTheSameAnswer(t *testing.T) {
	f := newFakeFlagds()
	f.set("a:8015", "r1")
	notified := make(chan []topology.Key, 8)
	p := newProber(f, notified)
	p.MaxDelay = 160 * time.Millisecond
	p.Start(t.Context())
	pod := Pod{UID: "a", Namespace: "ns", Address: "a:8015"}
	p.Want(pod, ff, time.Time{})
	<-notified
	// Wanted again for r2, which it does not serve yet (a kubelet that has
	// not projected the new ConfigMap).
	p.Want(pod, ff, time.Time{})
	time.Sleep(600 * time.Millisecond)
	n := f.count("a:8015")
	// 10, 20, 40, 80, 160, 160... ms: about 6 reads in 600 ms, not 60.
	if n < 3 || n > 10 {
		t.Fatalf("pod a read %d times in 600ms while its answer stayed the same; want a few, ever less often", n)
	}
	f.set("a:8015", "r2")
	select {
	case <-notified:
	case <-time.After(5 * time.Second):
		t.Fatal("the changed answer was not told")
	}
	waitReading(t, p, "a", func(r Reading) bool { ok, _ := r.Served.Confirm("ns/ff", "r2", 1); return ok })
}

// A reading made before the revision reached the pod's copy is no answer:
// Want with a later since reads at once, however long the pod's delay.
func TestProberReadsAgainWhatWasReadBeforeTheCopyChanged(t *testing.T) {
	f := newFakeFlagds()
	f.set("a:8015", "r1")
	notified := make(chan []topology.Key, 8)
	p := newProber(f, notified)
	p.MinDelay, p.MaxDelay = time.Hour, time.Hour
	p.Start(t.Context())
	pod := Pod{UID: "a", Namespace: "ns", Address: "a:8015"}
	p.Want(pod, ff, time.Time{})
	first := waitReading(t, p, "a", func(Reading) bool { return true })
	<-notified
	p.Want(pod, ff, time.Time{}) // its next read is an hour away
	time.Sleep(50 * time.Millisecond)
	if n := f.count("a:8015"); n != 1 {
		t.Fatalf("read %d times; want 1 (the next an hour later)", n)
	}
	p.Want(pod, ff, first.At.Add(time.Nanosecond))
	waitReading(t, p, "a", func(r Reading) bool { return r.At.After(first.At) })
}

// A tenant whose pods never answer delays another tenant's reads by no
// more than a turn: namespaces take turns, each bounded.
func TestProberNamespacesTakeTurns(t *testing.T) {
	f := newFakeFlagds()
	p := newProber(f, make(chan []topology.Key, 1))
	p.PerNamespace, p.InFlight = 4, 8
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p.Start(ctx)
	defer close(f.release)
	for i := range 1000 {
		addr := fmt.Sprintf("hostile-%d:8015", i)
		f.mu.Lock()
		f.hang[addr] = true
		f.mu.Unlock()
		p.Want(Pod{UID: fmt.Sprintf("h%d", i), Namespace: "hostile", Address: addr}, topology.FlagSetKey("hostile", "ff"), time.Time{})
	}
	f.set("good:8015", "r1")
	p.Want(Pod{UID: "good", Namespace: "ns", Address: "good:8015"}, ff, time.Time{})
	r := waitReading(t, p, "good", func(Reading) bool { return true })
	if r.Err != "" {
		t.Fatalf("good pod: %s", r.Err)
	}
	p.mu.Lock()
	running := p.running["hostile"]
	p.mu.Unlock()
	if running > 4 {
		t.Fatalf("%d reads of the hostile namespace in flight; at most 4", running)
	}
}

// A pod deleted is forgotten, and a want that lapsed reads no more.
func TestProberForgetsAndLapses(t *testing.T) {
	f := newFakeFlagds()
	p := newProber(f, make(chan []topology.Key, 8))
	p.WantFor = 100 * time.Millisecond
	p.Start(t.Context())
	// It never answers: once told, and wanted again, it is read again
	// and again while wanted.
	pod := Pod{UID: "a", Namespace: "ns", Address: "a:8015"}
	p.Want(pod, ff, time.Time{})
	waitReading(t, p, "a", func(Reading) bool { return true })
	p.Want(pod, ff, time.Time{})
	time.Sleep(400 * time.Millisecond)
	if n := f.count("a:8015"); n < 3 {
		t.Fatalf("read %d times while wanted; want it read again", n)
	}
	n := f.count("a:8015")
	time.Sleep(300 * time.Millisecond)
	if m := f.count("a:8015"); m != n {
		t.Fatalf("read %d more times after its want lapsed", m-n)
	}
	p.Forget("a")
	if p.Pods() != 0 {
		t.Fatalf("%d pods known after Forget", p.Pods())
	}
}
