package main

import (
	"strings"
	"testing"
	"time"
)

// TestMigrationRecord: an answer lower than one the same flagd gave before
// counts as older; a new pod that starts more than one edit behind its
// source's pods counts as behind; answers more than one edit behind the
// value written count as stale per phase and source.
func TestMigrationRecord(t *testing.T) {
	m := &migrationRun{pods: map[string]*polledPod{}, created: map[string]map[string]int{},
		workloadMax: map[string]int{}, stale: map[string]map[string]int{}, perPhase: map[string]int{}}
	m.record("a", "pod-a", "shop/file-src", "OFO", 3, 3)
	m.record("a", "pod-a", "shop/file-src", "OFO", 4, 4)
	m.record("a", "pod-a", "shop/file-src", "OFO", 4, 5) // one edit on its way
	if m.older != 0 || m.behind != 0 || m.stale["OFO"]["shop/file-src"] != 0 {
		t.Fatalf("nothing older, behind or stale yet: %+v", m)
	}
	m.record("a", "pod-a", "shop/file-src", "after", 3, 6)
	if m.older != 1 || m.stale["after"]["shop/file-src"] != 1 {
		t.Fatalf("4 then 3 is older, and 3 while 6 is written stale: older %d, stale %v", m.older, m.stale)
	}
	m.record("b", "pod-b", "shop/file-src", "after", 2, 6)
	m.record("c", "pod-c", "shop/kube-src", "after", 6, 6)
	if m.behind != 1 {
		t.Fatalf("pod-b starts at 2 where its source served 4: behind %d", m.behind)
	}
	if m.answers != 6 || m.perPhase["after"] != 3 {
		t.Fatalf("answers %d, per phase %v", m.answers, m.perPhase)
	}
	m.created["OFO"] = map[string]int{"with flagd": 2}
	m.created["OFO uninstalled"] = map[string]int{"without flagd": 1}
	m.began = time.Now()
	m.bare = []time.Time{m.began.Add(3 * time.Second)}
	m.created["OFO installing"] = map[string]int{"without flagd": 2}
	r := m.report(time.Minute, 5*time.Second, false, wayBackRun{window: 7 * time.Second, took: 40 * time.Second})
	for _, want := range []string{"| OFO | 2 | 0 | 0 | 3 | 0 | 0 |", "| OFO uninstalled | 0 | 1 | 0 | 0 | 0 | 0 |",
		"| OFO installing | 0 | 2 | 0 | 0 | 0 | 0 |", "| **all** | 2 | 3 | 0 | 6 | | |",
		"the way back, flagplane's uninstall to the Deployments rolled under OFO: 40s; flagplane uninstalled to OFO's webhook answering: 7s",
		"| after | 0 | 0 | 0 | 3 | 2 | 0 |", "older than one the same flagd gave before: **1**", "pod pod-a answered 3 after 4"} {
		if !strings.Contains(r, want) {
			t.Errorf("the report lacks %q:\n%s", want, r)
		}
	}
	if n := strings.Count(r, "from 3s to 3s"); n != 1 {
		t.Errorf("the window of pods without flagd is said %d times, want once:\n%s", n, r)
	}
}
