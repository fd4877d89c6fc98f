package confirm

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/outbound"
)

// A Prober asks consumers' flagds what they serve (Read), in the
// background: a status computation never waits on a pod. It asks only for
// the pods a caller wants confirmed (Want), which the status of a flag set
// does while a pod's last reading does not show the revision it plans for
// it, so a cluster where every pod serves its revision costs nothing.
//
// What it costs is bounded, and charged to the namespace of the pod (its
// tenant):
//
//   - each read is bounded in time and bytes (Outbound);
//   - at most PerNamespace reads of a namespace's pods run at once, and at
//     most InFlight in all; namespaces take turns, so that a tenant with
//     thousands of pods that never answer delays nobody else's by more
//     than a turn;
//   - a pod is read again only after a delay that doubles while its
//     answer stays the same (MinDelay to MaxDelay), or while its reads fail
//     (to MaxFailureDelay);
//   - a pod nobody wants confirmed for WantFor is not read again.
type Prober struct {
	// Outbound is the client of every read (outbound.New's defaults when nil).
	Outbound *outbound.Client
	// PerNamespace and InFlight bound the reads in flight (defaults 4, 32).
	PerNamespace, InFlight int
	// MinDelay, MaxDelay and MaxFailureDelay pace the reads of one pod
	// (defaults 1s, 10s, 60s).
	MinDelay, MaxDelay, MaxFailureDelay time.Duration
	// WantFor is how long a Want lasts (default 2m).
	WantFor time.Duration
	// Notify hears of the flag sets that wanted a pod whose reading
	// changed; it must return at once.
	Notify func(flagSets []topology.Key)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Read reads a pod (Read with Outbound when nil): tests' seam.
	Read func(ctx context.Context, address string) (Served, error)

	once sync.Once
	base context.Context
	log  logr.Logger

	mu       sync.Mutex
	pods     map[string]*podState
	queued   map[string][]string // namespace -> uids ready to be read, in order
	turns    []string            // namespaces with queued pods, in turn
	inFlight int
	running  map[string]int // namespace -> reads in flight
}

// Pod is a consumer pod whose flagd a Prober asks.
type Pod struct {
	// UID identifies the pod.
	UID string
	// Namespace is its tenant's: its reads count against it.
	Namespace string
	// Name names it in the logs.
	Name string
	// Address is host:port of its flagd's sync service.
	Address string
}

// Reading is what the last read of a pod's flagd found.
type Reading struct {
	// Served is what flagd answered, when Err is "".
	Served Served
	// Err says why the last read failed.
	Err string
	// At is when the read was made.
	At time.Time
}

type podState struct {
	pod     Pod
	reading *Reading
	// wanted are the flag sets that want it confirmed, until when.
	wanted map[topology.Key]time.Time
	// queued: waiting for its turn or its delay; inFlight: being read.
	queued, inFlight bool
	timer            *time.Timer
	next             time.Time
	same, failures   int
}

// Defaults of Prober.
const (
	DefaultPerNamespace    = 4
	DefaultInFlight        = 32
	DefaultMinDelay        = time.Second
	DefaultMaxDelay        = 10 * time.Second
	DefaultMaxFailureDelay = time.Minute
	DefaultWantFor         = 2 * time.Minute
)

func (p *Prober) init() {
	p.once.Do(func() {
		if p.Outbound == nil {
			p.Outbound = outbound.New(outbound.Client{})
		}
		if p.Read == nil {
			p.Read = func(ctx context.Context, address string) (Served, error) { return Read(ctx, p.Outbound, address) }
		}
		p.PerNamespace = cmpOr(p.PerNamespace, DefaultPerNamespace)
		p.InFlight = cmpOr(p.InFlight, DefaultInFlight)
		p.MinDelay = cmpOr(p.MinDelay, DefaultMinDelay)
		p.MaxDelay = cmpOr(p.MaxDelay, DefaultMaxDelay)
		p.MaxFailureDelay = cmpOr(p.MaxFailureDelay, DefaultMaxFailureDelay)
		p.WantFor = cmpOr(p.WantFor, DefaultWantFor)
		if p.Now == nil {
			p.Now = time.Now
		}
		if p.base == nil {
			p.base = context.Background()
		}
		p.pods = map[string]*podState{}
		p.queued = map[string][]string{}
		p.running = map[string]int{}
	})
}

func cmpOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Start gives the Prober the context of the manager's run: reads end when
// it does. Call it before the first Want.
func (p *Prober) Start(ctx context.Context) {
	p.base = ctx
	p.log = log.FromContext(ctx).WithName("confirm")
	p.init()
}

// Reading is what the last read of the pod of uid found; false when it
// was not read yet.
func (p *Prober) Reading(uid string) (Reading, bool) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok || st.reading == nil {
		return Reading{}, false
	}
	return *st.reading, true
}

// Want asks for a read of pod on behalf of flag set f, whose revision its
// last reading does not confirm: at once when it was never read or was
// read before since (when f's copy got the revision: what it read then
// is no answer about it), else once its delay has passed. It never waits.
// A pod's address may change (a pod's IP is set once it runs): the last
// one given is read.
func (p *Prober) Want(pod Pod, f topology.Key, since time.Time) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[pod.UID]
	if !ok {
		st = &podState{wanted: map[topology.Key]time.Time{}}
		p.pods[pod.UID] = st
	}
	st.pod = pod
	st.wanted[f] = p.Now().Add(p.WantFor)
	if st.reading != nil && st.reading.At.Before(since) && st.next.After(since) {
		// Read before the revision reached its copy: read again now, and
		// pace from the start.
		st.next, st.same, st.failures = time.Time{}, 0, 0
		if st.timer != nil && st.timer.Stop() {
			st.timer, st.queued = nil, false
		}
	}
	p.schedule(st)
}

