package controllers

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/go-logr/logr"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestPendingKeysUntilReconciledWithoutRetry(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	results := map[string][]error{"flaky": {errors.New("boom"), nil}, "bad": {reconcile.TerminalError(errors.New("never"))}}
	q := newWorkQueue(logr.Discard(), "test", 1, func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if len(results[key]) == 0 {
			return nil
		}
		err := results[key][0]
		results[key] = results[key][1:]
		return err
	})
	g.Expect(q.pending.len()).To(Equal(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.process(ctx, "good")
	g.Expect(q.pending.len()).To(Equal(0), "the startup pass reconciles a key nobody added")

	q.Add("flaky")
	q.Add("bad")
	q.Add("good")
	g.Expect(q.pending.len()).To(Equal(3), "added, not reconciled")

	// The startup pass reconciles a key nobody added; a failure keeps it pending.
	mu.Lock()
	results["startup"] = []error{errors.New("boom")}
	mu.Unlock()
	q.process(ctx, "startup")
	g.Expect(q.pending.len()).To(Equal(4))

	go q.run(ctx)
	g.Eventually(q.pending.len).Should(Equal(0), "every key reconciled once without a retry, the flaky one after its retry")
	mu.Lock()
	defer mu.Unlock()
	g.Expect(results["flaky"]).To(BeEmpty(), "retried after the failure")
}
