package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/flagplane/flagplane/test/controlplane"
)

func (o *Options) complete() error {
	if o.RootDir == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return err
		}
		o.RootDir = root
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RootDir, "bin")
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	return nil
}

// checkMachine fails, saying why, where the node cannot run: not root, a
// binary or a Debian package missing, or a kernel without what containers
// need. It never skips: a suite that needs the node fails here.
func checkMachine(binDir string) error {
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "it needs root (network namespaces, mounts, cgroups)")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
		"kube-proxy", "kubectl", "coredns", "flagd", "flagplane-sdkclient", "realnode/registry", "realnode/pause"} {
		if !fileExists(filepath.Join(binDir, b)) {
			problems = append(problems, fmt.Sprintf("%s is missing in %s (%s)", b, binDir, requiredBinariesHint))
		}
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nft", "iptables", "ip", "nsenter", "ss", "pgrep", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			problems = append(problems, fmt.Sprintf("%s is not on PATH (%s)", tool, requiredPackagesHint))
		}
	}
	for _, f := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap", "/bin/busybox"} {
		if !fileExists(f) {
			problems = append(problems, fmt.Sprintf("%s is missing (%s)", f, requiredPackagesHint))
		}
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fs), "overlay") {
		problems = append(problems, "the kernel has no overlay filesystem (containerd's snapshotter)")
	}
	if !fileExists("/proc/self/ns/net") {
		problems = append(problems, "the kernel has no network namespaces")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s:\n  - %s", unsupportedMachineMsg, strings.Join(problems, "\n  - "))
}
