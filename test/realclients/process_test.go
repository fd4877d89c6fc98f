package realclients

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/test/internal/child"
)

// process is a client binary run by a spec: its output is kept (and shown
// when the spec fails) and it is killed when the spec ends.
type process struct {
	name string
	proc *child.Process

	mu    sync.Mutex
	out   bytes.Buffer
	lines []string
}

// binary returns the path of a client that `make realclients` built.
func binary(name string) string {
	p := filepath.Join(binDir, name)
	if _, err := os.Stat(p); err != nil {
		Fail(fmt.Sprintf("%s missing: run `make realclients` (%v)", p, err))
	}
	return p
}

// startProcess runs a client until the spec ends.
func startProcess(name string, args ...string) *process {
	p := &process{name: filepath.Base(name)}
	cmd := exec.Command(name, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	go func() {
		s := bufio.NewScanner(pr)
		s.Buffer(make([]byte, 64<<10), 4<<20)
		for s.Scan() {
			p.mu.Lock()
			p.out.WriteString(s.Text() + "\n")
			p.lines = append(p.lines, s.Text())
			p.mu.Unlock()
		}
	}()
	var err error
	p.proc, err = child.Start(cmd)
	if err != nil {
		_ = pw.Close()
	}
	Expect(err).NotTo(HaveOccurred(), "starting %s", name)
	go func() {
		<-p.proc.Exited()
		_ = pw.Close()
	}()
	DeferCleanup(p.stop)
	return p
}

func (p *process) stop() {
	_, _ = p.proc.Stop(10 * time.Second)
	if CurrentSpecReport().Failed() {
		AddReportEntry(p.name+" output", p.output())
	}
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// outputLines returns the lines written so far.
func (p *process) outputLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

func (p *process) running() bool { return p.proc.Running() }
