package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podRunner runs one pod bound to the node, from its volumes to its
// deletion. Like a kubelet's pod worker, it owns the pod's processes,
// directories and ports; state that status reports is guarded by mu.
type podRunner struct {
	n      *Node
	uid    types.UID
	key    types.NamespacedName
	dir    string
	logDir string

	ports   *podPorts
	volumes *podVolumes

	mu             sync.Mutex
	pod            *corev1.Pod // as last seen
	changedCh      chan struct{}
	initContainers []*container
	containers     []*container
	startTime      metav1.Time
	mounted        bool // every volume projected once
	sandboxReady   bool
	initialized    bool
	failure        string // why the pod failed for good (an init container)
	volumeErr      string // last FailedMount message
	stopping       bool   // containers are being stopped: none may start
	termGrace      time.Duration
	objectGone     bool

	termCh    chan struct{} // closed once termination is requested
	termOnce  sync.Once
	projectCh chan struct{}
	statusCh  chan struct{}
	done      chan struct{}
}

func newPodRunner(n *Node, pod *corev1.Pod) *podRunner {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	dir := filepath.Join(n.dir, "pods", string(pod.UID))
	r := &podRunner{
		n: n, uid: pod.UID, key: key, dir: dir,
		// Like the kubelet's /var/log/pods/<ns>_<name>_<uid>; kept after
		// the pod is gone, until the node stops.
		logDir:    filepath.Join(n.dir, "logs", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		pod:       pod,
		changedCh: make(chan struct{}),
		startTime: now(),
		termCh:    make(chan struct{}),
		projectCh: make(chan struct{}, 1),
		statusCh:  make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	for _, c := range pod.Spec.InitContainers {
		role := roleInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			role = roleSidecar
		}
		r.initContainers = append(r.initContainers, newContainer(r, c, role))
	}
	for _, c := range pod.Spec.Containers {
		r.containers = append(r.containers, newContainer(r, c, roleRegular))
	}
	return r
}

// update hands the runner the pod as the API server has it now.
func (r *podRunner) update(pod *corev1.Pod) {
	r.mu.Lock()
	old := r.pod
	r.pod = pod
	r.mu.Unlock()
	if pod.DeletionTimestamp != nil {
		grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second
		r.requestTermination(grace, false)
	}
	if !equalityDeep(old.Labels, pod.Labels) || !equalityDeep(old.Annotations, pod.Annotations) {
		r.reproject() // the downward API may show them
	}
	if readinessGatesChanged(old, pod) {
		// Someone else set a readiness gate's condition: Ready follows at
		// once, as the kubelet reconciles a pod's readiness when its gates
		// change (status.NeedToReconcilePodReadiness).
		r.wakeStatusWriter()
	}
}

// readinessGatesChanged tells whether a pod's readiness gate conditions
// changed status between two of its versions.
func readinessGatesChanged(old, pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		before, now := findCondition(old.Status.Conditions, g.ConditionType), findCondition(pod.Status.Conditions, g.ConditionType)
		if (before == nil) != (now == nil) || (before != nil && before.Status != now.Status) {
			return true
		}
	}
	return false
}

// requestTermination stops the pod with the given grace period. gone says
// the pod object was deleted already (a forced deletion).
func (r *podRunner) requestTermination(grace time.Duration, gone bool) {
	r.mu.Lock()
	if gone {
		r.objectGone = true
	}
	r.mu.Unlock()
	r.termOnce.Do(func() {
		r.mu.Lock()
		r.termGrace = grace
		r.mu.Unlock()
		close(r.termCh)
	})
}

func (r *podRunner) currentPod() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pod
}

func (r *podRunner) isStopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

func (r *podRunner) podRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: r.key.Namespace, Name: r.key.Name, UID: r.uid}
}

func (r *podRunner) restartPolicy() corev1.RestartPolicy {
	if p := r.currentPod().Spec.RestartPolicy; p != "" {
		return p
	}
	return corev1.RestartPolicyAlways
}

// terminationGrace is the pod's terminationGracePeriodSeconds.
func (r *podRunner) terminationGrace() time.Duration {
	return time.Duration(ptr.Deref(r.currentPod().Spec.TerminationGracePeriodSeconds, 30)) * time.Second
}

// changed wakes whoever waits for the runner's state, and the status writer.
func (r *podRunner) changed() {
	r.mu.Lock()
	close(r.changedCh)
	r.changedCh = make(chan struct{})
	r.mu.Unlock()
	r.wakeStatusWriter()
}

// wakeStatusWriter has the status writer compute and write the pod's status.
func (r *podRunner) wakeStatusWriter() {
	select {
	case r.statusCh <- struct{}{}:
	default:
	}
}

func (r *podRunner) reproject() {
	select {
	case r.projectCh <- struct{}{}:
	default:
	}
}

// waitFor waits until cond (called with mu held) holds, or termination is
// requested (false).
func (r *podRunner) waitFor(cond func() bool) bool {
	for {
		r.mu.Lock()
		ok, ch := cond(), r.changedCh
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-r.termCh:
			return false
		}
	}
}

