package webhooks

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/workflows"
)

// The bounds of an answer: a flag set of 20,000 broken flags, or of a
// variant of 300 KiB quoted in its error, is refused in a page, not in
// megabytes (which also took seconds to join).
const (
	maxCauses                       = 20
	maxFieldBytes, maxValueBytes    = 256, 120
	maxDetailBytes, maxWarningBytes = 512, 1024
)

// readableErrors keeps the first maxCauses errors, each with its field,
// value and reason shortened and the characters a terminal acts on
// escaped (keys and names are the user's: a NUL, an RTL override), and
// counts the others.
func readableErrors(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, 0, min(len(errs), maxCauses)+1)
	for _, e := range errs[:min(len(errs), maxCauses)] {
		out = append(out, readableError(e))
	}
	if more := len(errs) - len(out); more > 0 {
		out = append(out, &field.Error{Type: field.ErrorTypeTooMany, Field: "spec", BadValue: len(errs),
			Detail: fmt.Sprintf("%d errors in all, the first %d above", len(errs), len(out))})
	}
	return out
}

// readableError is e with its field, value and reason shortened and the
// characters a terminal acts on escaped: the value is shortened before it
// is printed, so that the reason after it is not cut off.
func readableError(e *field.Error) *field.Error {
	c := *e
	c.Field, c.Detail = printable(c.Field, maxFieldBytes), printable(c.Detail, maxDetailBytes)
	// Any kind of string (a selector's operator is one of its own type).
	if v := reflect.ValueOf(c.BadValue); v.IsValid() && v.Kind() == reflect.String {
		c.BadValue = workflows.Cut(v.String(), maxValueBytes) // quoted when printed
	}
	return &c
}

// readableWarnings escapes and shortens each warning as readableErrors
// does an error; the handlers cap each list of them (capWarnings).
func readableWarnings(warnings []string) []string {
	out := make([]string, len(warnings))
	for i, w := range warnings {
		out[i] = printable(w, maxWarningBytes)
	}
	return out
}

// printable escapes what a terminal would act on rather than show
// (control and format characters: a NUL, an escape, an RTL mark; invalid
// UTF-8), as Go quotes them, and shortens the result to max bytes.
func printable(s string, max int) string {
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				fmt.Fprintf(&b, "\\x%02x", s[i])
				continue
			}
		}
		switch {
		case unicode.IsPrint(r) || r == ' ':
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			fmt.Fprintf(&b, "\\U%08x", r)
		}
	}
	return workflows.Cut(b.String(), max)
}
