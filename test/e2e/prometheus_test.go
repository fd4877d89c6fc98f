package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flagplane/flagplane/test/freeport"
)

// promServer is a real Prometheus (bin/prometheus, built by `make
// prometheus` from its Go module) that scrapes static targets every
// second, each with a namespace label, as a cluster's Prometheus labels
// the pods it scrapes. Its TSDB lives in a directory of the test, so that
// a stopped server started again keeps what it had scraped.
type promServer struct {
	binary, dir, addr string
	cmd               *exec.Cmd
	exited            chan struct{}
}

// newPromServer writes the configuration of a Prometheus that scrapes
// targets (namespace → host:port of a flagd's management port) and picks
// its loopback port; Start runs it.
func newPromServer(binary, dir string, targets map[string]string) (*promServer, error) {
	if out, err := exec.Command(binary, "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), "prometheus, version") {
		return nil, fmt.Errorf("prometheus %s is missing or does not run: run `make prometheus` (%v: %s)", binary, err, out)
	}
	addr, err := freeport.Address()
	if err != nil {
		return nil, err
	}
	namespaces := make([]string, 0, len(targets))
	for ns := range targets {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n- job_name: flagd\n  static_configs:\n")
	for _, ns := range namespaces {
		fmt.Fprintf(&cfg, "  - targets: [%q]\n    labels: {namespace: %q}\n", targets[ns], ns)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	return &promServer{binary: binary, dir: dir, addr: addr}, nil
}

// URL is the base URL of its HTTP API.
func (p *promServer) URL() string { return "http://" + p.addr }

// Start runs it and waits until it is ready (/-/ready).
func (p *promServer) Start(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(p.dir, "prometheus.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(p.binary,
		"--config.file="+filepath.Join(p.dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(p.dir, "tsdb"),
		"--web.listen-address="+p.addr)
	p.cmd.Dir = p.dir
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Killed when the thread that started it dies: the goroutine below
	// keeps its thread for the child's whole life, so a test process that
	// is killed leaves no Prometheus behind (as test/managerproc).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.exited = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer close(p.exited)
		defer log.Close()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = p.cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting prometheus: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("prometheus exited before it was ready:\n%s", p.tail())
		case <-ctx.Done():
			return errors.Join(ctx.Err(), p.Stop())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready after 30s: %w\n%s", p.Stop(), p.tail())
		}
	}
}

// Stop ends it with SIGTERM and waits (SIGKILL after 30 s); stopping a
// stopped server does nothing.
func (p *promServer) Stop() error {
	if p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping prometheus: %w", err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// tail is the end of its log.
func (p *promServer) tail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "prometheus.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Query runs an instant query and returns the sum of the vector it gives
// (its own reading of the API, not the manager's).
func (p *promServer) Query(ctx context.Context, query string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/api/v1/query?"+url.Values{"query": {query}}.Encode(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return 0, fmt.Errorf("%w: %s", err, body)
	}
	if answer.Status != "success" || answer.Data.ResultType != "vector" {
		return 0, fmt.Errorf("query %s: %s (%s)", query, answer.Error, body)
	}
	var sum float64
	for _, r := range answer.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("query %s: %w", query, err)
		}
		sum += v
	}
	return sum, nil
}
