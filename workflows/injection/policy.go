package injection

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kuadrant/policy-machinery/machinery"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

// Defaults and overrides (api/policy/v1alpha1) are merged in policy-machinery's
// vocabulary: the settings the sources of a sidecar merged to, each block of
// each FeatureFlagSourcePolicy of the sidecar's namespace, and every result
// are a SettingsPolicy (a machinery.Policy), and a block's strategy is a
// machinery.MergeStrategy. The sidecar's settings are
//
//	sources.Merge(defaults₁)…Merge(defaultsₙ).Merge(overridesₙ)…Merge(overrides₁)
//
// with the policies numbered oldest first: the oldest policy's defaults
// fill the gaps first and its overrides are applied last, so it wins both
// ways, as Gateway API resolves conflicting policies.

// Blocks of a policy.
const (
	BlockDefaults  = "defaults"
	BlockOverrides = "overrides"
)

// SettingValue is one setting of a SettingsPolicy and where it comes from.
type SettingValue struct {
	// Value is the setting's value: int32, string, bool, corev1.EnvVar
	// (envVars[NAME]) or a resource quantity's string (resources.*[NAME]).
	Value any
	// From is the object that set it: a FeatureFlagSource or a policy.
	From topology.Key
	// Block is BlockDefaults or BlockOverrides when a policy set it.
	Block string
}

// Text is the setting's value as explain and status show it.
func (s SettingValue) Text() string {
	if e, ok := s.Value.(corev1.EnvVar); ok {
		return envValue(e)
	}
	return fmt.Sprint(s.Value)
}

// SettingsPolicy is a set of sidecar settings as a machinery.Policy. A
// setting is named by its path: a field of SourceSettings ("logFormat"),
// or one entry of a list or map ("envVars[OTEL_SERVICE_NAME]",
// "contextValues[region]", "resources.limits[memory]"). The group of a path
// is its field ("envVars", "resources"): what an atomic block replaces or
// checks whole.
type SettingsPolicy struct {
	// Object is the policy (or, for the sources' settings, the sidecar's
	// workload); Block which of its blocks; Strategy the block's.
	Object   topology.Key
	Block    string
	Strategy machinery.MergeStrategy
	// Namespace is the namespace the settings govern.
	Namespace string
	Settings  map[string]SettingValue
}

var _ machinery.Policy = (*SettingsPolicy)(nil)

// GroupVersionKind is the kind of the object the settings come from.
func (p *SettingsPolicy) GroupVersionKind() schema.GroupVersionKind {
	return p.Object.GroupVersionKind()
}

// SetGroupVersionKind does nothing: the kind is the object's.
func (p *SettingsPolicy) SetGroupVersionKind(schema.GroupVersionKind) {}

// GetNamespace is the object's namespace.
func (p *SettingsPolicy) GetNamespace() string { return p.Object.Namespace }

// GetName is the object's name.
func (p *SettingsPolicy) GetName() string { return p.Object.Name }

// GetLocator is policy-machinery's locator of the object and block.
func (p *SettingsPolicy) GetLocator() string {
	if p.Block == "" {
		return p.Object.GetLocator()
	}
	return p.Object.GetLocator() + "#" + p.Block
}

// GetTargetRefs is the Namespace the settings govern.
func (p *SettingsPolicy) GetTargetRefs() []machinery.PolicyTargetReference {
	return []machinery.PolicyTargetReference{topology.Key{Kind: "Namespace", Name: p.Namespace}}
}

// GetMergeStrategy is the block's strategy.
func (p *SettingsPolicy) GetMergeStrategy() machinery.MergeStrategy {
	if p.Strategy == nil {
		return machinery.DefaultMergeStrategy
	}
	return p.Strategy
}

// Merge merges other into p with other's strategy, as Kuadrant's policies do.
func (p *SettingsPolicy) Merge(other machinery.Policy) machinery.Policy {
	return other.GetMergeStrategy()(other, p)
}

