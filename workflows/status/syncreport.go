package status

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/flagplane/flagplane/topology"
)

// The sync server runs on every replica of flagplane, and only the leader
// writes status: each replica reports the streams it serves in a ConfigMap
// of the manager's own namespace (a sync report), which the leader reads
// and folds into the status of the flag sets (SyncReports).
//
// Trust: a sync report is believed only from the manager's own namespace
// and with SyncReportLabel (the controllers watch nothing else). Whoever
// may write ConfigMaps in that namespace can make the status of any
// FeatureFlag claim a delivery that did not happen: keep write access to
// the operator's namespace to those who run the operator.
const (
	// SyncReportLabel marks the ConfigMaps that hold sync reports.
	SyncReportLabel = "flagplane.dev/sync-report"
	// SyncReportKey is the data key of the report (JSON) in its ConfigMap.
	SyncReportKey = "report.json"
	// KindSyncSubscribers is the kind of the consumers that stand for the
	// sync server's streams of a flag set to one namespace.
	KindSyncSubscribers = "SyncSubscribers"
	// MaxSyncReportEntries caps the entries of one report's ConfigMap
	// (about 200 bytes each): a replica with more splits its report over
	// several (syncserver.MaxReportShards of them at most; past those, the
	// rest are counted in Truncated, and their streams are not in the
	// status).
	MaxSyncReportEntries = 2000
)

// SyncReport is what one replica's sync server reports of its open streams.
type SyncReport struct {
	// Replica names the replica (its Pod, or its host).
	Replica string `json:"replica"`
	// Entries has one entry per flag set and subscriber namespace, sorted
	// by flag set, then namespace.
	Entries []SyncEntry `json:"entries,omitempty"`
	// Truncated is the number of entries left out (past MaxSyncReportEntries).
	Truncated int `json:"truncated,omitempty"`
}

// SyncEntry is what the streams of one namespace hold of one flag set.
type SyncEntry struct {
	// FlagSetNamespace and FlagSet name the FeatureFlag.
	FlagSetNamespace string `json:"flagSetNamespace"`
	FlagSet          string `json:"flagSet"`
	// Namespace is the subscribers' namespace.
	Namespace string `json:"namespace"`
	// Held counts the streams by the revision they were last sent, sorted
	// by revision.
	Held []HeldRevision `json:"held"`
}

// HeldRevision is how many streams were last sent one revision, and since when.
type HeldRevision struct {
	// Revision is flagsets.Revision of the content sent; "" for streams
	// that were sent nothing yet.
	Revision string `json:"revision,omitempty"`
	Streams  int32  `json:"streams"`
	// Since is when the last of these streams was sent it: since then,
	// all of them hold it. Zero for Revision "".
	Since time.Time `json:"since,omitzero"`
}

func (e SyncEntry) equal(o SyncEntry) bool {
	return e.FlagSetNamespace == o.FlagSetNamespace && e.FlagSet == o.FlagSet && e.Namespace == o.Namespace &&
		slices.EqualFunc(e.Held, o.Held, func(a, b HeldRevision) bool {
			return a.Revision == b.Revision && a.Streams == b.Streams && a.Since.Equal(b.Since)
		})
}

// Key is the flag set of the entry.
func (e SyncEntry) Key() topology.Key { return topology.FlagSetKey(e.FlagSetNamespace, e.FlagSet) }

// MaxSyncReportBytes bounds the encoding of one report's ConfigMap, below
// the 1 MiB (1048576 bytes) the API server allows a ConfigMap's data, with
// room for the object's other fields.
const MaxSyncReportBytes = 1000 * 1024

// Shards splits the report into at most maxShards reports, each of at most
// max entries and at most maxBytes encoded (EncodeSyncReport), entries kept
// in order. 2000 entries of the longest names Kubernetes allows (a
// 63-character namespace, 253-character flag sets) take about 1 MiB with
// one revision each, more with several: a count alone does not keep a
// shard under the API server's limit. The entries past the last shard are
// counted in its Truncated, with the report's own.
func (r *SyncReport) Shards(max, maxBytes, maxShards int) []*SyncReport {
	// The encoding of a shard: the envelope, the entries and a comma
	// between two of them.
	envelope := len(fmt.Sprintf(`{"replica":%q,"entries":[],"truncated":%d}`, r.Replica, len(r.Entries)+r.Truncated))
	var out []*SyncReport
	size, truncated := 0, r.Truncated
	for i, e := range r.Entries {
		b, err := json.Marshal(e)
		n := len(b) + 1
		if err != nil || envelope+n > maxBytes {
			truncated++ // fits no shard
			continue
		}
		if len(out) == 0 || len(out[len(out)-1].Entries) >= max || size+n > maxBytes {
			if len(out) == maxShards {
				truncated += len(r.Entries) - i
				break
			}
			out = append(out, &SyncReport{Replica: r.Replica})
			size = envelope
		}
		last := out[len(out)-1]
		last.Entries = append(last.Entries, e)
		size += n
	}
	if truncated > 0 {
		if len(out) == 0 {
			out = append(out, &SyncReport{Replica: r.Replica})
		}
		out[len(out)-1].Truncated = truncated
	}
	return out
}