// Forget drops what is known of a pod: it was deleted.
func (p *Prober) Forget(uid string) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[uid]; ok {
		if st.timer != nil {
			st.timer.Stop()
		}
		delete(p.pods, uid)
	}
}

// Pods is how many pods the Prober holds a state of.
func (p *Prober) Pods() int {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pods)
}

// schedule queues st's pod for a read once its delay has passed, unless it
// is queued or being read. Call with p.mu held.
func (p *Prober) schedule(st *podState) {
	if st.queued || st.inFlight {
		return
	}
	st.queued = true
	uid := st.pod.UID
	if wait := st.next.Sub(p.Now()); wait > 0 {
		st.timer = time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.pods[uid] == st {
				st.timer = nil
				p.enqueue(st)
			}
		})
		return
	}
	p.enqueue(st)
}

// enqueue puts a pod in its namespace's line and starts what reads the
// bounds allow. Call with p.mu held.
func (p *Prober) enqueue(st *podState) {
	ns := st.pod.Namespace
	if len(p.queued[ns]) == 0 {
		p.turns = append(p.turns, ns)
	}
	p.queued[ns] = append(p.queued[ns], st.pod.UID)
	p.dispatch()
}

// dispatch starts reads, namespaces taking turns, while the bounds allow.
// Call with p.mu held.
func (p *Prober) dispatch() {
	for p.inFlight < p.InFlight && p.base.Err() == nil {
		started := false
		for i := 0; i < len(p.turns); i++ {
			ns := p.turns[i]
			if p.running[ns] >= p.PerNamespace {
				continue
			}
			uid := p.queued[ns][0]
			p.queued[ns] = p.queued[ns][1:]
			// Its turn taken, the namespace goes last.
			p.turns = slices.Delete(p.turns, i, i+1)
			if len(p.queued[ns]) > 0 {
				p.turns = append(p.turns, ns)
			} else {
				delete(p.queued, ns)
			}
			st, ok := p.pods[uid]
			if !ok || !st.queued {
				started = true // a forgotten pod: its turn is spent, look again
				break
			}
			st.queued, st.inFlight = false, true
			p.inFlight++
			p.running[ns]++
			// The address as of now: Want may give another meanwhile.
			go p.read(st, st.pod.Address)
			started = true
			break
		}
		if !started {
			return
		}
	}
}

// read reads one pod and keeps what it found; a changed answer is told to
// the flag sets that wanted it, an unchanged one is read again later while
// they still want it.
func (p *Prober) read(st *podState, address string) {
	served, err := p.Read(p.base, address)
	now := p.Now()
	r := &Reading{Served: served, At: now}
	if err != nil {
		r = &Reading{Err: err.Error(), At: now}
	}
	p.mu.Lock()
	p.inFlight--
	ns := st.pod.Namespace
	if p.running[ns]--; p.running[ns] == 0 {
		delete(p.running, ns)
	}
	st.inFlight = false
	changed := st.reading == nil || !sameReading(st.reading, r)
	st.reading = r
	if err != nil {
		st.failures++
		st.next = now.Add(backoff(p.MinDelay, st.failures, p.MaxFailureDelay))
	} else {
		st.failures = 0
		if changed {
			st.same = 0
		} else {
			st.same++
		}
		st.next = now.Add(backoff(p.MinDelay, st.same+1, p.MaxDelay))
	}
	var tell []topology.Key
	for f, until := range st.wanted {
		if now.After(until) {
			delete(st.wanted, f)
			continue
		}
		tell = append(tell, f)
	}
	forgotten := p.pods[st.pod.UID] != st
	if !forgotten && len(st.wanted) > 0 {
		if changed {
			// The flag sets look again, and want it again if it still
			// does not confirm their revision.
			clear(st.wanted)
		} else {
			p.schedule(st)
		}
	}
	pod := st.pod
	p.dispatch()
	p.mu.Unlock()
	if !changed || forgotten || len(tell) == 0 {
		return
	}
	slices.SortFunc(tell, topology.Key.Compare)
	if logger := p.log.V(1); logger.Enabled() {
		for _, f := range tell {
			logger.Info("a consumer's flagd answered anew", "FeatureFlag", klog.KRef(f.Namespace, f.Name), "Pod", klog.KRef(pod.Namespace, pod.Name),
				"revisions", r.Served.FlagSets[f.Namespace+"/"+f.Name].Revisions, "error", r.Err)
		}
	}
	if p.Notify != nil {
		p.Notify(tell)
	}
}

// backoff is base doubled n-1 times, at most ceiling.
func backoff(base time.Duration, n int, ceiling time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

func sameReading(a, b *Reading) bool {
	if a.Err != b.Err || a.Served.Unnamed != b.Served.Unnamed || len(a.Served.FlagSets) != len(b.Served.FlagSets) {
		return false
	}
	for k, fa := range a.Served.FlagSets {
		fb, ok := b.Served.FlagSets[k]
		if !ok || fa.Flags != fb.Flags || !slices.Equal(fa.Revisions, fb.Revisions) {
			return false
		}
	}
	return true
}
