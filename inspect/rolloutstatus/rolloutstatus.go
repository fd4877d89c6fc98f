package rolloutstatus

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// Write writes p's rollout as text; now dates the current step's start.
// pods are what the pods of each namespace serve, from the FeatureFlag's
// status (status.serving; nil when not known): how many serve the
// revision planned for them, as their flagd answers.
func Write(out io.Writer, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, pods []v1beta1.NamespaceServing, now time.Time) error {
	st := p.Status
	var b strings.Builder
	fmt.Fprintf(&b, "FeatureFlagRolloutPolicy %s/%s stages FeatureFlag %s\n", p.Namespace, p.Name, p.Spec.TargetRef.Name)
	fmt.Fprintf(&b, "Phase:    %s\n", PhaseText(st.Phase))
	step := fmt.Sprintf("%d of %d", min(int(st.Step)+1, len(p.Spec.Steps)), len(p.Spec.Steps))
	if st.Phase == deliveryv1alpha1.PhaseCompleted {
		step = "all done"
	}
	fmt.Fprintf(&b, "Step:     %s\n", step)
	fmt.Fprintf(&b, "Stable:   %s\nTarget:   %s", topology.ShortRevision(st.StableRevision), topology.ShortRevision(st.TargetRevision))
	if st.Rollout > 0 {
		fmt.Fprintf(&b, " (rollout %d)", st.Rollout)
	}
	b.WriteString("\n")
	if st.StepStartedAt != nil {
		fmt.Fprintf(&b, "Started:  %s ago\n", now.Sub(st.StepStartedAt.Time).Round(time.Second))
	}
	if st.Message != "" {
		fmt.Fprintf(&b, "Message:  %s\n", st.Message)
	}
	for _, c := range st.Conditions {
		if c.Type == deliveryv1alpha1.ConditionAccepted && c.Status != metav1.ConditionTrue {
			fmt.Fprintf(&b, "Not accepted (%s): %s\n", c.Reason, c.Message)
		}
	}
	if len(st.Steps) > 0 {
		fmt.Fprintln(&b)
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		byNs := map[string]v1beta1.NamespaceServing{}
		for _, ns := range pods {
			byNs[ns.Namespace] = ns
		}
		fmt.Fprintln(tw, "STEP\tNAMESPACE\tWORKLOADS\tPLANNED\tSERVING\tPODS")
		for _, s := range st.Steps {
			for _, c := range s.Consumers {
				serving := topology.ShortRevision(c.Serving)
				if serving == "" {
					serving = "-"
				}
				confirmed := "-"
				if ns, ok := byNs[c.Namespace]; ok && ns.Pods > 0 {
					confirmed = fmt.Sprintf("%d/%d on %s", ns.Confirmed, ns.Pods, topology.ShortRevision(ns.Revision))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.Name, c.Namespace, c.Workloads, topology.ShortRevision(c.Planned), serving, confirmed)
			}
			if s.More > 0 {
				fmt.Fprintf(tw, "%s\t(%d more)\t\t\t\t\n", s.Name, s.More)
			}
		}
		_ = tw.Flush() // into a strings.Builder: never fails
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// PhaseText is a phase in lower case, "not started" before the first.
func PhaseText(p deliveryv1alpha1.RolloutPhase) string {
	if p == "" {
		return "not started"
	}
	return strings.ToLower(string(p))
}
