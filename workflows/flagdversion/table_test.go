package flagdversion_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/workflows/flagdversion"
)

var update = flag.Bool("update", false, "rewrite testdata/releases.txt")

// TestReleasesGolden: testdata/releases.txt is the table, written out: the
// facts of the oldest vouched release, then what every later one changes
// (go test ./workflows/flagdversion -run TestReleasesGolden -update).
func TestReleasesGolden(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	var prev *flagdversion.Facts
	for _, v := range flagdversion.Vouched() {
		f, ok := flagdversion.For(v)
		g.Expect(ok).To(BeTrue())
		fmt.Fprintf(&b, "%s\n", v)
		if prev == nil {
			fmt.Fprintf(&b, "  flags: %s\n  env: %s\n  sources fields: %s\n  providers: %s\n  semantics: %+v\n",
				strings.Join(f.Flags(), " "), strings.Join(f.Env(), " "), strings.Join(f.SourceFields(), " "),
				strings.Join(f.Providers(), " "), f.Semantics)
			prev = f
			continue
		}
		for _, c := range []struct {
			name       string
			before, at []string
		}{
			{"flags", prev.Flags(), f.Flags()},
			{"env", prev.Env(), f.Env()},
			{"sources fields", prev.SourceFields(), f.SourceFields()},
			{"providers", prev.Providers(), f.Providers()},
		} {
			if added := minus(c.at, c.before); len(added) > 0 {
				fmt.Fprintf(&b, "  + %s: %s\n", c.name, strings.Join(added, " "))
			}
			if removed := minus(c.before, c.at); len(removed) > 0 {
				fmt.Fprintf(&b, "  - %s: %s\n", c.name, strings.Join(removed, " "))
			}
		}
		if f.Semantics != prev.Semantics {
			fmt.Fprintf(&b, "  semantics: %+v\n", f.Semantics)
		}
		prev = f
	}
	got := b.String()
	path := filepath.Join("testdata", "releases.txt")
	if *update {
		g.Expect(os.WriteFile(path, []byte(got), 0o644)).To(Succeed())
	}
	want, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred(), "go test ./workflows/flagdversion -run TestReleasesGolden -update")
	g.Expect(got).To(Equal(string(want)))
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestFacts: the facts the issue names, at the releases it names.
func TestFacts(t *testing.T) {
	g := NewWithT(t)
	get := func(v flagdversion.Version) *flagdversion.Facts {
		f, ok := flagdversion.For(v)
		g.Expect(ok).To(BeTrue(), "%s is vouched", v)
		return f
	}
	ofo, ref := get(flagdversion.V(0, 15, 4)), get(flagdversion.Reference)

	// bearerToken: gone at v0.13.0, authHeader everywhere.
	g.Expect(get(flagdversion.V(0, 12, 9)).HasSourceField("bearerToken")).To(BeTrue())
	for _, f := range []*flagdversion.Facts{get(flagdversion.V(0, 13, 0)), ofo, ref} {
		g.Expect(f.HasSourceField("bearerToken")).To(BeFalse(), "%s", f.Version)
	}
	for _, v := range flagdversion.Vouched() {
		g.Expect(get(v).HasSourceField("authHeader")).To(BeTrue(), "%s", v)
		// --sync-provider-args left flagd at v0.8.0.
		g.Expect(get(v).HasFlag("sync-provider-args")).To(BeFalse(), "%s", v)
	}
	g.Expect(flagdversion.FlagChange("sync-provider-args")).To(Equal("it was removed in v0.8.0"))
	// headers: v0.15.6.
	g.Expect(ofo.HasSourceField("headers")).To(BeFalse())
	g.Expect(get(flagdversion.V(0, 15, 6)).HasSourceField("headers")).To(BeTrue())
	g.Expect(ref.HasSourceField("headers")).To(BeTrue())
	// The context flags.
	g.Expect(get(flagdversion.V(0, 11, 4)).HasFlag("context-value")).To(BeFalse())
	g.Expect(get(flagdversion.V(0, 11, 5)).HasFlag("context-value")).To(BeTrue())
	g.Expect(get(flagdversion.V(0, 12, 4)).HasFlag("context-from-header")).To(BeFalse())
	g.Expect(get(flagdversion.V(0, 12, 5)).HasFlag("context-from-header")).To(BeTrue())
	// Env: bound flags only.
	flag, ok := ref.EnvFlag("FLAGD_MANAGEMENT_PORT")
	g.Expect(ok).To(BeTrue())
	g.Expect(flag).To(Equal("management-port"))
	_, ok = ref.EnvFlag("FLAGD_OTEL_RELOAD_INTERVAL")
	g.Expect(ok).To(BeFalse(), "never bound")
	for _, appOnly := range []string{"FLAGD_RESOLVER", "FLAGD_EVALUATOR", "FLAGD_HOST"} {
		_, ok = ofo.EnvFlag(appOnly)
		g.Expect(ok).To(BeFalse(), appOnly)
	}
	// Providers.
	g.Expect(get(flagdversion.V(0, 10, 3)).Providers()).To(Equal([]string{"file", "grpc", "http", "kubernetes"}))
	g.Expect(get(flagdversion.V(0, 11, 4)).HasProvider("s3")).To(BeFalse())
	g.Expect(get(flagdversion.V(0, 11, 5)).HasProvider("s3")).To(BeTrue())
	// Semantics.
	g.Expect(ofo.Semantics.Disabled).To(Equal(flagdversion.DisabledNotFound))
	g.Expect(ref.Semantics.Disabled).To(Equal(flagdversion.DisabledReason))
	g.Expect(ofo.Semantics.NoDefaultVariant).To(Equal(ref.Semantics.NoDefaultVariant))
	g.Expect(get(flagdversion.V(0, 13, 3)).Semantics.NoDefaultVariant).To(Equal(flagdversion.NoDefaultNotFound))
	g.Expect(get(flagdversion.V(0, 12, 5)).Semantics.NoDefaultVariant).To(Equal(flagdversion.NoDefaultRefused))
	g.Expect(ofo.Semantics.Fractional.Bucketing).To(Equal(ref.Semantics.Fractional.Bucketing))
	g.Expect(get(flagdversion.V(0, 14, 5)).Semantics.Fractional.Bucketing).To(Equal(flagdversion.BucketingPercent))
	g.Expect(ofo.Semantics.Fractional.EmptyTargetingKeyDefault).To(BeFalse())
	g.Expect(ref.Semantics.Fractional.EmptyTargetingKeyDefault).To(BeTrue())
}

