// Package blast computes what a change of a FeatureFlag or a
// FeatureFlagSource reaches, before it is made: the graph with the object
// as it would be stored (View.WithFlagSet, View.WithSource) against the
// graph as it is. It reads the graph only and applies nothing; the
// admission webhooks turn a result into a warning (Summary), and
// `flagplane diff` prints it whole.
package blast
