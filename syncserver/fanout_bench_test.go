package syncserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// The fan-out benchmark: how long a FeatureFlag edit takes to reach every
// subscriber of its flag set, and what a subscriber costs the server.
//
// The server runs in the benchmark process over a topology, as in the
// manager: an edit is an UpsertFlagSet whose Delta goes to FlagSetsChanged,
// as controllers.Controller.dispatch passes it on (the informer's delivery
// of the event before that is not included). The subscribers run in a child
// process (this test binary again, as TestFanOutFleet), each with a
// connection of its own over loopback TCP, as one pod per subscriber would,
// so that their memory and CPU are not counted as the server's.
//
// Per size: edits one at a time (each waits until every subscriber has it),
// whose latencies give p50/p99/max; then a burst of edits without waiting,
// after which every subscriber must hold the final state (latest-value
// coalescing may skip intermediate ones, never the last). Memory per
// subscriber is the server's heap and stacks in use with the subscribers,
// less without, over their number, after a collection.
//
//	go test ./syncserver -run '^$' -bench FanOut -benchtime 1x
func BenchmarkFanOut(b *testing.B) {
	for _, n := range fanOutSizes() {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			// One connection per subscriber, as one flagd sidecar per pod
			// has; then 100 subscribers per connection, as processes that
			// hold many subscriptions (node agents, proxies) have.
			b.Run("streams-per-conn=1", func(b *testing.B) { benchFanOut(b, n, 1) })
			if n >= 1000 {
				b.Run("streams-per-conn=100", func(b *testing.B) { benchFanOut(b, n, 100) })
			}
		})
	}
}

const (
	fleetAddrEnv = "FLAGPLANE_FANOUT_FLEET_ADDR"
	fleetSizeEnv = "FLAGPLANE_FANOUT_FLEET_SIZE"
	fleetMuxEnv  = "FLAGPLANE_FANOUT_FLEET_STREAMS_PER_CONN"
	// fanOutSizesEnv overrides the sizes, e.g. "100,1000".
	fanOutSizesEnv = "FLAGPLANE_FANOUT_SIZES"
	// fleetFixedWindowEnv, set to 1, gives the subscribers fixed HTTP/2
	// windows, which turns off gRPC's bandwidth estimation: its ping after
	// every isolated message costs the server a read and a write per
	// message. flagd and its providers keep it on; this measures what it costs.
	fleetFixedWindowEnv = "FLAGPLANE_FANOUT_FIXED_WINDOW"
	// fleetCPUProfileEnv names a file for a CPU profile of the subscribers'
	// process.
	fleetCPUProfileEnv = "FLAGPLANE_FANOUT_FLEET_CPUPROFILE"
	// editsCPUProfileEnv names a prefix for CPU profiles of the edits one
	// at a time only, without connecting the subscribers: <prefix>.server
	// and <prefix>.fleet, per size the last run's.
	editsCPUProfileEnv = "FLAGPLANE_FANOUT_EDITS_CPUPROFILE"
	// editsPerRun edits, one at a time, per b.N; then a burst as long.
	editsPerRun = 10
	fleetToken  = "fleet-token"
)

// fleetGC makes the subscribers' process collect rarely. A process
// that holds thousands of subscribers would otherwise scan all their
// goroutine stacks at every collection, and collect the more often the
// more of them there are: a cost that no real subscriber, one per pod
// with a heap of its own, has, taken from the server's two cores.
var fleetGC = []string{"GOGC=1600", "GOMEMLIMIT=2GiB"}

func fanOutSizes() []int {
	sizes := []int{100, 1000, 10000}
	if s := os.Getenv(fanOutSizesEnv); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err == nil && n > 0 {
				sizes = append(sizes, n)
			}
		}
	}
	return sizes
}

// benchFlagSet is a flag set of 20 flags (about 2.5 KiB of flagd JSON) whose
// metadata carries a revision the subscribers can find without decoding.
func benchFlagSet(rev int) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name = "bench", "flags"
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
	for i := range 20 {
		ff.Spec.FlagSpec.Flags[fmt.Sprintf("feature-%02d", i)] = v1beta1.Flag{
			State: v1beta1.FlagStateEnabled, DefaultVariant: "off",
			Variants:  json.RawMessage(`{"on":true,"off":false}`),
			Targeting: json.RawMessage(`{"if":[{"in":[{"var":"email"},["a@example.com","b@example.com"]]},"on",null]}`),
		}
	}
	ff.Spec.FlagSpec.Metadata = json.RawMessage(fmt.Sprintf(`{"rev":"%d"}`, rev))
	return ff
}

