// Command fleetbench measures a fleet hub (controllers/fleet) on this
// machine and prints markdown tables:
//
//   - edit → every cluster Current, p50 and p99, with real members: each a
//     control plane (test/controlplane) with flagplane running against it
//     in this process, reached by the hub through ClusterProfiles, the
//     secretreader access provider and the hub's identity of
//     config/fleet/member, as test/fleet does. One hub FeatureFlag placed
//     on every member; -edits edits one after another, each timed from the
//     hub's Update until (a) the placement's status says every cluster
//     Current with the new revision, and (b), read by watches of this
//     command on the members and not through the hub, every member's copy
//     has that revision in status.revision and Ready True for its
//     generation;
//
//   - the same with -simulated virtual members: each a namespace of one
//     shared real member (hack/fleetbench/nsfleet, the hub's Engine), its
//     ClusterProfile real on the hub; with -sim-member stub the shared
//     member runs no flagplane and this command confirms each copy as soon
//     as it is written (confirmer), which leaves the hub's work and the
//     shared API server's;
//
//   - the hub's memory and CPU, idle for -idle once every member is
//     Current, and during the edits;
//
//   - a halt reaching every cluster: -halts edits staged by a
//     FeatureFlagRolloutPolicy of one step over every cluster with gate
//     Confirmed, and one more ClusterProfile the hub cannot reach, which
//     never confirms: each edit reaches every member, halts once the
//     gate's bound has passed, and is timed from the halt (the policy's
//     status, as a watch of this command sees it) until every member's
//     copy holds the stable spec, every member serves it, and the hub's
//     placement says so.
//
//     go run ./hack/fleetbench [-sizes 3,10] [-edits 20] [-simulated 1000] [-sim-edits 10] [-halts 3]
//
// The fleet is brought up by test/fleetenv, as test/fleet's is. The hub
// runs as config/fleet/hub's ServiceAccount in a process of its own (this
// command, run again with -hub-config), so that its RSS and CPU time (from
// /proc) and its Go heap (runtime.MemStats, served on loopback) are its
// alone. Progress goes to stderr, the tables to stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/test/controlplane"
)

// goalP99 is the goal: edit → every one of 1,000 members Current.
const goalP99 = 5 * time.Second

type options struct {
	sizes               []int
	edits, simulated    int
	simEdits            int
	halts               int
	simMember           string
	haltFor             time.Duration
	idle, timeout       time.Duration
	profile             string
	profileFor          time.Duration
	strict              bool
	hubConfig, sizesArg string
}

var scheme *runtime.Scheme

