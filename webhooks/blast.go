package webhooks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The blast radius of a change: the FeatureFlag and FeatureFlagSource
// webhooks answer every create and update (a server-side dry run too) with
// a warning that says what the change reaches, computed from the graph with
// the object as it would be stored (View.WithFlagSet, View.WithSource), and
// without an API call. kubectl prints it.

// maxCompared bounds the workloads whose sidecar a source change compares
// before and after (a few microseconds each): beyond it the warning counts
// the workloads but does not tell which sidecars change.
const maxCompared = 2000

// flagSetBlast says what a FeatureFlag, as it would be stored, reaches.
func flagSetBlast(v *topology.View, ff *v1beta1.FeatureFlag) (string, error) {
	after, err := v.WithFlagSet(ff)
	if err != nil {
		return "", err
	}
	key := topology.FlagSetKey(ff.Namespace, ff.Name)
	sources := after.SourcesOfFlagSet(key)
	if len(sources) == 0 {
		return "flagplane: no FeatureFlagSource uses this flag set: it reaches no workload", nil
	}
	workloads, flagds := map[topology.Key]bool{}, map[topology.Key]bool{}
	for _, s := range sources {
		addAll(workloads, after.WorkloadsOfSource(s))
		addAll(flagds, after.FlagdsOfSource(s))
	}
	namespaces := after.ConsumerNamespaces(key)
	msg := fmt.Sprintf("flagplane: this flag set reaches %s, %s and %s through %s",
		count(len(namespaces), "namespace"), count(len(workloads), "workload"), count(len(flagds), "Flagd"), count(len(sources), "FeatureFlagSource"))
	if len(namespaces) > 0 {
		msg += " (" + strings.Join(namespaces, ", ") + ")"
	}
	if !after.FlagSetValid(key) {
		return msg + "; it is not valid, so they keep its last valid content", nil
	}
	return msg + "; its flagd processes read the new content without a restart", nil
}

// sourceBlast says what a FeatureFlagSource change, as it would be stored,
// reaches and changes: the workloads it applies to before and after, those
// whose sidecar changes (new pods get it) and, of those, the ones that
// restart now (rolloutOnChange).
func sourceBlast(v *topology.View, src *v1beta1.FeatureFlagSource, opts injection.Options) (string, error) {
	after, err := v.WithSource(src)
	if err != nil {
		return "", err
	}
	key := topology.SourceKey(src.Namespace, src.Name)
	now, before := after.WorkloadsOfSource(key), v.WorkloadsOfSource(key)
	flagds := after.FlagdsOfSource(key)
	msg := fmt.Sprintf("flagplane: this source reaches %s, %s and %s",
		count(len(after.TargetNamespaces(key)), "namespace"), count(len(now), "workload"), count(len(flagds), "Flagd"))
	nowSet, beforeSet := map[topology.Key]bool{}, map[topology.Key]bool{}
	addAll(nowSet, now)
	addAll(beforeSet, before)
	var gained, lost int
	for w := range nowSet {
		if !beforeSet[w] {
			gained++
		}
	}
	for w := range beforeSet {
		if !nowSet[w] {
			lost++
		}
	}
	if gained > 0 || lost > 0 {
		msg += fmt.Sprintf("; %d more than before, %d fewer", gained, lost)
	}
	all := nowSet
	addAll(all, before)
	if len(all) > maxCompared {
		return msg + fmt.Sprintf("; too many workloads (%d) to compare their sidecars at admission", len(all)), nil
	}
	// Workloads whose sidecar is computed from the same inputs get the same
	// one: each group is computed once.
	type outcome struct{ changed, restarts bool }
	outcomes := map[string]outcome{}
	var changed, restarts int
	for w := range all {
		group := injectionInputs(v, after, w)
		o, ok := outcomes[group]
		if !ok {
			old, next := injection.Desired(v, w, opts), injection.Desired(after, w, opts)
			o.changed = old.Fingerprint() != next.Fingerprint()
			o.restarts = o.changed && (next.RolloutOnChange(after) || old.RolloutOnChange(v))
			outcomes[group] = o
		}
		if o.changed {
			changed++
		}
		if o.restarts {
			restarts++
		}
	}
	switch {
	case changed == 0:
		msg += "; no workload's sidecar changes"
	default:
		msg += fmt.Sprintf("; %s get a different sidecar (their new pods), %d of them restart now (rolloutOnChange)",
			count(changed, "workload"), restarts)
	}
	return msg, nil
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
