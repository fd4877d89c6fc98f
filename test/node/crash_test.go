package node_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/internal/scratch"
	"github.com/flagplane/flagplane/test/node"
)

// crashHelperEnv makes TestNodeCrashHelper act: it is the child process of
// the crash spec, not a test of its own.
const crashHelperEnv = "FLAGPLANE_NODE_CRASH_HELPER"

// TestNodeCrashHelper runs a control plane and a node with a pod (flagd and
// a placeholder), prints the containers' pids and the node's directory,
// waits for a line on stdin and then dies by SIGKILL, with no chance to
// stop anything.
func TestNodeCrashHelper(t *testing.T) {
	if os.Getenv(crashHelperEnv) == "" {
		t.Skip("child process of the crash spec only")
	}
	fail := func(err error) {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The outer spec shows this stderr when it fails: a watchdog the
	// control plane could not arm says so there.
	cp, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr})
	if err != nil {
		fail(err)
	}
	n, err := node.Start(ctx, cp, node.Options{Log: os.Stderr})
	if err != nil {
		fail(err)
	}
	ns, err := cp.NewNamespace(ctx, "crash")
	if err != nil {
		fail(err)
	}
	cm, pod := flagdOnConfigMap(ns, "flagd", "on")
	pod.Spec.NodeName = n.Name() // no scheduler here
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "app", Image: "app:1"})
	for _, o := range []client.Object{cm, pod} {
		if err := cp.Client.Create(ctx, o); err != nil {
			fail(err)
		}
	}
	var pids []string
	for len(pids) < 2 && ctx.Err() == nil {
		pids = pids[:0]
		for _, c := range []string{"flagd", "app"} {
			if pid, ok := n.PID(key(pod), c); ok {
				pids = append(pids, strconv.Itoa(pid))
			}
		}
		time.Sleep(50 * time.Millisecond) // a child process with no Gomega: a plain poll
	}
	if ctx.Err() != nil {
		fail(fmt.Errorf("the pod's containers never ran: %w", ctx.Err()))
	}
	fmt.Println("PIDS", strings.Join(pids, " "), n.Dir(), cp.Dir)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(cp)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

var _ = Describe("the node's processes", func() {
	It("do not outlive a test process that dies without stopping the node", func(ctx SpecContext) {
		// The helper makes its directories in a temporary directory of its
		// own: once it is dead, any suite that starts a control plane or a
		// node beside this one would reap them from the shared one before
		// this spec could see them left and reap them itself.
		tmp, err := scratch.Make("flagplane-crash-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(tmp.Remove)
		helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNodeCrashHelper$")
		helper.Env = append(os.Environ(), crashHelperEnv+"=1", "TMPDIR="+tmp.Path)
		stdin, err := helper.StdinPipe()
		Expect(err).NotTo(HaveOccurred())
		stdout, err := helper.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		helper.Stderr = GinkgoWriter // shown when the spec fails
		Expect(helper.Start()).To(Succeed())

		line, err := bufio.NewReader(stdout).ReadString('\n')
		Expect(err).NotTo(HaveOccurred(), "helper output %q", line)
		fields := strings.Fields(line)
		Expect(fields).To(HaveLen(5), "helper said %q", line)
		Expect(fields[0]).To(Equal("PIDS"))
		nodeDir, cpDir := fields[3], fields[4]
		DeferCleanup(func() {
			// Nobody else will: the helper died without Stop. Anything of
			// its control plane still running would be a failure of the
			// control plane's watchdog, which the spec reports below; it
			// must not stay behind on the machine either way.
			for _, pid := range processesMentioning(cpDir) {
				GinkgoWriter.Printf("killing leftover process %d of the helper's control plane\n", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			Expect(os.RemoveAll(nodeDir)).To(Succeed())
			Expect(os.RemoveAll(cpDir)).To(Succeed())
		})
		var pids []int
		for _, f := range fields[1:3] {
			pid, err := strconv.Atoi(f)
			Expect(err).NotTo(HaveOccurred())
			Expect(processGone(pid)()).To(BeFalse(), "container process %d runs", pid)
			pids = append(pids, pid)
		}

		Expect(stdin.Close()).To(Succeed()) // the helper now kills itself
		Expect(helper.Wait()).To(MatchError(ContainSubstring("killed")))
		for _, pid := range pids {
			Eventually(processGone(pid)).WithTimeout(10*time.Second).Should(BeTrue(), "process %d outlived the test process", pid)
		}
		Eventually(func() []int { return processesMentioning(cpDir) }).WithTimeout(10*time.Second).Should(BeEmpty(),
			"the helper's control plane outlived it")

		By("the next run removes the directories the helper left (its lock on them died with it)")
		Expect(nodeDir).To(BeADirectory())
		Expect(cpDir).To(BeADirectory())
		Expect(filepath.Dir(nodeDir)).To(Equal(tmp.Path))
		Expect(filepath.Dir(cpDir)).To(Equal(tmp.Path))
		Expect(scratch.ReapIn(tmp.Path, "flagplane-node-")).To(ContainElement(nodeDir))
		Expect(scratch.ReapIn(tmp.Path, "flagplane-controlplane-")).To(ContainElement(cpDir))
		Expect(nodeDir).NotTo(BeAnExistingFile())
		Expect(cpDir).NotTo(BeAnExistingFile())
		Expect(cp.Dir).To(BeADirectory(), "this suite's own control plane, whose process lives, keeps its directory")
	}, NodeTimeout(4*time.Minute))
})

// processesMentioning lists the live processes whose command line
// contains s (zombies have none).
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
