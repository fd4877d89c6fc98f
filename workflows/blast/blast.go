package blast

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// MaxCompared bounds the workloads whose sidecar a source change compares
// before and after: beyond it the workloads are counted, not compared.
const MaxCompared = 2000

// FlagSet is what a FeatureFlag, as it would be stored, reaches.
type FlagSet struct {
	FlagSet    topology.Key   `json:"flagSet"`
	Sources    []topology.Key `json:"sources,omitempty"`
	Workloads  []topology.Key `json:"workloads,omitempty"`
	Flagds     []topology.Key `json:"flagds,omitempty"`
	Namespaces []string       `json:"namespaces,omitempty"`
	// SyncSubscribers are the workloads and Flagds of Workloads and Flagds
	// whose flagd subscribes to the flag set on flagplane's sync server
	// (provider flagd-proxy): the sync server pushes an edit to their
	// streams, which no ConfigMap or kubelet stands between.
	SyncSubscribers []topology.Key `json:"syncSubscribers,omitempty"`
	// FileReaders are the workloads and Flagds of Workloads and Flagds
	// whose flagd reads the flag set from a generated ConfigMap (provider
	// file), and FileSources the sources that deliver it so: a flag set
	// larger than a ConfigMap holds does not reach them.
	FileReaders []topology.Key `json:"fileReaders,omitempty"`
	FileSources []topology.Key `json:"fileSources,omitempty"`
	// Valid is false when flagd could not load it: consumers keep its last
	// valid content.
	Valid bool `json:"valid"`
}

// OfFlagSet computes what ff, stored, would reach. served, when set, is
// what ff serves (validated already, by the caller): the graph then does
// not render it again.
func OfFlagSet(v *topology.View, ff *v1beta1.FeatureFlag, served *topology.Rendered) (*FlagSet, error) {
	var after *topology.View
	var err error
	if served != nil {
		after, err = v.WithServedFlagSet(ff, *served)
	} else {
		after, err = v.WithFlagSet(ff)
	}
	if err != nil {
		return nil, err
	}
	key := topology.FlagSetKey(ff.Namespace, ff.Name)
	r := &FlagSet{FlagSet: key, Sources: after.SourcesOfFlagSet(key), Namespaces: after.ConsumerNamespaces(key), Valid: after.FlagSetValid(key)}
	workloads, flagds, sync, file := map[topology.Key]bool{}, map[topology.Key]bool{}, map[topology.Key]bool{}, map[topology.Key]bool{}
	for _, s := range r.Sources {
		ws, fs := after.WorkloadsOfSource(s), after.FlagdsOfSource(s)
		addAll(workloads, ws)
		addAll(flagds, fs)
		if after.DeliversWith(s, key, string(v1beta1.SyncProviderFlagdProxy)) {
			addAll(sync, ws)
			addAll(sync, fs)
		}
		if after.DeliversWith(s, key, string(v1beta1.SyncProviderFile)) {
			r.FileSources = append(r.FileSources, s)
			addAll(file, ws)
			addAll(file, fs)
		}
	}
	r.Workloads, r.Flagds, r.SyncSubscribers, r.FileReaders = sorted(workloads), sorted(flagds), sorted(sync), sorted(file)
	return r, nil
}

// Summary is the one-line warning of the FeatureFlag webhook.
func (r *FlagSet) Summary() string {
	if len(r.Sources) == 0 {
		return "flagplane: no FeatureFlagSource uses this flag set: it reaches no workload"
	}
	msg := fmt.Sprintf("flagplane: this flag set reaches %s, %s and %s through %s",
		count(len(r.Namespaces), "namespace"), count(len(r.Workloads), "workload"), count(len(r.Flagds), "Flagd"), count(len(r.Sources), "FeatureFlagSource"))
	if len(r.Namespaces) > 0 {
		msg += " (" + strings.Join(r.Namespaces, ", ") + ")"
	}
	if len(r.SyncSubscribers) > 0 {
		verb := "subscribe"
		if len(r.SyncSubscribers) == 1 {
			verb = "subscribes"
		}
		msg += fmt.Sprintf("; %d of them %s to it on the sync server (flagd-proxy), which pushes the edit to their streams",
			len(r.SyncSubscribers), verb)
	}
	if !r.Valid {
		return msg + "; it is not valid, so they keep its last valid content"
	}
	return msg + "; its flagd processes read the new content without a restart"
}

