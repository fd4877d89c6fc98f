// Package managerproc builds the manager binary of cmd/manager and runs it
// as processes of their own, the way a cluster runs its replicas, for the
// suites and benchmarks that must kill one (SIGKILL: no cleanup, no lease
// released) or measure its memory. A process started here dies with the
// test process (parent-death signal) and serves its probes and plain-HTTP
// metrics on loopback ports that it binds itself (port 0) and reports in
// its log (the lines "listening"): no port is picked here and bound later,
// which another process of a busy machine may take meanwhile.
package managerproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Build compiles cmd/manager of the repository at root into dir and returns
// the binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/manager: %w\n%s", err, out)
	}
	return bin, nil
}

// Options configure Start.
type Options struct {
	// Binary is the manager, as Build made it.
	Binary string
	// Name tells the process apart in logs and file names.
	Name string
	// Kubeconfig is the path of the kubeconfig it runs with.
	Kubeconfig string
	// Dir receives its log, <Name>.log.
	Dir string
	// Args are further flags. The process always gets its probes and
	// metrics (plain HTTP) on loopback ports of its choosing, and JSON
	// logs with RFC 3339 times.
	Args []string
	// Env is added to this process's environment (KEY=value), e.g.
	// POD_NAME, which names a replica as the downward API would.
	Env []string
}

// Process is a running manager.
type Process struct {
	Name string
	// LogPath holds its standard output and error.
	LogPath string
	// Started is when the process was started.
	Started time.Time

	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	log    *os.File
	once   sync.Once

	mu        sync.Mutex
	addresses map[string]string // server → host:port, from its log
}

// Start runs the manager.
func Start(o Options) (*Process, error) {
	p := &Process{
		Name:    o.Name,
		LogPath: filepath.Join(o.Dir, o.Name+".log"),
		exited:  make(chan struct{}),
	}
	var err error
	if p.log, err = os.Create(p.LogPath); err != nil {
		return nil, fmt.Errorf("creating the log of %s: %w", o.Name, err)
	}
	args := append([]string{
		"--health-probe-bind-address=127.0.0.1:0",
		"--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false",
		"--zap-encoder=json", "--zap-time-encoding=rfc3339nano",
	}, o.Args...)
	p.cmd = exec.Command(o.Binary, args...)
	p.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+o.Kubeconfig), o.Env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// Killed when the thread that started it dies: this goroutine keeps its
	// thread for the child's whole life (see test/controlplane).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		p.Started = time.Now()
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.exited)
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.Name, err)
	}
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Address is where the process's server ("health", "metrics", "webhook",
// "sync") listens, as its log says, or "" before it says so.
func (p *Process) Address(server string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.addresses[server]; ok {
		return a
	}
	logs, err := p.Logs()
	if err != nil {
		return ""
	}
	for _, e := range logs {
		if e.Msg != "listening" {
			continue
		}
		name, _ := e.Fields["server"].(string)
		addr, _ := e.Fields["address"].(string)
		if name != "" && addr != "" {
			if p.addresses == nil {
				p.addresses = map[string]string{}
			}
			p.addresses[name] = addr
		}
	}
	return p.addresses[server]
}

// HealthURL serves /readyz and /healthz; "" until the process listens.
func (p *Process) HealthURL() string { return urlOf(p.Address("health")) }

// MetricsURL serves /metrics; "" until the process listens.
func (p *Process) MetricsURL() string { return urlOf(p.Address("metrics")) }

func urlOf(addr string) string {
	if addr == "" {
		return ""
	}
	return "http://" + addr
}

// Ready tells whether /readyz answers 200.
func (p *Process) Ready() bool {
	url := p.HealthURL()
	if url == "" {
		return false
	}
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitReady polls /readyz until it answers 200, the process ends, or ctx is done.
func (p *Process) WaitReady(ctx context.Context) error {
	for {
		if p.Ready() {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.Name, p.err, p.LogPath, p.Tail(20))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be ready: %w; last lines of %s:\n%s", p.Name, ctx.Err(), p.LogPath, p.Tail(20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill ends the process with SIGKILL, as a node failure or the OOM killer
// would: nothing runs after it, no lease is released.
func (p *Process) Kill() error { return p.signal(syscall.SIGKILL) }

// Stop ends the process with SIGTERM and waits for it.
func (p *Process) Stop() error { return p.signal(syscall.SIGTERM) }

func (p *Process) signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
	default:
		if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("signalling %s: %w", p.Name, err)
		}
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	p.once.Do(func() { _ = p.log.Close() })
	return nil
}

// RSS is the process's resident memory now and at its peak, in bytes.
func (p *Process) RSS() (now, peak int64, err error) {
	m, err := p.MemoryStatus()
	return m["VmRSS"], m["VmHWM"], err
}

// MemoryStatus reads the process's memory lines of /proc/<pid>/status
// (VmRSS, VmHWM, RssAnon, RssFile, ...), in bytes, by name.
func (p *Process) MemoryStatus() (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[strings.TrimSuffix(f[0], ":")] = kb * 1024
		}
	}
	return out, nil
}

// metricsWait bounds how long Metrics waits for the metrics server to
// listen (it starts once the caches have synced): minutes on a loaded machine.
const metricsWait = 3 * time.Minute

// Metrics scrapes /metrics, once the metrics server listens.
func (p *Process) Metrics() (map[string]*dto.MetricFamily, error) {
	deadline := time.Now().Add(metricsWait)
	url := p.MetricsURL()
	for url == "" {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before its metrics server listened (%v)", p.Name, p.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: its metrics server does not listen after %s", p.Name, metricsWait)
		}
		url = p.MetricsURL()
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// Sum adds up the values of a counter or gauge family whose labels include
// all of match; a histogram counts its samples.
func Sum(families map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
	}
	total := 0.0
next:
	for _, m := range f.GetMetric() {
		for k, v := range match {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// LogEntry is one JSON log line of the manager.
type LogEntry struct {
	Time   time.Time
	Msg    string
	Fields map[string]any
}

// Logs reads the log lines of the process so far.
func (p *Process) Logs() ([]LogEntry, error) {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return nil, err
	}
	var out []LogEntry
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		e := LogEntry{Fields: m}
		e.Msg, _ = m["msg"].(string)
		if ts, ok := m["ts"].(string); ok {
			e.Time, _ = time.Parse(time.RFC3339Nano, ts)
		}
		out = append(out, e)
	}
	return out, nil
}

// Tail returns the last n lines of the log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
