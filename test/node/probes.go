package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flagplane/flagplane/test/node/internal/mountns"
)

// Probes run as the kubelet runs them, with the probe's own timings
// (initialDelaySeconds, periodSeconds, timeoutSeconds, successThreshold,
// failureThreshold), against the pod's address 127.0.0.1 and the host port
// that a declared port was remapped to:
//
//   - httpGet (HTTP and HTTPS without verification, with httpHeaders):
//     success is a status in [200, 400);
//   - tcpSocket: success is an accepted connection;
//   - grpc: the standard health service answers SERVING;
//   - exec: the command runs in a mount namespace set up like the
//     container's (same volumes, env and user), with the host's binaries;
//     success is exit status 0.
//
// The startup probe runs first; liveness and readiness start once the
// container has started. A failed startup or liveness probe kills the
// container, which then restarts by its restart policy.

type probeKind string

const (
	probeStartup   probeKind = "Startup"
	probeLiveness  probeKind = "Liveness"
	probeReadiness probeKind = "Readiness"
)

// probeResult is one probe's outcome; detail says why it failed.
type probeResult struct {
	ok     bool
	detail string
}

// runProbe runs probe p of kind until ctx ends, calling report with the
// verdict each time the thresholds flip it (and the first time).
func (c *container) runProbe(ctx context.Context, kind probeKind, p *corev1.Probe, report func(ok bool, detail string)) {
	period := seconds(p.PeriodSeconds, 10)
	timeout := seconds(p.TimeoutSeconds, 1)
	success := int(max(p.SuccessThreshold, 1))
	failure := int(max(p.FailureThreshold, 1))
	if p.FailureThreshold == 0 {
		failure = 3
	}
	if !sleepCtx(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) {
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	var verdict *bool
	successes, failures := 0, 0
	for {
		res := c.probeOnce(ctx, p, timeout)
		if ctx.Err() != nil {
			return
		}
		if res.ok {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
			c.r.n.event(c.r.podRef(), corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, res.detail)
		}
		switch {
		case res.ok && successes >= success && (verdict == nil || !*verdict):
			v := true
			verdict = &v
			report(true, "")
		case !res.ok && failures >= failure && (verdict == nil || *verdict):
			v := false
			verdict = &v
			report(false, res.detail)
			if kind != probeReadiness {
				return // the container is being killed
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *container) probeOnce(ctx context.Context, p *corev1.Probe, timeout time.Duration) probeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return c.probeHTTP(ctx, p.HTTPGet)
	case p.TCPSocket != nil:
		port, err := c.probePort(p.TCPSocket.Port)
		if err != nil {
			return probeResult{detail: err.Error()}
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = c.r.n.facts.ip
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return probeResult{detail: err.Error()}
		}
		_ = conn.Close()
		return probeResult{ok: true}
	case p.GRPC != nil:
		return c.probeGRPC(ctx, p.GRPC)
	case p.Exec != nil:
		return c.probeExec(ctx, p.Exec)
	}
	return probeResult{detail: "probe has no handler"}
}

// probePort resolves a probe's port (a number or the name of one of the
// container's ports) to the host port to dial.
func (c *container) probePort(port intstr.IntOrString) (int, error) {
	n := port.IntValue()
	if port.Type == intstr.String {
		n = 0
		for _, p := range c.spec.Ports {
			if p.Name == port.StrVal {
				n = int(p.ContainerPort)
			}
		}
		if n == 0 {
			return 0, fmt.Errorf("container has no port named %q", port.StrVal)
		}
	}
	return c.r.ports.hostPort(int32(n)), nil
}

func (c *container) probeHTTP(ctx context.Context, g *corev1.HTTPGetAction) probeResult {
	port, err := c.probePort(g.Port)
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	host := g.Host
	if host == "" {
		host = c.r.n.facts.ip
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	path, query, _ := strings.Cut(g.Path, "?")
	u.Path, u.RawQuery = path, query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	req.Header.Set("User-Agent", "kube-probe/flagplane-node")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, //nolint:gosec // as the kubelet: probes do not verify
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return probeResult{ok: true}
	}
	return probeResult{detail: fmt.Sprintf("HTTP probe failed with statuscode: %d %s", resp.StatusCode, bytes.TrimSpace(body))}
}

func (c *container) probeGRPC(ctx context.Context, g *corev1.GRPCAction) probeResult {
	addr := net.JoinHostPort(c.r.n.facts.ip, strconv.Itoa(c.r.ports.hostPort(g.Port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return probeResult{detail: "service unhealthy (responded with " + resp.GetStatus().String() + ")"}
	}
	return probeResult{ok: true}
}

// probeExec runs the command in a mount namespace like the container's.
func (c *container) probeExec(ctx context.Context, e *corev1.ExecAction) probeResult {
	if len(e.Command) == 0 {
		return probeResult{detail: "exec probe has no command"}
	}
	spec, err := c.processSpec(ctx, mountns.ModeExec, e.Command[0], e.Command[1:])
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	var out bytes.Buffer
	exitCode, err := runToCompletion(ctx, c.r.n.scratchDir(), "flagplane-node-probe", spec, &out)
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	if exitCode != 0 {
		return probeResult{detail: fmt.Sprintf("command %q exited with %d: %s", e.Command, exitCode, bytes.TrimSpace(out.Bytes()))}
	}
	return probeResult{ok: true}
}

func seconds(v int32, def int) time.Duration {
	if v <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(v) * time.Second
}

// sleepCtx sleeps d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