// TestResolve: a vouched release is known; anything else is not, and is
// written for as the Reference.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		tag     string
		vouched bool
		version flagdversion.Version
		name    string
	}{
		{"v0.16.0", true, flagdversion.V(0, 16, 0), "flagd v0.16.0 (--sidecar-tag)"},
		{"0.15.4", true, flagdversion.V(0, 15, 4), "flagd v0.15.4 (--sidecar-tag)"},
		{"v0.15.4@sha256:0123456789abcdef", true, flagdversion.V(0, 15, 4), "flagd v0.15.4 (--sidecar-tag)"},
		{"v0.10.0", true, flagdversion.V(0, 10, 0), "flagd v0.10.0 (--sidecar-tag)"},
		{"v0.9.2", false, flagdversion.Reference, "flagd v0.9.2 (--sidecar-tag)"},
		{"v0.18.0", false, flagdversion.Reference, "flagd v0.18.0 (--sidecar-tag)"},
		{"v0.15.9", false, flagdversion.Reference, "flagd v0.15.9 (--sidecar-tag)"},
		{"latest", false, flagdversion.Reference, "flagd latest (--sidecar-tag)"},
		{"v0.16.0-rc.1", false, flagdversion.Reference, "flagd v0.16.0-rc.1 (--sidecar-tag)"},
		{"sha256:0123456789abcdef", false, flagdversion.Reference, "flagd sha256:0123456789abcdef (--sidecar-tag)"},
		{"v0.016.0", false, flagdversion.Reference, "flagd v0.016.0 (--sidecar-tag)"},
		{"", false, flagdversion.Reference, `flagd "" (--sidecar-tag)`},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			g := NewWithT(t)
			in := flagdversion.Resolve("--sidecar-tag", tc.tag)
			g.Expect(in.Vouched).To(Equal(tc.vouched))
			g.Expect(in.Facts.Version).To(Equal(tc.version))
			g.Expect(in.String()).To(Equal(tc.name))
			if tc.vouched {
				g.Expect(in.Unvouched()).To(BeEmpty())
			} else {
				g.Expect(in.Unvouched()).To(And(ContainSubstring(tc.name), ContainSubstring("from v0.10.0 to v0.16.1"),
					ContainSubstring("writes the arguments, env vars and --sources of flagd v0.16.0")))
			}
		})
	}
}

func TestDistinct(t *testing.T) {
	g := NewWithT(t)
	got := flagdversion.Distinct(
		flagdversion.Resolve("--sidecar-tag", "v0.15.4"),
		flagdversion.Resolve("--flagd-tag", "0.15.4"),
		flagdversion.Resolve("--flagd-tag", "latest"),
		flagdversion.Resolve("--other", "latest"),
	)
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].String()).To(Equal("flagd v0.15.4 (--sidecar-tag, --flagd-tag)"))
	g.Expect(got[1].String()).To(Equal("flagd latest (--flagd-tag, --other)"))
}

// TestReferenceIsVouched: the default is among the vouched releases.
func TestReferenceIsVouched(t *testing.T) {
	g := NewWithT(t)
	g.Expect(flagdversion.Vouched()).To(ContainElement(flagdversion.Reference))
	g.Expect(slices.IsSortedFunc(flagdversion.Vouched(), flagdversion.Version.Compare)).To(BeTrue())
}
