package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/workflows"
)

// startNode starts the test node: the Pods that kube-scheduler binds to it
// run, their flagd as the real flagd binary (test/node).
func (d *demo) startNode(ctx context.Context) error {
	d.step("Starting a test node (an agent of ours that runs the Pods bound to it, as a kubelet would)")
	start := time.Now()
	n, err := node.Start(ctx, d.cp, node.Options{Log: prefixWriter{w: d.out, prefix: "    "}})
	if err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return fmt.Errorf("starting the test node: %w", err)
	}
	d.node = n
	d.measured("test node ready", time.Since(start))
	d.say("node %s is Ready: flagd containers run as bin/flagd, other images as idle placeholders", n.Name())
	return nil
}

func (d *demo) stopNode() {
	if d.node == nil {
		return
	}
	if err := d.node.Stop(); err != nil {
		d.say("stopping the test node: %v", err)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// evaluate asks the Pod's flagd for a boolean flag over its HTTP API and
// returns its answer.
func (d *demo) evaluate(ctx context.Context, flag string) (string, error) {
	addr, ok := d.node.Addr(d.podKey, workflows.SidecarName, 8013)
	if !ok {
		return "", fmt.Errorf("the test node knows no port 8013 of %s's flagd", d.podKey)
	}
	d.flagdAddr = addr
	body, _ := json.Marshal(map[string]any{"flagKey": flag, "context": map[string]any{}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/flagd.evaluation.v1.Service/ResolveBoolean", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("flagd answered %s: %s (%v)", resp.Status, b, err)
	}
	return string(bytes.TrimSpace(b)), nil
}
