// Package flagdversion holds what flagplane knows of each flagd release it
// can inject: the flags and FLAGD_* env vars `flagd start` takes, the
// fields and providers of its --sources entries, and how it evaluates the
// few things flag sets mean differently from one release to another. Every
// fact names the file of flagd's repository and the release tag it was read
// at (facts.go, semantics.go); nothing of flagd's code is copied.
//
// flagplane vouches for the releases whose facts are recorded (Vouched:
// every flagd release from v0.10.0 to v0.16.1). For one of them it writes
// only what that release takes (package injection asks Facts before it
// writes a flag, a --sources field or a provider, and leaves out, with a
// warning, what the release lacks); its tests check, for every vouched
// release, that everything flagplane can write is taken (Facts.Check). An
// image tag it cannot place among them — "latest", a digest, a pre-release,
// v0.18.0 — is not vouched for: flagplane writes for the Reference release
// (v0.16.0, the default and the one its end-to-end tests run) and says so
// in the status of the sources and Flagds that inject it (Injected.Unvouched).
//
// Differences tells, for a flag set, the flags an injected release
// evaluates otherwise than the Reference: a DISABLED flag, a flag without
// a defaultVariant, fractional targeting whose bucketing differs. The
// FeatureFlag webhook returns them as admission warnings.
//
// The package is pure: no client, no cluster state.
package flagdversion
