package syncserver

import (
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// EmptyFlagSet is what the server serves for a flag set that does not exist
// (any more): flagd then answers FLAG_NOT_FOUND, as it would for a flag set
// without flags.
const EmptyFlagSet = `{"flags":{}}`

// served is what a flag set serves in a view: the flagd JSON document that
// the ConfigMaps of file-mode consumers hold too (workflows.RenderFlagSet), or
// EmptyFlagSet when it does not exist. ok is false when the flag set is
// invalid: the caller keeps serving its last valid content, as the
// ConfigMaps keep theirs.
func served(v *topology.View, flagSet topology.Key) (content string, exists, ok bool) {
	ff, found := v.FlagSet(flagSet)
	if !found {
		return EmptyFlagSet, false, true
	}
	if err := workflows.ValidateFlagSet(ff); err != nil {
		return "", true, false
	}
	content, err := workflows.RenderFlagSet(ff)
	if err != nil {
		return "", true, false
	}
	return content, true, true
}
