package main

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

// confirmer stands in for the shared member's flagplane when the
// simulated members run none (-sim-member stub): as soon as a copy's spec
// is written, it writes the status a member's flagplane writes once it
// serves the copy (the revision, observedGeneration, Ready True for the
// generation). What is left is the hub's own work and the shared API
// server's, without a member's rendering, admission and delivery.
type confirmer struct {
	c       client.Client
	mu      sync.Mutex
	pending map[client.ObjectKey]bool
	wake    chan struct{}
}

// confirm starts the confirmer on the member that c writes to and mc
// caches, with workers status writers, until ctx is done.
func confirm(ctx context.Context, c client.Client, mc cache.Cache, workers int) error {
	cf := &confirmer{c: c, pending: map[client.ObjectKey]bool{}, wake: make(chan struct{}, 1)}
	inf, err := mc.GetInformer(ctx, &v1beta1.FeatureFlag{})
	if err != nil {
		return err
	}
	see := func(o any) {
		ff, ok := o.(*v1beta1.FeatureFlag)
		if !ok || served(ff) {
			return
		}
		cf.mu.Lock()
		cf.pending[client.ObjectKeyFromObject(ff)] = true
		cf.mu.Unlock()
		select {
		case cf.wake <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return err
	}
	for range workers {
		go cf.work(ctx, mc)
	}
	return nil
}

// served: the copy's status says it serves its spec.
func served(ff *v1beta1.FeatureFlag) bool {
	return ff.Status.ObservedGeneration == ff.Generation && ff.Status.Revision == fleetwf.Revision(ff) &&
		meta.IsStatusConditionTrue(ff.Status.Conditions, v1beta1.ConditionReady)
}

func (cf *confirmer) next() (client.ObjectKey, bool) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	for k := range cf.pending {
		delete(cf.pending, k)
		return k, true
	}
	return client.ObjectKey{}, false
}

func (cf *confirmer) work(ctx context.Context, mc cache.Cache) {
	for {
		key, ok := cf.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-cf.wake:
				continue
			}
		}
		var ff v1beta1.FeatureFlag
		if err := mc.Get(ctx, key, &ff); err != nil || served(&ff) {
			continue
		}
		ff.Status.ObservedGeneration = ff.Generation
		ff.Status.Revision = fleetwf.Revision(&ff)
		meta.SetStatusCondition(&ff.Status.Conditions, metav1.Condition{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Served", Message: "confirmed by the benchmark", ObservedGeneration: ff.Generation})
		// A conflict means a newer copy: its event queues it again.
		_ = cf.c.Status().Update(ctx, &ff)
	}
}
