package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/realnode"
)

// The same work under each operator (-measure N): after the install, a
// FeatureFlag, a FeatureFlagSource (file provider) and N Deployments of
// one pod each that opt in by OFO's annotations, all Ready. What is
// measured is read from the real counterparts: pod admission by the API
// server's own histogram of each webhook's latency, the manager's memory
// and CPU by the kubelet's summary API.

// measurement is one operator's figures.
type measurement struct {
	operator                 string
	startup                  time.Duration // apply or helm install to the webhook answering
	podsReady                time.Duration // the N Deployments created to all pods Ready
	admissions               int           // pod CREATE admissions the mutating webhook answered
	refused                  int           // of them, those it refused (the ReplicaSet tries again)
	admitP50                 float64       // seconds, by the histogram's buckets
	admitP99                 float64
	rssMiB, cpuMilli         float64 // the manager over the 30 s after the pods are Ready
	restRSSMiB, restCPUMilli float64 // and over 30 s a minute later
	// With an audit log (editAndChurn): one edit, to its flagd answer
	// (-1: not within editServedBound), and the manager's requests for it;
	// every pod deleted and made again, with the manager's requests per
	// pod and its CPU and memory meanwhile.
	editServed                 time.Duration
	editRequests               int
	churn                      time.Duration
	requestsPerPod             float64
	churnCPUMilli, churnRSSMiB float64
	// kubeServed is, after the churn, an edit to the flagd of a pod that
	// reads the flag set with the kubernetes provider serving it (-1: not
	// within editServedBound).
	kubeServed time.Duration
}

func (m measurement) String() string {
	row := fmt.Sprintf("| %s | %s | %s | %d (%d refused) | ≤ %s | ≤ %s | %.1f | %.0f | %.1f | %.0f |", m.operator, m.startup.Round(100*time.Millisecond),
		m.podsReady.Round(100*time.Millisecond), m.admissions, m.refused, seconds(m.admitP50), seconds(m.admitP99),
		m.rssMiB, m.cpuMilli, m.restRSSMiB, m.restCPUMilli)
	if m.churn == 0 {
		return row
	}
	served := "not within " + editServedBound.String()
	if m.editServed >= 0 {
		served = m.editServed.Round(100 * time.Millisecond).String()
	}
	kubeServed := "not within " + editServedBound.String()
	if m.kubeServed >= 0 {
		kubeServed = m.kubeServed.Round(100 * time.Millisecond).String()
	}
	return row + fmt.Sprintf(" %s | %d | %s | %.1f | %.0f | %.1f | %s |", served, m.editRequests, m.churn.Round(100*time.Millisecond),
		m.requestsPerPod, m.churnCPUMilli, m.churnRSSMiB, kubeServed)
}

func seconds(s float64) string {
	if math.IsInf(s, 1) {
		return "+Inf"
	}
	return (time.Duration(s * float64(time.Second))).String()
}

const measureHeader = "| operator | install to webhook answering | N pods created to Ready | pod admissions | admission p50 | admission p99 | working set after Ready (MiB) | CPU after Ready (millicores, 30 s) | working set a minute later | CPU a minute later |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"

// header is the table's header for m's columns.
func header(m measurement) string {
	if m.churn == 0 {
		return measureHeader
	}
	head, sep, _ := strings.Cut(measureHeader, "\n")
	return head + auditHeader + "\n" + sep + strings.Repeat("--:|", 7)
}

// auditHeader extends measureHeader's columns with editAndChurn's.
const auditHeader = " edit to a pod's flagd serving it | the manager's API requests for the edit (Leases apart) | all pods deleted to all made again Ready | the manager's API requests per pod made again (Leases apart) | CPU meanwhile (millicores) | working set after (MiB) | edit to a kubernetes-provider pod's flagd serving it |"

// measure runs the work and reads the figures; webhook is the name of the
// operator's mutating pod webhook, managerNS its namespace.
func measure(ctx context.Context, c *realnode.Cluster, operator, webhook, managerNS string, n int, startup time.Duration) (measurement, error) {
	m := measurement{operator: operator, startup: startup}
	var b strings.Builder
	b.WriteString(`apiVersion: v1
kind: Namespace
metadata: {name: measure}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: flags, namespace: measure}
spec:
  flagSpec:
    flags:
      new-ui: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: source, namespace: measure}
spec:
  sources: [{source: flags, provider: file}]
`)
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app-%d, namespace: measure}
spec:
  replicas: 1
  selector: {matchLabels: {app: app-%d}}
  template:
    metadata:
      labels: {app: app-%d}
      annotations: {openfeature.dev/enabled: "true", openfeature.dev/featureflagsource: source}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: app, image: %s, command: [sleep, "3600"], resources: {requests: {cpu: 5m}}}
