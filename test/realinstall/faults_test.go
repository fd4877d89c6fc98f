package realinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/realnode"
	"github.com/flagplane/flagplane/topology"
)

// revisionFlag is a flag whose default variant names the edit: "r<n>", so
// that what a flagd serves says which edit it holds.
const (
	revisionFlag = "revision"
	revisions    = 20
)

func revisionFlagSet(ns, name string) *v1beta1.FeatureFlag {
	variants := map[string]int{}
	for i := 0; i < revisions; i++ {
		variants[fmt.Sprintf("r%d", i)] = i
	}
	raw, _ := json.Marshal(variants)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{revisionFlag: {State: "ENABLED", Variants: raw, DefaultVariant: "r0"}}
	return ff
}

// watcher polls every flagd of a namespace, remembers the newest revision
// each has served, and records every answer older than that: a running
// flagd must never go back.
type watcher struct {
	ns         string
	mu         sync.Mutex
	newest     map[string]int // pod UID → newest revision served
	current    map[string]int // pod UID → last revision served
	regressed  []string
	polls      atomic.Int64
	cancel     context.CancelFunc
	done       chan struct{}
	unanswered atomic.Int64
}

func watchRevisions(ns string) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{ns: ns, newest: map[string]int{}, current: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			w.poll(ctx)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return w
}

func (w *watcher) poll(ctx context.Context) {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(w.ns)); err != nil {
		return
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		e, err := flagdapi.Resolve(rctx, flagdAddr(&p), flagdapi.Int, revisionFlag, nil)
		cancel()
		w.polls.Add(1)
		if err != nil || !strings.HasPrefix(e.Variant, "r") {
			w.unanswered.Add(1)
			continue
		}
		rev, err := strconv.Atoi(strings.TrimPrefix(e.Variant, "r"))
		if err != nil {
			continue
		}
		w.mu.Lock()
		uid := string(p.UID)
		if newest, seen := w.newest[uid]; seen && rev < newest {
			w.regressed = append(w.regressed, fmt.Sprintf("%s served r%d after r%d at %s", p.Name, rev, newest, time.Now().Format(time.StampMilli)))
		}
		if rev > w.newest[uid] {
			w.newest[uid] = rev
		}
		w.current[uid] = rev
		w.mu.Unlock()
	}
}

// allServe tells whether n flagds were seen and each serves rev now.
func (w *watcher) allServe(n, rev int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at int
	for _, r := range w.current {
		if r == rev {
			at++
		}
	}
	return at >= n
}

func (w *watcher) stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.regressed
}

