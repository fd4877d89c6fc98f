package controllers

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/flagplane/flagplane/workflows/status"
)

// The sync reports: every replica's sync server reports, in a ConfigMap of
// the manager's own namespace labelled status.SyncReportLabel, which
// revision its streams were sent (syncserver.Reporter). They are read by a
// cache of their own, restricted to that namespace and label, so that no
// ConfigMap of another namespace is ever taken for a report (see
// status.SyncReportLabel on whom that trusts), and no report for a
// generated ConfigMap. A changed report queues the status of the flag sets
// it concerns (before and after), which only the leader writes.

// syncReportsFrom starts the cache of the sync reports of the manager's
// namespace, with the SyncReport line's handler on it; with no such
// namespace (Options.SyncReportNamespace), none.
func (c *Controller) syncReportsFrom(ctx context.Context, mgr manager.Manager, add addFunc[*corev1.ConfigMap]) error {
	namespace := c.opts.SyncReportNamespace
	if namespace == "" {
		return nil
	}
	reports, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(map[string]string{status.SyncReportLabel: "true"})},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the sync report cache: %w", err)
	}
	if err := add(ctx, reports, &corev1.ConfigMap{}); err != nil {
		return err
	}
	if err := mgr.Add(reports); err != nil {
		return fmt.Errorf("adding the sync report cache to the manager: %w", err)
	}
	return nil
}

func (c *Controller) syncReportHandler(namespace string) typedHandler[*corev1.ConfigMap] {
	set := func(cm *corev1.ConfigMap, gone bool) {
		// The cache holds nothing else; checked again, as it is what makes
		// a report believed.
		if cm.Namespace != namespace || cm.Labels[status.SyncReportLabel] != "true" {
			return
		}
		c.event("SyncReport", map[bool]string{false: "changed", true: "deleted"}[gone])
		var r *status.SyncReport
		if !gone {
			var err error
			if r, err = status.DecodeSyncReport(cm.Data); err != nil {
				c.log.WithName("syncreport").Error(err, "ignoring a sync report", "ConfigMap", klog.KObj(cm))
			}
		}
		// Queued even before the startup pass: a report may arrive while it
		// computes the status of its flag sets.
		for _, k := range c.syncReports.Set(cm.Name, r) {
			c.enqueue(k)
		}
	}
	return typedHandler[*corev1.ConfigMap]{
		onAdd:    func(cm *corev1.ConfigMap) { set(cm, false) },
		onUpdate: func(_, cm *corev1.ConfigMap) { set(cm, false) },
		onDelete: func(cm *corev1.ConfigMap) { set(cm, true) },
	}
}
