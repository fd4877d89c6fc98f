package staging

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
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
	// (ManagementPort 0: it has none, or it cannot be read: see PodOf).
	IP             string
	ManagementPort int32
	// EvaluationErrors is how many evaluations its flagd answered with an
	// error since the rollout reached it; -1 when its metrics could not be
	// read (yet).
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

// ManagementPortName is the name of the flagd sidecar's management port,
// where its /metrics are.
const ManagementPortName = "management"

// PodOf reads a pod for the gates. Its metrics are read only from the
// flagd sidecar flagplane injects (an init container named
// injection.SidecarName that runs as a native sidecar), on that
// container's port named ManagementPortName: an application's own
// "management" port (Spring Boot's name) is never read. A pod on the
// host's network has the node's IP, whose ports are the node's, not the
// pod's: its metrics are not read.
func PodOf(pod *corev1.Pod, w topology.Key) Pod {
	out := Pod{Namespace: pod.Namespace, Name: pod.Name, Workload: w, Ready: false, ReadySince: pod.CreationTimestamp.Time,
		UID: string(pod.UID), IP: pod.Status.PodIP, EvaluationErrors: -1}
	if !pod.Spec.HostNetwork {
		out.ManagementPort = sidecarManagementPort(pod)
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

// sidecarManagementPort is the management port of the flagd sidecar that
// flagplane injected into pod, 0 when it has none.
func sidecarManagementPort(pod *corev1.Pod) int32 {
	for _, c := range pod.Spec.InitContainers {
		if c.Name != injection.SidecarName || c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == ManagementPortName && p.ContainerPort > 0 && p.ContainerPort <= 65535 {
				return p.ContainerPort
			}
		}
	}
	return 0
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
			var n, most int64
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
				n = AddCounts(n, p.EvaluationErrors)
				if p.EvaluationErrors > most {
					most = p.EvaluationErrors
					worst = fmt.Sprintf("most at pod %s/%s: %d", p.Namespace, p.Name, p.EvaluationErrors)
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
			return "gate Prometheus is off in this manager (its --prometheus-gates): no rollout of this policy can be judged by it"
		}
		if g.Type == deliveryv1alpha1.GateConfirmed {
			return "gate Confirmed judges member clusters: only a fleet hub evaluates it; in one cluster, Ready and the steps already wait for confirmation"
		}
	}
	return ""
}

// PrometheusFailure judges a Prometheus gate's value: the failure, or "".
// It names the gate by its index, never the value nor the query: the
// value is of the consumers' namespaces, which are not all the policy's
// author's (see ConfineQuery).
func PrometheusFailure(index int, g deliveryv1alpha1.Gate, value float64) string {
	limit := int64(0)
	if g.Max != nil {
		limit = *g.Max
	}
	if value > float64(limit) {
		return fmt.Sprintf("gate Prometheus (spec.gates[%d]) failed: its query's value is more than %d", index, limit)
	}
	return ""
}
