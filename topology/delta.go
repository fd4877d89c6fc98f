package topology

import "strings"

// String lists the keys of the delta by set, sorted, e.g.
// "ConfigMaps[configmap:shop/shop/flags] FlagSets[featureflag:shop/flags]";
// empty sets are left out, and an empty delta is "{}". For logs and tests.
func (d Delta) String() string {
	var b strings.Builder
	for _, set := range []struct {
		name string
		keys KeySet
	}{
		{"ConfigMaps", d.ConfigMaps}, {"FlagSets", d.FlagSets}, {"Flagds", d.Flagds}, {"InProcessConfigs", d.InProcessConfigs}, {"SourcePolicies", d.SourcePolicies},
		{"Sources", d.Sources}, {"Workloads", d.Workloads},
	} {
		if len(set.keys) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(set.name)
		b.WriteByte('[')
		for i, k := range set.keys.Sorted() {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(k.String())
		}
		b.WriteByte(']')
	}
	if b.Len() == 0 {
		return "{}"
	}
	return b.String()
}
