package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxSlots is how many nodes may run on one machine at once. Each slot
// has addresses, a network namespace, a cgroup and a state directory of
// its own, so that two runs never meet.
const maxSlots = 32

// lockDir holds one lock file per slot. /run is cleared at boot, as the
// state of the slots is.
const lockDir = "/run/flagplane-realnode"

// slot is the share of the machine one node takes.
type slot struct {
	N    int
	lock *os.File
}

// Addresses of a slot: a /30 link between the host and the node's network
// namespace, a /24 of Pod addresses and a /24 of Service addresses.
func (s slot) HostIP() net.IP      { return net.IPv4(10, 243, byte(s.N), 1) }
func (s slot) NodeIP() net.IP      { return net.IPv4(10, 243, byte(s.N), 2) }
func (s slot) PodCIDR() string     { return fmt.Sprintf("10.244.%d.0/24", s.N) }
func (s slot) ServiceCIDR() string { return fmt.Sprintf("10.245.%d.0/24", s.N) }

// KubernetesServiceIP is the first address of the Service range, which the
// API server gives the kubernetes Service.
func (s slot) KubernetesServiceIP() net.IP { return net.IPv4(10, 245, byte(s.N), 1) }
func (s slot) Netns() string               { return fmt.Sprintf("flagplane-node-%d", s.N) }
func (s slot) HostVeth() string            { return fmt.Sprintf("fpnode%dh", s.N) }
func (s slot) CgroupRoot() string          { return fmt.Sprintf("flagplane-node-%d", s.N) }
func (s slot) NodeName() string            { return fmt.Sprintf("flagplane-node-%d", s.N) }
func (s slot) Dir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("flagplane-realnode-%d", s.N))
}
func (s slot) NetnsPath() string { return filepath.Join("/run/netns", s.Netns()) }

// takeSlot locks the first free slot. A slot whose lock is free but whose
// state is still there belongs to a run that died before its cleanup
// finished: its cleanup script runs again first.
func takeSlot(logf func(string, ...any)) (slot, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return slot{}, fmt.Errorf("creating %s: %w", lockDir, err)
	}
	for n := 0; n < maxSlots; n++ {
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("slot-%d.lock", n)), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return slot{}, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return slot{}, fmt.Errorf("locking slot %d: %w", n, err)
		}
		s := slot{N: n, lock: f}
		if script := filepath.Join(s.Dir(), cleanupScript); fileExists(script) {
			logf("slot %d: a dead run left its state; running its cleanup first", n)
			if out, err := exec.Command("sh", script).CombinedOutput(); err != nil {
				logf("slot %d: stale cleanup: %v: %s", n, err, out)
			}
		}
		if leftover := s.leftovers(); leftover != "" {
			_ = f.Close()
			return slot{}, fmt.Errorf("slot %d is free but %s is still there and was not made by a run of this harness that left a cleanup script; remove it by hand", n, leftover)
		}
		return s, nil
	}
	return slot{}, fmt.Errorf("all %d real-node slots are in use (locks in %s)", maxSlots, lockDir)
}

// leftovers names what of the slot exists although nothing should.
func (s slot) leftovers() string {
	switch {
	case fileExists(s.NetnsPath()):
		return "network namespace " + s.Netns()
	case fileExists("/sys/class/net/" + s.HostVeth()):
		return "interface " + s.HostVeth()
	case fileExists(s.Dir()):
		return "directory " + s.Dir()
	}
	return ""
}

func (s slot) release() { _ = s.lock.Close() }

// setupNetwork makes the node's network namespace: a veth pair to the host
// (the node's eth0 at NodeIP), a default route back through the host, IP
// forwarding inside (the node routes for its Pods), and host routes to the
// Pod and Service ranges through the node, so that the test process, the
// API server's callers and kubectl reach Pods and Services as a machine
// on a cluster's network does.
func (s slot) setupNetwork() error {
	steps := [][]string{
		{"ip", "netns", "add", s.Netns()},
		{"ip", "link", "add", s.HostVeth(), "type", "veth", "peer", "name", "eth0", "netns", s.Netns()},
		{"ip", "addr", "add", s.HostIP().String() + "/30", "dev", s.HostVeth()},
		{"ip", "link", "set", s.HostVeth(), "up"},
		{"ip", "-n", s.Netns(), "link", "set", "lo", "up"},
		{"ip", "-n", s.Netns(), "addr", "add", s.NodeIP().String() + "/30", "dev", "eth0"},
		{"ip", "-n", s.Netns(), "link", "set", "eth0", "up"},
		{"ip", "-n", s.Netns(), "route", "add", "default", "via", s.HostIP().String()},
		{"ip", "netns", "exec", s.Netns(), "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "route", "add", s.PodCIDR(), "via", s.NodeIP().String()},
		{"ip", "route", "add", s.ServiceCIDR(), "via", s.NodeIP().String()},
	}
	for _, st := range steps {
		if err := run(st...); err != nil {
			return fmt.Errorf("setting up the node's network: %w", err)
		}
	}
	return nil
}

// inNetns is the command line that runs argv in the node's network
// namespace and nothing else of it: unlike `ip netns exec`, nsenter keeps
// the host's mount namespace, which the kubelet and containerd must share.
func (s slot) inNetns(argv ...string) []string {
	return append([]string{"nsenter", "--net=" + s.NetnsPath(), "--"}, argv...)
}

func run(argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
