package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// cleanupScript, in the slot's directory, removes everything the node made.
// One script serves the three ways a run ends: Stop runs it; a watchdog
// runs it when the test process dies without Stop (a panic, a timeout, a
// kill); and the next run to take the slot runs it if both failed. It is
// idempotent.
const cleanupScript = "cleanup.sh"

// kernelTunables are the host-wide sysctls the kubelet sets at start
// (protectKernelDefaults: false). Their values before the node ran are
// written into the cleanup script, which puts them back.
var kernelTunables = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// sandboxGlob matches, under a node's directory, the directories
// containerd's CRI plugin keeps of each pod sandbox, named by its ID.
const sandboxGlob = "containerd/*/io.containerd.grpc.v1.cri/sandboxes/*/"

// writeCleanup writes the slot's cleanup script. It is written before
// anything is made, so that whatever follows can be undone.
func (s slot) writeCleanup(dir string) error {
	var b strings.Builder
	q := shellQuote
	fmt.Fprintf(&b, "#!/bin/sh\n# Removes what the real test node of slot %d made (test/realnode). Idempotent.\n", s.N)
	fmt.Fprintf(&b, "DIR=%s\nNETNS=%s\nCGROOT=%s\nSOCK=%s\n", q(dir), q(s.Netns()), q(s.CgroupRoot()), q(filepath.Join(dir, "containerd", "containerd.sock")))
	fmt.Fprintf(&b, "sandboxDirs() { ls -d \"$DIR\"/%s 2>/dev/null; }\n", sandboxGlob)
	b.WriteString(killByPidFiles)
	b.WriteString(`# containerd's shims (they daemonize), and the sockets they listen on.
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $SOCK" 2>/dev/null); do
  for sock in $(ss -xlpn 2>/dev/null | grep "pid=$p," | awk '{print $5}'); do
    case "$sock" in /run/containerd/s/*) rm -f "$sock";; esac
  done
  kill -9 "$p" 2>/dev/null
done
# Whatever still runs in the node's cgroups: the containers.
for i in 1 2 3; do
  for f in $(find /sys/fs/cgroup/*/"$CGROOT" -name cgroup.procs 2>/dev/null); do
    for p in $(cat "$f" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  sleep 0.2
done
# Mounts under the state directory (volumes, rootfs, network namespaces), deepest first.
awk '{print $5}' /proc/self/mountinfo | grep "^$DIR/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
# The node's cgroups, deepest first, in every hierarchy.
for h in /sys/fs/cgroup/*/; do
  [ -d "$h$CGROOT" ] && find "$h$CGROOT" -depth -type d -exec rmdir {} \; 2>/dev/null
done
# The network: the namespace takes the bridge, the veth pair, the nft and iptables tables with it.
ip netns del "$NETNS" 2>/dev/null
`)
	fmt.Fprintf(&b, "ip link del %s 2>/dev/null\n", q(s.HostVeth()))
	fmt.Fprintf(&b, "ip route del %s 2>/dev/null\nip route del %s 2>/dev/null\n", q(s.PodCIDR()), q(s.ServiceCIDR()))
	b.WriteString("# The host-wide sysctls the kubelet changed, back to their values before it ran.\n")
	for _, name := range kernelTunables {
		path := "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
		if v, err := os.ReadFile(path); err == nil {
			fmt.Fprintf(&b, "echo %s > %s 2>/dev/null\n", q(strings.TrimSpace(string(v))), q(path))
		}
	}
	b.WriteString(`# The kubelet's log symlinks, and CNI's cache of this node's network.
for l in /var/log/containers/*.log; do
  case "$(readlink "$l" 2>/dev/null)" in "$DIR"/*) rm -f "$l";; esac
done
rm -rf /var/lib/cni/results/"$NETNS"-* 2>/dev/null
# And the cache of the loopback network containerd gives each sandbox,
# named by the sandbox's ID, which the node's containerd state lists.
for d in $(sandboxDirs); do rm -f /var/lib/cni/results/cni-loopback-"$(basename "$d")"-lo; done
rm -rf "$DIR"
`)
	return os.WriteFile(filepath.Join(dir, cleanupScript), []byte(b.String()), 0o755)
}

// killByPidFiles is the part of the cleanup script that kills the node's
// processes by the pid files the harness wrote (component.start), each
// "<pid> <start time>". Pids are reused, and quickly: by the time the
// cleanup of a dead run runs, at the next run's start, the pid a file
// names may be any process of the machine's, another test's among them.
// Only a process of that pid that started at that time is killed. The start
// time is field 22 of /proc/<pid>/stat: its fields after the command name,
// which is in parentheses and may hold spaces, start at field 3.
const killByPidFiles = `
# The node's processes, by the pid files the harness wrote: a pid and the
# start time of its process, so that a pid reused since is left alone.
for f in "$DIR"/pids/*.pid; do
  [ -f "$f" ] || continue
  read -r p started < "$f" || true
  [ -n "$p" ] && [ -n "$started" ] || continue
  now=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f20)
  [ "$now" = "$started" ] && kill -9 "$p" 2>/dev/null
done
`

// startWatchdog starts a process of its own session that waits for the
// test process to end and then runs the cleanup script, holding the slot's
// lock meanwhile so that no other run takes the slot before it is clean.
func (s slot) startWatchdog(dir string) (*os.Process, error) {
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done; exec sh %s >/dev/null 2>&1`,
		os.Getpid(), shellQuote(filepath.Join(dir, cleanupScript)))
	cmd := exec.Command("sh", "-c", script)
	cmd.ExtraFiles = []*os.File{s.lock} // the lock lives as long as the watchdog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the cleanup watchdog: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
