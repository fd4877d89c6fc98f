// Package flagsets decides whether a FeatureFlag's flag set can be served,
// and renders it as flagd reads it.
//
// It computes, from a flag set alone, its errors (what flagd cannot load or
// the OpenFeature Operator refuses) and its warnings (what flagd loads but
// is probably a mistake): flagplane's semantic rules first, then flagd's own
// JSON schema (flagd-schemas, embedded). ValidateFlagSpec is the pure
// function; a Validator adds the operator-wide strictness (warnings as
// errors) and remembers verdicts by content. Render is the flagd JSON
// document of a flag set, the one content of its generated ConfigMaps and of
// the sync server, and Revision its content hash.
//
// It applies nothing: the admission webhook refuses what it finds, the
// topology marks flag sets valid or not (Validator.TopologyOptions), the
// ConfigMap workflow and the sync server keep the last valid content of an
// invalid flag set, and the status workflow reports the findings. The
// Validator is made once, at start, and passed to each of them; the package
// has no process-wide state but the compiled schemas, which never change.
package flagsets
