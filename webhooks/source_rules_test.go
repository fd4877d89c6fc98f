package webhooks

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/injection"
)

// longestNamespace and longName are the longest a namespace and a
// FeatureFlag name can be.
var longestNamespace = strings.Repeat("n", 63)

func longName(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("f", 249) }

// sourceOf is a source of the longest namespace with n entries of provider
// naming flag sets of the longest names.
func sourceOf(n int, provider v1beta1.SyncProviderType) *v1beta1.FeatureFlagSource {
	src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: longestNamespace, Name: "flags"}}
	for i := range n {
		src.Spec.Sources = append(src.Spec.Sources, v1beta1.Source{Source: longName(i), Provider: provider})
	}
	return src
}

// entriesThatFit is how many entries of sourceOf fit in flagd's
// --sources argument.
func entriesThatFit(t *testing.T, provider v1beta1.SyncProviderType) int {
	t.Helper()
	var two []injection.FlagdSourceConfig
	for i := range 2 {
		cfg, ok := injection.EntryOfSource(longestNamespace, v1beta1.Source{Source: longName(i)}, provider, injection.Options{})
		if !ok {
			t.Fatal("no entry")
		}
		two = append(two, cfg)
	}
	one := (injection.SourcesArgBytes(two) - 3) / 2 // without [ , ]: one among others
	return (injection.MaxArgBytes - 2 + 1) / (one + 1)
}

