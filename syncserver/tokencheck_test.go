package syncserver

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestPrecheck(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Unix(10_000, 0)
	for _, tc := range []struct {
		name  string
		token string
		err   string // empty: passed on to the review
	}{
		{name: "no claims that could refuse it", token: jwt(`{"sub":"x"}`)},
		{name: "audience as a string", token: jwt(`{"aud":"flagplane","exp":20000}`)},
		{name: "audience among a list", token: jwt(`{"aud":["other","flagplane"]}`)},
		{name: "null audience", token: jwt(`{"aud":null}`)},
		{name: "expired within the leeway", token: jwt(`{"exp":9950}`)},
		{name: "exp that is not positive is the review's business", token: jwt(`{"exp":-1}`)},
		{name: "padded segments", token: jwt(`{"sub":"x"}`) + "=="},
		{name: "a kubernetes-like token", token: enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." +
			enc([]byte(`{"aud":["flagplane"],"exp":10600,"iat":10000,"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:shop:web"}`)) + "." + enc(make([]byte, 256))},

		{name: "too long", token: jwt(`{"sub":"` + strings.Repeat("x", 1100) + `"}`), err: "longer than 1024 bytes"},
		{name: "empty", token: "", err: "not a JWT"},
		{name: "opaque", token: "s3cr3t", err: "not a JWT"},
		{name: "two segments", token: "a.b", err: "not a JWT"},
		{name: "four segments", token: jwt(`{}`) + ".x", err: "not a JWT"},
		{name: "no signature", token: strings.TrimSuffix(jwt(`{}`), "c2ln"), err: "not a JWT"},
		{name: "header not base64url", token: "!!." + enc([]byte(`{}`)) + ".c2ln", err: "not base64url"},
		{name: "signature not base64url", token: strings.TrimSuffix(jwt(`{}`), "c2ln") + "+/", err: "signature is not base64url"},
		{name: "header not JSON", token: enc([]byte("RS256")) + "." + enc([]byte(`{}`)) + ".c2ln", err: "not a valid JSON object"},
		{name: "claims a list", token: jwt(`[1]`), err: "not a valid JSON object"},
		{name: "claims null", token: jwt(`null`), err: "not a valid JSON object"},
		{name: "exp of the wrong type", token: jwt(`{"exp":true}`), err: "not a valid JSON object"},
		{name: "unsigned", token: enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{}`)) + ".c2ln", err: "not signed"},
		{name: "no alg", token: enc([]byte(`{"typ":"JWT"}`)) + "." + enc([]byte(`{}`)) + ".c2ln", err: "not signed"},
		{name: "expired", token: jwt(`{"exp":9000}`), err: "expired at"},
		{name: "other audience", token: jwt(`{"aud":"https://kubernetes.default.svc"}`), err: `not issued for audience "flagplane"`},
		{name: "other audiences", token: jwt(`{"aud":["a","b"]}`), err: `not issued for audience "flagplane"`},
		{name: "empty audience list", token: jwt(`{"aud":[]}`), err: `not issued for audience "flagplane"`},
		{name: "audience a number", token: jwt(`{"aud":5}`), err: "neither a string nor a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := precheck(tc.token, "flagplane", 1024, now)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}

// Each check of the chain refuses what it is for, and nothing else.
func TestTokenChecks(t *testing.T) {
	now := time.Unix(10_000, 0)
	parse := func(claims string) *unverifiedToken {
		tok, err := parseUnverified(jwt(claims))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := parse(`{"aud":"flagplane","exp":10001}`)
	for _, c := range tokenChecks {
		if err := c.check(good, "flagplane", now); err != nil {
			t.Errorf("%s refused a good token: %v", c.name, err)
		}
	}
	unsigned, err := parseUnverified(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + ".e30.c2ln")
	if err != nil {
		t.Fatal(err)
	}
	for name, refused := range map[string]*unverifiedToken{
		"signed":    unsigned,
		"unexpired": parse(`{"exp":1}`),
		"audience":  parse(`{"aud":"other"}`),
	} {
		for _, c := range tokenChecks {
			if err := c.check(refused, "flagplane", now); (err != nil) != (c.name == name) {
				t.Errorf("check %s on the token made for %s: %v", c.name, name, err)
			}
		}
	}
}

func FuzzPrecheck(f *testing.F) {
	for _, s := range []string{"", "a.b.c", jwt(`{"aud":"flagplane","exp":1e99}`), jwt(`{"exp":1.5}`), jwt(`{"aud":[1,2]}`), "..", "x.e30.", "e30.e30.e30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		err := precheck(token, "flagplane", DefaultMaxTokenBytes, time.Unix(10_000, 0))
		// Whatever passes is at least shaped like a JWT.
		if err == nil && strings.Count(token, ".") != 2 {
			t.Errorf("precheck passed %q", token)
		}
		_ = tokenExpiry(token)
	})
}
