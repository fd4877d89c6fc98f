package staging

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

// Pod is what the gates read of a pod of a workload that serves the new
// revision.
type Pod struct {
	Namespace, Name string
	Workload        topology.Key
	// Ready is the pod's Ready condition, and since when it holds.
	Ready      bool
	ReadySince time.Time
	// Restarts are the times its containers last terminated and were
	// restarted, with their restart counts.
	Restarts []Restart
	// UID identifies the pod for the evaluation error baseline.
	UID string
	// IP and ManagementPort are where its flagd sidecar serves its metrics
	// (ManagementPort 0: it has none).
	IP             string
	ManagementPort int32
	// EvaluationErrors is how many evaluations its flagd answered with an
	// error since the rollout reached it; -1 when its metrics could not be
	// read.
	EvaluationErrors int64
	// MetricsError says why its metrics could not be read.
	MetricsError string
}

// Restart is a container's last termination and its restart count.
type Restart struct {
	Container string
	Count     int32
	Finished  time.Time
}

// PodOf reads a pod for the gates.
func PodOf(pod *corev1.Pod, w topology.Key) Pod {
	out := Pod{Namespace: pod.Namespace, Name: pod.Name, Workload: w, Ready: false, ReadySince: pod.CreationTimestamp.Time,
		UID: string(pod.UID), IP: pod.Status.PodIP}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		for _, p := range c.Ports {
			if p.Name == "management" {
				out.ManagementPort = p.ContainerPort
			}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
			out.ReadySince = c.LastTransitionTime.Time
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.LastTerminationState.Terminated; t != nil && cs.RestartCount > 0 {
			out.Restarts = append(out.Restarts, Restart{Container: cs.Name, Count: cs.RestartCount, Finished: t.FinishedAt.Time})
		}
	}
	return out
}

// GateFailure says which gate fails on pods, or "". since is when the
// current step started: restarts before it are not the rollout's.
//
//   - PodsReady fails when a pod has not been Ready for longer than the
//     gate's For (default 0: at once).
//   - Restarts fails when more containers of the pods restarted since the
//     step started (their last termination finished after the second it
//     started in) than Max.
//   - EvaluationErrors fails when the flagd sidecars of the pods answered
//     more evaluations with an error since the rollout reached them than
//     Max (Pod.EvaluationErrors, from flagd's own metrics).
//
// Prometheus gates are judged apart (PrometheusFailure): their value
// comes from a query, not from the pods.
func GateFailure(gates []deliveryv1alpha1.Gate, pods []Pod, now, since time.Time) string {
	for _, g := range gates {
		switch g.Type {
		case deliveryv1alpha1.GatePodsReady:
			grace := time.Duration(0)
			if g.For != nil {
				grace = g.For.Duration
			}
			for _, p := range pods {
				if !p.Ready && now.Sub(p.ReadySince) >= grace {
					return fmt.Sprintf("gate PodsReady failed: pod %s/%s of %s %s is not Ready (since %s)",
						p.Namespace, p.Name, p.Workload.Kind, p.Workload.Name, p.ReadySince.UTC().Format(time.RFC3339))
				}
			}
		case deliveryv1alpha1.GateEvaluationErrors:
			limit := int64(0)
			if g.Max != nil {
				limit = *g.Max
			}
			var n int64
			var worst string
			for _, p := range pods {
				if p.ManagementPort == 0 {
					continue // no flagd sidecar: nothing of flagd's to read
				}
				if p.EvaluationErrors < 0 {
					// Unknown is not failing: a flagd whose metrics cannot be
					// read (yet) says nothing either way; PodsReady judges its pod.
					continue
				}
				n += p.EvaluationErrors
				if p.EvaluationErrors > 0 {
					worst = fmt.Sprintf("pod %s/%s: %d", p.Namespace, p.Name, p.EvaluationErrors)
				}
			}
			if n > limit {
				return fmt.Sprintf("gate EvaluationErrors failed: flagd answered %d evaluation(s) with an error since the rollout reached it, more than %d (%s)", n, limit, worst)
			}
		case deliveryv1alpha1.GateRestarts:
			limit := int64(0)
			if g.Max != nil {
				limit = *g.Max
			}
			var n int64
			var last string
			for _, p := range pods {
				for _, r := range p.Restarts {
					// Times in the API have seconds: a restart in the
					// second the step started is not told from one
					// before it, and does not count.
					if r.Finished.After(since) {
						n++
						last = fmt.Sprintf("container %s of pod %s/%s", r.Container, p.Namespace, p.Name)
					}
				}
			}
			if n > limit {
				return fmt.Sprintf("gate Restarts failed: %d container restart(s) since the step started, more than %d (last: %s)", n, limit, last)
			}
		}
	}
	return ""
}

// NextCheck is how long until the gates' verdict on pods can change
// without an event: the soonest end of a not Ready pod's PodsReady grace
// (0: none).
func NextCheck(gates []deliveryv1alpha1.Gate, pods []Pod, now time.Time) time.Duration {
	var next time.Duration
	for _, g := range gates {
		if g.Type != deliveryv1alpha1.GatePodsReady || g.For == nil {
			continue
		}
		for _, p := range pods {
			if left := g.For.Duration - now.Sub(p.ReadySince); !p.Ready && left > 0 && (next == 0 || left < next) {
				next = left
			}
		}
	}
	return next
}

// Unsupported says which gate of a policy this manager does not
// evaluate, or "": Prometheus gates when the manager runs without
// --prometheus-gates.
func Unsupported(gates []deliveryv1alpha1.Gate, prometheus bool) string {
	for _, g := range gates {
		if g.Type == deliveryv1alpha1.GatePrometheus && !prometheus {
			return "gate Prometheus is off in this manager (its --prometheus-gates): a policy naming it stages nothing (remove the gate, or turn them on)"
		}
	}
	return ""
}

// PrometheusFailure judges a Prometheus gate's value: the failure, or "".
func PrometheusFailure(g deliveryv1alpha1.Gate, query string, value float64) string {
	limit := int64(0)
	if g.Max != nil {
		limit = *g.Max
	}
	if value > float64(limit) {
		return fmt.Sprintf("gate Prometheus failed: %s is %g, more than %d", query, value, limit)
	}
	return ""
}
