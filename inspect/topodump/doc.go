// Package topodump gets flagplane's topology as Graphviz DOT — built from a
// cluster's objects with the caller's own permissions, or offline from a
// folder of manifests, both exactly as the controllers build it; or read
// from a running manager's /debug/topology endpoint — and renders it: as
// SVG drawn in Go (package dotsvg), as PNG with Graphviz's `dot`.
//
// It backs `flagplane topology` and the demo.
package topodump
