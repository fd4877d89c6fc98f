package blast

import (
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
	// Valid is false when flagd could not load it: consumers keep its last
	// valid content.
	Valid bool `json:"valid"`
}

// OfFlagSet computes what ff, stored, would reach.
func OfFlagSet(v *topology.View, ff *v1beta1.FeatureFlag) (*FlagSet, error) {
	after, err := v.WithFlagSet(ff)
	if err != nil {
		return nil, err
	}
	key := topology.FlagSetKey(ff.Namespace, ff.Name)
	r := &FlagSet{FlagSet: key, Sources: after.SourcesOfFlagSet(key), Namespaces: after.ConsumerNamespaces(key), Valid: after.FlagSetValid(key)}
	workloads, flagds := map[topology.Key]bool{}, map[topology.Key]bool{}
	for _, s := range r.Sources {
		addAll(workloads, after.WorkloadsOfSource(s))
		addAll(flagds, after.FlagdsOfSource(s))
	}
	r.Workloads, r.Flagds = sorted(workloads), sorted(flagds)
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
	r := &Source{Source: key, Namespaces: after.TargetNamespaces(key), Workloads: now, Flagds: after.FlagdsOfSource(key)}
	nowSet, beforeSet := map[topology.Key]bool{}, map[topology.Key]bool{}
	addAll(nowSet, now)
	addAll(beforeSet, before)
	for _, w := range now {
		if !beforeSet[w] {
			r.Gained = append(r.Gained, w)
		}
	}
	for _, w := range before {
		if !nowSet[w] {
			r.Lost = append(r.Lost, w)
		}
	}
	all := nowSet
	addAll(all, before)
	r.Total = len(all)
	if len(all) > MaxCompared {
		return r, nil
	}
	r.Compared = true
	// Workloads whose sidecar is computed from the same inputs get the same
	// one: each group is computed once.
	type groupOutcome struct{ changed, restarts bool }
	outcomes := map[string]groupOutcome{}
	for _, w := range sorted(all) {
		group := injectionInputs(v, after, w)
		outcome, ok := outcomes[group]
		if !ok {
			old, next := injection.Desired(v, w, opts), injection.Desired(after, w, opts)
			outcome.changed = old.Fingerprint() != next.Fingerprint()
			outcome.restarts = outcome.changed && (next.RolloutOnChange(after) || old.RolloutOnChange(v))
			outcomes[group] = outcome
		}
		if outcome.changed {
			r.Changed = append(r.Changed, w)
		}
		if outcome.restarts {
			r.Restarts = append(r.Restarts, w)
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
	return msg + fmt.Sprintf("; %s get a different sidecar (their new pods), %d of them restart now (rolloutOnChange)",
		count(len(r.Changed), "workload"), len(r.Restarts))
}

// injectionInputs is everything injection.Desired reads of a workload in
// the two views but its name: its kind and namespace (the tenancy rule),
// its pod annotations and service account, and the sources and in-process
// configurations that apply to it, in order.
func injectionInputs(before, after *topology.View, w topology.Key) string {
	wl, _ := after.Workload(w) // a source edit changes no workload: the same in both views
	annotations := make([]string, 0, len(wl.PodAnnotations))
	for k, v := range wl.PodAnnotations {
		annotations = append(annotations, k+"="+v)
	}
	slices.Sort(annotations)
	return fmt.Sprint(w.Kind, "|", w.Namespace, "|", wl.ServiceAccountName, "|", annotations, "|",
		before.SourcesOfWorkload(w), before.InProcessConfigsOfWorkload(w), "|",
		after.SourcesOfWorkload(w), after.InProcessConfigsOfWorkload(w))
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
	slices.SortFunc(out, func(a, b topology.Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}
