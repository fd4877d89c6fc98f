package topology

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// TestSnapshotIsolation checks that a View does not see later edits.
func TestSnapshotIsolation(t *testing.T) {
	g := NewWithT(t)
	top := shopWorld(t)
	v := top.Snapshot()
	dot, ans := string(v.DOT()), answers(v)

	top.DeleteSource("shop", "sidecar")
	top.DeleteFlagSet("shop", "flags")
	must(t)(top.UpsertWorkload(deployment("shop", "web", map[string]string{"app": "other"}, nil)))
	must(t)(top.UpsertSource(newSource("shop", "new", ref("flags", ""), selector(matchLabels("app", "other")))))

	g.Expect(string(v.DOT())).To(Equal(dot))
	g.Expect(answers(v)).To(Equal(ans))
	g.Expect(string(top.DOT())).NotTo(Equal(dot))
	g.Expect(string(top.DOT())).To(Equal(string(top.Snapshot().DOT())))
}

// TestSnapshotsWhileWriting has readers check views while a writer goes on
// (run with -race): a view answers the same however late it is asked, and
// its answers agree with each other.
func TestSnapshotsWhileWriting(t *testing.T) {
	top := New()
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		r := rand.New(rand.NewPCG(3, 4))
		for range 2000 {
			if _, err := genEvent(randChooser{r}).apply(top); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				v := top.Snapshot()
				first := string(v.DOT())
				if msg := inconsistency(v); msg != "" {
					t.Error(msg)
					return
				}
				if string(v.DOT()) != first {
					t.Error("a view changed while a writer went on")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// inconsistency checks the relations of a view against each other.
func inconsistency(v *View) string {
	for _, s := range v.Sources() {
		for _, r := range v.FlagSetRefs(s) {
			if (r.State == RefResolved) != slices.Contains(v.SourcesOfFlagSet(r.FlagSet), s) {
				return "refs state and SourcesOfFlagSet disagree for " + s.String()
			}
		}
		for _, w := range v.WorkloadsOfSource(s) {
			if !slices.Contains(v.SourcesOfWorkload(w), s) {
				return "WorkloadsOfSource and SourcesOfWorkload disagree for " + s.String()
			}
		}
	}
	for _, cm := range v.ConfigMaps() {
		if len(v.WorkloadsOfConfigMap(cm)) == 0 {
			return "ConfigMap no workload mounts: " + cm.String()
		}
		if !slices.Contains(v.ConsumerNamespaces(cm.FlagSet()), cm.Namespace) {
			return "ConfigMap missing from its flag set's consumers: " + cm.String()
		}
	}
	return ""
}
