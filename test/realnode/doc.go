// Package realnode runs a real single-node Kubernetes cluster on this
// machine, for the suites that run flagplane as its users do, and for
// `make cluster`. Nothing in it is a model of Kubernetes:
//
//   - etcd, kube-apiserver, kube-controller-manager and kube-scheduler, with
//     a cluster CA, the Node authorizer and NodeRestriction, service-account
//     tokens signed by the API server, and a certificate per component;
//   - the kubelet and kube-proxy (nftables mode), built from the same
//     k8s.io/kubernetes module as the API server;
//   - containerd and runc, from Debian's packages, with the CNI bridge,
//     host-local and portmap plugins;
//   - CoreDNS with its kubernetes plugin, as the cluster DNS;
//   - a registry (hack/image/registry) that containerd uses as the mirror
//     of docker.io, ghcr.io, registry.k8s.io, quay.io and gcr.io, serving
//     images built here from local binaries and OCI layouts under the
//     names manifests use: the sandbox (pause), flagd
//     (ghcr.io/open-feature/flagd:v0.16.0, the static flagd of `make
//     realclients`), busybox, the OpenFeature Go SDK client, and whatever
//     Options.Images adds (the manager's image from `make image`).
//     imagePullPolicy: Always pulls for real.
//
// # Isolation: a slot per node
//
// Every node takes a slot (0 to 31, a lock file in /run/flagplane-realnode)
// and everything it makes is the slot's own: a network namespace
// (flagplane-node-N) where every component runs, so that their ports, the
// cni0 bridge, kube-proxy's nft table and the iptables rules of the CNI
// plugins never meet another node's or the host's; a veth pair to the host
// with addresses 10.243.N.1 (host) and 10.243.N.2 (the node: its
// InternalIP, the API server on 6443, the DNS on 53); Pods in 10.244.N.0/24
// and Services in 10.245.N.0/24, both routed from the host through the
// node, so that the test process reaches Pods and Services as a machine on
// the cluster's network does; a cgroup flagplane-node-N in every
// hierarchy (the kubelet's cgroupRoot); a state directory
// $TMPDIR/flagplane-realnode-N holding certificates, configs, logs and
// containerd's and the kubelet's directories (and the Pods' network
// namespaces: netns_mounts_under_state_dir). Two `go test` processes, or a
// suite and `make cluster`, run side by side.
//
// # Cleanup
//
// Start writes a cleanup script into the state directory before it makes
// anything: it kills the node's processes (by their pid files), containerd's
// shims (and removes their sockets) and whatever runs in the node's
// cgroups, unmounts everything under the state directory, removes the
// cgroups, the network namespace (which takes the bridge, the veth pair and
// the nft and iptables tables with it) and the host routes, puts back the
// host-wide sysctls the kubelet changes (vm.overcommit_memory,
// kernel.panic, ...), removes the kubelet's /var/log/containers links and
// CNI's cache, and the directory. Stop runs it after stopping the
// processes gracefully. A watchdog process of its own session runs it when
// the test process dies without Stop, holding the slot's lock until it is
// done; and the next run that takes the slot runs it if it is still there.
// After it, Stop checks that nothing of the slot is left.
//
// # What the machine needs
//
// Root, cgroup v1 (the kubelet runs with failCgroupV1: false and the
// cgroupfs driver), overlayfs, and what `make realnode` installs and
// builds. Where something is missing, Start fails and lists every reason:
// a suite that needs the node never skips.
//
// Two facts of these machines shape the configuration: root lacks
// CAP_SYS_RESOURCE, so containerd runs with restrict_oom_score_adj; and
// there is no br_netfilter in the node's namespace, so kube-proxy
// masquerades all Service traffic (masqueradeAll), which lets a Pod reach
// a Service whose endpoint is on the same bridge.
//
// Typical use:
//
//	c, err := realnode.Start(ctx, realnode.Options{Log: GinkgoWriter, SyncFrequency: 5 * time.Second})
//	Expect(err).NotTo(HaveOccurred())
//	DeferCleanup(c.Stop)
//	out, err := c.Helm("install", "flagplane", "charts/flagplane", "--wait")
package realnode
