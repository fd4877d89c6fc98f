package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/workflows/injection"
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
	d.podAddrs.Set(n)
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
// returns its answer as flagd gives it.
func (d *demo) evaluate(ctx context.Context, flag string) (string, error) {
	addr, ok := d.node.Addr(d.podKey, injection.SidecarName, 8013)
	if !ok {
		return "", fmt.Errorf("the test node knows no port 8013 of %s's flagd", d.podKey)
	}
	d.flagdAddr = addr
	e, err := flagdapi.Resolve(ctx, addr, flagdapi.Boolean, flag, nil)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(e)
	return string(b), nil
}
