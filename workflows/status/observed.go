package status

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// Observed reads what the cluster holds of the objects flagplane generates.
// The controllers implement it over the informer cache.
type Observed interface {
	// ConfigMapData returns the data of a ConfigMap and whether it exists.
	ConfigMapData(namespace, name string) (map[string]string, bool)
	// Role returns a Role, or nil.
	Role(namespace, name string) *rbacv1.Role
	// RoleBinding returns a RoleBinding, or nil.
	RoleBinding(namespace, name string) *rbacv1.RoleBinding
	// WriteFailure says why the last write of a generated object failed
	// (kind ConfigMap, or RBAC for a Role and its RoleBinding), if it did.
	WriteFailure(kind, namespace, name string) workflows.Failure
}

// SyncObserved is what an Observed that knows of the sync server's streams
// (CacheObserved) implements too; the status of a flag set counts them.
type SyncObserved interface {
	// SyncSubscribers is what the sync server's streams of a flag set hold,
	// by subscriber namespace, over the reports of every replica (see
	// SyncReports).
	SyncSubscribers(flagSet topology.Key) []SyncSubscribers
}

// HistoryObserved is what an Observed that knows of the revision history
// (CacheObserved) implements too: why a flag set's accepted spec is not
// recorded, if it is not (workflows/history).
type HistoryObserved interface {
	UnrecordedRevision(flagSet topology.Key) (workflows.Unrecorded, bool)
}
