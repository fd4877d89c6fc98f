package syncserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/status"
)

// The ConfigMap of a replica's sync report lives in the manager's own
// namespace, which the manager's ConfigMap rules already cover (the
// ClusterRole's; in the namespace-scoped install, the Role of its own
// namespace, which is always among the watched ones).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete

// Defaults of the Reporter.
const (
	// DefaultReportInterval is the shortest time between two writes of a
	// replica's report.
	DefaultReportInterval = time.Second
	// ReportFieldManager is the field manager of the report's writes.
	ReportFieldManager = "flagplane-sync-report"
	// reportNamePrefix starts the name of every report's ConfigMap.
	reportNamePrefix = "flagplane-sync-report-"
	// MaxReportShards caps the ConfigMaps of one replica's report: each
	// holds up to MaxEntries entries (status.MaxSyncReportEntries), and
	// entries past them all are counted as left out.
	MaxReportShards = 50
	// shardSuffix separates a report's name from the number of a shard
	// past the first.
	shardSuffix = ".part-"
)

// report is what the hub's streams were sent, by flag set and subscriber
// namespace (see status.SyncReport), at most max entries.
func (h *hub) report(replica string, max int) *status.SyncReport {
	type entryKey struct {
		flagSet   topology.Key
		namespace string
	}
	held := map[entryKey]map[string]status.HeldRevision{}
	h.mu.Lock()
	for flagSet, set := range h.subs {
		set.each(func(s *subscriber) {
			k := entryKey{flagSet, s.namespace}
			byRevision := held[k]
			if byRevision == nil {
				byRevision = map[string]status.HeldRevision{}
				held[k] = byRevision
			}
			var rev string
			var at time.Time
			if sent := s.sent.Load(); sent != nil {
				// sentAt is stored before sent: it is this send's time, or a later one's.
				rev, at = sent.revision, time.Unix(s.sentAt.Load(), 0)
			}
			r := byRevision[rev]
			r.Revision = rev
			r.Streams++
			if at.After(r.Since) {
				r.Since = at
			}
			byRevision[rev] = r
		})
	}
	h.mu.Unlock()
	r := &status.SyncReport{Replica: replica, Entries: make([]status.SyncEntry, 0, len(held))}
	for k, byRevision := range held {
		e := status.SyncEntry{FlagSetNamespace: k.flagSet.Namespace, FlagSet: k.flagSet.Name, Namespace: k.namespace}
		for _, rev := range slices.Sorted(maps.Keys(byRevision)) {
			hr := byRevision[rev]
			// The API server keeps times to the second: so does the report,
			// so that a status is not rewritten for a fraction of a second.
			hr.Since = hr.Since.Truncate(time.Second).UTC()
			e.Held = append(e.Held, hr)
		}
		r.Entries = append(r.Entries, e)
	}
	slices.SortFunc(r.Entries, func(a, b status.SyncEntry) int {
		return cmp.Or(cmp.Compare(a.FlagSetNamespace, b.FlagSetNamespace), cmp.Compare(a.FlagSet, b.FlagSet), cmp.Compare(a.Namespace, b.Namespace))
	})
	r.Truncate(max)
	return r
}

// Reporter publishes the report of its server's streams as ConfigMaps in
// the manager's namespace, labelled status.SyncReportLabel, from which the
// leader's status workflow reads what every replica's subscribers hold. A
// report of more than MaxEntries entries, or of more than
// status.MaxSyncReportBytes encoded, is split over several ConfigMaps
// (shards, ReportShardName), so that nothing is left out below
// MaxReportShards of them. It runs on every replica, writes at most once per
// Interval and only the shards that changed, and deletes its ConfigMaps when
// it stops. With an Owner (the replica's Pod), the garbage collector deletes
// the report of a replica that died without doing so.
type Reporter struct {
	// Server is the server whose streams are reported.
	Server *Server
	// Client writes the report (server-side apply) and deletes it.
	Client client.Client
	// Reader, when set, lists the ConfigMaps of the replica's report left
	// by an earlier run (the API server itself: the manager's cache holds
	// no report), which the first write replaces or deletes.
	Reader client.Reader
	// Namespace is the manager's own namespace.
	Namespace string
	// Replica names the replica: its Pod's name, else the host's.
	Replica string
	// Owner, when its UID is set, is the Pod of the replica.
	Owner types.UID
	// Interval is the shortest time between two writes (DefaultReportInterval).
	Interval time.Duration
	// MaxEntries caps the entries of one shard (status.MaxSyncReportEntries).
	MaxEntries int
	Log        logr.Logger

	// published is the data last written to each shard; an empty map for
	// a shard that may exist with unknown data (from an earlier run).
	published []map[string]string
	truncated int
}

// ReportName is the name of a replica's report ConfigMap (its first shard).
func ReportName(replica string) string { return ReportShardName(replica, 0) }

// ReportShardName is the name of shard i of a replica's report: ReportName,
// with ".part-<i>" past the first.
func ReportShardName(replica string, i int) string {
	suffix := ""
	if i > 0 {
		suffix = shardSuffix + strconv.Itoa(i)
	}
	name := reportNamePrefix + replica
	if len(name)+len(suffix) > 253 {
		name = name[:253-len(suffix)]
	}
	return name + suffix
}

