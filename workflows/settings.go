package workflows

import (
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
)

// Settings are the operator-wide inputs of the workflows, from the
// manager's flags; everything else comes from the graph. They are made once,
// at start, and passed explicitly: the reconcilers hold them, the pure
// functions take them as an argument. The zero value is the settings of an
// operator started without flags, but for the injection (see
// DefaultSettings).
type Settings struct {
	// FlagSets validates flag sets (--strict-validation); nil is a
	// non-strict validator without a cache.
	FlagSets *flagsets.Validator
	// Generated is the metadata of the objects flagplane generates: the
	// value of app.kubernetes.io/managed-by by which it knows them
	// (--managed-by), its --labels and --annotations.
	Generated GeneratedMetadata
	// Injection are the options the admission webhook injects with, which
	// the rollout fingerprint and the status of sources render with, so
	// that they follow exactly what the webhook would inject.
	Injection injection.Options
}

// DefaultSettings are the settings of an operator started without flags.
func DefaultSettings() Settings {
	return Settings{FlagSets: flagsets.NewValidator(false), Injection: injection.DefaultOptions()}
}
