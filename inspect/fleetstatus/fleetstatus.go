package fleetstatus

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

// Report is where a FeatureFlag of the hub stands on the fleet: what the
// status of each placement that targets it says. It is also what -o json
// writes, with full revisions.
type Report struct {
	// Namespace and FlagSet name the hub's FeatureFlag.
	Namespace string `json:"namespace"`
	FlagSet   string `json:"flagSet"`
	// Placements target it, by name.
	Placements []Placement `json:"placements"`
	// Rollouts are the policies that stage its edits cluster by cluster.
	Rollouts []Rollout `json:"rollouts,omitempty"`
}

// Rollout is where a fleet rollout of the FeatureFlag stands.
type Rollout struct {
	Name    string                        `json:"name"`
	Phase   deliveryv1alpha1.RolloutPhase `json:"phase,omitempty"`
	Step    int32                         `json:"step"`
	Steps   int                           `json:"steps"`
	Stable  string                        `json:"stableRevision,omitempty"`
	Target  string                        `json:"targetRevision,omitempty"`
	Message string                        `json:"message,omitempty"`
}

// Rollouts are the fleet rollouts among policies that target flagSet: the
// policies whose steps select clusters.
func Rollouts(flagSet string, policies []deliveryv1alpha1.FeatureFlagRolloutPolicy) []Rollout {
	var out []Rollout
	for _, p := range policies {
		if p.Spec.TargetRef.Name != flagSet || len(p.Spec.Steps) == 0 || p.Spec.Steps[0].ClusterSelector == nil {
			continue
		}
		out = append(out, Rollout{Name: p.Name, Phase: p.Status.Phase, Step: p.Status.Step, Steps: len(p.Spec.Steps),
			Stable: p.Status.StableRevision, Target: p.Status.TargetRevision, Message: p.Status.Message})
	}
	slices.SortFunc(out, func(a, b Rollout) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Placement is one FeatureFlagPlacement's status.
type Placement struct {
	Name string `json:"name"`
	// Revision is the hub's FeatureFlag's revision, what Current means.
	Revision string `json:"revision,omitempty"`
	// Current is "<current>/<selected>" over the selected clusters.
	Current string `json:"current,omitempty"`
	// Stale says the status is of an older generation of the placement
	// than its spec: the hub has not reconciled the latest one yet.
	Stale bool `json:"stale,omitempty"`
	// Conditions are Accepted and Ready.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Clusters are the selected clusters, in the status's order (those
	// not Current first).
	Clusters []fleetv1alpha1.ClusterPlacementStatus `json:"clusters"`
}

// New is the report of the FeatureFlag namespace/flagSet from the
// placements of its namespace; those that target another are left out.
func New(namespace, flagSet string, placements []fleetv1alpha1.FeatureFlagPlacement) Report {
	r := Report{Namespace: namespace, FlagSet: flagSet, Placements: []Placement{}}
	for _, p := range placements {
		if p.Namespace != namespace || p.Spec.TargetRef.Name != flagSet {
			continue
		}
		st := p.Status
		clusters := slices.Clone(st.Clusters)
		if clusters == nil {
			clusters = []fleetv1alpha1.ClusterPlacementStatus{}
		}
		r.Placements = append(r.Placements, Placement{Name: p.Name, Revision: st.Revision, Current: st.Current,
			Stale: st.ObservedGeneration < p.Generation, Conditions: st.Conditions, Clusters: clusters})
	}
	slices.SortFunc(r.Placements, func(a, b Placement) int { return cmp.Compare(a.Name, b.Name) })
	return r
}

// Write writes the report as text; now dates LAST HEARD.
func Write(out io.Writer, r Report, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "FeatureFlag %s/%s on the fleet", r.Namespace, r.FlagSet)
	if len(r.Placements) == 0 {
		b.WriteString(": no FeatureFlagPlacement targets it\n")
	} else {
		b.WriteString("\n")
	}
	for _, ro := range r.Rollouts {
		step := fmt.Sprintf("step %d of %d", min(int(ro.Step)+1, ro.Steps), ro.Steps)
		fmt.Fprintf(&b, "\nRollout %s: %s, %s, stable %s, target %s\n%s\n", ro.Name, orDash(string(ro.Phase)), step,
			orDash(topology.ShortRevision(ro.Stable)), orDash(topology.ShortRevision(ro.Target)), oneLine(ro.Message))
	}
	for _, p := range r.Placements {
		writePlacement(&b, p, now)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func writePlacement(b *strings.Builder, p Placement, now time.Time) {
	if p.Revision == "" && p.Current == "" && len(p.Conditions) == 0 {
		fmt.Fprintf(b, "\nFeatureFlagPlacement %s: no status yet (does a fleet hub run?)\n", p.Name)
		return
	}
	fmt.Fprintf(b, "\nFeatureFlagPlacement %s: hub revision %s, %s current\n", p.Name, orDash(topology.ShortRevision(p.Revision)), orDash(p.Current))
	if p.Stale {
		b.WriteString("The hub has not reconciled the placement's latest spec yet.\n")
	}
	for _, c := range p.Conditions {
		if c.Status == metav1.ConditionTrue {
			continue
		}
		what := "Not accepted"
		if c.Type != "Accepted" {
			what = "Not " + strings.ToLower(c.Type)
		}
		fmt.Fprintf(b, "%s (%s): %s\n", what, c.Reason, oneLine(c.Message))
	}
	if len(p.Clusters) == 0 {
		b.WriteString("No cluster is selected.\n")
		return
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tSTATE\tPLANNED\tREVISION\tCONFIRMED\tLAST HEARD\tMESSAGE")
	for _, c := range p.Clusters {
		heard := "-"
		if c.LastHeard != nil {
			heard = duration.HumanDuration(now.Sub(c.LastHeard.Time))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Cluster, c.State, orDash(topology.ShortRevision(c.Planned)),
			orDash(topology.ShortRevision(c.Revision)),
			orDash(c.Confirmed), heard, oneLine(c.Message))
	}
	_ = tw.Flush() // into a strings.Builder: never fails
	// A row without a message ends in its padding: cut it.
	for line := range strings.Lines(table.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteString("\n")
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a message on its row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
