package controllers

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// TestDeliveriesEndTheWaitByAnEvent: a flag set's status that awaits a
// ConfigMap write is queued again by the write's informer event, or, when
// a reconciliation ends with nothing on its way (no write was made), by
// the end of that reconciliation; never while a write is still on its way,
// and never by a timer.
func TestDeliveriesEndTheWaitByAnEvent(t *testing.T) {
	flagSet := topology.FlagSetKey("shop", "flags")
	cm := client.ObjectKey{Namespace: "team", Name: topology.ConfigMapName(flagSet)}
	for _, tc := range []struct {
		name string
		// reconcile is what the ConfigMap's reconciliation does.
		reconcile func(q *workQueue[client.ObjectKey], unseen *workflows.UnseenWrites)
		// queuedAtEnd: the flag set is queued when the reconciliation ends.
		queuedAtEnd bool
	}{
		{name: "a write: its event ends the wait", reconcile: func(_ *workQueue[client.ObjectKey], unseen *workflows.UnseenWrites) {
			unseen.Wrote(configMapRef(cm), "10")
		}},
		{name: "no write needed: the end of the reconciliation ends the wait",
			reconcile: func(*workQueue[client.ObjectKey], *workflows.UnseenWrites) {}, queuedAtEnd: true},
		{name: "queued again meanwhile: the next reconciliation decides", reconcile: func(q *workQueue[client.ObjectKey], unseen *workflows.UnseenWrites) {
			if !unseen.Unseen(configMapRef(cm), "10") {
				q.Add(cm) // the first time, then it writes
				unseen.Wrote(configMapRef(cm), "10")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var queued []topology.Key
			var unseen workflows.UnseenWrites
			var d deliveries
			var q *workQueue[client.ObjectKey]
			q = newWorkQueue(logr.Discard(), "configmaps", 1, func(context.Context, client.ObjectKey) error {
				tc.reconcile(q, &unseen)
				return nil
			})
			version := "10" // the cache's, until the write's event
			d.track(q, &unseen, func(client.ObjectKey) string { return version }, func(k topology.Key) { queued = append(queued, k) })

			g.Expect(d.Await(flagSet, "team")).To(BeFalse(), "nothing on its way")
			q.Add(cm)
			g.Expect(d.Await(flagSet, "team")).To(BeTrue(), "queued")
			g.Expect(q.reconcile(context.Background(), cm)).To(Succeed())
			if tc.queuedAtEnd {
				g.Expect(queued).To(Equal([]topology.Key{flagSet}))
				g.Expect(d.Await(flagSet, "team")).To(BeFalse(), "nothing on its way any more")
				return
			}
			g.Expect(queued).To(BeEmpty(), "a write or a reconciliation still on its way")
			g.Expect(d.Await(flagSet, "team")).To(BeTrue())

			d.seen(cm, "10")
			if q.pending.has(cm) {
				g.Expect(queued).To(BeEmpty(), "an event of the version before the write")
				g.Expect(q.reconcile(context.Background(), cm)).To(Succeed())
			}
			version = "11"
			d.seen(cm, "11")
			g.Expect(queued).To(Equal([]topology.Key{flagSet}), "the write's event")
			g.Expect(d.Await(flagSet, "team")).To(BeFalse(), "nothing on its way any more")
		})
	}
}
