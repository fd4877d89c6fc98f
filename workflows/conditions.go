package workflows

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
