// Package webhooks is flagplane's admission: the mutating Pod webhook that
// injects flagd, the validating webhooks of FeatureFlags and
// FeatureFlagSources, the healing of pods that were admitted while the
// webhook was unavailable, and (in webhooks/certs) the webhook server's own
// certificates.
//
// Setup wires all of it into a controller-runtime manager whose controllers
// keep the topology; it adds nothing to the manager that the controllers
// need.
//
// # The Pod webhook
//
// CREATE only, never UPDATE (a pod's spec is immutable: mutating an update
// is at best useless). A pod's workload is resolved from its controller
// reference (Pod → ReplicaSet → Deployment through the ReplicaSet metadata
// cache, or StatefulSet, or DaemonSet) and what it gets is
// injection.Desired over a topology snapshot: no API read on this
// path. Outside dry-run, the ConfigMaps the pod is to mount are made to
// exist before the pod is admitted (the ConfigMap workflow usually created
// them when the workload appeared); a ConfigMap that cannot be made (a flag
// set that was never valid) is left out of the pod, never mounted dangling.
// A dry-run request gets the same patch and causes nothing. The patch is
// made field by field from the pod as decoded and as injected (podPatch):
// it adds the sidecar, its volumes and pull secrets, the app containers'
// env vars and the annotations, and leaves every other field as the API
// server sent it, those this build's API types do not know included.
//
// Every pod that gets an injection carries rollout.AnnotationInjection, the
// fingerprint of what it got; every other pod of a workload that it admits
// carries rollout.AnnotationAdmitted ("nothing-to-inject"). The first is how
// the webhook knows a pod it has injected (it is idempotent); together they
// are how the Healer knows a pod the webhook never saw, and tells the Event
// on the workload it restarts which happened: admitted before flagplane knew
// the workload was targeted (Targeted), or never admitted by flagplane's
// webhook (InjectionMissing), whichever replica admitted the pod.
//
// The webhook's failurePolicy is Ignore, with namespace and object
// selectors that leave kube-system, flagplane's own namespace and opted-out
// objects alone: an unavailable flagplane never blocks pod creation in the
// cluster, and the Healer rolls the workloads whose pods got through without
// their sidecar once it is back. A busy one may refuse a pod: each request
// takes its bytes from its namespace's share of a budget of its own before
// it is read whole (budgeted), and one that cannot within the wait is
// refused with 429 Too Many Requests, which its controller, or its client,
// retries; refusing nothing would let a burst of large pods take the
// manager's memory.
//
// # The validating webhooks
//
// FeatureFlag: flagsets.ValidateFlagSpec, the semantic rules plus flagd's
// JSON schema. FeatureFlagSource: reference and URI syntax per provider,
// ports, env var names, resources, the securityContext annotation. Both deny
// with an Invalid status whose causes are field paths, the way the API
// server reports its own validation; an update that leaves the spec alone
// is always allowed, so that a finalizer or label edit of an object stored
// before the webhook existed never gets stuck.
package webhooks
