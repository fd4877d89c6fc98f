// Package counts runs flagplane at the edges of counts and lengths, with
// nothing standing in for what Kubernetes and flagd do: a real control
// plane with kube-scheduler (test/controlplane), the whole operator with
// its admission webhooks and its flagd sync server (test/operator), and
// the test node (test/node), which runs the injected flagd as the real
// flagd binary with the pod's arguments, under Linux's own limits on
// them.
//
// Each case is created, admitted or refused with the reason and the limit,
// and delivered:
//
//   - a source naming 100 flag sets, with the file, kubernetes and
//     flagd-proxy providers: the pod gets all 100, and flagd serves a flag
//     of the 100th; more file entries than inotify allows a user: a
//     warning on admission, and real flagd failing to start;
//   - a workload with 20 sources, listed by its annotation, selecting it
//     by label, or naming it in targetRefs: one flagd serves the flag sets
//     of all of them, each source that loses a setting is told; the
//     injection time against one source;
//   - a flag set of 10,000 flags: its validation, rendering and graph edit
//     times, its admission time as the API server measures the webhook
//     call (timeoutSeconds is 5), delivery by every mode (the 10,000th flag
//     evaluates), and the largest such flag set the API server stores;
//   - the lengths: the worst combination (a 63-character namespace,
//     253-character names, 100 flag sets, 20 sources) computed by the
//     webhook's own code; a source whose entries alone make flagd's
//     --sources longer than execve takes, refused; sources that do so
//     together, whose pods are admitted without flagd, with the reason on
//     the pod, in an Event and in the sources' status, and rolled with
//     flagd once they fit; a workload annotation naming thousands of
//     missing sources; a pod that the sidecar would make larger than the
//     API server stores.
//
// Times are logged as report entries (go test -v, or -ginkgo.v, shows
// them), never asserted, but for the webhook's timeout. Specs that read
// many file sources run flagd as a user of their own: Linux counts inotify
// instances per user across the machine, where other tests' flagd
// sidecars run as the injected user too.
package counts
