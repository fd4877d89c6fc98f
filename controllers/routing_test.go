package controllers

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/status"
)

// routingController is a Controller with its queues and topology only: the
// callbacks put keys on the queues, nothing reconciles them.
func routingController() *Controller {
	c := &Controller{topo: topology.New()}
	none := func(context.Context, topology.Key) error { return nil }
	c.statuses = newWorkQueue(logr.Discard(), "status", 1, none)
	c.workloads = newWorkQueue(logr.Discard(), "workloads", 1, none)
	c.flagds = newWorkQueue(logr.Discard(), "flagds", 1, none)
	c.configMaps = newWorkQueue(logr.Discard(), "configmaps", 1, func(context.Context, client.ObjectKey) error { return nil })
	if err := c.route(c.kinds(nil)); err != nil {
		panic(err)
	}
	c.ready.Store(true)
	return c
}

// drain takes every key off the node queues: queue name → kinds seen.
func drain(c *Controller) map[topology.Kind]map[string]bool {
	seen := map[topology.Kind]map[string]bool{}
	for _, q := range []*workQueue[topology.Key]{c.statuses, c.workloads, c.flagds} {
		for q.Len() > 0 {
			k, _ := q.queue.Get()
			q.queue.Done(k)
			q.queue.Forget(k)
			if seen[k.Kind] == nil {
				seen[k.Kind] = map[string]bool{}
			}
			seen[k.Kind][q.name] = true
		}
	}
	return seen
}

// TestOneQueuePerKind: every path that queues a node puts it on the one
// queue of its kind, so that the status of each kind has one writer (the
// workflow of that queue). A Flagd's RBAC events once queued it on the
// workloads queue too, whose reconcile wrote its status as well: two
// writers of one status, and a Conflict for one of them.
func TestOneQueuePerKind(t *testing.T) {
	g := NewWithT(t)
	c := routingController()
	const ns = "shop"

	// A Flagd served by its source (a flag set as a file, another through
	// the kubernetes provider), as the informer events bring them.
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-flags", UID: "ff"}}
	d, err := c.topo.UpsertFlagSet(ff)
	g.Expect(err).NotTo(HaveOccurred())
	c.dispatch(d)
	src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags", UID: "s"}}
	src.Spec.Sources = []v1beta1.Source{{Source: "shop-flags", Provider: "file"}, {Source: "other-flags", Provider: "kubernetes"}}
	d, err = c.topo.UpsertSource(src)
	g.Expect(err).NotTo(HaveOccurred())
	c.dispatch(d)
	f := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge", UID: "f"}}
	f.Spec.FeatureFlagSource = "flags"
	for _, k := range c.kinds(nil) {
		if flagds, ok := k.(graphKind[*v1beta1.Flagd]); ok {
			flagds.handler(c).onAdd(f)
		}
	}
	flagd := topology.FlagdKey(ns, "edge")
	// Its generated Deployment, ConfigMap and RBAC change, as the informers tell.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge", Generation: 1,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1beta1.GroupVersion.String(), Kind: v1beta1.FlagdKind,
			Name: "edge", Controller: ptr.To(true)}}}}
	c.flagdChildHandler().onAdd(dep)
	cmKey := topology.ConfigMapKey(topology.FlagSetKey(ns, "shop-flags"), ns)
	g.Expect(c.topo.Snapshot().WorkloadsOfConfigMap(cmKey)).To(ContainElement(flagd), "the Flagd mounts the flag set's ConfigMap")
	c.configMapChanged(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: topology.ConfigMapName(cmKey.FlagSet())}}, false)
	web := topology.WorkloadKey(topology.KindDeployment, ns, "web")
	for _, w := range []topology.Key{flagd, web, topology.WorkloadKey("Job.batch", ns, "migrate")} {
		rbacHandler[*rbacv1.Role](c).onDelete(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rbac.Name(w)}})
		rbacHandler[*rbacv1.RoleBinding](c).onAdd(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rbac.Name(w)}})
	}
	// A Delta that names a node of every kind.
	var all topology.Delta
	for _, k := range []topology.Key{
		topology.FlagSetKey(ns, "shop-flags"), topology.SourceKey(ns, "flags"), topology.InProcessConfigKey(ns, "sdk"),
		topology.SourcePolicyKey(ns, "defaults"), flagd, web, topology.WorkloadKey(topology.KindStatefulSet, ns, "db"),
		topology.WorkloadKey(topology.KindDaemonSet, ns, "agent"),
	} {
		all.Add(k)
	}
	c.dispatch(all)

	g.Expect(drain(c)).To(Equal(map[topology.Kind]map[string]bool{
		topology.KindFlagSet:         {"status": true},
		topology.KindSource:          {"status": true},
		topology.KindInProcessConfig: {"status": true},
		topology.KindSourcePolicy:    {"status": true},
		topology.KindFlagd:           {"flagds": true},
		topology.KindDeployment:      {"workloads": true},
		topology.KindStatefulSet:     {"workloads": true},
		topology.KindDaemonSet:       {"workloads": true},
		"Job.batch":                  {"workloads": true},
	}), "each kind on one queue")

	// And a key that reaches the wrong queue all the same is refused, not reconciled there.
	err = c.reconcileWorkload(context.Background(), flagd)
	g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(BeTrue(), "%v", err)
	g.Expect(errors.Is(err, errNotThisQueue)).To(BeTrue(), "%v", err)
}

