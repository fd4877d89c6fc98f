package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/flagplane/flagplane/test/realnode"
)

// profileManager (-measure with -profile, flagplane only) reads flagplane's
// manager at rest from its own metrics server, as a scraper with the
// least it needs would: a ServiceAccount bound to a ClusterRole that may
// get /metrics and /debug/pprof/*, its token, and a port-forward to the
// manager's pod. It writes a 30 s CPU profile and the metrics before and
// after it into dir, and prints the profile's top functions. The manager
// must run with --profiling.
func profileManager(ctx context.Context, c *realnode.Cluster, managerNS, dir string) error {
	rbac := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: profiler, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flagplane-profiler}
rules:
- nonResourceURLs: [/metrics, /debug/pprof/*]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: flagplane-profiler}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flagplane-profiler}
subjects: [{kind: ServiceAccount, name: profiler, namespace: %[1]s}]
`, managerNS)
	if out, err := c.KubectlWithInput(strings.NewReader(rbac), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("the profiler's RBAC: %w\n%s", err, out)
	}
	token, err := c.Kubectl("-n", managerNS, "create", "token", "profiler")
	if err != nil {
		return fmt.Errorf("the profiler's token: %w\n%s", err, token)
	}
	token = strings.TrimSpace(token)
	pod, err := c.Kubectl("-n", managerNS, "get", "pods", "-l", "app.kubernetes.io/name=flagplane", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || pod == "" {
		return fmt.Errorf("the manager's pod: %v %s", err, pod)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	pf := exec.CommandContext(ctx, c.KubectlPath, "--kubeconfig", c.KubeconfigPath,
		"-n", managerNS, "port-forward", "pod/"+pod, fmt.Sprintf("%d:8443", port))
	if err := pf.Start(); err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()

	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the manager's self-signed metrics certificate, over a port-forward
	get := func(path, file string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	// The port-forward listens a moment after it starts.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := get("/metrics", "metrics-before.txt")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager's metrics through a port-forward: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	say("profiling flagplane's manager %s at rest for 30 s", pod)
	if err := get("/debug/pprof/profile?seconds=30", "idle-cpu.pprof"); err != nil {
		return err
	}
	if err := get("/metrics", "metrics-after.txt"); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=40", filepath.Join(dir, "idle-cpu.pprof")).CombinedOutput()
	fmt.Printf("%s\n", out)
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	say("the profile and the metrics before and after it are in %s", dir)
	return nil
}
