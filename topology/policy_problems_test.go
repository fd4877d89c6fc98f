package topology

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
)

// A policy governs nothing when a sidecar could not carry what it sets,
// which neither its schema nor a webhook refuses: an env var prefix or an
// env var name that makes an invalid env var name, ports that clash or
// take flagd's sync port. Each problem names its field.
func TestSourcePolicyProblems(t *testing.T) {
	policy := func(s policyv1alpha1.SourceSettings) *policyv1alpha1.FeatureFlagSourcePolicy {
		return &policyv1alpha1.FeatureFlagSourcePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"},
			Spec: policyv1alpha1.FeatureFlagSourcePolicySpec{TargetRef: policyv1alpha1.PolicyTargetReference{Kind: "Namespace", Name: "shop"},
				Overrides: &policyv1alpha1.SourceSettingsBlock{SourceSettings: s}}}
	}
	for _, c := range []struct {
		name     string
		settings policyv1alpha1.SourceSettings
		want     []string
	}{
		{"valid", policyv1alpha1.SourceSettings{EnvVarPrefix: "OF_1", Port: 9000, ManagementPort: 9001,
			EnvVars: []corev1.EnvVar{{Name: "a.b-c"}}}, nil},
		{"a prefix that starts with a digit", policyv1alpha1.SourceSettings{EnvVarPrefix: "1FLAGD"},
			[]string{`spec.overrides.envVarPrefix: Invalid value: "1FLAGD": must be letters, digits and underscores, not starting with a digit`}},
		{"a prefix with a right-to-left mark", policyv1alpha1.SourceSettings{EnvVarPrefix: "\u200fFLAGD"},
			[]string{"spec.overrides.envVarPrefix: Invalid value"}},
		{"an env var name with a space", policyv1alpha1.SourceSettings{EnvVars: []corev1.EnvVar{{Name: "ok"}, {Name: "not ok"}}},
			[]string{`spec.overrides.envVars[1].name: Invalid value: "not ok"`}},
		{"flagd's sync port", policyv1alpha1.SourceSettings{Port: 8015},
			[]string{"spec.overrides.port: Invalid value: 8015: flagd serves its sync service on 8015 in the sidecar"}},
		{"one port twice", policyv1alpha1.SourceSettings{Port: 9000, OFREPPort: 9000},
			[]string{"spec.overrides.ofrepPort: Invalid value: 9000: the same port as spec.overrides.port"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			p := policy(c.settings)
			problems := SourcePolicyProblems(p)
			g.Expect(problems).To(HaveLen(len(c.want)), "%v", problems)
			for i, w := range c.want {
				g.Expect(problems[i].Error()).To(HavePrefix(w))
			}
			g.Expect(SourcePolicyAccepted(p)).To(Equal(len(c.want) == 0))
		})
	}

	g := NewWithT(t)
	elsewhere := policy(policyv1alpha1.SourceSettings{LogFormat: "json"})
	elsewhere.Spec.TargetRef.Name = "pay"
	g.Expect(SourcePolicyProblems(elsewhere)).To(ConsistOf(HaveField("Field", "spec.targetRef")))
}