// TestStatusWriters: the status of a kind on the statuses queue is written
// by the writer its line names, and the start-up pass writes the status of
// every object of those kinds, in the table's order: a kind added to the
// table with its writer needs no other line to have its status written,
// and a line on that queue without a writer is refused at the start.
func TestStatusWriters(t *testing.T) {
	g := NewWithT(t)
	c := routingController()
	g.Expect(c.statusKinds).To(ContainElements(
		topology.KindFlagSet, topology.KindSource, topology.KindInProcessConfig, topology.KindSourcePolicy))
	g.Expect(c.statusKinds).NotTo(ContainElements(topology.KindFlagd, topology.KindDeployment))

	const ns = "shop"
	_, err := c.topo.UpsertFlagSet(&v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-flags", UID: "ff"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.topo.UpsertSource(&v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags", UID: "s"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.topo.UpsertInProcessConfig(&v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inproc", UID: "c"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.topo.UpsertFlagd(&v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge", UID: "f"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.statusKeys(c.topo.Snapshot())).To(Equal([]topology.Key{
		topology.FlagSetKey(ns, "shop-flags"), topology.SourceKey(ns, "flags"), topology.InProcessConfigKey(ns, "inproc"),
	}), "a Flagd's status is its own queue's to write")

	// A line on the statuses queue without a writer, and one with a writer
	// on another queue.
	noWriter := graphKind[*v1beta1.FeatureFlag]{object: &v1beta1.FeatureFlag{}, name: "Extra", queue: c.statuses}
	g.Expect(c.route([]registrar{noWriter})).To(MatchError(ContainSubstring("Extra is on the statuses queue and has no status writer")))
	elsewhere := graphKind[*v1beta1.FeatureFlag]{object: &v1beta1.FeatureFlag{}, name: "Extra", queue: c.workloads,
		status: (*status.Updater).UpdateFlagSet}
	g.Expect(c.route([]registrar{elsewhere})).To(MatchError(ContainSubstring("Extra has a status writer and is not on the statuses queue")))
	noQueue := graphKind[*v1beta1.FeatureFlag]{object: &v1beta1.FeatureFlag{}, name: "Extra", status: (*status.Updater).UpdateFlagSet}
	g.Expect(c.route([]registrar{noQueue})).To(MatchError(ContainSubstring("Extra has a status writer and is not on the statuses queue")))
}
