package node

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The downward API: pod fields and container resources, for env
// (fieldRef, resourceFieldRef) and downwardAPI volume items alike.

// podField resolves a downward-API field path for env and volumes.
func podField(pod *corev1.Pod, path string, node *nodeFacts) (string, error) {
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return node.ip, nil
	}
	return "", configErrorf("unsupported fieldPath %q", path)
}

// subscript parses "prefix['key']".
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap is the downward API's rendering of labels and annotations:
// key="value" lines, sorted, values quoted as Go strings.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// resourceField resolves a resourceFieldRef: the container's limit (the
// node's allocatable when it sets none) or request, in units of the
// divisor, rounded up.
func resourceField(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, node *nodeFacts) (string, error) {
	target := c
	if ref.ContainerName != "" {
		target = findContainer(pod, ref.ContainerName)
		if target == nil {
			return "", configErrorf("resourceFieldRef names no container %q", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", configErrorf("unsupported resource %q", ref.Resource)
	}
	res := corev1.ResourceName(name)
	var q resource.Quantity
	var set bool
	if kind == "limits" {
		q, set = target.Resources.Limits[res]
		if !set {
			q, set = node.allocatable[res]
		}
	} else {
		q, set = target.Resources.Requests[res]
		if !set && res == corev1.ResourceCPU {
			q, set = resource.MustParse("0"), true
		}
	}
	if !set {
		q = resource.MustParse("0")
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == corev1.ResourceCPU {
		v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
		return fmt.Sprintf("%d", int64(v)), nil
	}
	v := math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	return fmt.Sprintf("%d", int64(v)), nil
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, c := range allContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}
