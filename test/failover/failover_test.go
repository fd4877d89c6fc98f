package failover

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/metrics"
	"github.com/flagplane/flagplane/test/faultproxy"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/managerproc"
)

const (
	leaseID = "flagplane-failover"
	// flagSets are used by every namespace of the world.
	flagSets   = 6
	namespaces = 3
	// The burst: three phases of edits one every editPace, spread over the
	// flag sets: with the first leader, after it was killed, and after the
	// standby took over (once the lease expired).
	editsPerPhase = 20
	editPace      = 100 * time.Millisecond
)

// faults are what the proxies do to the replicas' requests during the
// burst. Leader election's own requests (Leases) are left alone: losing the
// lease through faults is another story (the replica exits and a standby
// takes over, as here). There is no rule for plain gets and lists: the
// replicas make none (their informers list by a watch that sends the
// initial state, which the watch faults reach).
var faults = []faultproxy.Rule{
	{Fault: faultproxy.ExpireWatch, Probability: 0.15},
	{Fault: faultproxy.DropWatch, Probability: 0.5, Delay: 3 * time.Second},
	{Fault: faultproxy.Conflict, Verbs: writeVerbs, ExceptResources: leases, Probability: 0.08},
	{Fault: faultproxy.TooManyRequests, Verbs: writeVerbs, ExceptResources: leases, Probability: 0.08},
	{Fault: faultproxy.InternalError, Verbs: writeVerbs, ExceptResources: leases, Probability: 0.08},
	{Fault: faultproxy.Timeout, Verbs: writeVerbs, ExceptResources: leases, Probability: 0.06, Delay: 500 * time.Millisecond},
}

var (
	writeVerbs = []string{"create", "update", "patch", "apply", "delete"}
	leases     = []string{"leases.coordination.k8s.io"}
)

var _ = Describe("Failover", func() {
	It("converges when the leader is killed in a burst of edits under faults, and a standby takes over", func(ctx SpecContext) {
		w := setUpWorld(ctx)
		pa, pb := startProxy(1), startProxy(2)

		By("replica a: elected, it reconciles the world")
		a := startReplica(ctx, "a", pa)
		Expect(a.WaitReady(ctx)).To(Succeed())
		Eventually(ctx, leaseHolder(ctx, leaseID)).ShouldNot(BeEmpty())
		leaderA := leaseHolder(ctx, leaseID)()
		Eventually(ctx, w.converged).Should(Succeed())

		By("replica b: a standby, its graph built")
		b := startReplica(ctx, "b", pb)
		Expect(b.WaitReady(ctx)).To(Succeed())
		Expect(leaseHolder(ctx, leaseID)()).To(Equal(leaderA))

		mon := startMonitor(ctx, w)
		DeferCleanup(mon.close)
		beforeA, beforeB := pa.Counts(), pb.Counts()
		pa.SetRules(faults)
		pb.SetRules(faults)
		pa.CutWatches() // the watches open now would outlive the spec
		pb.CutWatches()

		By(fmt.Sprintf("%d edits, one every %s, with replica a leading; then a killed (SIGKILL)", editsPerPhase, editPace))
		edit := 0
		burst := func() {
			for range editsPerPhase {
				edit++
				setCounter(ctx, client.ObjectKey{Namespace: w.home, Name: w.flagSets[edit%len(w.flagSets)]}, edit)
				time.Sleep(editPace)
			}
		}
		burst()
		Expect(a.Kill()).To(Succeed())
		killedAt := time.Now()
		By(fmt.Sprintf("%d edits with no leader", editsPerPhase))
		burst()
		By("replica b takes over once a's lease expires")
		Eventually(ctx, leaseHolder(ctx, leaseID)).Should(And(Not(BeEmpty()), Not(Equal(leaderA))))
		leaderBAt := time.Now()
		By(fmt.Sprintf("%d edits with replica b leading", editsPerPhase))
		burst()

		By("the world converges, faults still on")
		Eventually(ctx, w.converged).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		convergedAt := time.Now()
		pa.SetRules(nil)
		pb.SetRules(nil)
		Eventually(ctx, queuesEmpty(b)).Should(Succeed())
		Expect(w.converged(ctx)).To(Succeed())
		mon.close()
		duringA, duringB := pa.Counts().Sub(beforeA), pb.Counts().Sub(beforeB)
		during := duringA.Add(duringB)

		cmWrites := func(o faultproxy.Outcome) bool {
			return o.Resource == "configmaps" && (metrics.APIRequest{Verb: o.Verb}).Write()
		}
		cmFaults := func(o faultproxy.Outcome) bool { return cmWrites(o) && o.Fault != "" }
		configMaps := flagSets * namespaces
		// a: at most one write per edit and namespace, and one per fault.
		boundA := editsPerPhase*namespaces + duringA.Count(cmFaults)
		// b: at most one write per ConfigMap when it takes over (the last
		// content of the edits it did not see as leader), one per edit and
		// namespace after, and one per fault.
		boundB := configMaps + editsPerPhase*namespaces + duringB.Count(cmFaults)

		summary := fmt.Sprintf(`%d flag sets used in %d namespaces (%d ConfigMaps); %d edits one every %s with replica a leading, a killed (SIGKILL), %d edits with no leader, b elected, %d edits with b leading
new leader %s after the kill; world converged %s after the kill (%s after b was elected)
ConfigMap writes that reached the API server's proxy from a: %d (bound: %d edits x %d namespaces + %d faults injected on them = %d)
ConfigMap writes that reached the API server's proxy from b: %d (bound: %d ConfigMaps + %d edits x %d namespaces + %d faults injected on them = %d)
faults injected, by kind: %s
generated ConfigMaps deleted: %d, emptied: %d, gone back to an earlier edit: %d %v; ConfigMap events seen: %d
every request of both replicas from the first fault on, by what the proxies did with it:
%s`,
			flagSets, namespaces, configMaps, editsPerPhase, editPace, editsPerPhase, editsPerPhase,
			leaderBAt.Sub(killedAt).Round(100*time.Millisecond), convergedAt.Sub(killedAt).Round(100*time.Millisecond),
			convergedAt.Sub(leaderBAt).Round(100*time.Millisecond),
			duringA.Count(cmWrites), editsPerPhase, namespaces, duringA.Count(cmFaults), boundA,
			duringB.Count(cmWrites), configMaps, editsPerPhase, namespaces, duringB.Count(cmFaults), boundB,
			faultTotals(during), len(mon.deleted), len(mon.emptied), len(mon.regressions), mon.regressions, mon.events,
			during)
		AddReportEntry("faults and failover", summary)
		fmt.Fprintln(GinkgoWriter, summary)

		for _, r := range faults {
			Expect(during.Count(func(o faultproxy.Outcome) bool { return o.Fault == r.Fault })).To(BeNumerically(">", 0),
				"the burst ran under %s", r.Fault)
		}
		Expect(mon.deleted).To(BeEmpty(), "generated ConfigMaps deleted on the way")
		Expect(mon.emptied).To(BeEmpty(), "generated ConfigMaps without their flag set's content on the way")
		Expect(mon.regressions).To(BeEmpty(), "generated ConfigMaps that went back to an earlier edit on the way")
		Expect(duringA.Count(cmWrites)).To(BeNumerically("<=", boundA), "a's ConfigMap writes beyond its edits and the retries of injected faults")
		Expect(duringB.Count(cmWrites)).To(BeNumerically("<=", boundB), "b's ConfigMap writes beyond what it took over, its edits and the retries of injected faults")
		Expect(during.Count(func(o faultproxy.Outcome) bool {
			return o.Resource == "configmaps" && (o.Verb == "create" || o.Verb == "delete")
		})).To(BeZero(), "ConfigMaps created or deleted: they all existed and stay needed")
	})
})

