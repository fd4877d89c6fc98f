// Package gitops holds the specs of what GitOps tools see of flagplane:
// the health that kstatus (Flux, kubectl wait tools), Argo CD's Lua health
// checks and Flux's healthCheckExprs compute from real objects in every
// state, and server-side apply by a second field manager, as Argo CD and
// Flux apply, with no conflict and no diff after flagplane reconciles.
package gitops
