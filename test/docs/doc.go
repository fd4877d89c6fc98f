// Package docs holds the suite that runs every command the documentation
// shows (README.md and docs/*.md): offline when it needs no cluster, else
// against the demo's cluster (a control plane of test/controlplane, the
// operator of test/operator, config/samples applied), and checks its exit
// status and the output the docs show. A command that cannot run here is
// listed, with the reason, in the suite's table notRunnable. The convention
// the docs follow is at the top of docs_test.go and in docs/development.md.
//
// Run it with `make test-integration`, or alone with
// `go test ./test/docs -count=1 -ginkgo.v`.
package docs
