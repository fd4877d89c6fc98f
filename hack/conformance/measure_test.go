package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestManagerRequests: the manager's requests are the audit events of a
// ServiceAccount of its namespace completed within the window; others'
// (kube-controller-manager, another namespace's, the admin) are not.
func TestManagerRequests(t *testing.T) {
	at := func(s string) string {
		return time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC).Add(mustDuration(t, s)).Format(time.RFC3339Nano)
	}
	lines := []string{
		`{"user":{"username":"system:serviceaccount:flagplane-system:flagplane"},"stageTimestamp":"` + at("1s") + `","verb":"update"}`,
		`{"user":{"username":"system:serviceaccount:flagplane-system:flagplane"},"stageTimestamp":"` + at("5s") + `","verb":"patch"}`,
		`{"user":{"username":"system:serviceaccount:flagplane-system:flagplane"},"stageTimestamp":"` + at("20s") + `","verb":"get"}`,
		`{"user":{"username":"system:serviceaccount:flagplane-system-2:other"},"stageTimestamp":"` + at("2s") + `","verb":"get"}`,
		`{"user":{"username":"system:kube-controller-manager"},"stageTimestamp":"` + at("2s") + `","verb":"create"}`,
		`{"user":{"username":"flagplane-realnode-admin"},"stageTimestamp":"` + at("3s") + `","verb":"patch"}`,
		`{"user":{"username":"system:serviceaccount:flagplane-system:flagplane"},"stageTimestamp":"` + at("4s") + `","verb":"update","objectRef":{"resource":"leases"}}`,
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)
	n, leases, err := managerRequests(path, "flagplane-system", from, from.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || leases != 1 {
		t.Fatalf("counted %d requests and %d Lease requests, want the manager's 2 and 1 in the window", n, leases)
	}
	if _, _, err := managerRequests(path+".missing", "flagplane-system", from, from); err == nil {
		t.Fatal("a missing audit log is an error")
	}
}

// TestMeasureHeader: a measurement with the audit log's figures gets as
// many columns in its header as in its row.
func TestMeasureHeader(t *testing.T) {
	for _, m := range []measurement{{operator: "a"}, {operator: "b", churn: time.Second, editServed: -1}} {
		head, sep, _ := strings.Cut(header(m), "\n")
		cols := strings.Count(head, "|")
		if strings.Count(sep, "|") != cols || strings.Count(m.String(), "|") != cols {
			t.Errorf("%s: header %d, separator %d, row %d columns", m.operator, cols, strings.Count(sep, "|"), strings.Count(m.String(), "|"))
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestScaleWork: -scale W:F makes W Deployments of no replica spread over
// F sources, each reading a FeatureFlag of its own, in chunks.
func TestScaleWork(t *testing.T) {
	for _, bad := range []string{"", "10", "0:1", "10:0", "10:11", "a:b"} {
		if _, err := parseScale(bad); err == nil {
			t.Errorf("-scale %q accepted", bad)
		}
	}
	sw, err := parseScale("5:2")
	if err != nil {
		t.Fatal(err)
	}
	chunks := sw.manifests(4)
	all := strings.Join(chunks, "---\n")
	if len(chunks) != 3 {
		t.Errorf("1 Namespace, 4 flag set objects and 5 Deployments in chunks of 4: %d chunks", len(chunks))
	}
	for what, want := range map[string]int{"kind: Deployment": 5, "kind: FeatureFlag\n": 2, "kind: FeatureFlagSource": 2,
		"replicas: 0": 5, "featureflagsource: src-0}": 3, "featureflagsource: src-1}": 2, "source: flags-1, provider: file": 1} {
		if got := strings.Count(all, what); got != want {
			t.Errorf("%q: %d, want %d", what, got, want)
		}
	}
}
