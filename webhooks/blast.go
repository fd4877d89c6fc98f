package webhooks

import (
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/blast"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The blast radius of a change: the FeatureFlag and FeatureFlagSource
// webhooks answer every create and update (a server-side dry run too) with
// a warning that says what the change reaches, computed from the graph with
// the object as it would be stored (package blast), and without an API
// call. kubectl prints it.

// flagSetBlast is the warning for a FeatureFlag, as it would be stored.
func flagSetBlast(v *topology.View, ff *v1beta1.FeatureFlag, served *topology.Rendered) (string, error) {
	r, err := blast.OfFlagSet(v, ff, served)
	if err != nil {
		return "", err
	}
	return r.Summary(), nil
}

// sourceBlast is the warning for a FeatureFlagSource, as it would be stored.
func sourceBlast(v *topology.View, src *v1beta1.FeatureFlagSource, opts injection.Options) (string, error) {
	r, err := blast.OfSource(v, src, opts)
	if err != nil {
		return "", err
	}
	return r.Summary(), nil
}