const revMarker = `"rev":"`

// revOf finds the revision in served content, -1 if there is none.
func revOf(content string) int {
	i := strings.Index(content, revMarker)
	if i < 0 {
		return -1
	}
	rest := content[i+len(revMarker):]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return -1
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil {
		return -1
	}
	return n
}

func benchFanOut(b *testing.B, n, streamsPerConn int) {
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	if _, err := topo.UpsertFlagSet(benchFlagSet(0)); err != nil {
		b.Fatal(err)
	}
	srv, err := New(topo, Options{
		Authenticator: staticAuth{fleetToken: {Namespace: "bench", ServiceAccount: "app"}},
		Log:           logr.Discard(),
	})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}()

	before := memInUse()
	fleet := startFleet(b, lis.Addr().String(), n, streamsPerConn)
	defer fleet.stop()
	if got := srv.Subscribers(); got != n {
		b.Fatalf("%d subscribers connected, want %d", got, n)
	}
	perSubscriber := float64(memInUse()-before) / float64(n)

	rev := 0
	edit := func() int64 {
		rev++
		ff := benchFlagSet(rev)
		at := time.Now().UnixNano()
		d, err := topo.UpsertFlagSet(ff)
		if err != nil {
			b.Fatal(err)
		}
		srv.FlagSetsChanged(d.Of(topology.KindFlagSet))
		return at
	}

	var latencies []time.Duration
	serverCPU, fleetCPU := cpuTime(0), cpuTime(fleet.cmd.Process.Pid)
	reads0, writes0 := syscalls(0)
	busy0, total0 := machineTicks()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	stopProfiles := fleet.startProfiles(b)
	var handed []time.Duration
	b.ResetTimer()
	for range b.N {
		for range editsPerRun {
			sent := srv.Stats().Sent
			at := edit()
			done := handedAll(srv, sent+uint64(n))
			latencies = append(latencies, fleet.await(b, rev, at)...)
			handed = append(handed, time.Duration(<-done-at))
		}
	}
	b.StopTimer()
	stopProfiles()
	messages := float64(len(latencies))
	serverCPU, fleetCPU = cpuTime(0)-serverCPU, cpuTime(fleet.cmd.Process.Pid)-fleetCPU
	reads1, writes1 := syscalls(0)
	busy1, total1 := machineTicks()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)

	// A burst: every subscriber must end on the last edit.
	for range editsPerRun {
		edit()
	}
	missed := fleet.missed(b, rev)

	slices.Sort(latencies)
	b.ReportMetric(ms(latencies[0]), "first-ms")
	b.ReportMetric(ms(percentile(latencies, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(latencies, 0.99)), "p99-ms")
	b.ReportMetric(ms(latencies[len(latencies)-1]), "max-ms")
	slices.Sort(handed)
	b.ReportMetric(ms(percentile(handed, 0.5)), "handed-ms")
	b.ReportMetric(perSubscriber, "B/subscriber")
	b.ReportMetric(float64(serverCPU.Microseconds())/messages, "server-µs/msg")
	b.ReportMetric(float64(fleetCPU.Microseconds())/messages, "fleet-µs/msg")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/messages, "server-allocs/msg")
	b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "server-GCs")
	if writes1 > writes0 {
		// System calls are most of what a message costs the server
		// with a connection per subscriber: a write for the message,
		// and for default gRPC clients a read and a write for the
		// bandwidth-estimation ping that answers it.
		b.ReportMetric(float64(writes1-writes0)/messages, "server-writes/msg")
		b.ReportMetric(float64(reads1-reads0)/messages, "server-reads/msg")
	}
	b.ReportMetric(float64(missed), "missed-final")
	if total1 > total0 {
		// How much of the machine was busy while the edits went out: what
		// is not is time that neither the server nor the fleet could use.
		b.ReportMetric(100*float64(busy1-busy0)/float64(total1-total0), "machine-busy-%")
	}
	if missed > 0 {
		b.Errorf("%d of %d subscribers did not end on the final state", missed, n)
	}
}