// setUpWorld creates flag sets in a home namespace and, in it and further
// namespaces, a Deployment and a source that reads them all for it.
func setUpWorld(ctx context.Context) world {
	GinkgoHelper()
	var w world
	for i := range namespaces {
		ns, err := cp.NewNamespace(ctx, "fo")
		Expect(err).NotTo(HaveOccurred())
		w.namespaces = append(w.namespaces, ns)
		if i == 0 {
			w.home = ns
		}
	}
	var refs []v1beta1.Source
	for i := range flagSets {
		name := fmt.Sprintf("flags-%d", i)
		w.flagSets = append(w.flagSets, name)
		Expect(k8s.Create(ctx, flagSet(w.home, name))).To(Succeed())
		refs = append(refs, fixtures.FileRef(w.home+"/"+name))
	}
	for _, ns := range w.namespaces {
		if ns != w.home {
			Expect(k8s.Create(ctx, fixtures.ReferenceGrant(w.home, "from-"+ns, ns, ""))).To(Succeed())
		}
		Expect(k8s.Create(ctx, fixtures.Deployment(ns, "web", nil, nil))).To(Succeed())
		Expect(k8s.Create(ctx, fixtures.Source(ns, "flags", refs, fixtures.Targeting("Deployment", "web")))).To(Succeed())
	}
	return w
}

func startProxy(seed uint64) *faultproxy.Proxy {
	GinkgoHelper()
	p, err := faultproxy.Start(cp.Config, faultproxy.Options{Seed: seed})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(p.Close)
	return p
}

// startReplica runs the manager binary through proxy p, with leader election.
func startReplica(ctx context.Context, name string, p *faultproxy.Proxy) *managerproc.Process {
	GinkgoHelper()
	kubeconfig, err := p.Kubeconfig()
	Expect(err).NotTo(HaveOccurred())
	path := workDir + "/" + name + ".kubeconfig"
	Expect(writeFile(path, kubeconfig)).To(Succeed())
	proc, err := managerproc.Start(managerproc.Options{
		Binary: manager, Name: name, Kubeconfig: path, Dir: workDir,
		Args: []string{"--leader-elect", "--leader-election-namespace=" + leaseNamespace, "--leader-election-id=" + leaseID, "--webhooks=false"},
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(proc.Stop()).To(Succeed())
		if CurrentSpecReport().Failed() {
			fmt.Fprintf(GinkgoWriter, "last lines of replica %s (%s):\n%s\n", name, proc.LogPath, proc.Tail(40))
		}
	})
	return proc
}

// queuesEmpty: the replica has nothing left to do (flagplane_pending_keys).
func queuesEmpty(p *managerproc.Process) func() error {
	return func() error {
		m, err := p.Metrics()
		if err != nil {
			return err
		}
		if _, ok := m["flagplane_pending_keys"]; !ok {
			return fmt.Errorf("no flagplane_pending_keys yet")
		}
		if n := managerproc.Sum(m, "flagplane_pending_keys", nil); n != 0 {
			return fmt.Errorf("%v keys pending", n)
		}
		return nil
	}
}

// faultTotals: "kind n, kind n" for every fault injected.
func faultTotals(c faultproxy.Counts) string {
	var parts []string
	for _, r := range faults {
		n := c.Count(func(o faultproxy.Outcome) bool { return o.Fault == r.Fault })
		parts = append(parts, fmt.Sprintf("%s %d", r.Fault, n))
	}
	return strings.Join(dedupe(parts), ", ")
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
