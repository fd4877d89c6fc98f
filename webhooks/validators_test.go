package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/injection"
)

func admissionOf(t testing.TB, op admissionv1.Operation, obj, old any) admission.Request {
	t.Helper()
	raw, _ := json.Marshal(obj)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "shop", Object: runtime.RawExtension{Raw: raw}}}
	if old != nil {
		req.OldObject.Raw, _ = json.Marshal(old)
	}
	return req
}

func TestFlagSetValidator(t *testing.T) {
	ctx := context.Background()
	valid := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}}
	valid.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"}}
	bad := valid.DeepCopy()
	bad.Spec.FlagSpec.Flags["f"] = v1beta1.Flag{State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "of"}

	t.Run("valid", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect((&FlagSetValidator{}).Handle(ctx, admissionOf(t, admissionv1.Create, valid, nil)).Allowed).To(BeTrue())
	})
	t.Run("invalid: an Invalid status with the field and the rule", func(t *testing.T) {
		g := NewWithT(t)
		resp := (&FlagSetValidator{}).Handle(ctx, admissionOf(t, admissionv1.Create, bad, nil))
		g.Expect(resp.Allowed).To(BeFalse())
		g.Expect(resp.Result.Reason).To(Equal(metav1.StatusReasonInvalid))
		g.Expect(resp.Result.Code).To(BeEquivalentTo(422))
		g.Expect(resp.Result.Message).To(Equal(`FeatureFlag.core.openfeature.dev "checkout" is invalid: spec.flagSpec.flags[f].defaultVariant: Invalid value: "of": must be one of the variants: off, on`))
		g.Expect(resp.Result.Details.Causes).To(ConsistOf(HaveField("Field", "spec.flagSpec.flags[f].defaultVariant")))
	})
	t.Run("an update that leaves an invalid spec alone (a label, a finalizer) is allowed", func(t *testing.T) {
		g := NewWithT(t)
		labelled := bad.DeepCopy()
		labelled.Labels = map[string]string{"team": "shop"}
		g.Expect((&FlagSetValidator{}).Handle(ctx, admissionOf(t, admissionv1.Update, labelled, bad)).Allowed).To(BeTrue())
	})
	t.Run("an update that changes the spec is checked", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect((&FlagSetValidator{}).Handle(ctx, admissionOf(t, admissionv1.Update, bad, valid)).Allowed).To(BeFalse())
	})
	t.Run("delete is not judged", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect((&FlagSetValidator{}).Handle(ctx, admissionOf(t, admissionv1.Delete, bad, nil)).Allowed).To(BeTrue())
	})

	// What flagd loads but is probably a mistake: admitted with warnings,
	// as the OpenFeature Operator admits it; refused when strict.
	suspect := valid.DeepCopy()
	suspect.Spec.FlagSpec.Flags["f"] = v1beta1.Flag{State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on",
		Targeting: json.RawMessage(`{"if":[{"$ref":"is-admin"},"off",null]}`)}
	t.Run("an unresolved $ref: admitted, with a warning kubectl prints", func(t *testing.T) {
		g := NewWithT(t)
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
			resp := (&FlagSetValidator{}).Handle(ctx, admissionOf(t, op, suspect, valid))
			g.Expect(resp.Allowed).To(BeTrue(), string(op))
			g.Expect(resp.Warnings).To(ConsistOf(`spec.flagSpec.flags[f].targeting: Invalid value: "is-admin": $ref "is-admin" does not name an entry of $evaluators: flagd evaluates the flag to an error`))
		}
	})
	t.Run("strict: the warning refuses", func(t *testing.T) {
		g := NewWithT(t)
		resp := (&FlagSetValidator{Strict: true}).Handle(ctx, admissionOf(t, admissionv1.Create, suspect, nil))
		g.Expect(resp.Allowed).To(BeFalse())
		g.Expect(resp.Result.Message).To(ContainSubstring(`$ref "is-admin" does not name an entry of $evaluators`))
	})
	t.Run("a metadata key of flagplane's: admitted, with a warning that it is not served", func(t *testing.T) {
		g := NewWithT(t)
		reserved := valid.DeepCopy()
		reserved.Spec.FlagSpec.Metadata = json.RawMessage(`{"flagplane.dev/revision":"mine"}`)
		resp := (&FlagSetValidator{}).Handle(ctx, admissionOf(t, admissionv1.Create, reserved, nil))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Warnings).To(ConsistOf(HavePrefix(`spec.flagSpec.metadata[flagplane.dev/revision]: Invalid value: "\"mine\"": keys under flagplane.dev/ are flagplane's`)))
	})
	t.Run("validation off: everything is admitted", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect((&FlagSetValidator{Disabled: true}).Handle(ctx, admissionOf(t, admissionv1.Create, bad, nil)).Allowed).To(BeTrue())
	})
}

func sourceWith(mutate func(*v1beta1.FeatureFlagSource)) *v1beta1.FeatureFlagSource {
	s := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}}
	s.Spec.Sources = []v1beta1.Source{{Source: "checkout"}}
	mutate(s)
	return s
}

