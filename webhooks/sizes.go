package webhooks

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/blast"
)

// A flag set too large for a delivery mode (topology.Rendered.Overflow: a
// ConfigMap's 1 MiB for the file provider, flagd's 4 MiB sync message for
// flagd-proxy) is refused or reported at admission, never admitted
// silently to fail later:
//
//   - A FeatureFlag is refused when the graph shows consumers that read it
//     with a provider that cannot carry it: they would keep its last
//     content for good. Without such consumers it is admitted with a
//     warning that names its size, the limit and the providers that can
//     carry it (the kubernetes provider and the sync server can carry more
//     than a ConfigMap).
//   - A FeatureFlagSource is refused when the change makes it deliver a
//     flag set with a provider that cannot carry it: that entry could
//     never deliver it to any workload, whatever it targets, and a source
//     admitted so would be Stalled from the start. An entry that delivered
//     it so before the change (the flag set grew while admission was off)
//     is a warning only, so that an unrelated edit of the source is not
//     refused for what it does not change.
//
// While the graph is not built, what reaches the flag set is unknown:
// warnings only. When the combination arises anyway (admission was down,
// the graph did not know yet), the status of the FeatureFlag and its
// sources says so (reason FlagSetTooLarge), with an Event, and its
// consumers keep the last content that fitted.

// flagSetSizes judges the size of a FeatureFlag as it would be stored:
// served is its rendering, reach what it reaches (nil: unknown). refuse
// false makes every finding a warning (validation is off).
func flagSetSizes(key topology.Key, served topology.Rendered, reach *blast.FlagSet, refuse bool) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	for _, p := range []struct {
		provider v1beta1.SyncProviderType
		readers  []topology.Key
		how      string
	}{
		{v1beta1.SyncProviderFile, readersOf(reach, func(r *blast.FlagSet) []topology.Key { return r.FileReaders }), "with the file provider"},
		{v1beta1.SyncProviderFlagdProxy, readersOf(reach, func(r *blast.FlagSet) []topology.Key { return r.SyncSubscribers }), "from the sync server (flagd-proxy)"},
	} {
		o, over := served.Overflow(string(p.provider))
		if !over {
			continue
		}
		if len(p.readers) == 0 {
			warnings = append(warnings, "flagplane: "+o.Message(key))
			continue
		}
		msg := fmt.Sprintf("%s; %s read it %s and would keep its last content: %s",
			o.Message(key), countKeys(p.readers), p.how, keyList(p.readers, 5))
		if !refuse {
			warnings = append(warnings, "flagplane: "+msg)
			continue
		}
		errs = append(errs, tooLong(field.NewPath("spec", "flagSpec"), msg))
	}
	return errs, warnings
}

// sourceSizes judges the flag sets a FeatureFlagSource, as it would be
// stored, delivers: refused for the entries whose provider cannot carry
// their flag set, when the change makes them so; else warnings.
func sourceSizes(r *blast.Source) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	for _, t := range r.TooLarge {
		if !t.New {
			warnings = append(warnings, fmt.Sprintf("flagplane: spec.sources[%d]: %s", t.Index, t.Overflow.Message(t.FlagSet)))
			continue
		}
		errs = append(errs, tooLong(field.NewPath("spec", "sources").Index(t.Index).Child("source"),
			t.Overflow.Message(t.FlagSet)+"; this entry could never deliver it"))
	}
	return errs, warnings
}

// tooLong is a refusal for size, as the API server words its own ("Too
// long: ..."), with the reason, the size and the limit in its detail.
func tooLong(path *field.Path, detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeTooLong, Field: path.String(), BadValue: "<value omitted>", Detail: detail}
}

func readersOf(r *blast.FlagSet, of func(*blast.FlagSet) []topology.Key) []topology.Key {
	if r == nil {
		return nil
	}
	return of(r)
}

// countKeys says how many workloads and Flagds there are among keys.
func countKeys(keys []topology.Key) string {
	flagds := 0
	for _, k := range keys {
		if k.Kind == topology.KindFlagd {
			flagds++
		}
	}
	switch workloads := len(keys) - flagds; {
	case flagds == 0:
		return plural(workloads, "workload")
	case workloads == 0:
		return plural(flagds, "Flagd")
	default:
		return plural(workloads, "workload") + " and " + plural(flagds, "Flagd")
	}
}

// keyList names at most max keys, saying how many more there are.
func keyList(keys []topology.Key, max int) string {
	names := make([]string, 0, min(len(keys), max))
	for _, k := range keys[:min(len(keys), max)] {
		names = append(names, fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name))
	}
	if len(keys) > max {
		return fmt.Sprintf("%s and %d more", strings.Join(names, ", "), len(keys)-max)
	}
	return strings.Join(names, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
