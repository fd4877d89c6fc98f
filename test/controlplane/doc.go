// Package controlplane runs a real, local Kubernetes control plane for
// flagplane's integration suites: etcd and kube-apiserver started through
// controller-runtime's envtest, with flagplane's CRDs installed, and
// kube-controller-manager running against them.
//
// envtest alone is an API server without controllers: Deployments never get
// ReplicaSets or Pods, ownerReferences are never garbage-collected and a
// deleted namespace never goes away. flagplane's behaviour depends on all
// three (it injects sidecars into the Pods of workloads, owns what it
// generates and cleans up after deleted namespaces), so the suites need the
// controllers too. By default Pods stay Pending: there is no scheduler and
// no kubelet, so a rollout never completes, but admission runs and the
// objects are real. With Options.Scheduler, kube-scheduler runs too and
// binds Pods to the Nodes it finds; test/node registers one that runs them.
//
// The binaries (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubectl) are
// built from their Go modules by `make controlplane` into the repository's
// bin/ folder; nothing is downloaded at test time and nothing on the host is
// used. $KUBEBUILDER_ASSETS points elsewhere when set.
//
// Typical use in a Ginkgo suite:
//
//	var cp *controlplane.ControlPlane
//
//	var _ = BeforeSuite(func(ctx SpecContext) {
//		var err error
//		cp, err = controlplane.Start(ctx, controlplane.Options{Log: GinkgoWriter})
//		Expect(err).NotTo(HaveOccurred())
//		DeferCleanup(cp.Stop)
//	}, NodeTimeout(3*time.Minute))
//
// Stop is idempotent and also runs when a spec failed. If the test process
// dies without calling Stop (a panic outside Ginkgo, `go test -timeout`, a
// signal), the child processes are killed anyway: kube-controller-manager
// and kube-scheduler through the parent-death signal, etcd and kube-apiserver through a small
// watchdog that notices when the test process is gone. Its directory
// (etcd's data, the logs) cannot be removed by a process that is gone: the
// next control plane started on the machine removes it (test/internal/scratch).
package controlplane
