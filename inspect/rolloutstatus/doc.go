// Package rolloutstatus writes where the staged rollout of a FeatureFlag
// stands, read from its FeatureFlagRolloutPolicy's status: the phase, the
// step, the stable and target revisions, the message, and each step's
// consumers with the revision they are planned to serve and the one they
// serve. It is the text of `flagplane rollout status`, for the demo and
// any other reader that holds the policy.
package rolloutstatus
