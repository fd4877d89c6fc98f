package injection

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
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

// TestDropperIsTheAtomicOverride: a source's map entry dropped by atomic
// overrides is blamed on the policy whose atomic block dropped it, not on
// an older one that only merges the same field.
func TestDropperIsTheAtomicOverride(t *testing.T) {
	g := NewWithT(t)
	policy := func(name string, strategy policyv1alpha1.MergeStrategy) *policyv1alpha1.FeatureFlagSourcePolicy {
		return &policyv1alpha1.FeatureFlagSourcePolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: policyv1alpha1.FeatureFlagSourcePolicySpec{Overrides: &policyv1alpha1.SourceSettingsBlock{
				Strategy: strategy, SourceSettings: policyv1alpha1.SourceSettings{ContextValues: map[string]string{"region": "eu"}}}},
		}
	}
	policies := []*policyv1alpha1.FeatureFlagSourcePolicy{policy("older", policyv1alpha1.StrategyMerge), policy("younger", policyv1alpha1.StrategyAtomic)}
	overrides := []*SettingsPolicy{BlockPolicy(policies[0], BlockOverrides), BlockPolicy(policies[1], BlockOverrides)}
	g.Expect(dropper(policies, overrides, "contextValues[tier]")).To(Equal(topology.SourcePolicyKey("shop", "younger")))
	g.Expect(dropper(policies, overrides, "logFormat")).To(Equal(topology.Key{}), "no atomic block names logFormat")
}
