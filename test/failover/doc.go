// Package failover holds the Ginkgo suite of flagplane under faults: two
// replicas of the manager binary (cmd/manager, as processes of their own,
// with leader election) each reach the API server through a fault-injecting
// proxy (test/faultproxy) that answers a share of their requests with
// conflicts, throttling, internal errors and lost answers, and cuts and
// expires their watches. In the middle of a burst of FeatureFlag edits the
// leader is killed with SIGKILL, and the standby takes over once its lease
// expires.
//
// What it proves: the world converges (every generated ConfigMap holds the
// last content of its flag set, every status is about the last generation
// and says True); no generated ConfigMap is ever deleted, emptied or set
// back to an earlier edit on the way (a watch from the spec's own
// connection sees every change); and the ConfigMap writes that reach the
// proxies stay within the edits times the namespaces that use each flag
// set, plus one per injected fault. What was injected and what happened is reported in the spec's
// output (and quoted in docs/benchmarks.md).
//
// A second spec runs two replicas without faults, each with its sync
// server: with streams open on both, the FeatureFlag's status (written by
// whichever leads) counts every replica's streams from their sync reports,
// and forgets a replica's when they end; and a replica is ready only once
// its sync server listens.
package failover