// handedAll reports when the server has handed want messages in all to
// gRPC (Unix nanoseconds): the server's part of an edit, before gRPC's
// writers send them and the subscribers read them.
func handedAll(srv *Server, want uint64) <-chan int64 {
	done := make(chan int64, 1)
	go func() {
		for srv.Stats().Sent < want {
			time.Sleep(100 * time.Microsecond)
		}
		done <- time.Now().UnixNano()
	}()
	return done
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

// memInUse is the heap and the goroutine stacks in use after a collection.
func memInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// fleet is the child process that runs the subscribers; it answers commands
// on its stdin with one line on its stdout.
type fleet struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startFleet(b *testing.B, addr string, n, streamsPerConn int) *fleet {
	b.Helper()
	args := []string{"-test.run=^TestFanOutFleet$", "-test.v=false"}
	if p := os.Getenv(fleetCPUProfileEnv); p != "" {
		args = append(args, "-test.cpuprofile="+p)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), fleetGC...), fleetAddrEnv+"="+addr, fleetSizeEnv+"="+strconv.Itoa(n),
		fleetMuxEnv+"="+strconv.Itoa(streamsPerConn))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := &fleet{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	if line := f.read(b); line != "ready" {
		f.stop()
		b.Fatalf("fleet: %s", line)
	}
	return f
}

func (f *fleet) read(b *testing.B) string {
	line, err := f.out.ReadString('\n')
	if err != nil {
		b.Fatalf("reading from the fleet: %v", err)
	}
	return strings.TrimSpace(line)
}

// await waits until every subscriber has rev and returns each one's latency
// from at (Unix nanoseconds, the same clock in both processes).
func (f *fleet) await(b *testing.B, rev int, at int64) []time.Duration {
	fmt.Fprintf(f.in, "await %d %d\n", rev, at)
	fields := strings.Fields(f.read(b))
	if len(fields) == 0 || fields[0] != "latencies" {
		b.Fatalf("fleet: %v", fields)
	}
	out := make([]time.Duration, 0, len(fields)-1)
	for _, s := range fields[1:] {
		ns, _ := strconv.ParseInt(s, 10, 64)
		out = append(out, time.Duration(ns))
	}
	return out
}

// startProfiles starts CPU profiles of the server and the fleet when
// editsCPUProfileEnv asks for them, and returns what stops both.
func (f *fleet) startProfiles(b *testing.B) func() {
	prefix := os.Getenv(editsCPUProfileEnv)
	if prefix == "" {
		return func() {}
	}
	out, err := os.Create(prefix + ".server")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(f.in, "profile %s\n", prefix+".fleet")
	if line := f.read(b); line != "profiling" {
		b.Fatalf("fleet: %s", line)
	}
	return func() {
		fmt.Fprintf(f.in, "profile-stop\n")
		if line := f.read(b); line != "profiled" {
			b.Errorf("fleet: %s", line)
		}
		pprof.StopCPUProfile()
		_ = out.Close()
	}
}

// missed is the number of subscribers that do not hold rev once the stream
// has been quiet.
func (f *fleet) missed(b *testing.B, rev int) int {
	fmt.Fprintf(f.in, "final %d\n", rev)
	fields := strings.Fields(f.read(b))
	if len(fields) != 2 || fields[0] != "missed" {
		b.Fatalf("fleet: %v", fields)
	}
	n, _ := strconv.Atoi(fields[1])
	return n
}

func (f *fleet) stop() {
	_ = f.in.Close()
	done := make(chan struct{})
	go func() { _ = f.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = f.cmd.Process.Kill()
		<-done
	}
}

