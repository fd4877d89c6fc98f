// Package node is a test node: an agent that registers a Node with the
// local control plane of test/controlplane and runs the Pods bound to it,
// doing what a kubelet does for the parts flagplane depends on. With it, the
// flagd sidecar that admission injects really runs, as the real flagd
// binary, with the Pod's arguments, environment and volumes; the suites
// then assert what a real counterpart accepts, not what flagplane's own
// output looks like.
//
// The arguments and environment are not exactly the Pod's: the agent
// rewrites ports. Pods here have no network namespace of their own, so two
// pods' flagds would both listen on 8013 of the one loopback; every port a
// Pod declares gets a free host port instead, and to match, the agent
// rewrites, in every container, the environment variables whose name ends
// in _PORT and whose value is a declared port (so an app container's
// FLAGD_PORT still reaches its sidecar, and $(VAR) in args expands to the
// host port); in flagd's containers, the values of flagd's port flags
// (--port, --management-port, --sync-port, --ofrep-port, --metrics-port,
// -p, -m, -g, -r); and, when flagd's command is start, adds those flags
// with a host port for each flagd port the arguments leave to
// FLAGD_*_PORT or the default; probes are sent to the host port. See
// ports.go and ports_rewrite.go. A port written anywhere else — in a URL,
// a config file — is left alone. Tests reach a container on its host port
// with Addr or PortOf.
//
// Typical use in a Ginkgo suite, with kube-scheduler binding the Pods:
//
//	cp, err := controlplane.Start(ctx, controlplane.Options{Scheduler: true, Log: GinkgoWriter})
//	Expect(err).NotTo(HaveOccurred())
//	DeferCleanup(cp.Stop)
//	n, err := node.Start(ctx, cp, node.Options{Log: GinkgoWriter})
//	Expect(err).NotTo(HaveOccurred())
//	DeferCleanup(n.Stop) // runs before cp.Stop
//	...
//	addr, _ := n.Addr(types.NamespacedName{Namespace: ns, Name: pod}, "flagd", 8013)
//
// # What it does
//
//   - Node: registered Ready, with capacity and allocatable cpu, memory and
//     pods (Options.Capacity), address 127.0.0.1, the control plane's
//     version; its Lease in kube-node-lease renewed every quarter of its
//     duration, its status heartbeat every StatusInterval. It acts as user
//     system:node:<name> (group system:nodes) with the bootstrap ClusterRole
//     system:node. Start returns once the node lifecycle controller has
//     lifted the not-ready taint, so that kube-scheduler places pods on it.
//     Stop deletes the Node.
//   - Containers: init containers in order (a native sidecar, restartPolicy
//     Always, is started and must pass its startup probe before the next
//     one starts), then the containers. A container whose image is
//     Options.FlagdImage (any tag, digest or registry) runs the real flagd
//     binary; images listed in Options.Binaries run their binaries; any other
//     image runs an idle placeholder, which prints that it is one and waits
//     to be stopped. Its status says so: imageID
//     "flagplane-node://placeholder" and the pod condition
//     PlaceholderConditionType. A placeholder runs nothing of its image, so
//     a container of an unknown image runs as one whether or not it sets
//     command (the OpenFeature Operator's busybox apps with `command:
//     [sh, -c, ...]`). A container of flagd's or a listed image that sets
//     command cannot run (a binary stands for the image's entrypoint):
//     CreateContainerError.
//   - Environment: env and envFrom as the kubelet resolves them
//     (configMapKeyRef, secretKeyRef, fieldRef, resourceFieldRef, optional
//     references, $(VAR) expansion in env values and args), the variables of
//     the kubernetes Service pointing at the API server's real address
//     (KUBERNETES_SERVICE_HOST, _PORT, _PORT_HTTPS, ...), and what a runtime
//     adds (HOSTNAME, HOME=/, PATH).
//   - Files: every process runs in a mount namespace of its own (see
//     internal/mountns), where each volume is bind-mounted at its exact
//     mountPath (read-only when asked; subPath resolved once at start, as
//     the kubelet does), so that flagd's file URIs and the service-account
//     path /var/run/secrets/kubernetes.io/serviceaccount work unchanged.
//     Missing mount points are created on a tmpfs in that namespace, never
//     on the host. readOnlyRootFilesystem remounts / read-only there.
//     Start fails with a clear message where mount namespaces are not
//     available; there is no path-rewriting fallback.
//   - Identity: runAsUser, runAsGroup, supplementalGroups and fsGroup set
//     the process's identity; runAsNonRoot is checked. Projected files get
//     the kubelet's modes and owners (defaultMode, items' modes; a
//     service-account token is 0600 and owned by the pod's user when all
//     containers share one runAsUser; files are given to the fsGroup,
//     readable by it).
//   - Volumes: configMap, secret, downwardAPI and projected volumes, with
//     the kubelet's atomic-writer layout (package atomicwriter: a
//     "..<timestamp>" directory, the "..data" symlink swapped by rename, and
//     key symlinks through it), items and optional honoured, re-projected on
//     every change of what they read (one watch per ConfigMap or Secret);
//     as with a kubelet, deleting a ConfigMap or Secret that a running pod
//     mounts leaves its files as last projected, with a FailedMount event,
//     until it exists again (an optional one empties the volume instead);
//     projected service-account tokens requested through the TokenRequest
//     API with the pod's audience and expirationSeconds, bound to the Pod,
//     and rotated at 80 % of their life; the kube-api-access-* volume that
//     the ServiceAccount admission plugin adds (token, ca.crt from the
//     kube-root-ca.crt ConfigMap, namespace). emptyDir is a directory;
//     hostPath binds an existing host path; other types fail to mount, with
//     a FailedMount event.
//   - Ports: there are no pod network namespaces: every port a pod declares gets a free host port outside
//     the kernel's ephemeral range, and flagd's port flags, *_PORT variables
//     whose value is a declared port, and probes are rewritten to match.
//     PortOf and Addr tell tests where a container listens.
//   - Probes: startup, liveness and readiness (httpGet, tcpSocket, grpc,
//     exec) with the probe's timings; a failed startup or liveness probe
//     restarts the container, with the kubelet's exponential back-off
//     (Options.RestartBackoff) and restart policies.
//   - Status: written through the status subresource: phase, conditions
//     (PodScheduled, PodReadyToStartContainers, Initialized,
//     ContainersReady, Ready, readiness gates respected: Ready follows at
//     once when someone else sets a gate's condition), podIP and hostIP
//     127.0.0.1, and init and container statuses (state, last state, ready,
//     started, restartCount, image, imageID, containerID). Events as a
//     kubelet records them (Started, Killing, Unhealthy, BackOff,
//     FailedMount, Failed).
//   - Deletion: a Pod being deleted has its containers stopped within its
//     grace period (SIGTERM, the containers first, then the sidecars in
//     reverse order, SIGKILL at the deadline); its ports, watches and
//     directories are released, and then the Pod object is deleted with
//     grace period 0, as a kubelet does. Stop kills every pod's processes
//     (within Options.StopGrace). Every process gets a parent-death signal,
//     so none outlives the test process.
//   - Logs: each container's stdout and stderr go to a file per run, kept
//     until the node stops (Logs for a running pod, LogsOf for every pod of
//     a namespace, deleted ones included); they are how a failing spec
//     explains itself.
//     ReadFile, Readlink and Stat show a container's files as its process
//     sees them.
//
// # Limits
//
//   - No network namespaces: processes share the host's loopback, hence the
//     port rewrite. A port that is not declared is not remapped, and values
//     that carry ports anywhere else (a URL in a flag, a config file) are not
//     rewritten: refer to a declared port through $(VAR) of a *_PORT
//     variable instead. Services have no cluster IPs here, and the
//     service-link variables of the pod's namespace are not set.
//   - The kubelet's ConfigMap and Secret sync delay (its periodic sync, up
//     to a minute plus the cache TTL) is not modelled: a volume is
//     re-projected on the watch event, within milliseconds.
//   - No images and no image pulls: binaries stand in for images, and an
//     image that has no binary runs as a placeholder. imagePullPolicy and
//     imagePullSecrets are ignored.
//   - No cgroups: resources are neither reserved nor limited (they only
//     feed resourceFieldRef and the scheduler). No capabilities, seccomp,
//     AppArmor or SELinux enforcement. No lifecycle hooks (postStart,
//     preStop), no ephemeral containers, no kubelet API (kubectl logs and
//     exec do not work; use Logs).
//   - The Node and pod status are written as a kubelet writes them, but
//     there is no node pressure eviction, no static pods, no device plugins.
package node
