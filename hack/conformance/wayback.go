package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// wayBackRun is what the way back took: from the start of flagplane's
// uninstall to OFO's webhook answering (window), and to the Deployments
// rolled under OFO (took).
type wayBackRun struct{ window, took time.Duration }

// wayBack moves the same cluster back to OFO, with the same work running,
// by the steps of docs/openfeature-operator.md, "The way back, run
// live": flagplane's objects deleted but its CRDs, OFO
// installed as before (its CRDs applied over flagplane's), the
// Deployments rolled so that OFO injects their pods.
func (m *migrationRun) wayBack(ctx context.Context, ofoDir string) (wayBackRun, error) {
	var back wayBackRun
	began := time.Now()
	m.setPhase("flagplane uninstalled")
	if err := m.uninstallFlagplane(ctx); err != nil {
		return back, err
	}
	uninstalled := time.Now()
	m.setPhase("OFO installing")
	if err := installOFO(ctx, m.c, ofoDir); err != nil {
		return back, err
	}
	back.window = time.Since(uninstalled)
	m.setPhase("OFO installed")
	sleep(ctx, 10*time.Second)
	m.setPhase("rolled back")
	for _, d := range []string{"web-file", "web-kube"} {
		if out, err := m.c.Kubectl("-n", migrateNS, "rollout", "restart", "deployment/"+d); err != nil {
			return back, fmt.Errorf("rolling %s: %w\n%s", d, err, out)
		}
	}
	for _, d := range []string{"web-file", "web-kube"} {
		if out, err := m.c.Kubectl("-n", migrateNS, "rollout", "status", "deployment/"+d, "--timeout=5m"); err != nil {
			return back, fmt.Errorf("rolling %s back under OFO: %w\n%s", d, err, out)
		}
	}
	back.took = time.Since(began)
	m.setPhase("after, back")
	sleep(ctx, 30*time.Second)
	return back, nil
}

// uninstallFlagplane deletes flagplane's objects of config/default but its
// CRDs, which hold the FeatureFlags both operators read.
func (m *migrationRun) uninstallFlagplane(ctx context.Context) error {
	out, err := m.c.Kubectl("kustomize", filepath.Join(m.root, "config", "default"))
	if err != nil {
		return fmt.Errorf("kubectl kustomize: %w\n%s", err, out)
	}
	var keep []string
	for doc := range strings.SplitSeq(out, "\n---\n") {
		if !strings.Contains(doc, "kind: CustomResourceDefinition\n") {
			keep = append(keep, doc)
		}
	}
	say("$ kubectl delete --ignore-not-found -f - (flagplane's objects of config/default but its CRDs)")
	if out, err := m.c.KubectlWithInput(strings.NewReader(strings.Join(keep, "\n---\n")), "delete", "--ignore-not-found", "--wait=true", "--timeout=3m", "-f", "-"); err != nil {
		return fmt.Errorf("uninstalling flagplane: %w\n%s", err, out)
	}
	return ctx.Err()
}
