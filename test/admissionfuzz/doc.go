// Package admissionfuzz is what the fuzz tests of flagplane's admission
// share, and the API server's own admission of flagplane's custom
// resources, run in process.
//
//   - Readable and Warnings are the bounds of an answer a user can read: a
//     refusal that says which field and why, in a bounded message, and a
//     bounded list of warnings, free of control and bidirectional
//     formatting characters that a terminal would act on.
//   - Timings keeps the longest admission seen per path, with its input.
//     Fuzzing runs the inputs in worker processes whose output go test
//     drops: with FLAGPLANE_FUZZ_TIMINGS naming a file, every new longest
//     is appended to it, and make fuzz prints the longest of each path.
//   - CRDs serves flagplane's custom resources as the API server does
//     (config/crd/bases: decoding, pruning, defaulting, the OpenAPI
//     schema, x-kubernetes-list-type, the CEL rules with the API server's
//     cost limits), without a server, with k8s.io/apiextensions-apiserver's
//     own packages. Its fuzz tests (crds_test.go) feed it random and
//     extreme Flagds, FeatureFlagSourcePolicies, FeatureFlagSources and
//     FeatureFlagRolloutPolicies, and then the Go code that judges what it
//     admits (flagds.Validate, the policy's status and the injections it
//     governs, the rollout policy webhook's webhooks.ValidateRolloutPolicy,
//     its plan and status); test/api checks on a real API server that the
//     extremes are admitted and refused alike.
//
// It needs no control plane: it runs with the unit tests.
package admissionfuzz
