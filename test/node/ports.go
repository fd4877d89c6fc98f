package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Ports. Pods here have no network namespace of their own: every process
// listens on the host's loopback. So that two pods (or a pod and anything
// else on the machine) never fight over a port, each port a pod declares
// (spec.containers[].ports and those of init containers) is given a free
// host port, and the values that carry a declared port are rewritten
// consistently within the pod:
//
//   - flagd's port flags (--port, --management-port, --sync-port,
//     --ofrep-port, --metrics-port, and their short forms -p, -m, -g, -r),
//     in both "--flag v" and "--flag=v" forms; flagd ports that its
//     arguments leave at their defaults (or take from FLAGD_*_PORT) are
//     made explicit with the remapped value, because two flagds on one host
//     would otherwise share a default;
//   - environment variables whose name ends in _PORT and whose value is a
//     port the pod declares (so an app container's FLAGD_PORT still reaches
//     its sidecar);
//   - probes, which are sent to the remapped port.
//
// A port that nothing declares is not remapped: a process listening on it
// listens on that very host port.

// portKey is a declared port of a pod.
type portKey struct {
	port     int32
	protocol corev1.Protocol
}

// portAllocator hands out host ports outside the kernel's ephemeral range,
// where outgoing connections and ":0" listeners of other processes on the
// machine take theirs.
type portAllocator struct {
	mu     sync.Mutex
	lo, hi int // [lo, hi)
	next   int
	used   map[int]bool
}

func newPortAllocator() *portAllocator {
	lo, hi := 20000, 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil && start > 11000 {
				hi = start
				lo = max(10000, start-12768)
			}
		}
	}
	return &portAllocator{lo: lo, hi: hi, next: lo + rand.IntN(hi-lo), used: map[int]bool{}}
}

// allocate returns a free port and a listener that holds it (on every
// address, as a process binding ":port" would) until the caller closes it,
// just before the process that will listen on it starts.
func (a *portAllocator) allocate() (int, net.Listener, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range a.hi - a.lo {
		p := a.next
		a.next++
		if a.next == a.hi {
			a.next = a.lo
		}
		if a.used[p] {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue // someone else's
		}
		a.used[p] = true
		return p, l, nil
	}
	return 0, nil, errors.New("no free port left in the node's range")
}

func (a *portAllocator) release(ports ...int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ports {
		delete(a.used, p)
	}
}

// podPorts is the port mapping of one pod.
type podPorts struct {
	alloc *portAllocator

	mu sync.Mutex
	// declared maps each declared port to its host port; owner says which
	// container declared it.
	declared map[portKey]int
	owner    map[portKey]string
	// implicit are host ports for flagd ports that no container declares,
	// by container and flagd port.
	implicit map[string]map[int32]int
	// held keep allocated ports free until their container starts.
	held map[int]net.Listener
	// released: the pod is gone; it maps nothing any more.
	released bool
}

// newPodPorts allocates a host port for every port the pod declares.
func newPodPorts(alloc *portAllocator, pod *corev1.Pod) (*podPorts, error) {
	pp := &podPorts{alloc: alloc, declared: map[portKey]int{}, owner: map[portKey]string{},
		implicit: map[string]map[int32]int{}, held: map[int]net.Listener{}}
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			k := portKey{p.ContainerPort, protocolOf(p)}
			if _, dup := pp.declared[k]; dup {
				continue // the API server refuses duplicates within a container only
			}
			host, l, err := alloc.allocate()
			if err != nil {
				pp.release()
				return nil, fmt.Errorf("allocating a host port for %s port %d: %w", c.Name, p.ContainerPort, err)
			}
			pp.declared[k], pp.owner[k], pp.held[host] = host, c.Name, l
		}
	}
	return pp, nil
}

func protocolOf(p corev1.ContainerPort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return p.Protocol
}

// hostPort maps a TCP port of the pod: its host port if the pod declares
// it, else the port itself.
func (pp *podPorts) hostPort(port int32) int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if h, ok := pp.declared[portKey{port, corev1.ProtocolTCP}]; ok {
		return h
	}
	return int(port)
}

// declaredPort returns the host port of a declared TCP port.
func (pp *podPorts) declaredPort(port int32) (int, bool) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	h, ok := pp.declared[portKey{port, corev1.ProtocolTCP}]
	return h, ok
}

// flagdPort maps a port that a flagd of container will listen on: its host
// port if the pod declares it, else a host port of its own for that
// container, allocated on first use.
func (pp *podPorts) flagdPort(container string, port int32) (int, error) {
	if h, ok := pp.declaredPort(port); ok {
		return h, nil
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.isHostPort(int(port)) {
		return int(port), nil // remapped already, through a rewritten $(VAR)
	}
	if h, ok := pp.implicit[container][port]; ok {
		return h, nil
	}
	h, l, err := pp.alloc.allocate()
	if err != nil {
		return 0, err
	}
	if pp.implicit[container] == nil {
		pp.implicit[container] = map[int32]int{}
	}
	pp.implicit[container][port], pp.held[h] = h, l
	return h, nil
}

// isHostPort tells whether p is one of the pod's host ports; mu is held.
func (pp *podPorts) isHostPort(p int) bool {
	for _, h := range pp.declared {
		if h == p {
			return true
		}
	}
	for _, m := range pp.implicit {
		for _, h := range m {
			if h == p {
				return true
			}
		}
	}
	return false
}

// portOf is Node.PortOf for this pod.
func (pp *podPorts) portOf(container string, port int32) (int, bool) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.released {
		return 0, false
	}
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
		k := portKey{port, proto}
		if h, ok := pp.declared[k]; ok && pp.owner[k] == container {
			return h, true
		}
	}
	h, ok := pp.implicit[container][port]
	return h, ok
}

// unhold closes the listeners that keep the ports of container free, just
// before it starts. Ports of other containers stay held.
func (pp *podPorts) unhold(container string) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var mine []int
	for k, h := range pp.declared {
		if pp.owner[k] == container {
			mine = append(mine, h)
		}
	}
	for _, h := range pp.implicit[container] {
		mine = append(mine, h)
	}
	for _, h := range mine {
		if l, ok := pp.held[h]; ok {
			_ = l.Close()
			delete(pp.held, h)
		}
	}
}

// release gives every port back.
func (pp *podPorts) release() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var all []int
	for _, h := range pp.declared {
		all = append(all, h)
	}
	for _, m := range pp.implicit {
		for _, h := range m {
			all = append(all, h)
		}
	}
	for _, l := range pp.held {
		_ = l.Close()
	}
	pp.held = map[int]net.Listener{}
	pp.released = true
	pp.alloc.release(all...)
}
