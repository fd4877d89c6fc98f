package child_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/onsi/ginkgo/v2" // registers -ginkgo.* flags, which `make test-integration` passes to every package under test/
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/test/internal/child"
)

func TestExitCode(t *testing.T) {
	g := NewWithT(t)
	p, err := child.Start(exec.Command("/bin/sh", "-c", "exit 3"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(p.Exited()).Should(BeClosed())
	g.Expect(p.Running()).To(BeFalse())
	g.Expect(p.ExitCode()).To(Equal(3))
	g.Expect(p.Err()).To(HaveOccurred())
}

func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	g := NewWithT(t)
	// The shell ignores SIGTERM, and so does the sleep it starts: only
	// SIGKILL to the process group ends both.
	cmd := exec.Command("/bin/sh", "-c", "trap '' TERM; sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	p, err := child.Start(cmd)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Cmd.SysProcAttr.Pdeathsig).To(Equal(syscall.SIGKILL))
	line, err := bufio.NewReader(out).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	sleepPID := strings.TrimSpace(line)

	killed, err := p.Stop(200 * time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(killed).To(BeTrue())
	g.Expect(p.ExitCode()).To(Equal(128 + int(syscall.SIGKILL)))
	g.Eventually(func() bool { return dead(sleepPID) }).Should(BeTrue(), "the shell's child was killed with it")
}

// dead tells whether a process is gone, or a zombie that only its reaper
// still has to collect.
func dead(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

func TestStopEndsAWillingProcessBySIGTERM(t *testing.T) {
	g := NewWithT(t)
	p, err := child.Start(exec.Command("sleep", "30"))
	g.Expect(err).NotTo(HaveOccurred())
	killed, err := p.Stop(10 * time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(killed).To(BeFalse())
	g.Expect(p.ExitCode()).To(Equal(128 + int(syscall.SIGTERM)))
}