// TestFanOutFleet is the benchmark's client fleet; it does nothing unless
// BenchmarkFanOut started it.
func TestFanOutFleet(t *testing.T) {
	addr := os.Getenv(fleetAddrEnv)
	if addr == "" {
		t.Skip("the client fleet of BenchmarkFanOut")
	}
	n, _ := strconv.Atoi(os.Getenv(fleetSizeEnv))
	perConn, _ := strconv.Atoi(os.Getenv(fleetMuxEnv))
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	reply := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	subs, err := connectFleet(addr, n, max(perConn, 1))
	if err != nil {
		reply("error %v", err)
		return
	}
	reply("ready")

	var profile *os.File
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fields := strings.Fields(in.Text())
		switch {
		case len(fields) == 2 && fields[0] == "profile":
			if profile, err = os.Create(fields[1]); err == nil {
				err = pprof.StartCPUProfile(profile)
			}
			if err != nil {
				reply("error %v", err)
				continue
			}
			reply("profiling")
		case len(fields) == 1 && fields[0] == "profile-stop" && profile != nil:
			pprof.StopCPUProfile()
			_ = profile.Close()
			profile = nil
			reply("profiled")
		case len(fields) == 3 && fields[0] == "await":
			rev, _ := strconv.Atoi(fields[1])
			at, _ := strconv.ParseInt(fields[2], 10, 64)
			var sb strings.Builder
			sb.WriteString("latencies")
			for _, s := range subs {
				got := s.waitFor(rev, 60*time.Second)
				sb.WriteString(" " + strconv.FormatInt(got-at, 10))
			}
			reply("%s", sb.String())
		case len(fields) == 2 && fields[0] == "final":
			rev, _ := strconv.Atoi(fields[1])
			// Give late messages a moment: a subscriber that never gets
			// rev is counted, one that gets it late is not.
			missed := 0
			for _, s := range subs {
				if s.waitFor(rev, 10*time.Second) < 0 {
					missed++
				}
			}
			reply("missed %d", missed)
		default:
			reply("error unknown command %q", in.Text())
		}
	}
}

// fleetSubscriber records when it first saw each revision.
type fleetSubscriber struct {
	mu   sync.Mutex
	rev  int
	seen map[int]int64 // revision → Unix nanoseconds it arrived
}

// waitFor returns when the subscriber first held rev or a later revision,
// or -1 after timeout.
func (s *fleetSubscriber) waitFor(rev int, timeout time.Duration) int64 {
	deadline := time.Now().Add(timeout)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.rev < rev {
		if time.Now().After(deadline) {
			return -1
		}
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	}
	for r := rev; r <= s.rev; r++ {
		if at, ok := s.seen[r]; ok {
			return at
		}
	}
	return -1
}

func connectFleet(addr string, n, perConn int) ([]*fleetSubscriber, error) {
	subs := make([]*fleetSubscriber, n)
	var conns []*grpc.ClientConn
	var ready sync.WaitGroup
	var failed atomic.Value
	sem := make(chan struct{}, 64) // subscribe in parallel, but not all at once
	for i := range subs {
		if i%perConn == 0 {
			opts := []grpc.DialOption{
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithPerRPCCredentials(tokenCreds(fleetToken)),
			}
			if os.Getenv(fleetFixedWindowEnv) == "1" {
				opts = append(opts, grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
			}
			conn, err := grpc.NewClient(addr, opts...)
			if err != nil {
				return nil, err
			}
			conns = append(conns, conn)
		}
		client := syncv1grpc.NewFlagSyncServiceClient(conns[len(conns)-1])
		s := &fleetSubscriber{rev: -1, seen: map[int]int64{}}
		subs[i] = s
		ready.Add(1)
		sem <- struct{}{}
		go func() {
			first := true
			err := subscribeFleet(client, func(content string) {
				at := time.Now().UnixNano()
				rev := revOf(content)
				s.mu.Lock()
				if rev > s.rev {
					s.seen[rev] = at
					s.rev = rev
				}
				s.mu.Unlock()
				if first {
					first = false
					<-sem
					ready.Done()
				}
			})
			if first {
				failed.Store(err)
				<-sem
				ready.Done()
			}
		}()
	}
	ready.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return nil, err
	}
	return subs, nil
}

// subscribeFleet runs one subscriber until its stream ends.
func subscribeFleet(client syncv1grpc.FlagSyncServiceClient, onMessage func(string)) error {
	stream, err := client.SyncFlags(context.Background(), &syncv1.SyncFlagsRequest{Selector: "core.openfeature.dev/bench/flags"})
	if err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		onMessage(m.GetFlagConfiguration())
	}
}
