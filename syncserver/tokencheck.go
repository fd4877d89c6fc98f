package syncserver

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// DefaultMaxTokenBytes is the longest bearer token TokenReviews sends for
// review. A projected service-account token is 1 to 2 KiB.
const DefaultMaxTokenBytes = 8 << 10

// expiryLeeway is how long past its "exp" claim a token is still sent for
// review: the API server's clock may be behind ours. The pre-checks only
// refuse what the API server certainly refuses.
const expiryLeeway = time.Minute

// unverifiedToken is a JWT split and decoded, its signature not checked.
type unverifiedToken struct {
	header struct {
		Alg string `json:"alg"`
	}
	claims struct {
		Exp json.Number     `json:"exp"`
		Aud json.RawMessage `json:"aud"`
	}
}

// tokenCheck is one cheap test of a token before any TokenReview. Its
// verdict may only refuse a token (one the API server would refuse anyway),
// never accept one: the claims it reads are unverified.
type tokenCheck struct {
	name  string
	check func(tok *unverifiedToken, audience string, now time.Time) error
}

// tokenChecks run in order after parseUnverified; the first failure refuses.
var tokenChecks = []tokenCheck{
	{name: "signed", check: checkSigned},
	{name: "unexpired", check: checkUnexpired},
	{name: "audience", check: checkAudience},
}

// precheck refuses, without any request, a token that no TokenReview could
// accept: too long, not a JWT, expired, or for another audience. Claims that
// are absent are not held against a token; the review decides.
func precheck(token, audience string, maxBytes int, now time.Time) error {
	if len(token) > maxBytes {
		return fmt.Errorf("the token is longer than %d bytes", maxBytes)
	}
	tok, err := parseUnverified(token)
	if err != nil {
		return err
	}
	for _, c := range tokenChecks {
		if err := c.check(tok, audience, now); err != nil {
			return err
		}
	}
	return nil
}

// parseUnverified splits a compact JWT (header.payload.signature, each
// base64url) and decodes its header and claims as JSON objects.
func parseUnverified(token string) (*unverifiedToken, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] == "" {
		return nil, errors.New("the token is not a JWT (header.payload.signature)")
	}
	tok := &unverifiedToken{}
	for i, into := range []any{&tok.header, &tok.claims} {
		raw, err := decodeSegment(parts[i])
		if err != nil {
			return nil, errors.New("the token is not a JWT: a segment is not base64url")
		}
		// A JSON object, with claims of the types the API server reads.
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, into) != nil {
			return nil, errors.New("the token is not a JWT: its header or claims are not a valid JSON object")
		}
	}
	if _, err := decodeSegment(parts[2]); err != nil {
		return nil, errors.New("the token is not a JWT: its signature is not base64url")
	}
	return tok, nil
}

func decodeSegment(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// checkSigned refuses unsigned tokens, which the API server never accepts.
func checkSigned(tok *unverifiedToken, _ string, _ time.Time) error {
	if tok.header.Alg == "" || strings.EqualFold(tok.header.Alg, "none") {
		return errors.New("the token is not signed")
	}
	return nil
}

// checkUnexpired refuses a token whose "exp" claim is past by more than
// expiryLeeway.
func checkUnexpired(tok *unverifiedToken, _ string, now time.Time) error {
	exp := tok.expiry()
	if !exp.IsZero() && now.After(exp.Add(expiryLeeway)) {
		return fmt.Errorf("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkAudience refuses a token whose "aud" claim (a string or a list) does
// not name the audience.
func checkAudience(tok *unverifiedToken, audience string, _ time.Time) error {
	if len(tok.claims.Aud) == 0 || string(tok.claims.Aud) == "null" {
		return nil
	}
	var auds []string
	var one string
	if json.Unmarshal(tok.claims.Aud, &one) == nil {
		auds = []string{one}
	} else if json.Unmarshal(tok.claims.Aud, &auds) != nil {
		return errors.New(`the token's "aud" claim is neither a string nor a list of strings`)
	}
	if !slices.Contains(auds, audience) {
		return fmt.Errorf("the token is not issued for audience %q", audience)
	}
	return nil
}

// maxExp is the largest "exp" claim read (in some 30 million years): past
// it, seconds no longer fit time.Time's arithmetic.
const maxExp = 1e15

// expiry is the "exp" claim, zero when absent or not a positive number.
func (tok *unverifiedToken) expiry() time.Time {
	if tok.claims.Exp == "" {
		return time.Time{}
	}
	exp, err := tok.claims.Exp.Float64()
	if err != nil || exp <= 0 || exp > maxExp {
		return time.Time{}
	}
	sec, frac := math.Modf(exp)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// tokenExpiry reads the "exp" claim of a JWT, zero when the token is not a
// JWT or has none. The signature is not checked here: it is only called on
// a token the API server has just accepted, and only to learn when that
// acceptance ends.
func tokenExpiry(token string) time.Time {
	tok, err := parseUnverified(token)
	if err != nil {
		return time.Time{}
	}
	return tok.expiry()
}
