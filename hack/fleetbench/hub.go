package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flagplane/flagplane/api"
	fleethub "github.com/flagplane/flagplane/controllers/fleet"
	"github.com/flagplane/flagplane/hack/fleetbench/nsfleet"
	"github.com/flagplane/flagplane/test/fleetenv"
)

// hubConfig is what the hub process is started with, as a JSON file.
type hubConfig struct {
	// Kubeconfig is the hub's as config/fleet/hub's ServiceAccount, by
	// impersonation (fleetenv's HubKubeconfig): the hub runs with it, and
	// the secretreader exec plugin Plugin reads the token Secrets with it.
	Kubeconfig, Plugin string
	// SimKubeconfig, when set, is the shared member's, and SimClusters the
	// virtual clusters the hub's engine maps onto its namespaces.
	SimKubeconfig string
	SimClusters   []string
}

// runHub is the hub process: flagplane's fleet controllers in a manager
// of the hub, as config/fleet/hub's ServiceAccount and with the hub's
// cache, and a listener on loopback (its address the first line of
// stdout) that serves /stats (the Go heap) and /debug/pprof.
func runHub(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var hc hubConfig
	if err := json.Unmarshal(raw, &hc); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	cfg, err := clientcmd.BuildConfigFromFlags("", hc.Kubeconfig)
	if err != nil {
		return err
	}
	if cfg.Impersonate.UserName != fleetenv.HubServiceAccount {
		return fmt.Errorf("%s is not a kubeconfig of %s", hc.Kubeconfig, fleetenv.HubServiceAccount)
	}
	cfg.QPS, cfg.Burst = 20, 30 // controller-runtime's defaults for a manager
	scheme, err := api.NewScheme()
	if err != nil {
		return err
	}
	if err := cpv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: fleethub.CacheOptions(inventoryNS)})
	if err != nil {
		return err
	}
	o := fleethub.Options{InventoryNamespace: inventoryNS}
	if hc.SimKubeconfig != "" {
		mcfg, err := clientcmd.BuildConfigFromFlags("", hc.SimKubeconfig)
		if err != nil {
			return err
		}
		if o.Engine, err = nsfleet.New(mcfg, scheme, hc.SimClusters, 5*time.Second); err != nil {
			return err
		}
	} else {
		o.Access = fleetenv.AccessConfig(hc.Plugin, hc.Kubeconfig)
	}
	if _, err := fleethub.Add(mgr, o); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: statsMux(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mgr.Start(ctx)
}

// hubStats is the hub process's Go heap, as /stats reports it.
type hubStats struct {
	HeapInuse, HeapAlloc, Sys uint64
}

func statsMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") != "" {
			runtime.GC()
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(hubStats{HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, Sys: ms.Sys})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// hubProc is the hub process, as the bench sees it.
type hubProc struct {
	cmd  *exec.Cmd
	addr string
	log  string
	done chan error
}

// startHub runs this command again as the hub process, which dies with
// the bench.
func startHub(dir string, hc hubConfig) (*hubProc, error) {
	raw, err := json.Marshal(hc)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "hub.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	h := &hubProc{log: filepath.Join(dir, "hub.log"), done: make(chan error, 1)}
	logf, err := os.Create(h.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	h.cmd = exec.Command(exe, "-hub-config", path)
	h.cmd.Stderr = logf
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, out)
		h.done <- h.cmd.Wait()
	}()
	select {
	case h.addr = <-addr:
	case <-time.After(time.Minute):
	}
	if h.addr == "" {
		_ = h.stop()
		return nil, fmt.Errorf("the hub process did not start; its log:\n%s", tailFile(h.log, 20))
	}
	return h, nil
}

func (h *hubProc) stop() error {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-h.done:
		if errors.As(err, new(*exec.ExitError)) {
			return nil // it ended on the signal, or with an error its log has
		}
		return err
	case <-time.After(15 * time.Second):
		_ = h.cmd.Process.Kill()
		err := <-h.done
		return fmt.Errorf("the hub process did not stop within 15s: killed (%v)", err)
	}
}

// heap is the hub's Go heap in use (after a collection with gc).
func (h *hubProc) heap(gc bool) (uint64, error) {
	u := "http://" + h.addr + "/stats"
	if gc {
		u += "?gc=1"
	}
	resp, err := http.Get(u) //nolint:gosec,noctx // loopback, the bench's own child
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st hubStats
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st.HeapInuse, err
}

// rss is the hub process's resident set, from /proc.
func (h *hubProc) rss() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// cpu is the hub process's user and system CPU time, from /proc.
func (h *hubProc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", h.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// profile writes a CPU profile of the hub over d to path.
func (h *hubProc) profile(d time.Duration, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", h.addr, int(d.Seconds()))) //nolint:gosec,noctx // loopback
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