// Source is what a FeatureFlagSource change, as it would be stored,
// reaches and changes.
type Source struct {
	Source     topology.Key   `json:"source"`
	Namespaces []string       `json:"namespaces,omitempty"`
	Workloads  []topology.Key `json:"workloads,omitempty"`
	Flagds     []topology.Key `json:"flagds,omitempty"`
	// Gained and Lost are the workloads it applies to now and not before,
	// and before and not now.
	Gained []topology.Key `json:"gained,omitempty"`
	Lost   []topology.Key `json:"lost,omitempty"`
	// Compared is false when there were more than MaxCompared workloads to
	// compare: Changed and Restarts are then empty.
	Compared bool `json:"compared"`
	// Changed are the workloads whose sidecar changes (their new pods get
	// it); Restarts those of them that restart now (rolloutOnChange).
	Changed  []topology.Key `json:"changed,omitempty"`
	Restarts []topology.Key `json:"restarts,omitempty"`
	// Total is how many workloads it applied to before or applies to now.
	Total int `json:"total"`
	// TooLarge are the flag sets it delivers with a provider that cannot
	// carry them (topology.Rendered.Overflow): its workloads and Flagds do
	// not get them.
	TooLarge []TooLarge `json:"tooLarge,omitempty"`
}

// TooLarge is a flag set that a source delivers with a provider that
// cannot carry it.
type TooLarge struct {
	// Index is the entry of spec.sources that delivers it.
	Index    int               `json:"index"`
	FlagSet  topology.Key      `json:"flagSet"`
	Overflow topology.Overflow `json:"overflow"`
	// New is true when the source did not deliver it with that provider
	// before the change: the change makes the overflow, rather than
	// keeping one.
	New bool `json:"new"`
}

// tooLarge lists the flag sets that the source key delivers, in after,
// with a provider that cannot carry them; New when it did not in before.
func tooLarge(before, after *topology.View, key topology.Key) []TooLarge {
	var out []TooLarge
	for _, ref := range after.FlagSetRefs(key) {
		if ref.State != topology.RefResolved {
			// Tenancy and missing flag sets: nothing is delivered, and
			// the size of another namespace's flag set is not told.
			continue
		}
		r, _ := after.FlagSetRendered(ref.FlagSet)
		if o, over := r.Overflow(ref.Provider); over {
			out = append(out, TooLarge{Index: ref.Index, FlagSet: ref.FlagSet, Overflow: o, New: !before.DeliversWith(key, ref.FlagSet, ref.Provider)})
		}
	}
	return out
}

// OfSource computes what src, stored, would reach and change, with the
// sidecars computed as the webhook injects them (opts).
func OfSource(v *topology.View, src *v1beta1.FeatureFlagSource, opts injection.Options) (*Source, error) {
	after, err := v.WithSource(src)
	if err != nil {
		return nil, err
	}
	key := topology.SourceKey(src.Namespace, src.Name)
	now, before := after.WorkloadsOfSource(key), v.WorkloadsOfSource(key)
	r := &Source{Source: key, Namespaces: after.TargetNamespaces(key), Workloads: now, Flagds: after.FlagdsOfSource(key),
		TooLarge: tooLarge(v, after, key)}
	// Both lists are sorted (View.WorkloadsOfSource): one merge pass
	// finds what was gained, lost and kept.
	type reached struct {
		key  topology.Key
		kept bool
	}
	all := make([]reached, 0, max(len(now), len(before)))
	i, j := 0, 0
	for i < len(now) || j < len(before) {
		switch {
		case j == len(before) || (i < len(now) && now[i].Less(before[j])):
			r.Gained = append(r.Gained, now[i])
			all = append(all, reached{key: now[i]})
			i++
		case i == len(now) || before[j].Less(now[i]):
			r.Lost = append(r.Lost, before[j])
			all = append(all, reached{key: before[j]})
			j++
		default:
			all = append(all, reached{key: now[i], kept: true})
			i++
			j++
		}
	}
	r.Total = len(all)
	if len(all) > MaxCompared {
		return r, nil
	}
	r.Compared = true
	// Workloads whose sidecar is computed from the same inputs get the same
	// one: each group is computed once. The inputs are written into one
	// buffer, reused: looking a group up allocates nothing, only a new
	// group's key is copied.
	type groupOutcome struct{ changed, restarts bool }
	outcomes := map[string]groupOutcome{}
	var inputs injectionInputs
	for _, w := range all {
		group := inputs.of(v, after, w.key, w.kept)
		outcome, ok := outcomes[string(group)]
		if !ok {
			old, next := injection.Desired(v, w.key, opts), injection.Desired(after, w.key, opts)
			outcome.changed = !old.Same(next)
			outcome.restarts = outcome.changed && (next.RolloutOnChange(after) || old.RolloutOnChange(v))
			outcomes[string(group)] = outcome
		}
		if outcome.changed {
			if r.Changed == nil {
				r.Changed = make([]topology.Key, 0, len(all))
			}
			r.Changed = append(r.Changed, w.key)
		}
		if outcome.restarts {
			if r.Restarts == nil {
				r.Restarts = make([]topology.Key, 0, len(all))
			}
			r.Restarts = append(r.Restarts, w.key)
		}
	}
	return r, nil
}

