// Package flagsets decides whether a FeatureFlag's flag set can be served,
// and renders it as flagd reads it.
//
// It computes, from a flag set alone, its errors (what flagd cannot load or
// the OpenFeature Operator refuses) and its warnings (what flagd loads but
// is probably a mistake): flagplane's semantic rules first, then flagd's own
// JSON schema (flagd-schemas, embedded). ValidateFlagSpec is the pure
// function; a Validator adds the operator-wide strictness (warnings as
// errors). Render is the flagd JSON document of a flag set, the one content
// of its generated ConfigMaps and of the sync server, and Revision its
// content hash.
//
// It applies nothing. The topology renders, validates and hashes each edit
// of a flag set once, with Validator.Rendering (Validator.TopologyOptions),
// and keeps the result (topology.Rendered) with the object: the ConfigMap
// workflow and the sync server read its content and keep the last valid
// content of an invalid flag set, the status workflow reports its revision
// and findings, explain shows them. The admission webhook refuses what
// ValidateFlagSpec finds. The Validator is made once, at start; the package
// has no process-wide state but the compiled schemas, which never change.
package flagsets
