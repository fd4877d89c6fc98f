package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flagplane/flagplane/test/realnode"
)

// scaleWork (-scale W:F with -measure) is what a cluster holds besides the
// measured work: F FeatureFlags of one flag each, each read through a
// FeatureFlagSource (`file`) of its own, and W Deployments of no replica
// that opt in by OFO's annotations, spread over the sources in turn, all
// in namespace "scale". No pod runs for them (a 2-core node holds a few
// dozen flagd sidecars, not thousands): they are what an operator keeps in
// its caches and, for flagplane, its graph and the ConfigMaps it
// generates.
type scaleWork struct{ workloads, flagSets int }

func parseScale(s string) (scaleWork, error) {
	w, f, ok := strings.Cut(s, ":")
	if !ok {
		return scaleWork{}, fmt.Errorf("-scale %q: W:F, e.g. 1000:100", s)
	}
	var sw scaleWork
	var err error
	if sw.workloads, err = strconv.Atoi(w); err != nil || sw.workloads < 1 {
		return scaleWork{}, fmt.Errorf("-scale %q: W is a number of workloads, at least 1", s)
	}
	if sw.flagSets, err = strconv.Atoi(f); err != nil || sw.flagSets < 1 || sw.flagSets > sw.workloads {
		return scaleWork{}, fmt.Errorf("-scale %q: F is a number of flag sets, from 1 to W", s)
	}
	return sw, nil
}

// manifests is the work as YAML documents, in chunks of at most chunk
// objects (one kubectl create each).
func (s scaleWork) manifests(chunk int) []string {
	var docs []string
	docs = append(docs, "apiVersion: v1\nkind: Namespace\nmetadata: {name: scale}\n")
	for i := range s.flagSets {
		docs = append(docs, fmt.Sprintf(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: flags-%[1]d, namespace: scale}
spec:
  flagSpec:
    flags:
      f%[1]d: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}
`, i), fmt.Sprintf(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: src-%[1]d, namespace: scale}
spec:
  sources: [{source: flags-%[1]d, provider: file}]
`, i))
	}
	for j := range s.workloads {
		docs = append(docs, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: w-%[1]d, namespace: scale}
spec:
  replicas: 0
  selector: {matchLabels: {app: w-%[1]d}}
  template:
    metadata:
      labels: {app: w-%[1]d}
      annotations: {openfeature.dev/enabled: "true", openfeature.dev/featureflagsource: src-%[2]d}
    spec:
      containers:
      - {name: app, image: %[3]s, command: [sleep, "3600"]}
`, j, j%s.flagSets, realnode.BusyboxImage))
	}
	var chunks []string
	for len(docs) > 0 {
		n := min(chunk, len(docs))
		chunks = append(chunks, strings.Join(docs[:n], "---\n"))
		docs = docs[n:]
	}
	return chunks
}

// create applies the work, waits until kube-controller-manager has made
// the ReplicaSet of every Deployment of it (under either operator, so that
// its backlog does not fall into the measured work), and, for flagplane,
// until every flag set has its ConfigMap in namespace scale. It returns
// how long the objects took to create, and each wait after.
func (s scaleWork) create(ctx context.Context, c *realnode.Cluster, flagplane bool) (created, replicaSets, settled time.Duration, err error) {
	began := time.Now()
	for _, chunk := range s.manifests(500) {
		if out, err := c.KubectlWithInput(strings.NewReader(chunk), "create", "-f", "-", "-o", "name"); err != nil {
			return 0, 0, 0, fmt.Errorf("creating the scale work: %w\n%s", err, tail(out))
		}
	}
	created = time.Since(began)
	if replicaSets, err = waitForCount(ctx, c, "replicasets", "", s.workloads); err != nil {
		return created, 0, 0, fmt.Errorf("kube-controller-manager did not make the ReplicaSets of the scale work: %w", err)
	}
	if !flagplane {
		return created, replicaSets, 0, nil
	}
	if settled, err = waitForCount(ctx, c, "configmaps", "app.kubernetes.io/managed-by", s.flagSets); err != nil {
		return created, replicaSets, 0, fmt.Errorf("flagplane did not generate the ConfigMaps of the scale work: %w", err)
	}
	return created, replicaSets, settled, nil
}

// waitForCount waits, at most 20 minutes, until namespace scale holds n
// objects of resource (with label selector when not ""), and says how long
// that took.
func waitForCount(ctx context.Context, c *realnode.Cluster, resource, selector string, n int) (time.Duration, error) {
	began := time.Now()
	deadline := began.Add(20 * time.Minute)
	args := []string{"-n", "scale", "get", resource, "-o", "name"}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	for {
		out, err := c.Kubectl(args...)
		have := strings.Count(out, "\n")
		if err == nil && have >= n {
			return time.Since(began), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d %s after %s", have, n, resource, time.Since(began).Round(time.Second))
		}
		sleepCtx(ctx, 2*time.Second)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}