// TestSourceLengths: a source whose sidecar Linux's execve would refuse by
// itself is refused at admission, naming the limit; what only probably
// fails is a warning.
func TestSourceLengths(t *testing.T) {
	t.Run("--sources: up to the limit admitted, over it refused", func(t *testing.T) {
		for _, provider := range []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes} {
			g := NewWithT(t)
			fit := entriesThatFit(t, provider)
			errs, _ := ValidateSourceSpec(sourceOf(fit, provider), v1beta1.SyncProviderFile)
			g.Expect(errs).To(BeEmpty(), "%s: %d entries fit", provider, fit)
			errs, _ = ValidateSourceSpec(sourceOf(fit+1, provider), v1beta1.SyncProviderFile)
			g.Expect(errs.ToAggregate()).To(MatchError(And(
				ContainSubstring(fmt.Sprintf(`spec.sources: Invalid value: "%d entries": flagd's --sources argument for these entries alone would be`, fit+1)),
				ContainSubstring("over the 131071 bytes Linux takes in one argument (MAX_ARG_STRLEN)"))), string(provider))
		}
	})
	t.Run("a repeated entry counts once", func(t *testing.T) {
		g := NewWithT(t)
		fit := entriesThatFit(t, v1beta1.SyncProviderFile)
		src := sourceOf(fit, v1beta1.SyncProviderFile)
		src.Spec.Sources = append(src.Spec.Sources, src.Spec.Sources[0])
		errs, _ := ValidateSourceSpec(src, v1beta1.SyncProviderFile)
		g.Expect(errs).To(BeEmpty())
	})
	t.Run("flagd-proxy: refused when over without the operator's part, a warning when over with it", func(t *testing.T) {
		g := NewWithT(t)
		fit := entriesThatFit(t, v1beta1.SyncProviderFlagdProxy)
		errs, _ := ValidateSourceSpec(sourceOf(fit+1, v1beta1.SyncProviderFlagdProxy), v1beta1.SyncProviderFile)
		g.Expect(errs).NotTo(BeEmpty())
		errs, warnings := ValidateSourceSpec(sourceOf(fit, v1beta1.SyncProviderFlagdProxy), v1beta1.SyncProviderFile)
		g.Expect(errs).To(BeEmpty())
		g.Expect(warnings).To(ContainElement(ContainSubstring("with the sync server's address and credential in its")))
		_, warnings = ValidateSourceSpec(sourceOf(10, v1beta1.SyncProviderFlagdProxy), v1beta1.SyncProviderFile)
		g.Expect(warnings).NotTo(ContainElement(ContainSubstring("MAX_ARG_STRLEN")))
	})
	t.Run("the operator's default provider counts", func(t *testing.T) {
		g := NewWithT(t)
		fit := entriesThatFit(t, v1beta1.SyncProviderKubernetes)
		errs, _ := ValidateSourceSpec(sourceOf(fit+1, ""), v1beta1.SyncProviderKubernetes)
		g.Expect(errs).NotTo(BeEmpty())
	})
	t.Run("more file entries than inotify allows by default: a warning", func(t *testing.T) {
		g := NewWithT(t)
		short := func(n int) *v1beta1.FeatureFlagSource {
			src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}}
			for i := range n {
				src.Spec.Sources = append(src.Spec.Sources, v1beta1.Source{Source: fmt.Sprintf("f%d", i)})
			}
			return src
		}
		errs, warnings := ValidateSourceSpec(short(128), v1beta1.SyncProviderFile)
		g.Expect(errs).To(BeEmpty())
		g.Expect(warnings).NotTo(ContainElement(ContainSubstring("inotify")))
		errs, warnings = ValidateSourceSpec(short(129), v1beta1.SyncProviderFile)
		g.Expect(errs).To(BeEmpty())
		g.Expect(warnings).To(ContainElement(ContainSubstring("spec.sources: 129 file entries: flagd holds an inotify instance for each")))
	})
	t.Run("one argument or environment string too long", func(t *testing.T) {
		big := strings.Repeat("x", injection.MaxArgBytes+1)
		for _, tc := range []struct {
			name  string
			set   func(*v1beta1.FeatureFlagSource)
			field string
		}{
			{"context value", func(s *v1beta1.FeatureFlagSource) { s.Spec.ContextValues = map[string]string{"k": big} }, "spec.contextValues[k]"},
			{"header mapping", func(s *v1beta1.FeatureFlagSource) { s.Spec.HeaderToContextMappings = map[string]string{"X-A": big} }, "spec.headerToContextMappings[X-A]"},
			{"CORS origin", func(s *v1beta1.FeatureFlagSource) { s.Spec.CORS = []string{"https://a", big} }, "spec.cors[1]"},
			{"sync provider arg", func(s *v1beta1.FeatureFlagSource) { s.Spec.SyncProviderArgs = []string{"k=" + big} }, "spec.syncProviderArgs[0]"},
			{"otel collector", func(s *v1beta1.FeatureFlagSource) { s.Spec.OtelCollectorUri = "http://" + big }, "spec.otelCollectorUri"},
			{"socket path", func(s *v1beta1.FeatureFlagSource) { s.Spec.SocketPath = "/" + big }, "spec.socketPath"},
			{"env var", func(s *v1beta1.FeatureFlagSource) {
				s.Spec.EnvVars = []corev1.EnvVar{{Name: "A", Value: big[:injection.MaxArgBytes-len("FLAGD_A=")+1]}} // one byte over
			}, "spec.envVars[0].value"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := NewWithT(t)
				src := sourceOf(1, v1beta1.SyncProviderFile)
				tc.set(src)
				errs, _ := ValidateSourceSpec(src, v1beta1.SyncProviderFile)
				g.Expect(errs.ToAggregate()).To(MatchError(And(ContainSubstring(tc.field+": Invalid value: "),
					ContainSubstring("Linux takes in one argument or environment string (MAX_ARG_STRLEN): flagd could not start"))))
			})
		}
		g := NewWithT(t)
		src := sourceOf(1, v1beta1.SyncProviderFile)
		src.Spec.EnvVars = []corev1.EnvVar{{Name: "A", Value: big[:injection.MaxArgBytes-len("FLAGD_A=")]}}
		src.Spec.CORS = []string{big[:injection.MaxArgBytes]}
		errs, _ := ValidateSourceSpec(src, v1beta1.SyncProviderFile)
		g.Expect(errs).To(BeEmpty(), "exactly at the limit")
	})
}
