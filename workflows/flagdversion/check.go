package flagdversion

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Check tells what of a flagd container's arguments and env vars the
// release would not take as flagplane means them: a command other than
// start, a flag it does not know (cobra exits on one), a flag without its
// value, --sources that is not a list of objects, an entry without uri or
// provider, a provider it does not know (it exits), a field it does not
// know (it drops the field: whatever the field was for does not happen),
// and an env var it reads (FLAGD_*) whose value is not the one the same
// flag has in the arguments. appOnly are env vars written for the app
// containers' flagd providers, not for flagd (FLAGD_RESOLVER): they must be
// ones flagd does not read. Any other FLAGD_* env var flagd does not read
// is reported too. It returns nil when flagd takes everything.
func (f *Facts) Check(args []string, env []corev1.EnvVar, appOnly ...string) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	given := map[string][]string{}
	if len(args) == 0 || args[0] != "start" {
		add("the first argument must be the command start, got %q", strings.Join(args[:min(1, len(args))], ""))
		return problems
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, value, inline := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || name == "" {
			add("argument %q is not a long flag", a)
			continue
		}
		if !f.HasFlag(name) {
			add("flagd %s has no --%s%s", f.Version, name, paren(FlagChange(name)))
			if !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++ // its value, as far as one can tell
			}
			continue
		}
		switch {
		case f.IsBoolFlag(name):
			value = "true"
			if inline {
				value = strings.TrimPrefix(a, "--"+name+"=")
			}
		case !inline:
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				add("--%s has no value", name)
				continue
			}
			i++
			value = args[i]
		}
		given[name] = append(given[name], value)
	}
	for _, s := range given["sources"] {
		problems = append(problems, f.checkSources(s)...)
	}
	for _, e := range env {
		if !strings.HasPrefix(e.Name, EnvPrefix+"_") {
			continue
		}
		flag, reads := f.EnvFlag(e.Name)
		switch {
		case slices.Contains(appOnly, e.Name):
			if reads {
				add("env %s is meant for the app containers, but flagd %s reads it as --%s", e.Name, f.Version, flag)
			}
		case !reads:
			add("env %s is not read by flagd %s", e.Name, f.Version)
		case e.ValueFrom != nil:
			add("env %s sets --%s from a reference, which flagplane cannot check", e.Name, flag)
		case len(given[flag]) > 0 && !slices.Contains(given[flag], e.Value):
			add("env %s=%s disagrees with --%s %s", e.Name, e.Value, flag, strings.Join(given[flag], ","))
		}
	}
	return problems
}

// checkSources checks the value of --sources.
func (f *Facts) checkSources(value string) []string {
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &entries); err != nil {
		return []string{fmt.Sprintf("--sources is not a JSON list of objects: %v", err)}
	}
	var problems []string
	for i, e := range entries {
		for _, required := range []string{"uri", "provider"} {
			var s string
			if json.Unmarshal(e[required], &s) != nil || s == "" {
				problems = append(problems, fmt.Sprintf("--sources[%d] has no %s", i, required))
			}
		}
		var provider string
		if json.Unmarshal(e["provider"], &provider) == nil && provider != "" && !f.HasProvider(provider) {
			problems = append(problems, fmt.Sprintf("--sources[%d]: flagd %s has no provider %q%s", i, f.Version, provider, paren(ProviderChange(provider))))
		}
		for _, field := range slices.Sorted(maps.Keys(e)) {
			if !f.HasSourceField(field) {
				problems = append(problems, fmt.Sprintf("--sources[%d]: flagd %s has no field %s%s", i, f.Version, field, paren(SourceFieldChange(field))))
			}
		}
	}
	return problems
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
