package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod status. The node writes what a kubelet writes, through the status
// subresource: phase, the conditions PodReadyToStartContainers,
// Initialized, ContainersReady and Ready (PodScheduled is the scheduler's,
// or set here for a pod bound without one), hostIP(s) and podIP(s)
// (127.0.0.1: there is no pod network), startTime, and a status for every
// container and init container: state and last state, ready, started,
// restartCount, image, imageID and containerID. The imageID of a container
// run by a binary is "flagplane-node://<binary>@sha256:<digest of the
// binary>"; that of an idle placeholder is "flagplane-node://placeholder",
// and its pod gets the condition PlaceholderConditionType, so that status
// never pretends that the image runs. Conditions owned by others (readiness
// gates, DisruptionTarget) and the rest of the status are left alone.

// PlaceholderConditionType is the pod condition that says which containers
// run as idle placeholders (True), because no binary stands in for their
// image on this node.
const PlaceholderConditionType corev1.PodConditionType = "flagplane.dev/PlaceholderContainers"

// desiredStatus computes the pod's status from the runner's state, on top
// of the status last read from the API server.
func (r *podRunner) desiredStatus(base *corev1.PodStatus) *corev1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := base.DeepCopy()
	ip := r.n.facts.ip
	st.HostIP, st.HostIPs = ip, []corev1.HostIP{{IP: ip}}
	if r.sandboxReady {
		st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	if st.StartTime == nil {
		st.StartTime = &r.startTime
	}
	pod := r.pod
	st.ObservedGeneration = pod.Generation

	st.InitContainerStatuses = r.containerStatuses(r.initContainers)
	st.ContainerStatuses = r.containerStatuses(r.containers)

	initialized := r.initialized
	containersReady := initialized && len(r.containers) > 0
	for _, c := range r.initContainers {
		if c.role == roleSidecar && !c.ready {
			containersReady = false
		}
	}
	for _, c := range r.containers {
		if !c.ready {
			containersReady = false
		}
	}
	ready := containersReady
	for _, g := range pod.Spec.ReadinessGates {
		if cond := findCondition(st.Conditions, g.ConditionType); cond == nil || cond.Status != corev1.ConditionTrue {
			ready = false
		}
	}

	setCondition(st, pod.Generation, corev1.PodScheduled, true, "", "")
	setCondition(st, pod.Generation, corev1.PodReadyToStartContainers, r.sandboxReady, "", "")
	reason := ""
	if !initialized {
		reason = "ContainersNotInitialized"
	}
	setCondition(st, pod.Generation, corev1.PodInitialized, initialized, reason, r.notInitializedMessage())
	notReady := r.notReadyMessage()
	reason = ""
	if !containersReady {
		reason = "ContainersNotReady"
	}
	setCondition(st, pod.Generation, corev1.ContainersReady, containersReady, reason, notReady)
	if !ready && containersReady {
		reason, notReady = "ReadinessGatesNotReady", "the pod's readiness gates are not all True"
	}
	setCondition(st, pod.Generation, corev1.PodReady, ready, reason, notReady)
	if names := r.placeholders(); len(names) > 0 {
		setCondition(st, pod.Generation, PlaceholderConditionType, true, "NoBinaryForImage",
			fmt.Sprintf("containers %s run as idle placeholders: the flagplane test node has no binary for their images", strings.Join(names, ", ")))
	}

	st.Phase = r.phase()
	if st.Phase == corev1.PodFailed && r.failure != "" {
		st.Reason, st.Message = "InitContainerFailed", r.failure
	}
	return st
}

