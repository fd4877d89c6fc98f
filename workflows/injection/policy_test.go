package injection

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
)

// TestMergeStrategies: the four strategies on one pair of settings, as
// machinery.Policy merges (target.Merge(source) = source's strategy).
func TestMergeStrategies(t *testing.T) {
	src := topology.SourceKey("shop", "app")
	pol := topology.SourcePolicyKey("shop", "platform")
	sources := &SettingsPolicy{Object: topology.WorkloadKey(topology.KindDeployment, "shop", "web"), Settings: map[string]SettingValue{
		"logFormat":           {Value: "console", From: src},
		"contextValues[tier]": {Value: "gold", From: src},
	}}
	block := func(strategy func(*SettingsPolicy) *SettingsPolicy) *SettingsPolicy {
		return strategy(&SettingsPolicy{Object: pol, Settings: map[string]SettingValue{
			"logFormat":             {Value: "json", From: pol, Block: "b"},
			"contextValues[region]": {Value: "eu", From: pol, Block: "b"},
		}})
	}
	values := func(p *SettingsPolicy) map[string]string {
		out := map[string]string{}
		for k, v := range p.Settings {
			out[k] = v.Text()
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		strategy func(*SettingsPolicy) *SettingsPolicy
		want     map[string]string
	}{
		{"defaults merge: fills the gaps only", func(p *SettingsPolicy) *SettingsPolicy { p.Strategy = DefaultsMerge; return p },
			map[string]string{"logFormat": "console", "contextValues[tier]": "gold", "contextValues[region]": "eu"}},
		{"defaults atomic: the sources set logFormat, so nothing applies", func(p *SettingsPolicy) *SettingsPolicy { p.Strategy = DefaultsAtomic; return p },
			map[string]string{"logFormat": "console", "contextValues[tier]": "gold"}},
		{"overrides merge: replaces, entry by entry", func(p *SettingsPolicy) *SettingsPolicy { p.Strategy = OverridesMerge; return p },
			map[string]string{"logFormat": "json", "contextValues[tier]": "gold", "contextValues[region]": "eu"}},
		{"overrides atomic: replaces whole fields", func(p *SettingsPolicy) *SettingsPolicy { p.Strategy = OverridesAtomic; return p },
			map[string]string{"logFormat": "json", "contextValues[region]": "eu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			merged := sources.Merge(block(tc.strategy))
			g.Expect(values(settingsOf(merged))).To(Equal(tc.want))
			g.Expect(values(sources)).To(HaveLen(2), "merging leaves its inputs alone")
		})
	}
}

// TestDefaultsAtomicAppliesWhenNothingIsSet: atomic defaults apply whole
// where the sources set none of their fields.
func TestDefaultsAtomicAppliesWhenNothingIsSet(t *testing.T) {
	g := NewWithT(t)
	pol := topology.SourcePolicyKey("shop", "platform")
	sources := &SettingsPolicy{Settings: map[string]SettingValue{"port": {Value: int32(9000)}}}
	defaults := &SettingsPolicy{Object: pol, Strategy: DefaultsAtomic, Settings: map[string]SettingValue{
		"otelCollectorUri": {Value: "otel:4317", From: pol}, "envVars[A]": {Value: "x", From: pol}}}
	g.Expect(settingsOf(sources.Merge(defaults)).Settings).To(HaveLen(3))
}
