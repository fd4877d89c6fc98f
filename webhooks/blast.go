package webhooks

import (
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/blast"
)

// The blast radius of a change: the FeatureFlag and FeatureFlagSource
// webhooks answer every create and update (a server-side dry run too) with
// a warning that says what the change reaches, computed from the graph with
// the object as it would be stored (package blast: blast.OfFlagSet,
// blast.OfSource), and without an API call. kubectl prints it. What it
// reaches also decides whether a flag set too large for a delivery mode is
// refused or only warned about (sizes.go).

// reach is what ff, stored, would reach, or nil while the graph is not
// built (or cannot take the object). served, when set, is what ff serves,
// from the validation this admission did: the graph does not validate it
// again.
func (v *FlagSetValidator) reach(ff *v1beta1.FeatureFlag, served *topology.Rendered) *blast.FlagSet {
	if v.Graph == nil || !v.Graph.GraphBuilt() {
		return nil
	}
	r, err := blast.OfFlagSet(v.Graph.Topology().Snapshot(), ff, served)
	if err != nil {
		return nil
	}
	return r
}

// summary is the blast-radius warning of what reach found, if anything.
func summary(r *blast.FlagSet) []string {
	if r == nil {
		return nil
	}
	return []string{r.Summary()}
}
