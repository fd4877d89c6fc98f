// Package topodump gets flagplane's topology as Graphviz DOT — from a
// running manager's /debug/topology endpoint (directly, or through the API
// server's service proxy), or built offline from a folder of manifests
// exactly as the controllers build it — and renders it with Graphviz.
//
// It backs `flagplane topology` and the demo.
package topodump
