// Package migrate tests `flagplane migrate` on the real control plane: a
// cluster where the OpenFeature Operator ran (its leftovers are written in
// its shape under testdata), flagplane installed beside them, the command
// run as a cluster administrator would run it, the outcome checked, until a
// run finds nothing; and flagplane taking over the team's FeatureFlags,
// sources and Deployments without field-manager conflicts.
package migrate
