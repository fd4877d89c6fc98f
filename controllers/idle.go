package controllers

import (
	"errors"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// pending counts, per key, the adds a queue has not yet answered with a
// reconciliation that ended (successfully, or for good), so that Idle can
// tell when nothing is left to do: no key waiting, being reconciled, or
// waiting to be retried. Adds of a key already waiting are counted too; the
// reconciliation that starts after them answers them all.
type pending[T comparable] struct {
	mu   sync.Mutex
	adds map[T]int
}

func (p *pending[T]) added(key T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.adds == nil {
		p.adds = map[T]int{}
	}
	p.adds[key]++
}

// run runs the reconciliation of key: the adds seen when it starts are
// answered when it ends without a retry; a failure that will be retried
// keeps the key pending.
func (p *pending[T]) run(key T, reconcileKey func() error) error {
	p.mu.Lock()
	seen := p.adds[key]
	p.mu.Unlock()
	err := reconcileKey()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil || errors.Is(err, reconcile.TerminalError(nil)):
		if left := p.adds[key] - seen; left > 0 {
			p.adds[key] = left
		} else {
			delete(p.adds, key)
		}
	case p.adds[key] == 0:
		if p.adds == nil {
			p.adds = map[T]int{}
		}
		p.adds[key] = 1 // a retry follows; the startup pass reconciles keys nobody added
	}
	return err
}

// has tells whether key waits, is being reconciled, or waits for a retry.
func (p *pending[T]) has(key T) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.adds[key] > 0
}

func (p *pending[T]) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.adds)
}

// Idle tells whether the workflows have nothing left to do: no key of any
// queue waits, is being reconciled, or waits for a retry. Events that the
// informers have not delivered yet are not known here.
func (c *Controller) Idle() bool { return c.Pending() == 0 }

// Pending counts the keys of all queues that wait, are being reconciled, or
// wait for a retry: those of the graph's workflows and of the history,
// whose reconciles write revisions and may put a status on its queue.
func (c *Controller) Pending() int {
	n := c.configMaps.pending.len() + c.statuses.pending.len() + c.workloads.pending.len() + c.flagds.pending.len()
	if c.history != nil {
		n += c.history.pending.len()
	}
	return n
}
