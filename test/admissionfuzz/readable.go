package admissionfuzz

import (
	"errors"
	"fmt"
	"net/http"
	"unicode"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The bounds of an answer a user can read. kubectl prints a refusal's
// message and every warning whole; the API server passes a webhook's
// refusal on as it is, and keeps only the first 4 KiB of its warnings.
const (
	// MaxMessageBytes bounds a refusal's message.
	MaxMessageBytes = 32 << 10
	// MaxWarnings bounds the warnings of one answer.
	MaxWarnings = 64
	// MaxWarningBytes bounds one warning.
	MaxWarningBytes = 4 << 10
)

// Readable tells why s is not a message a user can read: it is empty,
// longer than max bytes, not UTF-8, or holds a control character (a NUL, a
// newline, an escape) or a bidirectional formatting character (an RTL
// mark, an override), which a terminal acts on rather than shows: those a
// message names, it escapes.
func Readable(s string, max int) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > max:
		return fmt.Errorf("%d bytes, more than %d, starting %.200q", len(s), max, s)
	case !utf8.ValidString(s):
		return fmt.Errorf("not UTF-8: %.300q", s)
	}
	for i, r := range s {
		if unicode.IsControl(r) || bidiControl(r) {
			return fmt.Errorf("holds %U at byte %d: %.300q", r, i, s)
		}
	}
	return nil
}

// bidiControl tells whether r is one of Unicode's bidirectional formatting
// characters (UAX #9: the marks, embeddings, overrides and isolates).
func bidiControl(r rune) bool {
	return r == '\u061c' || r == '\u200e' || r == '\u200f' ||
		(r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

// Response tells why a webhook's answer is not a clear one. A refusal
// carries a readable message within MaxMessageBytes; a refusal for
// invalid content (422) names, in each of its causes, a field and why; a
// request that cannot be decoded is a 400. Warnings are at most
// MaxWarnings, each readable within MaxWarningBytes. An allowed answer's
// message, when it has one, is readable too.
func Response(resp admissionv1.AdmissionResponse) error {
	if err := Warnings(resp.Warnings); err != nil {
		return err
	}
	if resp.Allowed {
		if resp.Result != nil && resp.Result.Message != "" {
			if err := Readable(resp.Result.Message, MaxMessageBytes); err != nil {
				return fmt.Errorf("the message of an allowed answer: %w", err)
			}
		}
		return nil
	}
	if resp.Result == nil {
		return errors.New("a refusal without a status")
	}
	if err := Readable(resp.Result.Message, MaxMessageBytes); err != nil {
		return fmt.Errorf("the message of a refusal: %w", err)
	}
	switch resp.Result.Code {
	case http.StatusBadRequest, http.StatusTooManyRequests:
		return nil
	case http.StatusUnprocessableEntity:
	default:
		return fmt.Errorf("a refusal with code %d, want 400 (undecodable), 422 (invalid) or 429 (busy): %s", resp.Result.Code, resp.Result.Message)
	}
	if resp.Result.Details == nil || len(resp.Result.Details.Causes) == 0 {
		return fmt.Errorf("an Invalid refusal without causes: %s", resp.Result.Message)
	}
	for _, c := range resp.Result.Details.Causes {
		if c.Field == "" || c.Message == "" {
			return fmt.Errorf("a cause without a field or a reason (%+v) in: %.300s", c, resp.Result.Message)
		}
	}
	return nil
}

// Warnings tells why a list of warnings is not a readable one.
func Warnings(warnings []string) error {
	if len(warnings) > MaxWarnings {
		return fmt.Errorf("%d warnings, more than %d; the first: %.200q", len(warnings), MaxWarnings, warnings[0])
	}
	for i, w := range warnings {
		if err := Readable(w, MaxWarningBytes); err != nil {
			return fmt.Errorf("warning %d: %w", i, err)
		}
	}
	return nil
}

// FieldErrors tells why the errors the API server found in an object do
// not each name a field and a reason.
func FieldErrors(errs field.ErrorList) error {
	for _, e := range errs {
		if e.Field == "" || e.ErrorBody() == "" {
			return fmt.Errorf("an error without a field or a reason: %#v", e)
		}
	}
	return nil
}
