// Package flagd is the integration suite of the Flagd kind: the whole
// operator (test/operator) on a real control plane with kube-scheduler, and
// a test node (test/node) that runs the flagd pods of the generated
// Deployments as the real flagd binary. A spec asserts what a client of the
// Flagd gets: an evaluation over the Service's port (the node has no
// cluster IPs, so the spec resolves the Service the way kube-proxy would —
// its selector to a ready pod, its port's targetPort to that pod's
// container port — and evaluates at the port the node mapped it to), before
// and after an edit.
//
// One spec per kind × event: create, source edit, flag-set edit, a
// generated object deleted or edited by hand, Gateway API installed later
// (on a control plane of its own, started without Gateway API's CRDs), and
// delete; every delivery mode (file, kubernetes, flagd-proxy); the tenancy
// rule; and the OpenFeature Operator's four Flagd scenarios in its own
// manifest form (testdata/ofo).
package flagd