// Summary is the one-line warning of the FeatureFlagSource webhook.
func (r *Source) Summary() string {
	msg := fmt.Sprintf("flagplane: this source reaches %s, %s and %s",
		count(len(r.Namespaces), "namespace"), count(len(r.Workloads), "workload"), count(len(r.Flagds), "Flagd"))
	if len(r.Gained) > 0 || len(r.Lost) > 0 {
		msg += fmt.Sprintf("; %d more than before, %d fewer", len(r.Gained), len(r.Lost))
	}
	switch {
	case !r.Compared:
		return msg + fmt.Sprintf("; too many workloads (%d) to compare their sidecars at admission", r.Total)
	case len(r.Changed) == 0:
		return msg + "; no workload's sidecar changes"
	}
	if len(r.Changed) == 1 {
		now := "it restarts now"
		if len(r.Restarts) == 0 {
			now = "it does not restart now"
		}
		return msg + "; 1 workload gets a different sidecar (its new pods), " + now + " (rolloutOnChange)"
	}
	return msg + fmt.Sprintf("; %s get a different sidecar (their new pods), %d of them restart now (rolloutOnChange)",
		count(len(r.Changed), "workload"), len(r.Restarts))
}

// injectionInputs writes everything injection.Desired reads of a workload
// in the two views but its name: its kind and namespace (the tenancy rule),
// its pod annotations and service account, and the sources and in-process
// configurations that apply to it, in order.
//
// A workload the source applied to before and applies to now has the same
// sources in both views (the edit changes this source only, and the order
// is the workload's): they are read once.
type injectionInputs struct {
	buf  []byte
	keys []string
}

// of returns w's inputs, valid until the next call.
func (in *injectionInputs) of(before, after *topology.View, w topology.Key, kept bool) []byte {
	wl, _ := after.Workload(w) // a source edit changes no workload: the same in both views
	in.buf, in.keys = in.buf[:0], in.keys[:0]
	for k := range wl.PodAnnotations {
		in.keys = append(in.keys, k)
	}
	slices.Sort(in.keys)
	// Every string is written after its length, every list after its
	// count: two different inputs never write the same bytes, whatever
	// bytes an annotation's value holds.
	field := func(s string) {
		in.buf = binary.AppendUvarint(in.buf, uint64(len(s)))
		in.buf = append(in.buf, s...)
	}
	keys := func(ks []topology.Key) {
		in.buf = binary.AppendUvarint(in.buf, uint64(len(ks)))
		for _, k := range ks {
			field(string(k.Kind))
			field(k.Namespace)
			field(k.Name)
		}
	}
	field(string(w.Kind))
	field(w.Namespace)
	field(wl.ServiceAccountName)
	in.buf = binary.AppendUvarint(in.buf, uint64(len(in.keys)))
	for _, k := range in.keys {
		field(k)
		field(wl.PodAnnotations[k])
	}
	keys(after.SourcesOfWorkload(w))
	keys(after.InProcessConfigsOfWorkload(w))
	if !kept {
		keys(before.SourcesOfWorkload(w))
		keys(before.InProcessConfigsOfWorkload(w))
	}
	return in.buf
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func addAll(set map[topology.Key]bool, keys []topology.Key) {
	for _, k := range keys {
		set[k] = true
	}
}

func sorted(set map[topology.Key]bool) []topology.Key {
	out := make([]topology.Key, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b topology.Key) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
