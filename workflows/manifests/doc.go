// Package manifests builds the graph offline: Load reads a YAML or JSON
// stream of Kubernetes objects into a topology, as the controllers'
// informers would add them, for the flagplane CLI (explain, diff, graph)
// and for the golden tests of the workflows. GrantFromReferenceGrant reads
// a Gateway API ReferenceGrant, from a file or from the controllers'
// unstructured informer, as a topology.Grant.
//
// It computes nothing and applies nothing: what the graph makes of the
// objects is package topology's.
package manifests
