package topology

import "github.com/flagplane/flagplane/api/v1beta1"

// FlagSetFacts is what the status of a flag set reads of the graph,
// gathered in one pass (View.FlagSetFacts): the status is computed from
// this value, not from a dozen questions asked of the view in turn.
type FlagSetFacts struct {
	// Key is the flag set's.
	Key Key
	// Rendered is what the FeatureFlag serves (View.RenderFlagSet).
	Rendered Rendered
	// Sources is how many sources resolve it (View.SourcesOfFlagSet).
	Sources int
	// Plan is its rollout plan (View.RolloutPlan), nil when no rollout
	// policy targets it.
	Plan *RolloutPlan
	// Consumers are what its copies are to hold, namespace by namespace,
	// and who reads them (View.ConsumersOf).
	Consumers Consumers
	// Unobserved are its readers whose revision flagplane cannot ask.
	Unobserved UnobservedReaders
	// TooLarge are the delivery modes that cannot carry Rendered, and who
	// keeps the last content that fitted.
	TooLarge TooLarge
}

// UnobservedReaders counts the readers of a flag set whose revision
// flagplane cannot ask: the workloads and Flagds that read it with the
// kubernetes provider (flagd watches the FeatureFlag itself, and nothing
// tells flagplane which revision it holds), and the workloads whose
// in-process SDKs read it (View.InProcessReaders).
type UnobservedReaders struct {
	Workloads, Flagds, InProcess int
}

// TooLarge says which delivery modes cannot carry a flag set's rendering
// (Rendered.Overflow), in the words of Overflow.Message: "" when the mode
// carries it.
type TooLarge struct {
	// File is the file provider's: the generated ConfigMaps
	// (Consumers.ConfigMaps) keep the last content that fitted.
	File string
	// FlagdProxy is the sync server's: the streams of ProxySources keep
	// the last content that fitted.
	FlagdProxy string
	// ProxySources are the sources that deliver the flag set with
	// flagd-proxy to some namespace (View.DeliversWith,
	// View.TargetNamespaces); listed only when FlagdProxy is set.
	ProxySources []Key
}

// FlagSetFacts gathers what the status of ff reads of the graph
// (FlagSetFacts). ff may be a copy, as the cache gives it: its rendering is
// the graph's when the graph holds its spec (View.RenderFlagSet).
func (v *View) FlagSetFacts(ff *v1beta1.FeatureFlag) FlagSetFacts {
	key := FlagSetKey(ff.Namespace, ff.Name)
	facts := FlagSetFacts{Key: key, Rendered: v.RenderFlagSet(ff), Plan: v.RolloutPlan(key), Consumers: v.ConsumersOf(key)}
	sources := v.SourcesOfFlagSet(key)
	facts.Sources = len(sources)
	// The sources, by the provider they deliver it with: those of
	// kubernetes read it unobserved, those of flagd-proxy through the
	// sync server.
	var kubernetes, proxy []Key
	for _, s := range sources {
		if v.DeliversWith(s, key, string(v1beta1.SyncProviderKubernetes)) {
			kubernetes = append(kubernetes, s)
		}
		if v.DeliversWith(s, key, string(v1beta1.SyncProviderFlagdProxy)) {
			proxy = append(proxy, s)
		}
	}
	facts.Unobserved = v.unobservedReaders(key, kubernetes)
	facts.TooLarge = v.tooLarge(key, facts.Rendered, proxy)
	return facts
}

// unobservedReaders counts the readers of flag set f that sources deliver
// it to with the kubernetes provider, and its in-process readers.
func (v *View) unobservedReaders(f Key, kubernetes []Key) UnobservedReaders {
	u := UnobservedReaders{InProcess: len(v.InProcessReaders(f))}
	switch len(kubernetes) {
	case 0:
	case 1:
		// One source: its targets counted, not listed.
		u.Workloads, _ = v.FirstWorkloadsOfSource(kubernetes[0], 0)
		u.Flagds = len(v.FlagdsOfSource(kubernetes[0]))
	default:
		// Several: a workload two of them target is one reader.
		seen := map[Key]struct{}{}
		for _, s := range kubernetes {
			for _, k := range append(v.WorkloadsOfSource(s), v.FlagdsOfSource(s)...) {
				seen[k] = struct{}{}
			}
		}
		for k := range seen {
			if k.Kind == KindFlagd {
				u.Flagds++
			} else {
				u.Workloads++
			}
		}
	}
	return u
}

// tooLarge says which delivery modes of flag set f cannot carry rendered,
// and which of the sources that deliver it with flagd-proxy (proxy) reach
// some namespace, when that mode cannot.
func (v *View) tooLarge(f Key, rendered Rendered, proxy []Key) TooLarge {
	var t TooLarge
	if o, over := rendered.Overflow(string(v1beta1.SyncProviderFile)); over {
		t.File = o.Message(f)
	}
	if o, over := rendered.Overflow(string(v1beta1.SyncProviderFlagdProxy)); over {
		t.FlagdProxy = o.Message(f)
		for _, s := range proxy {
			if len(v.TargetNamespaces(s)) > 0 {
				t.ProxySources = append(t.ProxySources, s)
			}
		}
	}
	return t
}
