package workflows

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TurnedFalse returns the condition of type t in desired when it is False and
// was not False (or had another message) before: an Event goes out on the
// transition, not on every reconcile.
func TurnedFalse(before, desired []metav1.Condition, t string) *metav1.Condition {
	now := meta.FindStatusCondition(desired, t)
	if now == nil || now.Status != metav1.ConditionFalse {
		return nil
	}
	if was := meta.FindStatusCondition(before, t); was != nil && was.Status == metav1.ConditionFalse && was.Message == now.Message {
		return nil
	}
	return now
}

// WaitingFor is the message of a condition that waits for items: at most
// max of them, and how many more there are.
func WaitingFor(items []string, max int) string {
	if len(items) <= max {
		return "waiting for " + strings.Join(items, "; ")
	}
	return fmt.Sprintf("waiting for %s; and %d more", strings.Join(items[:max], "; "), len(items)-max)
}

// maxInvalid bounds the errors the message of an invalid object names, and
// maxInvalidBytes each of them: a condition's message holds at most 32768
// characters, and joining many thousands of errors, as an aggregate does,
// costs seconds (a Flagd of 20,000 invalid labels took minutes).
const maxInvalid, maxInvalidBytes = 10, 512

// InvalidMessage is the message of a condition that says why an object is
// invalid: its first maxInvalid distinct errors, each cut to
// maxInvalidBytes, and how many more errors there are, in an aggregate's
// words. The others are counted, not printed: their values may be large.
func InvalidMessage(errs field.ErrorList) string {
	var msgs []string
	seen := map[string]bool{}
	more := 0
	for i, e := range errs {
		if len(msgs) == maxInvalid {
			more = len(errs) - i
			break
		}
		msg := e.Error()
		if seen[msg] {
			continue
		}
		seen[msg] = true
		msgs = append(msgs, Cut(msg, maxInvalidBytes))
	}
	switch {
	case len(msgs) == 0:
		return ""
	case len(msgs) == 1:
		return msgs[0]
	case more > 0:
		return fmt.Sprintf("[%s, and %d more]", strings.Join(msgs, ", "), more)
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// Cut shortens s to at most max bytes and "...", at a rune boundary: a
// message that quotes what a user wrote (a name, a reference) stays a
// message.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return prefixOf(s, max) + "..."
}

// prefixOf is the longest prefix of s of at most n bytes that ends at a
// rune boundary.
func prefixOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