func TestValidateSourceSpec(t *testing.T) {
	cases := []struct {
		name     string
		src      *v1beta1.FeatureFlagSource
		want     string // error substring; "" means valid
		warnings []string
	}{
		{"valid file source", sourceWith(func(*v1beta1.FeatureFlagSource) {}), "", nil},
		{"every remote provider", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Sources = []v1beta1.Source{
				{Source: "https://flags.example/a.json", Provider: "http", HttpSyncBearerToken: "t", Interval: 5},
				{Source: "grpcs://flags.example:443", Provider: "grpc", TLS: true, Selector: "x"},
				{Source: "flags.example:8015", Provider: "grpc"},
				{Source: "dns:///flags.example:8015", Provider: "grpc"},
				{Source: "gs://bucket/a.json", Provider: "gcs"},
				{Source: "azblob://container/a.json", Provider: "azblob"},
				{Source: "s3://bucket/a.json", Provider: "s3"},
				{Source: "other/checkout", Provider: "kubernetes"},
				{Source: "checkout", Provider: "flagd-proxy"},
			}
		}), "", nil},
		{"reference with three parts", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.Sources[0].Source = "a/b/c" }),
			`spec.sources[0].source: Invalid value: "a/b/c": provider file takes a FeatureFlag as name or namespace/name`, nil},
		{"reference to an invalid namespace", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.Sources[0].Source = "Shop/checkout" }),
			`spec.sources[0].source: Invalid value: "Shop/checkout": provider file takes a FeatureFlag as name or namespace/name: namespace a lowercase RFC 1123 label`, nil},
		{"reference to an invalid name", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.Sources[0].Source = "check_out" }),
			`provider file takes a FeatureFlag as name or namespace/name: name a lowercase RFC 1123 subdomain`, nil},
		{"http without scheme", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Sources[0] = v1beta1.Source{Source: "flags.example/a.json", Provider: "http"}
		}),
			`spec.sources[0].source: Invalid value: "flags.example/a.json": provider http takes an http:// or https:// URL`, nil},
		{"grpc without port", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Sources[0] = v1beta1.Source{Source: "grpc://flags.example", Provider: "grpc"}
		}),
			`provider grpc takes host:port`, nil},
		{"gcs without object", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Sources[0] = v1beta1.Source{Source: "gs://bucket", Provider: "gcs"}
		}),
			`provider gcs takes gs://<bucket>/<object>`, nil},
		{"s3 with a gcs URI", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Sources[0] = v1beta1.Source{Source: "gs://bucket/a.json", Provider: "s3"}
		}),
			`provider s3 takes s3://<bucket>/<object>`, nil},
		{"port equal to the management port", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.Port, s.Spec.ManagementPort = 9000, 9000 }),
			`spec.managementPort: Invalid value: 9000: the same port as spec.port`, nil},
		{"OFREP port on flagd's sync port", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.OFREPPort = 8015 }),
			`spec.ofrepPort: Invalid value: 8015: flagd serves its sync service on 8015 in the sidecar`, nil},
		{"env var prefix with a dash", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.EnvVarPrefix = "MY-APP" }),
			`spec.envVarPrefix: Invalid value: "MY-APP": must be letters, digits and underscores`, nil},
		{"env var name with a space", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.EnvVars = []corev1.EnvVar{{Name: "LOG LEVEL", Value: "x"}} }),
			`spec.envVars[0].name: Invalid value: "LOG LEVEL"`, nil},
		{"sync provider arg without =", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.SyncProviderArgs = []string{"verbose"} }),
			`spec.syncProviderArgs[0]: Invalid value: "verbose": must be key=value`, nil},
		{"header mapping of an invalid header", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.HeaderToContextMappings = map[string]string{"X User": "user"}
		}),
			`spec.headerToContextMappings[X User]: Invalid value: "X User"`, nil},
		{"unknown log format", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.LogFormat = "text" }),
			`spec.logFormat: Unsupported value: "text": supported values: "json", "console"`, nil},
		{"relative socket path", sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.SocketPath = "flagd.sock" }),
			`spec.socketPath: Invalid value: "flagd.sock": must be an absolute path`, nil},
		{"request above limit", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
			s.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
		}), `spec.resources.requests[memory]: Invalid value: "256Mi": must not exceed the limit 128Mi`, nil},
		{"targetRef to an invalid name", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "Web"}}
		}), `spec.targetRefs[0].name: Invalid value: "Web"`, nil},
		{"targetRef to a workload of another namespace", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "other/web"}}
		}), `spec.targetRefs[0].name: Invalid value: "other/web": a source targets workloads of its own namespace: a name, without a namespace`, nil},
		{"securityContext annotation that is not one", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Annotations = map[string]string{injection.AnnotationSidecarSecurityContext: `{"runAsRoot": true}`}
		}), `metadata.annotations[flagplane.core.openfeature.dev/sidecar-security-context]: Invalid value: "{\"runAsRoot\": true}": annotation flagplane.core.openfeature.dev/sidecar-security-context must be a JSON securityContext: json: unknown field "runAsRoot"`, nil},
		{"settings the provider ignores are warnings", sourceWith(func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Sources = []v1beta1.Source{{Source: "checkout", TLS: true, Interval: 5}, {Source: "checkout"}}
		}), "", []string{"spec.sources[0].tls is ignored by provider file", "spec.sources[0].interval is ignored by provider file",
			"spec.sources[1]: the same source as spec.sources[0]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			errs, warnings := ValidateSourceSpec(tc.src, v1beta1.SyncProviderFile)
			if tc.want == "" {
				g.Expect(errs).To(BeEmpty())
			} else {
				g.Expect(errs.ToAggregate()).To(MatchError(ContainSubstring(tc.want)))
			}
			g.Expect(warnings).To(Equal(tc.warnings))
		})
	}
}

func TestSourceValidatorDeniesWithAnInvalidStatus(t *testing.T) {
	g := NewWithT(t)
	src := sourceWith(func(s *v1beta1.FeatureFlagSource) { s.Spec.LogFormat = "text" })
	resp := (&SourceValidator{}).Handle(context.Background(), admissionOf(t, admissionv1.Create, src, nil))
	g.Expect(resp.Allowed).To(BeFalse())
	g.Expect(resp.Result.Message).To(Equal(`FeatureFlagSource.core.openfeature.dev "flags" is invalid: spec.logFormat: Unsupported value: "text": supported values: "json", "console"`))
}