// shardOf tells whether name is one of replica's report shards, and which.
func shardOf(replica, name string) (int, bool) {
	for i := range MaxReportShards {
		if ReportShardName(replica, i) == name {
			return i, true
		}
	}
	return 0, false
}

// ReplicaIdentity is the name and Pod UID of this replica: $POD_NAME and
// $POD_UID (the downward API), else the host name and no UID.
func ReplicaIdentity() (string, types.UID) {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name, types.UID(os.Getenv("POD_UID"))
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host, ""
}

// NeedLeaderElection is false: every replica reports its own streams.
func (r *Reporter) NeedLeaderElection() bool { return false }

// Start publishes until ctx ends, then deletes the report.
func (r *Reporter) Start(ctx context.Context) error {
	interval := cmp.Or(r.Interval, DefaultReportInterval)
	// Shards of this replica's name may be left from an earlier run (a
	// replica outside a Pod, named after its host): the first round
	// replaces or deletes them.
	r.published = []map[string]string{{}}
	if err := r.adoptLeftovers(ctx); err != nil {
		r.Log.Error(err, "listing the sync report's ConfigMaps left by an earlier run; only its first is replaced")
	}
	r.Server.hub.reportChanged.Store(true)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			r.remove()
			return nil
		case <-tick.C:
		}
		if err := r.Publish(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "publishing the sync report")
		}
	}
}

// adoptLeftovers marks the shards of this replica's report that exist as
// published with unknown data.
func (r *Reporter) adoptLeftovers(ctx context.Context) error {
	if r.Reader == nil {
		return nil
	}
	var list corev1.ConfigMapList
	if err := r.Reader.List(ctx, &list, client.InNamespace(r.Namespace), client.MatchingLabels{status.SyncReportLabel: "true"}); err != nil {
		return err
	}
	for _, cm := range list.Items {
		if i, ok := shardOf(r.Replica, cm.Name); ok {
			for len(r.published) <= i {
				r.published = append(r.published, nil)
			}
			r.published[i] = map[string]string{}
		}
	}
	return nil
}

// Publish writes the shards of the report that changed since the last
// write, and deletes those it no longer needs.
func (r *Reporter) Publish(ctx context.Context) error {
	h := r.Server.hub
	if !h.reportChanged.Swap(false) {
		return nil
	}
	perShard := cmp.Or(r.MaxEntries, status.MaxSyncReportEntries)
	rep := h.report(r.Replica, perShard*MaxReportShards)
	shards := rep.Shards(perShard, status.MaxSyncReportBytes, MaxReportShards)
	truncated := 0
	if len(shards) > 0 {
		truncated = shards[len(shards)-1].Truncated
	}
	if truncated > 0 && truncated != r.truncated {
		r.Log.Info("the sync report is truncated: the streams of some flag sets are not in their status",
			"entries", len(rep.Entries)+rep.Truncated, "leftOut", truncated, "shards", MaxReportShards)
	}
	r.truncated = truncated
	var errs []error
	for i, shard := range shards {
		data, err := status.EncodeSyncReport(shard)
		if err != nil {
			return err
		}
		if i < len(r.published) && r.published[i] != nil && maps.Equal(data, r.published[i]) {
			continue
		}
		if err := r.apply(ctx, i, data); err != nil {
			errs = append(errs, err)
			continue
		}
		for len(r.published) <= i {
			r.published = append(r.published, nil)
		}
		r.published[i] = data
	}
	// No streams: no report, rather than an empty one; fewer entries: fewer shards.
	for i := len(r.published) - 1; i >= len(shards); i-- {
		if r.published[i] == nil {
			r.published = r.published[:i]
			continue
		}
		if err := r.delete(ctx, i); err != nil {
			errs = append(errs, err)
			break
		}
		r.published = r.published[:i]
	}
	if len(errs) > 0 {
		h.reportChanged.Store(true) // try again at the next tick
		return errors.Join(errs...)
	}
	return nil
}

func (r *Reporter) apply(ctx context.Context, shard int, data map[string]string) error {
	name := ReportShardName(r.Replica, shard)
	ac := corev1ac.ConfigMap(name, r.Namespace).
		WithLabels(map[string]string{status.SyncReportLabel: "true"}).
		WithData(data)
	if r.Owner != "" {
		ac.WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion("v1").WithKind("Pod").WithName(r.Replica).WithUID(r.Owner))
	}
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(ReportFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ConfigMap %s/%s: %w", r.Namespace, name, err)
	}
	return nil
}

func (r *Reporter) delete(ctx context.Context, shard int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: ReportShardName(r.Replica, shard)}}
	if err := r.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ConfigMap %s/%s: %w", r.Namespace, cm.Name, err)
	}
	return nil
}

// remove deletes the report when the replica stops: its streams end with it.
func (r *Reporter) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := len(r.published) - 1; i >= 0; i-- {
		if r.published[i] == nil {
			continue
		}
		if err := r.delete(ctx, i); err != nil {
			r.Log.Error(err, "deleting the sync report on the way out; the garbage collector removes it with the Pod")
		}
	}
	r.published = nil
}
