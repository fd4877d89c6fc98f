package install

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// balancer stands in for a Service in front of the manager's replicas: a
// TCP proxy that spreads new connections over the endpoints it has, as
// kube-proxy does over the ready Pods. An endpoint taken out keeps the
// connections it has (as conntrack keeps them) until its server closes them.
type balancer struct {
	l    net.Listener
	mu   sync.Mutex
	next int
	eps  []string
}

func newBalancer() *balancer {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	b := &balancer{l: l}
	go b.serve()
	DeferCleanup(l.Close)
	return b
}

func (b *balancer) addr() string { return b.l.Addr().String() }

func (b *balancer) add(ep string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.eps = append(b.eps, ep)
}

func (b *balancer) remove(ep string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.eps = slices.DeleteFunc(b.eps, func(e string) bool { return e == ep })
}

func (b *balancer) pick() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.eps) == 0 {
		return "", false
	}
	b.next++
	return b.eps[b.next%len(b.eps)], true
}

func (b *balancer) serve() {
	for {
		in, err := b.l.Accept()
		if err != nil {
			return
		}
		ep, ok := b.pick()
		if !ok {
			_ = in.Close() // no ready endpoint: connection refused, as a Service without endpoints
			continue
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", ep)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}

// describeRollout upgrades the installed manager the way the Deployment's
// rolling update does it (maxSurge 1, maxUnavailable 0, a readiness probe on
// /readyz, a preStop sleep before the container stops): a new replica
// starts and joins the Service's endpoints once /readyz says so, then an old
// one leaves the endpoints, sleeps its preStop and stops, until every
// replica is new. Meanwhile Pods that opt in are created without pause.
// Every one must be admitted with flagd: no admission gap.
func describeRollout(mgr func() *installedManager, shop func() string) {
	It("rolls its replicas one at a time with no admission gap: every Pod created meanwhile gets flagd", func(ctx SpecContext) {
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-manager"}, d)).To(Succeed())
		Expect(d.Spec.Strategy.RollingUpdate).NotTo(BeNil())
		Expect(d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(BeZero(), "the rollout this spec plays")
		manager := d.Spec.Template.Spec.Containers[0]
		Expect(manager.ReadinessProbe).NotTo(BeNil())
		Expect(manager.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(manager.Lifecycle).NotTo(BeNil())
		Expect(manager.Lifecycle.PreStop.Sleep).NotTo(BeNil())
		preStop := time.Duration(manager.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		Expect(preStop).To(BeNumerically(">", 0))

		// The Pods' owner, known to the manager's cache before the first Pod.
		job := suspendedJob(ctx, shop())
		old := mgr()
		Eventually(func(g Gomega) {
			pod := jobPod(job, "shop")
			g.Expect(k8s.Create(ctx, pod, client.DryRunAll)).To(Succeed())
			g.Expect(sidecarOf(pod)).NotTo(BeNil())
		}).Should(Succeed(), "a Pod of the Job gets flagd")
		svc := newBalancer()
		svc.add(strings.TrimPrefix(old.webhookBase, "https://"))
		pointWebhooksAt(ctx, "https://"+svc.addr(), "flagplane-injector", "flagplane-validator")

		// Pods, created without pause until the rollout is over.
		var (
			mu      sync.Mutex
			created []*corev1.Pod
			failed  []error
		)
		creating, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(stopped)
			for creating.Err() == nil {
				pod := jobPod(job, "shop")
				err := k8s.Create(ctx, pod)
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					created = append(created, pod)
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}()
		stopCreating := func() {
			cancel()
			<-stopped
		}
		DeferCleanup(stopCreating)
		createdSoFar := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(created)
		}
		Eventually(createdSoFar).Should(BeNumerically(">=", 5), "Pods admitted through the balancer before the rollout")

		// The rollout: two new replicas replace the old one, one at a time.
		current := old
		for i := range 2 {
			By("a new replica starts, and joins the endpoints once ready")
			next := runInstalled(ctx, systemNS, nil)
			Eventually(httpStatus("http://" + next.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
			svc.add(strings.TrimPrefix(next.webhookBase, "https://"))
			at := createdSoFar()
			Eventually(createdSoFar).Should(BeNumerically(">=", at+5), "Pods admitted while both serve (%d)", i)

			By("an old replica leaves the endpoints, sleeps its preStop, and stops")
			svc.remove(strings.TrimPrefix(current.webhookBase, "https://"))
			time.Sleep(preStop)
			Expect(current.stop()).To(Succeed())
			at = createdSoFar()
			Eventually(createdSoFar).Should(BeNumerically(">=", at+5), "Pods admitted after the old replica stopped (%d)", i)
			current = next
		}
		stopCreating()

		mu.Lock()
		defer mu.Unlock()
		Expect(errors.Join(failed...)).NotTo(HaveOccurred(), "no Pod refused during the rollout")
		var without []string
		for _, pod := range created {
			if sidecarOf(pod) == nil {
				without = append(without, pod.Name)
			}
		}
		Expect(without).To(BeEmpty(), "of %d Pods created during the rollout, these were admitted without flagd", len(created))
		AddReportEntry("pods created during the rollout", len(created))
		GinkgoWriter.Printf("%d Pods created during the rollout, every one with flagd\n", len(created))
	})
}

// jobPod is a Pod as the Job controller would create one for job (which is
// suspended, so that it creates none itself) that opts in to a source by
// annotation.
func jobPod(job *batchv1.Job, source string) *corev1.Pod {
	pod := optedInPod(job.Namespace, source)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name,
		UID: job.UID, Controller: ptr.To(true)}}
	return pod
}

// suspendedJob creates a Job in ns that runs nothing.
func suspendedJob(ctx context.Context, ns string) *batchv1.Job {
	GinkgoHelper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rollout"},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}}}
	Expect(k8s.Create(ctx, job)).To(Succeed())
	return job
}