func (p *SettingsPolicy) with(settings map[string]SettingValue) *SettingsPolicy {
	out := *p
	out.Settings = settings
	return &out
}

// settingGroup is the field of a setting path.
func settingGroup(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

func (p *SettingsPolicy) groups() map[string]bool {
	out := map[string]bool{}
	for path := range p.Settings {
		out[settingGroup(path)] = true
	}
	return out
}

func settingsOf(p machinery.Policy) *SettingsPolicy {
	if sp, ok := p.(*SettingsPolicy); ok {
		return sp
	}
	return &SettingsPolicy{}
}

// DefaultsMerge is the merge strategy of defaults: a setting of source
// applies where target sets none.
func DefaultsMerge(source, target machinery.Policy) machinery.Policy {
	src, tgt := settingsOf(source), settingsOf(target)
	out := maps.Clone(tgt.Settings)
	for path, v := range src.Settings {
		if _, ok := out[path]; !ok {
			out[path] = v
		}
	}
	return tgt.with(out)
}

// DefaultsAtomic is the merge strategy of atomic defaults: source applies
// whole, only where target sets none of its fields.
func DefaultsAtomic(source, target machinery.Policy) machinery.Policy {
	src, tgt := settingsOf(source), settingsOf(target)
	groups := src.groups()
	for path := range tgt.Settings {
		if groups[settingGroup(path)] {
			return tgt
		}
	}
	out := maps.Clone(tgt.Settings)
	maps.Copy(out, src.Settings)
	return tgt.with(out)
}

// OverridesMerge is the merge strategy of overrides: every setting of
// source replaces target's.
func OverridesMerge(source, target machinery.Policy) machinery.Policy {
	src, tgt := settingsOf(source), settingsOf(target)
	out := maps.Clone(tgt.Settings)
	maps.Copy(out, src.Settings)
	return tgt.with(out)
}

// OverridesAtomic is the merge strategy of atomic overrides: every field
// source names replaces target's whole (entries of target's not in source
// are dropped).
func OverridesAtomic(source, target machinery.Policy) machinery.Policy {
	src, tgt := settingsOf(source), settingsOf(target)
	groups := src.groups()
	out := map[string]SettingValue{}
	for path, v := range tgt.Settings {
		if !groups[settingGroup(path)] {
			out[path] = v
		}
	}
	maps.Copy(out, src.Settings)
	return tgt.with(out)
}

// strategyOf is the machinery strategy of a block.
func strategyOf(block string, s policyv1alpha1.MergeStrategy) machinery.MergeStrategy {
	atomic := s == policyv1alpha1.StrategyAtomic
	switch {
	case block == BlockDefaults && atomic:
		return DefaultsAtomic
	case block == BlockDefaults:
		return DefaultsMerge
	case atomic:
		return OverridesAtomic
	}
	return OverridesMerge
}

// BlockPolicy is one block of a FeatureFlagSourcePolicy as a
// SettingsPolicy; nil when the policy has no such block.
func BlockPolicy(p *policyv1alpha1.FeatureFlagSourcePolicy, block string) *SettingsPolicy {
	b := p.Spec.Defaults
	if block == BlockOverrides {
		b = p.Spec.Overrides
	}
	if b == nil {
		return nil
	}
	k := topology.SourcePolicyKey(p.Namespace, p.Name)
	out := &SettingsPolicy{Object: k, Block: block, Strategy: strategyOf(block, b.Strategy),
		Namespace: p.Namespace, Settings: map[string]SettingValue{}}
	s := &b.SourceSettings
	set := func(path string, v any) { out.Settings[path] = SettingValue{Value: v, From: k, Block: block} }
	if s.ManagementPort != 0 {
		set("managementPort", s.ManagementPort)
	}
	if s.Port != 0 {
		set("port", s.Port)
	}
	if s.OFREPPort != 0 {
		set("ofrepPort", s.OFREPPort)
	}
	if s.Evaluator != "" {
		set("evaluator", s.Evaluator)
	}
	if s.LogFormat != "" {
		set("logFormat", s.LogFormat)
	}
	if s.EnvVarPrefix != "" {
		set("envVarPrefix", s.EnvVarPrefix)
	}
	if s.OtelCollectorUri != "" {
		set("otelCollectorUri", s.OtelCollectorUri)
	}
	if s.ProbesEnabled != nil {
		set("probesEnabled", *s.ProbesEnabled)
	}
	if s.DebugLogging != nil {
		set("debugLogging", *s.DebugLogging)
	}
	for _, e := range s.EnvVars {
		set("envVars["+e.Name+"]", *e.DeepCopy())
	}
	for name, q := range s.Resources.Requests {
		set("resources.requests["+string(name)+"]", q.String())
	}
	for name, q := range s.Resources.Limits {
		set("resources.limits["+string(name)+"]", q.String())
	}
	for k, v := range s.ContextValues {
		set("contextValues["+k+"]", v)
	}
	for k, v := range s.HeaderToContextMappings {
		set("headerToContextMappings["+k+"]", v)
	}
	return out
}

// PolicyDecision is one setting of a sidecar that a policy decided.
type PolicyDecision struct {
	// Setting is the setting's path, Value its value in force.
	Setting string `json:"setting"`
	Value   string `json:"value"`
	// Policy and Block are the policy block it comes from.
	Policy topology.Key `json:"policy"`
	Block  string       `json:"block"`
	// Replaced is the source whose value the policy replaced, and that
	// value; empty for a default that filled a gap.
	Replaced      *topology.Key `json:"replaced,omitempty"`
	ReplacedValue string        `json:"replacedValue,omitempty"`
}

// String reads "logFormat=json from <policy> overrides (was console from <source>)".
func (d PolicyDecision) String() string {
	s := fmt.Sprintf("%s=%s from %s %s", d.Setting, d.Value, keyString(d.Policy), d.Block)
	if d.Replaced != nil {
		s += fmt.Sprintf(" (was %s from %s)", d.ReplacedValue, keyString(*d.Replaced))
	}
	return s
}

// PolicyNote is a block of a policy that did not apply to a sidecar, or a
// setting of one that another policy won.
type PolicyNote struct {
	Policy  topology.Key `json:"policy"`
	Block   string       `json:"block"`
	Message string       `json:"message"`
}

// applyPolicies merges the settings of the sources with the blocks of the
// namespace's policies (oldest first) and writes the result back.
func (m *sidecarMerge) applyPolicies(policies []*policyv1alpha1.FeatureFlagSourcePolicy, namespace string) {
	if len(policies) == 0 {
		return
	}
	// Each policy's blocks, once; nil where it has none.
	defaults := make([]*SettingsPolicy, len(policies))
	overrides := make([]*SettingsPolicy, len(policies))
	for i, p := range policies {
		defaults[i], overrides[i] = BlockPolicy(p, BlockDefaults), BlockPolicy(p, BlockOverrides)
	}
	sources := m.settings(namespace)
	var effective machinery.Policy = sources
	for _, b := range defaults {
		if b != nil {
			next := effective.Merge(b)
			m.noteUnapplied(b, settingsOf(effective), settingsOf(next))
			effective = next
		}
	}
	for _, b := range slices.Backward(overrides) {
		if b != nil {
			effective = effective.Merge(b)
		}
	}
	eff := settingsOf(effective)
	for _, path := range slices.Sorted(maps.Keys(eff.Settings)) {
		v := eff.Settings[path]
		if v.Block == "" {
			continue
		}
		d := PolicyDecision{Setting: path, Value: v.Text(), Policy: v.From, Block: v.Block}
		if old, ok := sources.Settings[path]; ok {
			from := old.From
			d.Replaced, d.ReplacedValue = &from, old.Text()
		}
		m.inj.PolicyDecisions = append(m.inj.PolicyDecisions, d)
	}
	for _, path := range slices.Sorted(maps.Keys(sources.Settings)) {
		if _, ok := eff.Settings[path]; !ok {
			old := sources.Settings[path]
			from := old.From
			m.inj.PolicyDecisions = append(m.inj.PolicyDecisions, PolicyDecision{Setting: path, Value: "(removed)",
				Policy: dropper(policies, overrides, path), Block: BlockOverrides, Replaced: &from, ReplacedValue: old.Text()})
		}
	}
	// Settings of a block that another policy's block wins.
	for _, b := range slices.Concat(defaults, overrides) {
		if b == nil {
			continue
		}
		var lost []string
		for _, path := range slices.Sorted(maps.Keys(b.Settings)) {
			if v, ok := eff.Settings[path]; ok && v.Block != "" && v.From != b.Object {
				lost = append(lost, fmt.Sprintf("%s (to %s %s)", path, keyString(v.From), v.Block))
			}
		}
		if len(lost) > 0 {
			m.inj.PolicyNotes = append(m.inj.PolicyNotes, PolicyNote{Policy: b.Object, Block: b.Block,
				Message: "another policy wins " + strings.Join(lost, ", ")})
		}
	}
	m.setSettings(eff)
}

// dropper is the policy whose atomic overrides dropped a path: the last
// applied of those naming its field, i.e. the oldest.
func dropper(policies []*policyv1alpha1.FeatureFlagSourcePolicy, overrides []*SettingsPolicy, path string) topology.Key {
	for i, b := range overrides {
		if b != nil && policies[i].Spec.Overrides.Strategy == policyv1alpha1.StrategyAtomic && b.groups()[settingGroup(path)] {
			return b.Object
		}
	}
	return topology.Key{}
}

// noteUnapplied notes an atomic defaults block that did not apply because
// the settings it merged into set one of its fields.
func (m *sidecarMerge) noteUnapplied(b, before, after *SettingsPolicy) {
	for path := range b.Settings {
		if v, ok := after.Settings[path]; ok && v.From == b.Object {
			return
		}
	}
	if len(b.Settings) == 0 {
		return
	}
	var set []string
	groups := b.groups()
	for path, v := range before.Settings {
		if groups[settingGroup(path)] {
			set = append(set, fmt.Sprintf("%s (by %s)", path, keyString(v.From)))
		}
	}
	slices.Sort(set)
	msg := "not applied: every setting it names is already set"
	if len(set) > 0 {
		msg = "not applied (atomic): already set: " + strings.Join(set, ", ")
	}
	m.inj.PolicyNotes = append(m.inj.PolicyNotes, PolicyNote{Policy: b.Object, Block: BlockDefaults, Message: msg})
}

// settings is what the sources merged to, as a SettingsPolicy.
func (m *sidecarMerge) settings(namespace string) *SettingsPolicy {
	out := &SettingsPolicy{Object: m.inj.Workload, Namespace: namespace, Settings: map[string]SettingValue{}}
	scalar := func(path string, v any, from topology.Key, set bool) {
		if set {
			out.Settings[path] = SettingValue{Value: v, From: from}
		}
	}
	scalar("managementPort", m.managementPort.value, m.managementPort.from, m.managementPort.set)
	scalar("port", m.port.value, m.port.from, m.port.set)
	scalar("ofrepPort", m.ofrepPort.value, m.ofrepPort.from, m.ofrepPort.set)
	scalar("evaluator", m.evaluator.value, m.evaluator.from, m.evaluator.set)
	scalar("logFormat", m.logFormat.value, m.logFormat.from, m.logFormat.set)
	scalar("envVarPrefix", m.envVarPrefix.value, m.envVarPrefix.from, m.envVarPrefix.set)
	scalar("otelCollectorUri", m.otelCollector.value, m.otelCollector.from, m.otelCollector.set)
	scalar("probesEnabled", m.probes.value, m.probes.from, m.probes.set)
	scalar("debugLogging", m.debug.value, m.debug.from, m.debug.set)
	for _, e := range m.envVars {
		out.Settings["envVars["+e.Name+"]"] = SettingValue{Value: *e.DeepCopy(), From: m.envFrom[e.Name]}
	}
	for name, kv := range m.requests {
		out.Settings["resources.requests["+string(name)+"]"] = SettingValue{Value: kv.value, From: kv.from}
	}
	for name, kv := range m.limits {
		out.Settings["resources.limits["+string(name)+"]"] = SettingValue{Value: kv.value, From: kv.from}
	}
	for k, kv := range m.contextValues {
		out.Settings["contextValues["+k+"]"] = SettingValue{Value: kv.value, From: kv.from}
	}
	for k, kv := range m.headerMappings {
		out.Settings["headerToContextMappings["+k+"]"] = SettingValue{Value: kv.value, From: kv.from}
	}
	return out
}

// setSettings writes merged settings back into the merge.
func (m *sidecarMerge) setSettings(p *SettingsPolicy) {
	get := func(path string) (SettingValue, bool) { v, ok := p.Settings[path]; return v, ok }
	setInt32 := func(s *setting[int32], path string) {
		v, ok := get(path)
		*s = setting[int32]{}
		if ok {
			*s = setting[int32]{value: v.Value.(int32), from: v.From, set: true}
		}
	}
	setString := func(s *setting[string], path string) {
		v, ok := get(path)
		*s = setting[string]{}
		if ok {
			*s = setting[string]{value: v.Value.(string), from: v.From, set: true}
		}
	}
	setBool := func(s *setting[bool], path string) {
		v, ok := get(path)
		*s = setting[bool]{}
		if ok {
			*s = setting[bool]{value: v.Value.(bool), from: v.From, set: true}
		}
	}
	setInt32(&m.managementPort, "managementPort")
	setInt32(&m.port, "port")
	setInt32(&m.ofrepPort, "ofrepPort")
	setString(&m.evaluator, "evaluator")
	setString(&m.logFormat, "logFormat")
	setString(&m.envVarPrefix, "envVarPrefix")
	setString(&m.otelCollector, "otelCollectorUri")
	setBool(&m.probes, "probesEnabled")
	setBool(&m.debug, "debugLogging")

	// Env vars keep the sources' order; those a policy adds follow, by name.
	var env []corev1.EnvVar
	envFrom := map[string]topology.Key{}
	for _, e := range m.envVars {
		if v, ok := get("envVars[" + e.Name + "]"); ok {
			env = append(env, v.Value.(corev1.EnvVar))
			envFrom[e.Name] = v.From
		}
	}
	for _, path := range slices.Sorted(maps.Keys(p.Settings)) {
		name, ok := strings.CutPrefix(path, "envVars[")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "]")
		if _, done := envFrom[name]; !done {
			v := p.Settings[path]
			env = append(env, v.Value.(corev1.EnvVar))
			envFrom[name] = v.From
		}
	}
	m.envVars, m.envFrom = env, envFrom

	keyed := func(prefix string) map[string]keyedValue {
		out := map[string]keyedValue{}
		for path, v := range p.Settings {
			if k, ok := strings.CutPrefix(path, prefix); ok {
				out[strings.TrimSuffix(k, "]")] = keyedValue{value: v.Value.(string), from: v.From}
			}
		}
		return out
	}
	m.contextValues = keyed("contextValues[")
	m.headerMappings = keyed("headerToContextMappings[")
	resources := func(prefix string) map[corev1.ResourceName]keyedValue {
		out := map[corev1.ResourceName]keyedValue{}
		for k, v := range keyed(prefix) {
			out[corev1.ResourceName(k)] = v
		}
		return out
	}
	m.requests = resources("resources.requests[")
	m.limits = resources("resources.limits[")
}
