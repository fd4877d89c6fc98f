package topology

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Builders for test objects.

func newFlagSet(ns, name string, defaultVariant string) *v1beta1.FeatureFlag {
	return &v1beta1.FeatureFlag{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.FeatureFlagSpec{FlagSpec: v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{
			"new-ui": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: defaultVariant},
		}}},
	}
}

type sourceOpt func(*v1beta1.FeatureFlagSource)

func newSource(ns, name string, opts ...sourceOpt) *v1beta1.FeatureFlagSource {
	s := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

func ref(source string, provider v1beta1.SyncProviderType) sourceOpt {
	return func(s *v1beta1.FeatureFlagSource) {
		s.Spec.Sources = append(s.Spec.Sources, v1beta1.Source{Source: source, Provider: provider})
	}
}

func defaultProvider(p v1beta1.SyncProviderType) sourceOpt {
	return func(s *v1beta1.FeatureFlagSource) { s.Spec.DefaultSyncProvider = p }
}

func targetRef(kind Kind, name string) sourceOpt {
	return func(s *v1beta1.FeatureFlagSource) {
		s.Spec.TargetRefs = append(s.Spec.TargetRefs, v1beta1.TargetRef{Group: "apps", Kind: string(kind), Name: name})
	}
}

func selector(sel *metav1.LabelSelector) sourceOpt {
	return func(s *v1beta1.FeatureFlagSource) { s.Spec.Selector = sel }
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		sel.MatchLabels[kv[i]] = kv[i+1]
	}
	return sel
}

func debugLogging(on bool) sourceOpt {
	return func(s *v1beta1.FeatureFlagSource) { s.Spec.DebugLogging = &on }
}

func port(p int32) sourceOpt {
	return func(s *v1beta1.FeatureFlagSource) { s.Spec.Port = p }
}

func newIPC(ns, name string, port int32) *v1beta1.InProcessConfiguration {
	return &v1beta1.InProcessConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1beta1.InProcessConfigurationSpec{Port: port},
	}
}

func deployment(ns, name string, labels map[string]string, annotations map[string]string) Workload {
	return Workload{Kind: KindDeployment, Namespace: ns, Name: name, Labels: labels, PodAnnotations: annotations}
}

// optIn is the OpenFeature Operator's opt-in annotation set.
func optIn(sources string) map[string]string {
	return map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: sources}
}

// Keys, shortened.

func fsK(ns, name string) Key  { return FlagSetKey(ns, name) }
func srcK(ns, name string) Key { return SourceKey(ns, name) }
func ipcK(ns, name string) Key { return InProcessConfigKey(ns, name) }
func depK(ns, name string) Key { return WorkloadKey(KindDeployment, ns, name) }
func cmK(flagSet Key, ns string) Key {
	return ConfigMapKey(flagSet, ns)
}

// deltaKeys lists a Delta's keys, sorted, so that a test names exactly
// what it expects. Policies are left out: an edit marks every policy of the
// namespaces whose consumers it touches (markPoliciesOfConsumers), more
// than the exact set the property test compares with.
func deltaKeys(d Delta) []string {
	var out []string
	for k := range d.All() {
		if k.Kind != KindSourcePolicy {
			out = append(out, k.String())
		}
	}
	slices.Sort(out)
	return out
}

// expect lists the keys a Delta should hold.
func expect(keys ...Key) []string {
	var d Delta
	d.Add(keys...)
	return deltaKeys(d)
}

// must fails the test on an edit error and returns the Delta.
func must(t testing.TB) func(Delta, error) Delta {
	return func(d Delta, err error) Delta {
		t.Helper()
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return d
	}
}

func corev1EnvVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// flagSetGrant lets the sources of the namespaces from refer to the flag
// sets of namespace (those named, or all).
func flagSetGrant(namespace, name string, from []string, names ...string) Grant {
	return grantOf(namespace, name, GroupOpenFeature, "FeatureFlagSource", from, KindFlagSet, names...)
}

// podGrant lets the pods of the namespaces from refer to objects of kind in
// namespace (those named, or all).
func podGrant(namespace, name string, from []string, kind Kind, names ...string) Grant {
	return grantOf(namespace, name, GroupCore, KindPod, from, kind, names...)
}

func grantOf(namespace, name, fromGroup, fromKind string, from []string, kind Kind, names ...string) Grant {
	g := Grant{Namespace: namespace, Name: name}
	for _, ns := range from {
		g.From = append(g.From, GrantFrom{Group: fromGroup, Kind: fromKind, Namespace: ns})
	}
	if len(names) == 0 {
		names = []string{""}
	}
	for _, n := range names {
		g.To = append(g.To, GrantTo{Group: GroupOpenFeature, Kind: string(kind), Name: n})
	}
	return g
}
