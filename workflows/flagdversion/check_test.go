package flagdversion_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/workflows/flagdversion"
)

// TestCheck: what a release would not take, it reports, naming the release.
func TestCheck(t *testing.T) {
	ofo, _ := flagdversion.For(flagdversion.V(0, 15, 4))
	ref, _ := flagdversion.For(flagdversion.Reference)
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		facts *flagdversion.Facts
		args  []string
		env   []corev1.EnvVar
		want  []string
	}{
		{"valid", ref, []string{"start", "--port", "8013", "--debug", "--sources", `[{"uri":"/f.json","provider":"file"}]`},
			env("FLAGD_PORT", "8013", "FLAGD_RESOLVER", "rpc", "OTHER", "x"), nil},
		{"not start", ref, []string{"--port", "8013"}, nil, []string{`the first argument must be the command start, got "--port"`}},
		{"unknown flag", ref, []string{"start", "--sync-provider-args", "a=b"}, nil,
			[]string{"flagd v0.16.0 has no --sync-provider-args (it was removed in v0.8.0)"}},
		{"a flag of a later release", ofo, []string{"start", "--keep-alive-min-time", "1s"}, nil,
			[]string{"flagd v0.15.4 has no --keep-alive-min-time (it came in v0.16.1)"}},
		{"no value", ref, []string{"start", "--port", "--debug"}, nil, []string{"--port has no value"}},
		{"not a long flag", ref, []string{"start", "-p", "8013"}, nil, []string{`argument "-p" is not a long flag`, `argument "8013" is not a long flag`}},
		{"sources not JSON", ref, []string{"start", "--sources", "file:/x"}, nil, []string{"--sources is not a JSON list of objects: invalid character 'i' in literal false (expecting 'a')"}},
		{"sources without uri", ref, []string{"start", "--sources", `[{"provider":"file"}]`}, nil, []string{"--sources[0] has no uri"}},
		{"bearerToken", ref, []string{"start", "--sources", `[{"uri":"https://x","provider":"http","bearerToken":"t"}]`}, nil,
			[]string{"--sources[0]: flagd v0.16.0 has no field bearerToken (it was removed in v0.13.0)"}},
		{"headers before v0.15.6", ofo, []string{"start", "--sources", `[{"uri":"s:8015","provider":"grpc","headers":{"a":"b"}}]`}, nil,
			[]string{"--sources[0]: flagd v0.15.4 has no field headers (it came in v0.15.6)"}},
		{"unknown provider", ref, []string{"start", "--sources", `[{"uri":"x","provider":"flagd-proxy"}]`}, nil,
			[]string{`--sources[0]: flagd v0.16.0 has no provider "flagd-proxy"`}},
		{"env disagrees", ref, []string{"start", "--port", "8013"}, env("FLAGD_PORT", "9000"), []string{"env FLAGD_PORT=9000 disagrees with --port 8013"}},
		{"env not read", ref, []string{"start"}, env("FLAGD_EVALUATOR", "json"), []string{"env FLAGD_EVALUATOR is not read by flagd v0.16.0"}},
		{"app-only env read by flagd", ref, []string{"start"}, env("FLAGD_PORT", "8013"), []string{"env FLAGD_PORT is meant for the app containers, but flagd v0.16.0 reads it as --port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			appOnly := []string{"FLAGD_RESOLVER"}
			if tc.name == "app-only env read by flagd" {
				appOnly = []string{"FLAGD_PORT"}
			}
			g.Expect(tc.facts.Check(tc.args, tc.env, appOnly...)).To(Equal(tc.want))
		})
	}
}
