// Package api holds the integration suite that proves flagplane's API
// (core.openfeature.dev/v1beta1) on a real control plane: OpenFeature
// Operator manifests apply unchanged and read back with their defaults,
// invalid ones are rejected with the message a user needs, the status
// subresource, short names, printer columns and kubectl explain work, and
// kube-controller-manager does what flagplane relies on.
//
// Run it with `make test-integration`; see package test/controlplane.
package api
