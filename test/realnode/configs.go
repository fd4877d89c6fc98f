package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// registryAddr is where the node's registry listens, inside the node's
// network namespace, where containerd reaches it.
const registryAddr = "127.0.0.1:5000"

// mirroredRegistries are the upstream registries whose images containerd
// pulls from the node's registry instead (there is no internet here).
var mirroredRegistries = []string{"docker.io", "ghcr.io", "registry.k8s.io", "quay.io", "gcr.io", "localhost:5000", registryAddr}

// PauseImage is the sandbox image containerd runs for every Pod.
const PauseImage = "registry.k8s.io/pause:3.10"

func (c *Cluster) writeContainerdConfig() (string, error) {
	dir := filepath.Join(c.Dir, "containerd")
	certsDir := filepath.Join(dir, "certs.d")
	for _, host := range mirroredRegistries {
		hostDir := filepath.Join(certsDir, host)
		if err := os.MkdirAll(hostDir, 0o755); err != nil {
			return "", err
		}
		server := "https://" + host
		if host == "docker.io" {
			server = "https://registry-1.docker.io"
		}
		if strings.HasPrefix(host, "localhost") || strings.HasPrefix(host, "127.") {
			server = "http://" + host
		}
		hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n  skip_verify = true\n",
			server, "http://"+registryAddr)
		if err := os.WriteFile(filepath.Join(hostDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return "", err
		}
	}
	cniConf := filepath.Join(c.Dir, "cni", "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return "", err
	}
	conflist := map[string]any{
		"cniVersion": "1.0.0",
		"name":       c.slot.Netns(),
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": c.slot.PodCIDR()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(c.Dir, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conflist, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-flagplane.conflist"), data, 0o644); err != nil {
		return "", err
	}
	// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so runc
	// cannot lower the pause container's oom_score_adj. Every path is under
	// the slot's directory, so that two nodes never share state.
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[8]q

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[9]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "containerd.sock.ttrpc"), filepath.Join(dir, "opt"), PauseImage,
		filepath.Join(c.Dir, "runc"), cniConf, certsDir)
	path := filepath.Join(dir, "config.toml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

func (c *Cluster) writeKubeletConfig(syncFrequency time.Duration, servingCert, servingKey string) (string, error) {
	resolv := filepath.Join(c.Dir, "kubelet-resolv.conf")
	// The Pods' resolv.conf gets the cluster DNS from the kubelet; the
	// host's own settings (search domains of this machine) stay out.
	if err := os.WriteFile(resolv, []byte("nameserver "+c.DNSIP.String()+"\n"), 0o644); err != nil {
		return "", err
	}
	sync := ""
	if syncFrequency > 0 {
		sync = fmt.Sprintf("syncFrequency: %s\n", syncFrequency)
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[1]s
tlsPrivateKeyFile: %[2]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]s}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /%[4]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
clusterDNS: [%[5]s]
clusterDomain: cluster.local
resolvConf: %[6]s
containerRuntimeEndpoint: unix://%[7]s
podCIDR: %[8]s
podLogsDir: %[9]s
maxPods: 60
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
  imagefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
rotateCertificates: false
%[10]s`, servingCert, servingKey, c.pki.CAPath, c.slot.CgroupRoot(), c.DNSIP, resolv,
		filepath.Join(c.Dir, "containerd", "containerd.sock"), c.slot.PodCIDR(), filepath.Join(c.Dir, "pod-logs"), sync)
	path := filepath.Join(c.Dir, "kubelet-config.yaml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

func (c *Cluster) writeKubeProxyConfig(kubeconfig string) (string, error) {
	// masqueradeAll: Service traffic between two Pods of the bridge is
	// masqueraded, so that replies return through the node's conntrack
	// without the host's br_netfilter. conntrack values of 0 leave the
	// host's settings alone.
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
mode: nftables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nftables: {masqueradeAll: true}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, c.slot.PodCIDR(), c.NodeName)
	path := filepath.Join(c.Dir, "kube-proxy-config.yaml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

func (c *Cluster) writeCorefile(kubeconfig string) (string, error) {
	config := fmt.Sprintf(`.:53 {
    bind %[1]s
    errors
    health %[1]s:8080
    ready %[1]s:8181
    cache 5
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %[2]s
        pods insecure
        ttl 5
    }
}
`, c.DNSIP, kubeconfig)
	path := filepath.Join(c.Dir, "Corefile")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

// registryImage is one image of the registry's images.json (see
// hack/image/registry).
type registryImage struct {
	Ref        string            `json:"ref"`
	Layout     string            `json:"layout,omitempty"`
	Files      []ImageFile       `json:"files,omitempty"`
	Dirs       []ImageDir        `json:"dirs,omitempty"`
	Trees      []ImageTree       `json:"trees,omitempty"`
	Symlinks   map[string]string `json:"symlinks,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	User       string            `json:"user,omitempty"`
	Env        []string          `json:"env,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

func (c *Cluster) writeImages(images []Image) (string, error) {
	list := make([]registryImage, 0, len(images))
	for _, im := range images {
		for _, f := range im.Files {
			if f.Src != "" && !fileExists(f.Src) {
				return "", fmt.Errorf("image %s: %s is missing (run `make realnode`)", im.Ref, f.Src)
			}
		}
		for _, t := range im.Trees {
			if !fileExists(t.Src) {
				return "", fmt.Errorf("image %s: directory %s is missing (run `make realnode`)", im.Ref, t.Src)
			}
		}
		if im.Layout != "" && !fileExists(filepath.Join(im.Layout, "index.json")) {
			return "", fmt.Errorf("image %s: no OCI layout in %s (run `make image`)", im.Ref, im.Layout)
		}
		list = append(list, registryImage(im))
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, "images.json")
	return path, os.WriteFile(path, data, 0o644)
}
