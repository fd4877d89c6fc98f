package controlplane_test

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

	"github.com/flagplane/flagplane/test/controlplane"
)

func TestControlPlane(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "controlplane suite")
}

// crashHelperEnv makes TestCrashHelper act: it is the child process of the
// crash spec, not a test of its own.
const crashHelperEnv = "FLAGPLANE_CONTROLPLANE_CRASH_HELPER"

// TestCrashHelper starts a control plane, prints its directory, waits for a
// line on stdin and then dies by SIGKILL, with no chance to call Stop.
func TestCrashHelper(t *testing.T) {
	if os.Getenv(crashHelperEnv) == "" {
		t.Skip("child process of the crash spec only")
	}
	// Its log goes to stderr, which the spec shows when it fails: a
	// watchdog that could not be armed says why there.
	cp, err := controlplane.Start(context.Background(), controlplane.Options{Scheduler: true, Log: os.Stderr})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	fmt.Println("DIR", cp.Dir)
	fmt.Println("CERTS", cp.Env.WebhookInstallOptions.LocalServingCertDir)
	fmt.Println("WATCHDOG", cp.WatchdogPID())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(cp) // a collected ControlPlane closes the watchdog's pipe
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

var _ = Describe("ControlPlane", func() {
	It("serves kubectl, stops everything, removes its directory, and may be stopped twice", func(ctx SpecContext) {
		cp, err := controlplane.Start(ctx, controlplane.Options{Log: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cp.Stop) // if an assertion below fails first
		dir := cp.Dir

		Expect(processesMentioning(dir)).To(HaveLen(3), "etcd, kube-apiserver, kube-controller-manager")
		Expect(cp.KubeconfigPath).To(BeAnExistingFile())
		Expect(cp.ControllerManagerLogPath).To(BeAnExistingFile())
		Expect(cp.Kubectl("get", "namespaces", "-o", "name")).To(ContainSubstring("namespace/kube-system\n"))
		Expect(cp.Timings.APIServer).To(BeNumerically(">", 0))
		Expect(cp.Timings.ControllerManager).To(BeNumerically(">", 0))
		Expect(cp.Timings.Total).To(BeNumerically(">=", cp.Timings.APIServer+cp.Timings.ControllerManager))

		Expect(cp.Stop()).To(Succeed())
		Expect(processesMentioning(dir)).To(BeEmpty())
		Expect(dir).NotTo(BeADirectory())
		Expect(cp.Stop()).To(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("leaves no process behind when the test process dies without calling Stop", func(ctx SpecContext) {
		helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashHelper$")
		helper.Env = append(os.Environ(), crashHelperEnv+"=1")
		stdin, err := helper.StdinPipe()
		Expect(err).NotTo(HaveOccurred())
		stdout, err := helper.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		var stderr bytes.Buffer
		helper.Stderr = &stderr
		Expect(helper.Start()).To(Succeed())

		out := bufio.NewReader(stdout)
		said := func(prefix string) string {
			GinkgoHelper()
			line, err := out.ReadString('\n')
			Expect(err).NotTo(HaveOccurred(), "helper output %q, stderr:\n%s", line, stderr.String())
			value, ok := strings.CutPrefix(strings.TrimSpace(line), prefix+" ")
			Expect(ok).To(BeTrue(), "helper said %q, stderr:\n%s", line, stderr.String())
			return value
		}
		dir := said("DIR")
		// Nobody else will remove them, nor kill what this spec is about
		// should it fail: the machine is shared.
		DeferCleanup(os.RemoveAll, dir)
		DeferCleanup(killProcessesMentioning, dir)
		certs := said("CERTS")
		DeferCleanup(os.RemoveAll, certs)
		Expect(certs).To(And(BeADirectory(), HavePrefix(dir+string(filepath.Separator))),
			"envtest's webhook serving certificates live in the control plane's directory, which goes with it")
		watchdog, err := strconv.Atoi(said("WATCHDOG"))
		Expect(err).NotTo(HaveOccurred())
		Expect(watchdog).NotTo(BeZero(), "the watchdog is armed; the helper's log:\n%s", stderr.String())
		Expect(processesMentioning(dir)).To(HaveLen(4), "the helper's control plane is running, with kube-scheduler")

		Expect(stdin.Close()).To(Succeed()) // the helper now kills itself
		Expect(helper.Wait()).To(MatchError(ContainSubstring("killed")))
		Eventually(func() []string { return processesMentioning(dir) }).
			WithTimeout(10*time.Second).Should(BeEmpty(), func() string {
			return fmt.Sprintf("the watchdog (pid %d) %s; the helper's log:\n%s", watchdog, processState(watchdog), stderr.String())
		})
	}, NodeTimeout(3*time.Minute))

	It("runs kube-scheduler when asked, which binds pods, and stops it; each of its processes collects garbage at GOGC=400", func(ctx SpecContext) {
		cp, err := controlplane.Start(ctx, controlplane.Options{Scheduler: true, Log: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cp.Stop)
		dir := cp.Dir
		processes := processesMentioning(dir)
		Expect(processes).To(ConsistOf(HaveSuffix(" etcd"), HaveSuffix(" kube-apiserver"),
			HaveSuffix(" kube-controller-manager"), HaveSuffix(" kube-scheduler")))
		for _, p := range processes {
			pid, _, _ := strings.Cut(p, " ")
			environ, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Split(string(environ), "\x00")).To(ContainElement("GOGC="+controlplane.ProcessGOGC), p)
		}
		Expect(cp.Timings.Scheduler).To(BeNumerically(">", 0))
		Expect(cp.Kubectl("get", "nodes", "-o", "name")).To(BeEmpty(), "the probe Node is gone")
		Expect(cp.Kubectl("get", "configmap", "kube-root-ca.crt", "-n", "default", "-o", "jsonpath={.data.ca\\.crt}")).
			To(Equal(string(mustReadFile(cp.CAPath))), "pods can trust the API server")
		Expect(cp.Stop()).To(Succeed())
		Expect(processesMentioning(dir)).To(BeEmpty())
	}, NodeTimeout(3*time.Minute))

	It("says how to build a missing binary", func(ctx SpecContext) {
		_, err := controlplane.Start(ctx, controlplane.Options{BinDir: GinkgoT().TempDir(), Log: GinkgoWriter})
		Expect(err).To(MatchError(And(ContainSubstring("etcd missing"), ContainSubstring("make controlplane"))))
	})
})

// processesMentioning lists the live processes whose command line contains
// s, as "pid command".
func processesMentioning(s string) []string {
	GinkgoHelper()
	found, err := mentioning(s)
	Expect(err).NotTo(HaveOccurred())
	return found
}

// mentioning is processesMentioning, for callers without Gomega.
func mentioning(s string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue // not a process, gone, a zombie (empty cmdline), or not ours
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		found = append(found, e.Name()+" "+filepath.Base(string(argv0)))
	}
	return found, nil
}

// killProcessesMentioning kills every live process whose command line
// contains s, with SIGKILL.
func killProcessesMentioning(s string) {
	for _, p := range processesMentioning(s) {
		pid, _, _ := strings.Cut(p, " ")
		if n, err := strconv.Atoi(pid); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
}

// processState says whether pid is alive, and its state and parent if so.
func processState(pid int) string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "is gone"
	}
	return "is alive: " + strings.TrimSpace(string(stat))
}

func mustReadFile(path string) []byte {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return data
}
