package evaluate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Context is a named evaluation context: what a client sends flagd with
// its Resolve calls, and the HTTP headers it sends them with (which flagd
// maps into the context where a source says so: headerToContextMappings).
type Context struct {
	Name    string            `json:"name"`
	Context map[string]any    `json:"context"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Serving is what one flagd adds to every request's context, from its
// command line: static context values (--context-value, a source's
// contextValues) and the headers it maps into the context
// (--context-from-header, a source's headerToContextMappings: header to
// context key).
type Serving struct {
	ContextValues  map[string]string `json:"contextValues,omitempty"`
	HeaderMappings map[string]string `json:"headerToContextMappings,omitempty"`
}

// Empty tells whether flagd adds nothing to the request's context.
func (s Serving) Empty() bool { return len(s.ContextValues) == 0 && len(s.HeaderMappings) == 0 }

// Merge is the context flagd evaluates c with: the request's context, over
// it the static values, over those the mapped headers that c sends and
// that are not empty (flagd's order, header names case-insensitive).
func (s Serving) Merge(c Context) map[string]any {
	if s.Empty() {
		return c.Context
	}
	out := make(map[string]any, len(c.Context)+len(s.ContextValues)+len(s.HeaderMappings))
	maps.Copy(out, c.Context)
	for k, v := range s.ContextValues {
		out[k] = v
	}
	headers := http.Header{}
	for name, v := range c.Headers {
		headers.Set(name, v)
	}
	for header, key := range s.HeaderMappings {
		if v := headers.Get(header); v != "" {
			out[key] = v
		}
	}
	return out
}

// ParseContexts reads a list of named evaluation contexts, YAML or JSON:
//
//   - name: eu-user
//     context: {region: eu, email: a@example.com, targetingKey: user-1}
//
// Names must be given and distinct; a context that is left out is empty.
// A context may list the HTTP headers its requests carry (headers: {X-User:
// a@example.com}), for the flagds that map headers into the context.
func ParseContexts(data []byte) ([]Context, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("no evaluation contexts: give a list of {name, context}")
	}
	var raw []json.RawMessage
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("want a list of {name, context}: %w", err)
	}
	if len(raw) == 0 {
		return nil, errors.New("no evaluation contexts: give a list of {name, context}")
	}
	var out []Context
	seen := map[string]bool{}
	for i, r := range raw {
		var c Context
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("context %d: want {name, context, headers} with context an object and headers a map of strings: %w", i+1, err)
		}
		switch {
		case strings.TrimSpace(c.Name) == "":
			return nil, fmt.Errorf("context %d has no name", i+1)
		case seen[c.Name]:
			return nil, fmt.Errorf("context %q is given twice", c.Name)
		}
		seen[c.Name] = true
		if c.Context == nil {
			c.Context = map[string]any{}
		}
		out = append(out, c)
	}
	return out, nil
}

// Changes is what an edit of a flag set changes in what flagd serves: per
// evaluation context, the flags whose variant, value, reason, error or
// type change.
type Changes struct {
	// Evaluator names the evaluator: flagd's, at FlagdVersion.
	Evaluator string `json:"evaluator"`
	// Refused is set when flagd would not load the new flag set (flagd
	// keeps serving what it had, and flagplane does not deliver it).
	Refused string `json:"refused,omitempty"`
	// CurrentRefused is set when flagd would not load the current flag
	// set; its flags are then compared as absent.
	CurrentRefused string `json:"currentRefused,omitempty"`
	// Flags counts the flags evaluated: those of either version.
	Flags int `json:"flags"`
	// Shadowed are flags of the flag set that the flagd answers from
	// another of its sources, of higher priority: the edit does not reach
	// them there.
	Shadowed []string         `json:"shadowed,omitempty"`
	Contexts []ContextChanges `json:"contexts,omitempty"`
}

// ContextChanges are the flags whose answer changes for one context.
type ContextChanges struct {
	Name    string       `json:"name"`
	Changed []FlagChange `json:"changed,omitempty"`
}

// FlagChange is one flag's answer before and after.
type FlagChange struct {
	Flag   string     `json:"flag"`
	Before Resolution `json:"before"`
	After  Resolution `json:"after"`
}

// Compare evaluates every flag of two versions of a flag set (flagd
// documents; "" for none, as before a flag set is created) for each
// context, as a flagd with serving serves them, and lists what changes.
// Each version answers a flag as a client of its type asks it; a flag only
// one version has is asked as that version's type of the other.
func Compare(before, after string, contexts []Context, serving Serving) Changes {
	return CompareStack(Stack{}, before, after, contexts, serving)
}

// Stack is what else one flagd serves besides the flag set compared, as
// flagd documents in the order of its --sources: Lower before it, Upper
// after it. flagd answers a flag key that several hold from the last of
// them (the highest priority), so Upper's keys hide the flag set's, and
// the flag set's hide Lower's.
type Stack struct {
	Lower, Upper []string
}

// CompareStack is Compare for a flagd that also serves stack: each flag of
// the flag set is answered as that flagd answers it, from whichever
// document holds the key with the highest priority. Keys that Upper holds
// are never answered from the flag set, before or after: they are listed
// in Shadowed. A document of the stack that flagd would not load counts as
// holding nothing.
func CompareStack(stack Stack, before, after string, contexts []Context, serving Serving) Changes {
	out := Changes{Evaluator: "flagd " + FlagdVersion}
	next, err := Load(after)
	if err != nil {
		out.Refused = err.Error()
		return out
	}
	cur := Empty()
	if before != "" {
		if cur, err = Load(before); err != nil {
			out.CurrentRefused = err.Error()
			cur = Empty()
		}
	}
	load := func(docs []string) []*FlagSet {
		var sets []*FlagSet
		for _, d := range docs {
			if fs, err := Load(d); err == nil {
				sets = append(sets, fs)
			}
		}
		return sets
	}
	lower, upper := load(stack.Lower), load(stack.Upper)
	keys := map[string]bool{}
	for _, k := range cur.Keys() {
		keys[k] = true
	}
	for _, k := range next.Keys() {
		keys[k] = true
	}
	out.Flags = len(keys)
	typeIn := func(fs, other *FlagSet, key string) Type {
		if t, ok := fs.TypeOf(key); ok {
			return t
		}
		t, _ := other.TypeOf(key)
		return t
	}
	// answering is the document flagd answers key from, with the flag set
	// at version own: the last of Upper that holds it, else own if it does,
	// else the last of Lower that does (own, holding nothing, when none).
	answering := func(own *FlagSet, key string) *FlagSet {
		for i := len(upper) - 1; i >= 0; i-- {
			if _, ok := upper[i].TypeOf(key); ok {
				return upper[i]
			}
		}
		if _, ok := own.TypeOf(key); ok {
			return own
		}
		for i := len(lower) - 1; i >= 0; i-- {
			if _, ok := lower[i].TypeOf(key); ok {
				return lower[i]
			}
		}
		return own
	}
	var compared []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if slices.ContainsFunc(upper, func(fs *FlagSet) bool { _, ok := fs.TypeOf(k); return ok }) {
			out.Shadowed = append(out.Shadowed, k)
			continue
		}
		compared = append(compared, k)
	}
	for _, c := range contexts {
		cc := ContextChanges{Name: c.Name}
		evalCtx := serving.Merge(c)
		for _, k := range compared {
			b := answering(cur, k).Resolve(k, typeIn(cur, next, k), evalCtx)
			a := answering(next, k).Resolve(k, typeIn(next, cur, k), evalCtx)
			if !a.Equal(b) {
				cc.Changed = append(cc.Changed, FlagChange{Flag: k, Before: b, After: a})
			}
		}
		out.Contexts = append(out.Contexts, cc)
	}
	return out
}

// String says a resolution in a few words: the variant with its value and
// reason, "disabled", "not found" or the error.
func (r Resolution) String() string {
	switch {
	case r.ErrorCode == "FLAG_NOT_FOUND":
		return "not found"
	case r.ErrorCode != "":
		return "error " + r.ErrorCode
	case r.Reason == "DISABLED":
		return "disabled"
	}
	v, err := json.Marshal(r.Value)
	if err != nil {
		v = []byte(fmt.Sprint(r.Value))
	}
	return fmt.Sprintf("%s (%s, %s)", r.Variant, v, r.Reason)
}

// String says a flag's change on one line.
func (c FlagChange) String() string {
	s := c.Flag + ": " + c.Before.String() + " -> " + c.After.String()
	if c.Before.Type != c.After.Type && c.Before.ErrorCode != "FLAG_NOT_FOUND" && c.After.ErrorCode != "FLAG_NOT_FOUND" {
		s += fmt.Sprintf(" (now a %s flag: clients asking for a %s get TYPE_MISMATCH)", c.After.Type, c.Before.Type)
	}
	return s
}
