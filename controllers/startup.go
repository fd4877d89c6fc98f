package controllers

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// The start-up: the graph built from the caches, every generated object
// and status reconciled once, then the queues served.

// run is the manager runnable of the workflows: it waits until every
// callback has seen the initial list (so the graph holds the whole cache),
// reconciles every node once, reports ready, then serves the queues.
func (c *Controller) run(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("startup")
	start := time.Now()
	if !toolscache.WaitForCacheSync(ctx.Done(), c.handlerSynced) {
		return errors.New("caches did not sync")
	}
	v := c.topo.Snapshot()
	logger.Info("topology built from the caches", "duration", time.Since(start).String(), "nodes", v.Counts())
	if c.confirmer != nil {
		// Before any status asks it for a read.
		c.confirmer.Prober.Start(ctx)
	}

	if err := c.initialPass(ctx, v); err != nil {
		return err
	}
	// From now on the Pod webhook may write a ConfigMap for a pod that the
	// graph learns of a moment later.
	c.configMapWF.UnneededGrace = configmaps.UnneededGrace
	// Ready once what workloads use is in place; the statuses, which only
	// report, are written next, before the queues start.
	c.ready.Store(true)
	logger.Info("ready: every generated object reconciled once", "duration", time.Since(start).String())
	processAll(ctx, c.statuses, slices.Values(c.statusKeys(v)))
	logger.Info("every status reconciled once", "duration", time.Since(start).String())
	if c.opts.StartedUp != nil {
		c.opts.StartedUp()
	}

	go c.configMaps.run(ctx)
	go c.statuses.run(ctx)
	// Rollouts start with the other queues, never ahead of them: each is
	// bounded by the queue's reconcile timeout, and reads no pod's answer
	// itself (staging.Prober).
	c.stagingWF.Prober.Start(ctx)
	for _, k := range v.RolloutPolicies() {
		c.rollouts.Add(k)
	}
	go c.rollouts.run(ctx)
	if c.history != nil {
		go c.history.run(ctx)
	}
	go c.runHealer(ctx)
	go c.flagds.run(ctx)
	c.workloads.run(ctx)
	return nil
}

func (c *Controller) handlerSynced() bool {
	for _, h := range c.handlers {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// initialPass reconciles every generated object the graph wants, and every
// one in the cache that the graph no longer wants, once: ConfigMaps, then
// workloads (RBAC, rollouts), then Flagds, several keys at a time. Events
// that arrive meanwhile wait on the queues. The statuses follow it (run).
func (c *Controller) initialPass(ctx context.Context, v *topology.View) error {
	cms := map[client.ObjectKey]bool{}
	for _, k := range v.ConfigMaps() {
		cms[configMapObjectKey(k)] = true
	}
	var existing corev1.ConfigMapList
	if err := c.cache.List(ctx, &existing); err != nil {
		return fmt.Errorf("listing generated ConfigMaps: %w", err)
	}
	for i := range existing.Items {
		cms[client.ObjectKeyFromObject(&existing.Items[i])] = true
	}
	// Each key on the one queue of its kind (queueOf): a Role's workload
	// may be a Flagd, which only the flagds queue reconciles.
	keys := map[*workQueue[topology.Key]]map[topology.Key]bool{c.workloads: {}, c.flagds: {}}
	for _, k := range slices.Concat(v.Workloads(), v.Flagds()) {
		keys[c.queueOf(k)][k] = true
	}
	var roles rbacv1.RoleList
	if err := c.cache.List(ctx, &roles); err != nil {
		return fmt.Errorf("listing generated Roles: %w", err)
	}
	for i := range roles.Items {
		if k, ok := rbac.WorkloadOfName(roles.Items[i].Name); ok {
			if q := c.queueOf(k); keys[q] != nil {
				keys[q][k] = true
			}
		}
	}
	processAll(ctx, c.configMaps, maps.Keys(cms))
	processAll(ctx, c.workloads, maps.Keys(keys[c.workloads]))
	processAll(ctx, c.flagds, maps.Keys(keys[c.flagds]))
	return nil
}

// startupConcurrency is how many keys the startup pass reconciles at once.
// Its time is mostly waiting for the API server (a first start creates
// every ConfigMap and writes every status), so requests in flight, not
// cores, bound it. No two reconcile the same key: each is visited once, and
// the queues' workers start after the pass.
const startupConcurrency = 8

// processAll reconciles every key once, startupConcurrency at a time.
func processAll[T comparable](ctx context.Context, q *workQueue[T], keys iter.Seq[T]) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, startupConcurrency)
	for k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			q.process(ctx, k)
		})
	}
	wg.Wait()
}