func main() {
	var o options
	flag.StringVar(&o.sizesArg, "sizes", "3,10", "numbers of real members, one fleet each")
	flag.IntVar(&o.edits, "edits", 20, "edits per size of real members")
	flag.IntVar(&o.simulated, "simulated", 1000, "simulated members on one shared member (0: none)")
	flag.IntVar(&o.simEdits, "sim-edits", 10, "edits with the simulated members")
	flag.StringVar(&o.simMember, "sim-member", "flagplane", "what serves the simulated members' copies: flagplane (the shared member's own) or stub (no flagplane; the bench confirms each copy once written, isolating the hub)")
	flag.IntVar(&o.halts, "halts", 3, "staged edits halted by gate Confirmed, per fleet (0: none)")
	flag.DurationVar(&o.haltFor, "halt-for", 0, "gate Confirmed's bound in the halts (0: twice the slowest edit, at least 2s)")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "how long the hub is watched idle once every member is Current")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long one edit (or the first placement) is waited for")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of the hub during the simulated members' edits to this file")
	flag.DurationVar(&o.profileFor, "profile-for", 30*time.Second, "how long the CPU profile runs")
	flag.BoolVar(&o.strict, "strict", false, "exit 3 when the goal is missed")
	flag.StringVar(&o.hubConfig, "hub-config", "", "run as the hub process with this configuration (internal)")
	flag.Parse()
	if o.hubConfig != "" {
		if err := runHub(o.hubConfig); err != nil {
			fmt.Fprintln(os.Stderr, "fleetbench hub:", err)
			os.Exit(1)
		}
		return
	}
	if o.simMember != "flagplane" && o.simMember != "stub" {
		fmt.Fprintf(os.Stderr, "fleetbench: -sim-member: %q is neither flagplane nor stub\n", o.simMember)
		os.Exit(2)
	}
	for s := range strings.SplitSeq(o.sizesArg, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleetbench: -sizes: %q is not a number of members\n", s)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ok, err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
	if !ok && o.strict {
		os.Exit(3)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// result is one size's figures.
type result struct {
	n          int
	simulated  bool
	stub       bool
	first      time.Duration
	edits      []editResult
	halts      []haltResult
	haltFor    time.Duration
	idle, busy usage
}

func run(ctx context.Context, o options, out io.Writer) (bool, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return false, err
	}
	dir, err := os.MkdirTemp("", "flagplane-fleetbench-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	// The members' flagplane logs to nowhere: the tables are the output.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	if scheme, err = api.NewScheme(); err != nil {
		return false, err
	}
	if err := cpv1alpha1.AddToScheme(scheme); err != nil {
		return false, err
	}
	var results []result
	for _, n := range o.sizes {
		r, err := measure(ctx, o, root, dir, n, false)
		if err != nil {
			return false, fmt.Errorf("%d real members: %w", n, err)
		}
		results = append(results, r)
	}
	if o.simulated > 0 {
		r, err := measure(ctx, o, root, dir, o.simulated, true)
		if err != nil {
			return false, fmt.Errorf("%d simulated members: %w", o.simulated, err)
		}
		results = append(results, r)
	}
	return report(out, o, results), nil
}

// measure brings up one fleet of n members, places, idles and edits.
func measure(ctx context.Context, o options, root, parent string, n int, sim bool) (r result, err error) {
	r.n, r.simulated, r.stub = n, sim, sim && o.simMember == "stub"
	dir, err := os.MkdirTemp(parent, "fleet-")
	if err != nil {
		return r, err
	}
	f := &fleet{root: root, dir: dir}
	defer f.stop()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\nthe hub's log ends:\n%s", err, f.hubLogTail())
		}
	}()
	began := time.Now()
	progress("%s: starting the hub and the members", label(r))
	if sim {
		err = f.startSim(ctx, n, o.simMember == "stub")
	} else {
		err = f.startReal(ctx, n)
	}
	if err != nil {
		return r, err
	}
	t := newTrackers(n)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := f.watchAll(wctx, t); err != nil {
		return r, err
	}
	progress("%s: up in %s; placing", label(r), time.Since(began).Round(time.Second))
	if r.first, err = f.place(ctx, t, o.timeout); err != nil {
		return r, err
	}
	progress("%s: every member Current %s after the placement; idle for %s", label(r), r.first.Round(time.Millisecond), o.idle)
	stop := f.meter()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(o.idle):
	}
	r.idle = stop()
	edits := o.edits
	if sim {
		edits = o.simEdits
		if o.profile != "" {
			go func() {
				if err := f.proc.profile(o.profileFor, o.profile); err != nil {
					progress("profiling the hub: %v", err)
				}
			}()
		}
	}
	stop = f.meter()
	for i := 1; i <= edits; i++ {
		e, err := f.edit(ctx, i, t, o.timeout)
		if err != nil {
			stop()
			return r, err
		}
		progress("%s: edit %d: hub says all Current in %s; every copy written in %s, served in %s", label(r), i,
			ms(e.hub), ms(e.written), ms(e.members))
		r.edits = append(r.edits, e)
	}
	r.busy = stop()
	if o.halts > 0 {
		r.haltFor = haltBound(o, r)
		progress("%s: %d staged edits, each halted by gate Confirmed after %s", label(r), o.halts, r.haltFor)
		if r.halts, err = f.halts(ctx, o, t, edits+1, r.haltFor); err != nil {
			return r, err
		}
	}
	return r, nil
}

func label(r result) string {
	if r.simulated && r.stub {
		return fmt.Sprintf("%d simulated members, confirmed by the bench", r.n)
	}
	if r.simulated {
		return fmt.Sprintf("%d simulated members", r.n)
	}
	return fmt.Sprintf("%d real members", r.n)
}
