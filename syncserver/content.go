package syncserver

import (
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// EmptyFlagSet is what the server serves for a flag set that does not exist
// (any more): flagd then answers FLAG_NOT_FOUND, as it would for a flag set
// without flags.
const EmptyFlagSet = `{"flags":{}}`

// served is what a flag set serves in a view: the flagd JSON document that
// the ConfigMaps of file-mode consumers hold too (flagsets.Render), or
// EmptyFlagSet when it does not exist. ok is false when the flag set is
// invalid (by val): the caller keeps serving its last valid content, as the
// ConfigMaps keep theirs.
func served(v *topology.View, flagSet topology.Key, val *flagsets.Validator) (content string, exists, ok bool) {
	ff, found := v.FlagSet(flagSet)
	if !found {
		return EmptyFlagSet, false, true
	}
	content, ok = render(ff, val)
	return content, true, ok
}

// render renders and validates a FeatureFlag.
func render(ff *v1beta1.FeatureFlag, val *flagsets.Validator) (string, bool) {
	if err := val.Validate(ff); err != nil {
		return "", false
	}
	content, err := flagsets.Render(ff)
	if err != nil {
		return "", false
	}
	return content, true
}

// rendering remembers the rendering of one FeatureFlag object. Objects from
// the informer cache are never modified, so the same object renders the
// same: rounds that only serve newcomers (thousands of subscribers
// reconnecting after a restart) validate a flag set once, not once each.
type rendering struct {
	ff      *v1beta1.FeatureFlag
	content string
	valid   bool
}
