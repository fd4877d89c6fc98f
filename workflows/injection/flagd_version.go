package injection

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagdversion"
)

// What the sidecar's flagd is told depends on its release: flagplane
// writes a flag, a --sources field or a provider only when the injected
// release takes it (flagdversion.Facts), and leaves out what it does not,
// with a warning and a VersionGap. An image tag flagplane does not vouch
// for is written for as flagdversion.Reference.

// DefaultTagSetting names the setting of SidecarOptions.Tag in messages.
const DefaultTagSetting = "--sidecar-tag"

// Flagd is the flagd release the options inject, and what flagplane knows
// of it.
func (o SidecarOptions) Flagd() flagdversion.Injected {
	setting := o.TagSetting
	if setting == "" {
		setting = DefaultTagSetting
	}
	return flagdversion.Resolve(setting, o.Tag)
}

// VersionGap is a setting of a source that the injected flagd release
// cannot take, which its sidecars go without.
type VersionGap struct {
	// Source is the object that asks for it: a FeatureFlagSource, or a
	// FeatureFlagSourcePolicy.
	Source topology.Key `json:"source"`
	// What is left out: "contextValues", "sources[2] \"flags\"", ...
	What string `json:"what"`
	// Why says what the release lacks.
	Why string `json:"why"`
}

func (g VersionGap) String() string {
	return keyString(g.Source) + ": " + g.What + " left out: " + g.Why
}

// gap records that what of from is left out, and why, as a warning too.
func (m *sidecarMerge) gap(from topology.Key, what, why string) {
	g := VersionGap{Source: from, What: what, Why: why}
	if slices.Contains(m.inj.FlagdVersionGaps, g) {
		return
	}
	m.inj.FlagdVersionGaps = append(m.inj.FlagdVersionGaps, g)
	m.inj.Warnings = append(m.inj.Warnings, g.String())
}

// lacksFlag says why the injected flagd does not take --name, or "" when it does.
func (m *sidecarMerge) lacksFlag(name string) string {
	if m.flagd.Facts.HasFlag(name) {
		return ""
	}
	return fmt.Sprintf("%s has no --%s%s", m.flagd, name, parenthesized(flagdversion.FlagChange(name)))
}

// flagArgs appends --name value for every value, when the injected flagd
// takes --name; otherwise it records a gap for each of from (what names
// the setting) and appends nothing.
func (m *sidecarMerge) flagArgs(args []string, name, what string, from []topology.Key, values ...string) []string {
	if len(values) == 0 {
		return args
	}
	if why := m.lacksFlag(name); why != "" {
		for _, f := range from {
			m.gap(f, what, why)
		}
		return args
	}
	for _, v := range values {
		args = append(args, "--"+name, v)
	}
	return args
}

// lacksForEntry says why the injected flagd cannot take a --sources entry
// as flagplane means it (its provider, or a field it sets), or "".
func (m *sidecarMerge) lacksForEntry(cfg FlagdSourceConfig) string {
	f := m.flagd.Facts
	if !f.HasProvider(cfg.Provider) {
		return fmt.Sprintf("%s has no provider %s%s", m.flagd, cfg.Provider, parenthesized(flagdversion.ProviderChange(cfg.Provider)))
	}
	var missing []string
	for _, field := range cfg.fields() {
		if !f.HasSourceField(field) {
			missing = append(missing, field+parenthesized(flagdversion.SourceFieldChange(field)))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("%s takes no --sources field %s", m.flagd, strings.Join(missing, ", "))
}

// fields lists the JSON names of the fields of an entry that are set, as
// it marshals.
func (c FlagdSourceConfig) fields() []string {
	out := []string{"uri", "provider"}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"authHeader", c.AuthHeader != ""}, {"certPath", c.CertPath != ""}, {"tls", c.TLS}, {"providerID", c.ProviderID != ""},
		{"selector", c.Selector != ""}, {"interval", c.Interval != 0}, {"headers", len(c.Headers) > 0},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// VersionGapsOfSource lists what of a source the injected flagd release
// cannot take, which every sidecar and Flagd of that source goes without:
// the source rendered alone, as for a workload of its own namespace. The
// status of the source reports them.
func VersionGapsOfSource(v *topology.View, source topology.Key, opts Options) []VersionGap {
	src, ok := v.Source(source)
	if !ok {
		return nil
	}
	inj := &Injection{Workload: topology.Key{Namespace: source.Namespace}, Sources: []topology.Key{source}}
	m := newSidecarMerge(inj, opts)
	// Whether the tenancy rule lets a workload read a flag set is not the
	// question here: that is ResolvedRefs and the workload's warnings.
	m.mayReadDirectly = func(topology.Key) bool { return true }
	m.defaultProvider = v.DefaultSyncProvider()
	m.providerArgs = slices.Clone(opts.Sidecar.ProviderArgs)
	m.addSource(v, source, src, opts)
	if len(m.entries) > 0 {
		m.container(opts)
	}
	var out []VersionGap
	for _, g := range inj.FlagdVersionGaps {
		if g.Source == source {
			out = append(out, g)
		}
	}
	return out
}

// keyedArgs are the KEY=VALUE arguments of a merged map, by key.
func keyedArgs(m map[string]keyedValue) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k].value)
	}
	return out
}

// keyedSources are the objects that set a merged map's keys, in key order, once each.
func keyedSources(m map[string]keyedValue) []topology.Key {
	var out []topology.Key
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(out, m[k].from) {
			out = append(out, m[k].from)
		}
	}
	return out
}

func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
