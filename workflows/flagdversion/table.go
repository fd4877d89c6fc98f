package flagdversion

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Reference is the flagd release flagplane injects by default
// (--sidecar-tag), the one its end-to-end tests run: the only flagd daemon
// the Go module proxy serves them (github.com/open-feature/flagd/flagd
// v0.16.0). Semantic differences are told against it.
var Reference = V(0, 16, 0)

// EnvPrefix is the prefix of the env vars flagd reads (viper.SetEnvPrefix
// in flagd/cmd/start.go, every recorded release).
const EnvPrefix = "FLAGD"

// Facts are what one flagd release accepts and how it evaluates, as far as
// flagplane writes for it and tells flag sets apart. A Facts is shared and
// read-only.
type Facts struct {
	Version Version
	// flags are the long flags of `flagd start`, by name.
	flags map[string]startFlag
	// env maps an env var flagd reads (FLAGD_PORT) to its flag (port).
	env map[string]string
	// fields and providers are the --sources fields and provider names it takes.
	fields, providers map[string]bool
	Semantics         Semantics
}

// HasFlag tells whether `flagd start` takes --name.
func (f *Facts) HasFlag(name string) bool { _, ok := f.flags[name]; return ok }

// IsBoolFlag tells whether --name is a flag without a value.
func (f *Facts) IsBoolFlag(name string) bool { return f.flags[name].boolean }

// EnvFlag tells which flag an env var sets, if flagd reads it.
func (f *Facts) EnvFlag(env string) (flag string, ok bool) { flag, ok = f.env[env]; return flag, ok }

// HasSourceField tells whether an entry of --sources may have the field.
func (f *Facts) HasSourceField(name string) bool { return f.fields[name] }

// HasProvider tells whether provider is a provider of --sources.
func (f *Facts) HasProvider(provider string) bool { return f.providers[provider] }

// Flags lists the long flags of `flagd start`, sorted.
func (f *Facts) Flags() []string { return slices.Sorted(maps.Keys(f.flags)) }

// Env lists the env vars flagd reads, sorted.
func (f *Facts) Env() []string { return slices.Sorted(maps.Keys(f.env)) }

// SourceFields lists the fields an entry of --sources may have, sorted.
func (f *Facts) SourceFields() []string { return slices.Sorted(maps.Keys(f.fields)) }

// Providers lists the provider names of --sources, sorted.
func (f *Facts) Providers() []string { return slices.Sorted(maps.Keys(f.providers)) }

// table holds the Facts of every release.
var table = func() map[Version]*Facts {
	t := make(map[Version]*Facts, len(releases))
	for _, v := range releases {
		t[v] = factsOf(v)
	}
	return t
}()

// EnvVar is the env var flagd reads a flag of `flagd start` from (its
// viper binding): EnvPrefix, then the flag's name in capitals, dashes as
// underscores.
func EnvVar(flag string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func factsOf(v Version) *Facts {
	f := &Facts{Version: v, flags: map[string]startFlag{}, env: map[string]string{},
		fields: map[string]bool{}, providers: map[string]bool{}, Semantics: semanticsOf(v)}
	for _, fl := range startFlags {
		if !fl.holds(v) {
			continue
		}
		f.flags[fl.name] = fl
		if fl.env {
			f.env[EnvVar(fl.name)] = fl.name
		}
	}
	for _, sf := range sourceFields {
		if sf.holds(v) {
			f.fields[sf.name] = true
		}
	}
	for _, p := range providers {
		if p.holds(v) {
			f.providers[p.name] = true
		}
	}
	return f
}

// Vouched lists the releases flagplane vouches for, oldest first.
func Vouched() []Version { return slices.Clone(releases) }

// VouchedSummary names the vouched releases in a few words.
func VouchedSummary() string {
	return fmt.Sprintf("every flagd release from %s to %s", releases[0], releases[len(releases)-1])
}

// For returns the Facts of a vouched release.
func For(v Version) (*Facts, bool) {
	f, ok := table[v]
	return f, ok
}

// Injected is a flagd image flagplane injects: its tag, the setting that
// chose it, and what flagplane writes for it.
type Injected struct {
	// Setting names where the tag comes from ("--sidecar-tag"); several,
	// comma-separated, when Distinct merged them.
	Setting string
	// Tag is the image tag as set.
	Tag string
	// Vouched tells whether the tag is a release flagplane vouches for.
	Vouched bool
	// Facts are the release's; for a tag flagplane does not vouch for, the
	// Reference's: flagplane writes for the Reference then, which it cannot
	// check against that image.
	Facts *Facts
}

// Resolve tells what flagplane knows of the flagd image tag set by setting.
func Resolve(setting, tag string) Injected {
	in := Injected{Setting: setting, Tag: tag}
	if v, ok := Parse(tag); ok {
		in.Facts, in.Vouched = For(v)
	}
	if !in.Vouched {
		in.Facts = table[Reference]
	}
	return in
}

// String names the injected flagd: "flagd v0.15.4 (--sidecar-tag)".
func (in Injected) String() string {
	name := in.Tag
	if in.Vouched {
		name = in.Facts.Version.String()
	} else if name == "" {
		name = `""`
	}
	if in.Setting == "" {
		return "flagd " + name
	}
	return "flagd " + name + " (" + in.Setting + ")"
}

// Unvouched says that flagplane cannot vouch for the tag, and for what it
// can; "" when it can.
func (in Injected) Unvouched() string {
	if in.Vouched {
		return ""
	}
	return fmt.Sprintf("%s is not a flagd release flagplane vouches for (%s): flagplane writes the arguments, "+
		"env vars and --sources of flagd %s, and cannot tell whether that image takes them", in, VouchedSummary(), Reference)
}

// Distinct merges injected flagds of one version (or one tag, when it is
// not vouched), joining their settings, in order of first appearance.
func Distinct(ins ...Injected) []Injected {
	var out []Injected
	for _, in := range ins {
		i := slices.IndexFunc(out, func(o Injected) bool {
			if o.Vouched != in.Vouched {
				return false
			}
			if o.Vouched {
				return o.Facts.Version == in.Facts.Version
			}
			return o.Tag == in.Tag
		})
		if i < 0 {
			out = append(out, in)
			continue
		}
		if in.Setting != "" && !slices.Contains(strings.Split(out[i].Setting, ", "), in.Setting) {
			out[i].Setting = strings.TrimPrefix(out[i].Setting+", "+in.Setting, ", ")
		}
	}
	return out
}

// FlagChange says when --name came into flagd or left it, for a message
// about a release that lacks it: "it came in v0.11.5", "it was removed in
// v0.8.0"; "" for a flag flagplane knows nothing of.
func FlagChange(name string) string {
	for _, fl := range startFlags {
		if fl.name == name {
			return fl.change()
		}
	}
	return ""
}

// SourceFieldChange is FlagChange for a field of --sources.
func SourceFieldChange(name string) string { return changeOf(sourceFields, name) }

// ProviderChange is FlagChange for a provider of --sources.
func ProviderChange(name string) string { return changeOf(providers, name) }

func changeOf(list []sourceField, name string) string {
	for _, f := range list {
		if f.name == name {
			return f.change()
		}
	}
	return ""
}

func (s span) change() string {
	switch {
	case !s.until.IsZero():
		return "it was removed in " + s.until.String()
	case !s.from.IsZero():
		return "it came in " + s.from.String()
	}
	return ""
}
