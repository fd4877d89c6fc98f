// Package fleetstatus says where a FeatureFlag of a fleet hub stands on
// each member cluster, read from the status of the FeatureFlagPlacements
// that target it: per placement, the hub's revision and how many of its
// clusters are current, and per cluster its state, the revision its copy
// holds, how many of its pods confirm it, when the hub last heard from
// the member, and why it is not current. It is the text and JSON of
// `flagplane fleet status`.
package fleetstatus