var _ = Describe("upgrades and faults on a real node", Ordered, func() {
	var (
		ns       string
		ff       *v1beta1.FeatureFlag
		w        *watcher
		rev      int
		flagdsUp = 3
	)

	BeforeAll(func(ctx SpecContext) {
		ns = newNamespace(ctx, "faults")
		ff = revisionFlagSet(ns, "flags")
		sources := map[string]v1beta1.SyncProviderType{
			"file": v1beta1.SyncProviderFile, "kubernetes": v1beta1.SyncProviderKubernetes, "proxy": v1beta1.SyncProviderFlagdProxy,
		}
		create(ctx, ff)
		for name, provider := range sources {
			create(ctx, fixtures.Source(ns, name, []v1beta1.Source{{Source: "flags", Provider: provider}}),
				app(ns, name, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: name}))
		}
		for name := range sources {
			injectedPod(ctx, ns, name)
		}
		w = watchRevisions(ns)
		DeferCleanup(func() {
			regressed := w.stop()
			AddReportEntry("flagd answers polled during the faults", fmt.Sprint(w.polls.Load()))
			Expect(regressed).To(BeEmpty(), "a running flagd served an older revision than it had served")
		})
		Eventually(func() bool { return w.allServe(flagdsUp, 0) }).WithTimeout(deliveryTimeout).Should(BeTrue())
	})

	// edit makes the next revision, and returns it.
	edit := func(ctx context.Context) int {
		GinkgoHelper()
		rev++
		Eventually(func() error {
			var cur v1beta1.FeatureFlag
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur); err != nil {
				return err
			}
			f := cur.Spec.FlagSpec.Flags[revisionFlag]
			f.DefaultVariant = fmt.Sprintf("r%d", rev)
			cur.Spec.FlagSpec.Flags[revisionFlag] = f
			return k8s.Update(ctx, &cur)
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		return rev
	}
	// converged waits until every flagd serves rev and both managers are
	// Ready, and reports how long that took from since.
	converged := func(ctx context.Context, fault string, since time.Time, want int) {
		GinkgoHelper()
		Eventually(func() bool { return w.allServe(flagdsUp, want) }).WithTimeout(3*time.Minute).WithPolling(100*time.Millisecond).
			Should(BeTrue(), "every flagd serves r%d after: %s", want, fault)
		served := time.Since(since)
		waitForManagers(ctx, 2)
		webhooksAnswer(ctx)
		AddReportEntry("converged after "+fault, fmt.Sprintf("every flagd serves the edit %s after; managers Ready and webhooks answering %s after", fmtDuration(served), fmtDuration(time.Since(since))))
		Expect(cluster.Healthy()).To(Succeed())
	}

	It("helm upgrade to a new image while opted-in pods are created continuously: every pod is admitted with flagd, none refused", func(ctx SpecContext) {
		// Pods of the file workload's ReplicaSet, as its controller creates them.
		owner := injectedPod(ctx, ns, "file")
		stop := make(chan struct{})
		var created, injected, refused, bare atomic.Int64
		var failures, bareOnes sync.Map
		began := time.Now()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-churn-%d", owner.GenerateName, i),
					Labels: owner.Labels, OwnerReferences: owner.OwnerReferences,
					Annotations: map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "file"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: realnode.BusyboxImage, Command: []string{"sleep", "1"}}}}}
				// A server-side dry run goes through the whole admission chain,
				// the injector through its Service included, and keeps nothing.
				err := k8s.Create(ctx, pod, client.DryRunAll)
				created.Add(1)
				switch {
				case err != nil:
					refused.Add(1)
					failures.Store(err.Error(), true)
				case len(pod.Spec.InitContainers) > 0 && pod.Spec.InitContainers[0].Name == "flagd":
					injected.Add(1)
				default:
					bare.Add(1)
					// When, and what the answer marked: a pod with no mark of
					// flagplane's never reached a webhook that answered it.
					bareOnes.Store(fmt.Sprintf("+%s %s annotations %v", fmtDuration(time.Since(began)), pod.Name, pod.Annotations), true)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		helm("upgrade", releaseName, filepath.Join(root, "charts", "flagplane"), "--reuse-values",
			"--set", "controllerManager.manager.image.tag="+upgradeTag, "--set", "controllerManager.manager.image.pullPolicy=Always",
			// A user turning on the admission log, as docs/debugging.md says.
			"--set-json", `extraArgs=["--zap-log-level=debug"]`,
			"--wait", "--timeout", "5m")
		Eventually(func(g Gomega) {
			pods := waitForManagers(ctx, 2)
			for _, p := range pods {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(upgradeImage))
			}
		}).WithTimeout(podReadyTimeout).Should(Succeed())
		rolled := time.Since(began)
		// A few more after the rollout, against the new replicas only.
		time.Sleep(3 * time.Second)
		close(stop)
		wg.Wait()
		var errs []string
		failures.Range(func(k, _ any) bool { errs = append(errs, k.(string)); return true })
		AddReportEntry("helm upgrade under pod creation", fmt.Sprintf("rollout %s; pods created %d, admitted with flagd %d, admitted without flagd %d, refused %d",
			fmtDuration(rolled), created.Load(), injected.Load(), bare.Load(), refused.Load()))
		Expect(created.Load()).To(BeNumerically(">", 20), "pods were created throughout the rollout")
		Expect(refused.Load()).To(BeZero(), "refusals: %v", errs)
		var bares []string
		bareOnes.Range(func(k, _ any) bool { bares = append(bares, k.(string)); return true })
		Expect(bare.Load()).To(BeZero(), "pods admitted without flagd: %v", bares)
		Expect(injected.Load()).To(Equal(created.Load()))
		currentImage = upgradeImage

		By("the new replicas log each admission at the level the user turned on")
		probes := 0
		Eventually(func(g Gomega) {
			// A Pod admitted now is admitted by a new replica.
			probes++
			name := fmt.Sprintf("%s-logged-%d", owner.GenerateName, probes)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: owner.Labels, OwnerReferences: owner.OwnerReferences,
				Annotations: map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "file"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: realnode.BusyboxImage}}}}
			g.Expect(k8s.Create(ctx, pod, client.DryRunAll)).To(Succeed())
			out, err := cluster.Kubectl("logs", "-n", systemNS, "-l", "app.kubernetes.io/name=flagplane", "--tail=-1")
			g.Expect(err).NotTo(HaveOccurred())
			var logged []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, `"msg":"admission allowed"`) && strings.Contains(l, `"kind":"Pod"`) && strings.Contains(l, `"dryRun":true`) {
					logged = append(logged, l)
				}
			}
			g.Expect(logged).To(ContainElement(ContainSubstring(name)))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("deleting the leader pod with --grace-period=0", func(ctx SpecContext) {
		// The leader now: a replica that holds the Lease (a stopped leader
		// releases it, and the standby takes it a moment later).
		var leader string
		Eventually(func(g Gomega) {
			var lease coordinationv1.Lease
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane.core.openfeature.dev"}, &lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			leader = strings.SplitN(*lease.Spec.HolderIdentity, "_", 2)[0]
			var names []string
			for _, p := range waitForManagers(ctx, 2) {
				names = append(names, p.Name)
			}
			g.Expect(names).To(ContainElement(leader))
		}).WithTimeout(time.Minute).Should(Succeed())
		since := time.Now()
		kubectl("delete", "pod", "-n", systemNS, leader, "--grace-period=0", "--force")
		want := edit(ctx)
		converged(ctx, "the leader pod deleted with --grace-period=0", since, want)
	})

	It("restarting containerd", func(ctx SpecContext) {
		want := edit(ctx)
		since := time.Now()
		Expect(cluster.Restart(realnode.Containerd, 10*time.Second)).To(Succeed())
		converged(ctx, "containerd restarted", since, want)
	})

	It("restarting the kubelet", func(ctx SpecContext) {
		want := edit(ctx)
		since := time.Now()
		Expect(cluster.Restart(realnode.Kubelet, 10*time.Second)).To(Succeed())
		converged(ctx, "the kubelet restarted", since, want)
	})

	It("deleting a generated ConfigMap", func(ctx SpecContext) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: topology.ConfigMapName(topology.FlagSetKey(ns, "flags"))}}
		since := time.Now()
		Expect(k8s.Delete(ctx, cm)).To(Succeed())
		want := edit(ctx)
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm) }).WithTimeout(deliveryTimeout).Should(Succeed(), "flagplane writes it back")
		converged(ctx, "a generated ConfigMap deleted", since, want)
	})

	It("stopping the API server for 20 s (SIGSTOP, then SIGCONT)", func(ctx SpecContext) {
		want := edit(ctx)
		since := time.Now()
		Expect(cluster.Pause(realnode.APIServer)).To(Succeed())
		time.Sleep(20 * time.Second)
		Expect(cluster.Resume(realnode.APIServer)).To(Succeed())
		want2 := edit(ctx)
		Expect(want2).To(BeNumerically(">", want))
		converged(ctx, "the API server stopped for 20 s", since, want2)
		var restarts []string
		for _, p := range waitForManagers(ctx, 2) {
			st := p.Status.ContainerStatuses[0]
			r := fmt.Sprintf("%s: %d restarts", p.Name, st.RestartCount)
			if t := st.LastTerminationState.Terminated; t != nil {
				r += fmt.Sprintf(", last exit %d (%s) %q", t.ExitCode, t.Reason, lastLine(t.Message))
			}
			restarts = append(restarts, r)
		}
		AddReportEntry("manager replicas after the API server's pause", strings.Join(restarts, "; "))
	})
})
