package workflows

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/injection"
)

// FlagdVersionCondition is the FlagdVersionSupported condition of an
// object (what names it: "source", "Flagd") whose flagd is the release in,
// which goes without gaps. It is False when flagplane does not vouch for
// the release, or when the release cannot take a setting of the object.
func FlagdVersionCondition(what string, in flagdversion.Injected, gaps []injection.VersionGap, gen int64) metav1.Condition {
	c := metav1.Condition{Type: v1beta1.ConditionFlagdVersionSupported, ObservedGeneration: gen}
	switch {
	case !in.Vouched:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1beta1.ReasonUnsupportedFlagdVersion, in.Unvouched()
	case len(gaps) > 0:
		msgs := make([]string, len(gaps))
		for i, g := range gaps {
			msgs[i] = g.What + ": " + strings.TrimPrefix(g.Why, in.String()+" ")
		}
		c.Status, c.Reason = metav1.ConditionFalse, v1beta1.ReasonUnsupportedSettings
		c.Message = fmt.Sprintf("%s cannot take what this %s asks for, which its flagd goes without: %s", in, what, summarize(msgs, 5))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, v1beta1.ReasonSupportedFlagdVersion
		c.Message = fmt.Sprintf("%s is a release flagplane vouches for, and it takes everything this %s asks for", in, what)
		if unlike := in.Facts.Unlike(); len(unlike) > 0 {
			c.Message += fmt.Sprintf("; it evaluates %s otherwise than flagd %s (FeatureFlag admission warns of the flags concerned)",
				strings.Join(unlike, ", "), flagdversion.Reference)
		}
	}
	return c
}

// summarize joins at most max items, saying how many more there are.
func summarize(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:max], "; "), len(items)-max)
}