// waitChangeOrTimeout waits for any change of state, d, or ctx.
func (r *podRunner) waitChangeOrTimeout(ctx context.Context, d time.Duration) bool {
	r.mu.Lock()
	ch := r.changedCh
	r.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// run is the pod's life: volumes, init containers in order (each sidecar
// started, and past its startup probe, before the next), then the
// containers; then, once termination is requested, the stop.
func (r *podRunner) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(r.n.ctx)
	defer cancel()
	statusCtx, stopStatus := context.WithCancel(context.Background())
	statusDone := make(chan struct{})
	go func() { defer close(statusDone); r.statusLoop(statusCtx) }()
	defer func() { stopStatus(); <-statusDone }()

	var wg sync.WaitGroup
	if r.setUp(ctx) {
		r.start(ctx, &wg)
	}
	<-r.termCh
	r.terminate(cancel, &wg)
}

// setUp allocates the pod's ports and projects its volumes; it returns
// false if termination was requested first.
func (r *podRunner) setUp(ctx context.Context) bool {
	pod := r.currentPod()
	for {
		var err error
		if r.ports, err = newPodPorts(r.n.ports, pod); err == nil {
			break
		}
		r.n.event(r.podRef(), corev1.EventTypeWarning, "FailedCreatePodSandBox", "%v", err)
		select {
		case <-r.termCh:
			return false
		case <-time.After(time.Second):
		}
	}
	tokens := newPodTokens(r.n.client, pod, r.reproject)
	vols, err := newPodVolumes(filepath.Join(r.dir, "volumes"), pod, r.n.objects, tokens, r.reproject)
	if err != nil {
		r.n.event(r.podRef(), corev1.EventTypeWarning, "FailedMount", "%v", err)
		return false
	}
	r.volumes = vols
	go r.projectLoop(ctx)
	r.reproject()
	if !r.waitFor(func() bool { return r.mounted }) {
		return false
	}
	r.mu.Lock()
	r.sandboxReady = true
	r.mu.Unlock()
	r.changed()
	return true
}

// start runs the init containers in order, then the containers.
func (r *podRunner) start(ctx context.Context, wg *sync.WaitGroup) {
	for _, c := range r.initContainers {
		wg.Add(1)
		go func() { defer wg.Done(); c.run(ctx) }()
		if c.role == roleSidecar {
			if !r.waitFor(func() bool { return c.started }) {
				return
			}
			continue
		}
		if !r.waitFor(func() bool { return c.finished }) {
			return
		}
		r.mu.Lock()
		failed := c.state.Terminated == nil || c.state.Terminated.ExitCode != 0
		if failed {
			r.failure = fmt.Sprintf("init container %s failed and restartPolicy is %s", c.spec.Name, r.pod.Spec.RestartPolicy)
		}
		r.mu.Unlock()
		if failed {
			r.changed()
			r.stopSidecars()
			return
		}
	}
	r.mu.Lock()
	r.initialized = true
	r.mu.Unlock()
	r.changed()
	for _, c := range r.containers {
		wg.Add(1)
		go func() { defer wg.Done(); c.run(ctx) }()
	}
	// Containers that will not restart end the pod's run; its sidecars are
	// then stopped, as the kubelet stops them.
	if r.waitFor(func() bool {
		for _, c := range r.containers {
			if !c.finished {
				return false
			}
		}
		return true
	}) {
		r.stopSidecars()
	}
}

func (r *podRunner) stopSidecars() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	grace := r.terminationGrace()
	for i := len(r.initContainers) - 1; i >= 0; i-- {
		if c := r.initContainers[i]; c.role == roleSidecar {
			c.stop(grace)
		}
	}
}

// terminate stops the containers within the grace period (the
// containers first, then the sidecars in reverse order, SIGKILL for
// whatever is left at the deadline), deletes the pod object as the
// kubelet does, and removes what the pod left on the node.
func (r *podRunner) terminate(cancel context.CancelFunc, wg *sync.WaitGroup) {
	r.mu.Lock()
	r.stopping = true
	grace := r.termGrace
	r.mu.Unlock()
	deadline := time.Now().Add(grace)
	cancel() // no more restarts, probes or projections

	var stops sync.WaitGroup
	for _, c := range append(append([]*container{}, r.containers...), r.initContainers...) {
		if c.role == roleSidecar {
			continue
		}
		stops.Add(1)
		go func() { defer stops.Done(); c.stop(time.Until(deadline)) }()
	}
	stops.Wait()
	for i := len(r.initContainers) - 1; i >= 0; i-- {
		if c := r.initContainers[i]; c.role == roleSidecar {
			c.stop(time.Until(deadline))
		}
	}
	wg.Wait()

	// What the pod held on the node goes before the pod object does, as
	// with a kubelet: once the object is gone, nothing of it is left.
	if r.volumes != nil {
		r.volumes.close()
	}
	if r.ports != nil {
		r.ports.release()
	}
	if !r.n.opts.KeepDir {
		if err := os.RemoveAll(r.dir); err != nil {
			r.n.logf("pod %s: removing its directory: %v", r.key, err)
		}
	}

	r.mu.Lock()
	gone := r.objectGone
	r.mu.Unlock()
	if gone || r.n.ctx.Err() != nil {
		return
	}
	ctx, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	if err := r.writeStatus(ctx); err != nil {
		r.n.logf("pod %s: final status: %v", r.key, err)
	}
	err := r.n.client.CoreV1().Pods(r.key.Namespace).Delete(ctx, r.key.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &r.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.n.logf("pod %s: deleting the terminated pod: %v", r.key, err)
	}
}