// phase follows the kubelet's rules, for the containers of this node.
func (r *podRunner) phase() corev1.PodPhase {
	if r.failure != "" {
		return corev1.PodFailed
	}
	if !r.initialized {
		return corev1.PodPending
	}
	running, waiting, succeeded, failed := 0, 0, 0, 0
	for _, c := range r.containers {
		switch {
		case c.state.Running != nil:
			running++
		case c.state.Terminated != nil && c.finished && c.state.Terminated.ExitCode == 0:
			succeeded++
		case c.state.Terminated != nil && c.finished:
			failed++
		case c.state.Terminated != nil, c.last.Terminated != nil:
			running++ // between a run and its restart
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case failed > 0:
		return corev1.PodFailed
	case succeeded > 0:
		return corev1.PodSucceeded
	}
	return corev1.PodPending
}

func (r *podRunner) containerStatuses(cs []*container) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i, c := range cs {
		started := c.started
		out[i] = corev1.ContainerStatus{
			Name: c.spec.Name, State: c.state, LastTerminationState: c.last,
			Ready: c.ready, Started: &started, RestartCount: c.restarts,
			Image: c.spec.Image, ImageID: c.imageID, ContainerID: c.containerID,
		}
	}
	return out
}

func (r *podRunner) notInitializedMessage() string {
	var names []string
	for _, c := range r.initContainers {
		if (c.role == roleInit && !c.finished) || (c.role == roleSidecar && !c.started) {
			names = append(names, c.spec.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "containers with incomplete status: [" + strings.Join(names, " ") + "]"
}

func (r *podRunner) notReadyMessage() string {
	var names []string
	for _, c := range r.initContainers {
		if c.role == roleSidecar && !c.ready {
			names = append(names, c.spec.Name)
		}
	}
	for _, c := range r.containers {
		if !c.ready {
			names = append(names, c.spec.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "containers with unready status: [" + strings.Join(names, " ") + "]"
}

func (r *podRunner) placeholders() []string {
	var names []string
	for _, c := range append(append([]*container{}, r.initContainers...), r.containers...) {
		if c.kind == runPlaceholder {
			names = append(names, c.spec.Name)
		}
	}
	return names
}

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// setCondition sets a condition, moving its transition time only when its
// status changes.
func setCondition(st *corev1.PodStatus, generation int64, t corev1.PodConditionType, ok bool, reason, msg string) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	if t == corev1.PodScheduled {
		if c := findCondition(st.Conditions, t); c != nil {
			return // the scheduler's
		}
	}
	c := findCondition(st.Conditions, t)
	if c == nil {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t})
		c = &st.Conditions[len(st.Conditions)-1]
	}
	if c.Status != status {
		c.LastTransitionTime = now()
	}
	c.Status, c.Reason, c.Message = status, reason, msg
	c.ObservedGeneration = generation
}

// writeStatus writes the desired status if it differs from the one last
// read, retrying on conflicts with a fresh read.
func (r *podRunner) writeStatus(ctx context.Context) error {
	pods := r.n.client.CoreV1().Pods(r.key.Namespace)
	pod := r.currentPod().DeepCopy()
	for attempt := 0; ; attempt++ {
		if pod.UID != r.uid {
			return nil // a new pod of the same name: not ours to write
		}
		st := r.desiredStatus(&pod.Status)
		if statusEqual(&pod.Status, st) {
			return nil
		}
		pod.Status = *st
		_, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		switch {
		case err == nil:
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < 5:
			fresh, getErr := pods.Get(ctx, r.key.Name, metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			pod = fresh
		default:
			return fmt.Errorf("writing the status of pod %s: %w", r.key, err)
		}
	}
}

// statusEqual compares statuses ignoring condition transition times of
// unchanged conditions (desiredStatus keeps those anyway).
func statusEqual(a, b *corev1.PodStatus) bool {
	return equalityDeep(a, b)
}

// statusLoop writes the pod's status whenever the runner's state changed.
func (r *podRunner) statusLoop(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.statusCh:
		case <-retry:
		}
		retry = nil
		if err := r.writeStatus(ctx); err != nil && ctx.Err() == nil {
			r.n.logf("pod %s: %v", r.key, err)
			retry = time.After(time.Second)
		}
	}
}