// Truncate keeps at most max entries, counting the rest in Truncated.
func (r *SyncReport) Truncate(max int) {
	if len(r.Entries) > max {
		r.Truncated += len(r.Entries) - max
		r.Entries = r.Entries[:max]
	}
}

// EncodeSyncReport is the data of a report's ConfigMap.
func EncodeSyncReport(r *SyncReport) (map[string]string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return map[string]string{SyncReportKey: string(b)}, nil
}

// DecodeSyncReport reads the data of a report's ConfigMap. A report past
// MaxSyncReportEntries, or with negative counts, is refused.
func DecodeSyncReport(data map[string]string) (*SyncReport, error) {
	raw, ok := data[SyncReportKey]
	if !ok {
		return nil, fmt.Errorf("no %s", SyncReportKey)
	}
	r := &SyncReport{}
	if err := json.Unmarshal([]byte(raw), r); err != nil {
		return nil, fmt.Errorf("%s: %w", SyncReportKey, err)
	}
	if len(r.Entries) > MaxSyncReportEntries {
		return nil, fmt.Errorf("%d entries, more than %d", len(r.Entries), MaxSyncReportEntries)
	}
	for _, e := range r.Entries {
		for _, h := range e.Held {
			if h.Streams < 0 {
				return nil, errors.New("a negative count of streams")
			}
		}
	}
	return r, nil
}

// SyncSubscribers is what the streams of one namespace hold of a flag set,
// over every replica's report.
type SyncSubscribers struct {
	// Namespace is the subscribers'.
	Namespace string
	// Held counts the streams by revision, sorted by revision; the Since of
	// a revision is the latest over the replicas.
	Held []HeldRevision
}

// Streams is the number of streams.
func (s SyncSubscribers) Streams() int32 {
	var n int32
	for _, h := range s.Held {
		n += h.Streams
	}
	return n
}

// SyncReports holds the replicas' sync reports, by the name of their
// ConfigMap, for the status of flag sets. It is safe for concurrent use.
type SyncReports struct {
	mu sync.RWMutex
	// byReport holds each report's entries by flag set.
	byReport map[string]map[topology.Key][]SyncEntry
}

// Set records a replica's report (nil: the report is gone) and returns the
// flag sets whose subscribers it changes: those of its previous report and
// of this one.
func (s *SyncReports) Set(name string, r *SyncReport) []topology.Key {
	next := map[topology.Key][]SyncEntry{}
	if r != nil {
		for _, e := range r.Entries {
			next[e.Key()] = append(next[e.Key()], e)
		}
	}
	s.mu.Lock()
	prev := s.byReport[name]
	if s.byReport == nil {
		s.byReport = map[string]map[topology.Key][]SyncEntry{}
	}
	if len(next) == 0 {
		delete(s.byReport, name)
	} else {
		s.byReport[name] = next
	}
	s.mu.Unlock()
	// Only the flag sets whose entries changed: a replica rewrites its
	// report for any stream's change, and the status of the others would
	// come out the same.
	changed := map[topology.Key]struct{}{}
	for k, entries := range prev {
		if !slices.EqualFunc(entries, next[k], SyncEntry.equal) {
			changed[k] = struct{}{}
		}
	}
	for k, entries := range next {
		if !slices.EqualFunc(entries, prev[k], SyncEntry.equal) {
			changed[k] = struct{}{}
		}
	}
	out := make([]topology.Key, 0, len(changed))
	for k := range changed {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b topology.Key) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Of folds the reports of every replica for a flag set: its subscribers by
// namespace, sorted by namespace.
func (s *SyncReports) Of(flagSet topology.Key) []SyncSubscribers {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	var entries []SyncEntry
	for _, byFlagSet := range s.byReport {
		entries = append(entries, byFlagSet[flagSet]...)
	}
	s.mu.RUnlock()
	return FoldSyncEntries(entries)
}

// FoldSyncEntries folds the entries of several replicas (of one flag set)
// by namespace and revision: streams add up, and the Since of a revision is
// the latest, when the last stream that holds it was sent it.
func FoldSyncEntries(entries []SyncEntry) []SyncSubscribers {
	byNamespace := map[string]map[string]HeldRevision{}
	for _, e := range entries {
		held := byNamespace[e.Namespace]
		if held == nil {
			held = map[string]HeldRevision{}
			byNamespace[e.Namespace] = held
		}
		for _, h := range e.Held {
			if h.Streams <= 0 {
				continue
			}
			acc := held[h.Revision]
			acc.Revision = h.Revision
			acc.Streams += h.Streams
			if h.Since.After(acc.Since) {
				acc.Since = h.Since
			}
			held[h.Revision] = acc
		}
	}
	out := make([]SyncSubscribers, 0, len(byNamespace))
	for ns, held := range byNamespace {
		if len(held) == 0 {
			continue
		}
		s := SyncSubscribers{Namespace: ns}
		for _, h := range held {
			s.Held = append(s.Held, h)
		}
		slices.SortFunc(s.Held, func(a, b HeldRevision) int { return cmp.Compare(a.Revision, b.Revision) })
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b SyncSubscribers) int { return cmp.Compare(a.Namespace, b.Namespace) })
	return out
}