`, i, i, i, realnode.BusyboxImage)
	}
	began := time.Now()
	if out, err := c.KubectlWithInput(strings.NewReader(b.String()), "apply", "-f", "-"); err != nil {
		return m, fmt.Errorf("creating the work: %w\n%s", err, out)
	}
	// kubectl wait finds no pod when kube-controller-manager has not made
	// one yet (it may have thousands of Deployments before them, -scale):
	// the count below waits for them all.
	if out, err := c.Kubectl("-n", "measure", "wait", "pods", "--all", "--for=condition=Ready", "--timeout=10m"); err != nil &&
		!strings.Contains(err.Error(), "no matching resources found") {
		return m, fmt.Errorf("waiting for the pods: %w\n%s", err, out)
	}
	// kubectl wait can start before the last pod exists.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		out, err := c.Kubectl("-n", "measure", "get", "pods", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}")
		if err == nil && strings.Count(out, "True") >= n {
			break
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("the %d pods are not all Ready: %s", n, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m.podsReady = time.Since(began)

	metrics, err := c.Kubectl("get", "--raw", "/metrics")
	if err != nil {
		return m, err
	}
	m.admissions, m.admitP50, m.admitP99 = admissionQuantiles(metrics, webhook)
	m.refused = admissionsRefused(metrics, webhook)

	// Right after the pods are Ready, and at rest a minute later: the
	// kubelet's summary gives the working set, and CPU as the difference
	// of two readings 30 s apart (the kubelet refreshes its container
	// stats every 10 to 15 s).
	if m.rssMiB, m.cpuMilli, err = managerUse(ctx, c, managerNS); err != nil {
		return m, err
	}
	select {
	case <-ctx.Done():
		return m, ctx.Err()
	case <-time.After(time.Minute):
	}
	if m.restRSSMiB, m.restCPUMilli, err = managerUse(ctx, c, managerNS); err != nil || c.AuditLogPath == "" {
		return m, err
	}
	return m, editAndChurn(ctx, c, &m, managerNS, n)
}

// editAndChurn, on a node with an audit log: one edit of the flag set,
// timed until a pod's flagd serves it (flagd's own answer), and the
// manager's API requests for it; then every pod of the work deleted at
// once and made again by its ReplicaSet, with the manager's requests per
// pod created and its CPU and memory meanwhile. The requests are the API
// server's audit events whose user is a ServiceAccount of managerNS.
func editAndChurn(ctx context.Context, c *realnode.Cluster, m *measurement, managerNS string, n int) error {
	ip, err := c.Kubectl("-n", "measure", "get", "pods", "-l", "app=app-0", "-o", "jsonpath={.items[0].status.podIP}")
	if err != nil || ip == "" {
		return fmt.Errorf("the first pod's IP: %v %s", err, ip)
	}
	edited := time.Now()
	if out, err := c.Kubectl("-n", "measure", "patch", "featureflag", "flags", "--type=merge",
		"-p", `{"spec":{"flagSpec":{"flags":{"new-ui":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on"}}}}}`); err != nil {
		return fmt.Errorf("editing the flag set: %w\n%s", err, out)
	}
	m.editServed = -1
	for time.Since(edited) < editServedBound {
		askCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		e, err := flagdapi.Resolve(askCtx, ip+":8013", flagdapi.Boolean, "new-ui", nil)
		cancel()
		if err == nil && e.Variant == "on" {
			m.editServed = time.Since(edited)
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(250 * time.Millisecond)
	}
	sleepCtx(ctx, 10*time.Second) // what follows the edit: status, history
	if m.editRequests, _, err = managerRequests(c.AuditLogPath, managerNS, edited, time.Now()); err != nil {
		return err
	}

	before, err := managerStats(c, managerNS)
	if err != nil {
		return err
	}
	churned := time.Now()
	if out, err := c.Kubectl("-n", "measure", "delete", "pods", "--all", "--wait=false"); err != nil {
		return fmt.Errorf("deleting the pods: %w\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		out, err := c.Kubectl("-n", "measure", "get", "pods", "-o",
			"jsonpath={range .items[*]}{.metadata.deletionTimestamp}/{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}")
		if err == nil && strings.Count(out, "\n") == n && strings.Count(out, "/True\n") == n && !strings.Contains(out, "Z/") {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d pods were not made again: %s", n, out)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	m.churn = time.Since(churned)
	sleepCtx(ctx, 15*time.Second) // the kubelet's next CPU reading
	after, err := managerStats(c, managerNS)
	if err != nil {
		return err
	}
	if after.at.After(before.at) {
		m.churnCPUMilli = float64(after.cpuNanos-before.cpuNanos) / 1e6 / after.at.Sub(before.at).Seconds()
	}
	m.churnRSSMiB = float64(after.workingSet) / (1 << 20)
	requests, _, err := managerRequests(c.AuditLogPath, managerNS, churned, time.Now())
	if err != nil {
		return err
	}
	m.requestsPerPod = float64(requests) / float64(n)
	m.kubeServed, err = kubernetesEditServed(ctx, c)
	return err
}

// kubernetesEditServed adds, after everything else was measured, a
// FeatureFlagSource with the kubernetes provider and a Deployment of one
// pod that reads the flag set through it (flagd watches the FeatureFlag
// with the pod's ServiceAccount, under the RBAC the operator grants), and
// times one edit to that flagd serving it.
func kubernetesEditServed(ctx context.Context, c *realnode.Cluster) (time.Duration, error) {
	work := fmt.Sprintf(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: kube-source, namespace: measure}
spec:
  sources: [{source: flags, provider: kubernetes}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kube-app, namespace: measure}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kube-app, namespace: measure}
spec:
  replicas: 1
  selector: {matchLabels: {app: kube-app}}
  template:
    metadata:
      labels: {app: kube-app}
      annotations: {openfeature.dev/enabled: "true", openfeature.dev/featureflagsource: kube-source}
    spec:
      serviceAccountName: kube-app
      terminationGracePeriodSeconds: 1
      containers:
      - {name: app, image: %s, command: [sleep, "3600"], resources: {requests: {cpu: 5m}}}
`, realnode.BusyboxImage)
	if out, err := c.KubectlWithInput(strings.NewReader(work), "apply", "-f", "-"); err != nil {
		return 0, fmt.Errorf("creating the kubernetes-provider work: %w\n%s", err, out)
	}
	if out, err := c.Kubectl("-n", "measure", "rollout", "status", "deployment/kube-app", "--timeout=5m"); err != nil {
		return 0, fmt.Errorf("the kubernetes-provider pod: %w\n%s", err, out)
	}
	ip, err := c.Kubectl("-n", "measure", "get", "pods", "-l", "app=kube-app", "--field-selector=status.phase=Running", "-o", "jsonpath={.items[0].status.podIP}")
	if err != nil || ip == "" {
		return 0, fmt.Errorf("the kubernetes-provider pod's IP: %v %s", err, ip)
	}
	// The flag set serves "on" since the first edit; this one turns it off.
	edited := time.Now()
	if out, err := c.Kubectl("-n", "measure", "patch", "featureflag", "flags", "--type=merge",
		"-p", `{"spec":{"flagSpec":{"flags":{"new-ui":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"off"}}}}}`); err != nil {
		return 0, fmt.Errorf("editing the flag set: %w\n%s", err, out)
	}
	for time.Since(edited) < editServedBound {
		askCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		e, err := flagdapi.Resolve(askCtx, ip+":8013", flagdapi.Boolean, "new-ui", nil)
		cancel()
		if err == nil && e.Variant == "off" {
			return time.Since(edited), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, nil
}

// editServedBound is how long an edit is waited for at a pod's flagd.
const editServedBound = 100 * time.Second

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// managerRequests counts the API server's audit events of requests made
// by a ServiceAccount of managerNS and completed within [from, to]: all of
// them but the leader election's (Leases), and those apart. The others are
// printed by verb and resource.
func managerRequests(auditLog, managerNS string, from, to time.Time) (requests, leases int, err error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	prefix := "system:serviceaccount:" + managerNS + ":"
	by := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e struct {
			User           struct{ Username string } `json:"user"`
			StageTimestamp time.Time                 `json:"stageTimestamp"`
			Verb           string                    `json:"verb"`
			RequestURI     string                    `json:"requestURI"`
			ObjectRef      struct {
				Resource, Subresource string
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return 0, 0, fmt.Errorf("reading the audit log: %w", err)
		}
		if !strings.HasPrefix(e.User.Username, prefix) || e.StageTimestamp.Before(from) || e.StageTimestamp.After(to) {
			continue
		}
		if e.ObjectRef.Resource == "leases" {
			leases++
			continue
		}
		requests++
		what := e.ObjectRef.Resource
		if what == "" {
			what, _, _ = strings.Cut(e.RequestURI, "?") // a non-resource URL
		}
		if e.ObjectRef.Subresource != "" {
			what += "/" + e.ObjectRef.Subresource
		}
		by[e.Verb+" "+what]++
	}
	if len(by) > 0 {
		keys := slices.Sorted(maps.Keys(by))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
		}
		say("the manager's requests from %s to %s: %s; leases %d", from.Format("15:04:05"), to.Format("15:04:05"), strings.Join(parts, ", "), leases)
	}
	return requests, leases, sc.Err()
}

// managerUse is the operator's working set, and its CPU over 30 s.
func managerUse(ctx context.Context, c *realnode.Cluster, managerNS string) (rssMiB, cpuMilli float64, err error) {
	first, err := managerStats(c, managerNS)
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(30 * time.Second):
	}
	second, err := managerStats(c, managerNS)
	if err != nil {
		return 0, 0, err
	}
	if !second.at.After(first.at) {
		return 0, 0, fmt.Errorf("the kubelet's CPU readings of the manager did not advance in 30 s (%s)", first.at)
	}
	return float64(second.workingSet) / (1 << 20), float64(second.cpuNanos-first.cpuNanos) / 1e6 / second.at.Sub(first.at).Seconds(), nil
}

// admissionsRefused counts the webhook's pod CREATE admissions that it
// refused, by the API server's counter of them.
func admissionsRefused(metrics, webhook string) int {
	n := 0
	for line := range strings.SplitSeq(metrics, "\n") {
		if strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_count{") &&
			strings.Contains(line, `name="`+webhook+`"`) && strings.Contains(line, `operation="CREATE"`) &&
			strings.Contains(line, `rejected="true"`) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			n += int(v)
		}
	}
	return n
}

// admissionQuantiles reads the API server's histogram of a webhook's
// latency for pod CREATE admissions: their count and the upper bounds of
// the buckets that hold the 50th and 99th percentiles.
func admissionQuantiles(metrics, webhook string) (count int, p50, p99 float64) {
	type bucket struct {
		le    float64
		count float64
	}
	var buckets []bucket
	sc := bufio.NewScanner(strings.NewReader(metrics))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_bucket{") ||
			!strings.Contains(line, `name="`+webhook+`"`) || !strings.Contains(line, `operation="CREATE"`) ||
			!strings.Contains(line, `type="admit"`) {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.Index(line[i+4:], `"`)
		le, err := strconv.ParseFloat(line[i+4:i+4+j], 64)
		if err != nil {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		buckets = append(buckets, bucket{le, v})
	}
	// Several label sets (rejected or not) add up by bound.
	sums := map[float64]float64{}
	for _, b := range buckets {
		sums[b.le] += b.count
	}
	bounds := slices.Sorted(func(yield func(float64) bool) {
		for le := range sums {
			if !yield(le) {
				return
			}
		}
	})
	if len(bounds) == 0 {
		return 0, 0, 0
	}
	total := sums[bounds[len(bounds)-1]]
	at := func(q float64) float64 {
		for _, le := range bounds {
			if sums[le] >= q*total {
				return le
			}
		}
		return math.Inf(1)
	}
	return int(total), at(0.5), at(0.99)
}

type stats struct {
	workingSet, cpuNanos uint64
	at                   time.Time
}

// managerStats sums the kubelet's summary of the operator namespace's
// pods (its manager; OFO's flagd-proxy is not deployed by this work).
func managerStats(c *realnode.Cluster, managerNS string) (stats, error) {
	raw, err := c.Kubectl("get", "--raw", "/api/v1/nodes/"+c.NodeName+"/proxy/stats/summary")
	if err != nil {
		return stats{}, err
	}
	var summary struct {
		Pods []struct {
			PodRef struct{ Name, Namespace string } `json:"podRef"`
			CPU    struct {
				Time                 time.Time `json:"time"`
				UsageCoreNanoSeconds uint64    `json:"usageCoreNanoSeconds"`
			} `json:"cpu"`
			Memory struct {
				WorkingSetBytes uint64 `json:"workingSetBytes"`
			} `json:"memory"`
		} `json:"pods"`
	}
	if err := json.Unmarshal([]byte(raw), &summary); err != nil {
		return stats{}, fmt.Errorf("reading the kubelet's summary: %w", err)
	}
	var s stats
	for _, p := range summary.Pods {
		if p.PodRef.Namespace != managerNS {
			continue
		}
		s.workingSet += p.Memory.WorkingSetBytes
		s.cpuNanos += p.CPU.UsageCoreNanoSeconds
		s.at = p.CPU.Time
	}
	if s.at.IsZero() {
		return s, fmt.Errorf("the kubelet's summary has no pod of namespace %s", managerNS)
	}
	return s, nil
}
