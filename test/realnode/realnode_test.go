package realnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/controlplane"
)

// childEnv makes the test binary a child that starts a node, says where,
// and waits to be killed: TestKilledRunIsCleanedUp's victim.
const childEnv = "FLAGPLANE_REALNODE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		c, err := Start(context.Background(), Options{Log: os.Stderr})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("slot %d %s\n", c.slot.N, c.Dir)
		select {} // until killed
	}
	os.Exit(m.Run())
}

// TestNode runs a Pod that resolves a Service by the cluster DNS and talks
// to it through kube-proxy, and the OpenFeature Operator's e2e pattern with
// the real programs its manifests name: nginx proxying to a sidecar, and a
// curl Job whose shell script calls nginx's Service by name. Then it stops
// the node and checks that nothing of it is left on the machine and the
// host's sysctls are as before.
func TestNode(t *testing.T) {
	g := NewWithT(t)
	before := tunables()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	nginx, err := NginxAt(NginxImage, filepath.Join(root, "bin"))
	g.Expect(err).NotTo(HaveOccurred())
	curl, err := CurlAt(CurlImage)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := Start(ctx, Options{Log: testWriter{t}, Images: []Image{nginx, curl}})
	g.Expect(err).NotTo(HaveOccurred())
	s := c.slot
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()

	// A server Pod behind a Service, and a client Pod that reaches it by name.
	server := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "server", Labels: map[string]string{"app": "server"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "httpd", Image: BusyboxImage,
			Command: []string{"sh", "-c", "mkdir -p /www && echo hello-from-the-node > /www/index.html && httpd -f -p 8080 -h /www"}}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "server"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "server"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	clientPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "client"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{Name: "client", Image: BusyboxImage,
			Command: []string{"sh", "-c", "wget -q -O - http://server.default.svc.cluster.local/"}}}}}
	for _, o := range []client.Object{server, svc, clientPod} {
		g.Expect(c.Client.Create(ctx, o)).To(Succeed())
	}
	g.Eventually(func() (string, error) { return c.Kubectl("logs", "client") }).WithTimeout(3 * time.Minute).
		Should(ContainSubstring("hello-from-the-node"))

	// The kubelet runs the Pods under the node's cgroup, which the kernel
	// weighs as nodeCPUShares against the host's processes.
	g.Expect(os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", s.CgroupRoot(), "cpu.shares"))).
		To(WithTransform(func(b []byte) string { return strings.TrimSpace(string(b)) }, Equal(strconv.Itoa(nodeCPUShares))))
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(server), server)).To(Succeed())
	g.Expect(filepath.Glob(filepath.Join("/sys/fs/cgroup/cpu", s.CgroupRoot(), "kubepods", "*", "pod"+string(server.UID)))).
		To(HaveLen(1), "the server Pod's cgroup, under the node's")

	// nginx (its image's command, the configuration mounted over
	// /etc/nginx) proxies to a sidecar on 127.0.0.1:8013; curl's image runs
	// the Job's script with the idioms of OFO's (${var//[[:space:]]/}, [[ ]]).
	out, err := c.KubectlWithInput(strings.NewReader(proxyManifests), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = c.Kubectl("wait", "--for=condition=complete", "job/call-nginx", "--timeout=3m")
	g.Expect(err).NotTo(HaveOccurred(), "%s\n%s", out, describe(c, "job/call-nginx"))
	out, err = c.Kubectl("logs", "job/call-nginx")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`curl \d+\.\d+\.\d+ .*libcurl/`), "Debian's curl ran (7.88 under the tag 8.11.1)")
	g.Expect(out).To(ContainSubstring("got: from-the-sidecar-behind-nginx"))
	out, err = c.Kubectl("logs", "deployment/nginx", "-c", "nginx")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`"GET /flag HTTP/1.1" 200`), "nginx's access log shows the proxied call")
	g.Expect(c.Healthy()).To(Succeed())

	// CNI caches each sandbox's loopback result outside the node's
	// directory, by the sandbox's ID.
	sandboxes, err := filepath.Glob(filepath.Join(s.Dir(), sandboxGlob))
	g.Expect(err).NotTo(HaveOccurred())
	loopbacks := func() (found []string) {
		for _, d := range sandboxes {
			if f := "/var/lib/cni/results/cni-loopback-" + filepath.Base(d) + "-lo"; fileExists(f) {
				found = append(found, f)
			}
		}
		return found
	}
	g.Expect(loopbacks()).NotTo(BeEmpty(), "the running sandboxes' loopback results, found by %s", sandboxGlob)

	g.Expect(c.Stop()).To(Succeed())
	stopped = true
	expectNothingLeft(g, s)
	g.Expect(loopbacks()).To(BeEmpty(), "CNI's cache of the node's sandboxes")
	g.Expect(tunables()).To(Equal(before), "the host's sysctls are back")
}

// TestKilledRunIsCleanedUp kills a process that runs a node, as `go test
// -timeout` or a CI runner would, and checks that the watchdog removes all
// of it.
func TestKilledRunIsCleanedUp(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Start()).To(Succeed())
	line, err := bufio.NewReader(out).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	var n int
	var dir string
	_, err = fmt.Sscanf(line, "slot %d %s", &n, &dir)
	g.Expect(err).NotTo(HaveOccurred(), "the child said %q", line)
	s := slot{N: n}
	g.Expect(s.Dir()).To(Equal(dir))
	g.Expect(fileExists(s.NetnsPath())).To(BeTrue())

	g.Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = cmd.Wait()
	g.Eventually(func() string { return s.leftovers() + mountsUnder(dir) + cgroupsOf(s) }).
		WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(BeEmpty())
	expectNothingLeft(g, s)
}

// proxyManifests are OFO's e2e pattern in small: nginx with its
// configuration from a ConfigMap over /etc/nginx, a sidecar behind it, a
// Service, and a curl Job that calls the Service by name.
const proxyManifests = `
apiVersion: v1
kind: ConfigMap
metadata: {name: nginx-conf, namespace: default}
data:
  nginx.conf: |
    events {}
    http {
      server {
        location / {
          proxy_pass http://127.0.0.1:8013;
        }
      }
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: default}
spec:
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      volumes:
      - name: conf
        configMap: {name: nginx-conf, items: [{key: nginx.conf, path: nginx.conf}]}
      containers:
      - name: nginx
        image: nginx:stable-alpine
        ports: [{containerPort: 80}]
        volumeMounts: [{name: conf, mountPath: /etc/nginx, readOnly: true}]
      - name: sidecar
        image: busybox:1.36
        command: [sh, -c, 'mkdir -p /www && printf "  from-the-sidecar-behind-nginx  " > /www/flag && httpd -f -p 127.0.0.1:8013 -h /www']
---
apiVersion: v1
kind: Service
metadata: {name: nginx, namespace: default}
spec:
  selector: {app: nginx}
  ports: [{port: 30000, targetPort: 80}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: call-nginx, namespace: default}
spec:
  backoffLimit: 10
  template:
    spec:
      restartPolicy: OnFailure
      containers:
      - name: curl
        image: curlimages/curl:8.11.1
        args:
        - /bin/sh
        - -ec
        - |
          curl --version | head -1
          RESPONSE=$(curl -s "nginx:30000/flag")
          RESPONSE="${RESPONSE//[[:space:]]/}"
          if [[ "$RESPONSE" == *"from-the-sidecar"* ]]; then
            echo "got: $RESPONSE"
            exit 0
          fi
          echo "unexpected: $RESPONSE"
          exit 1
`

// describe is kubectl describe of ref and its Pods' logs, for a failure.
func describe(c *Cluster, ref string) string {
	out, _ := c.Kubectl("describe", ref)
	pods, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
	logs, _ := c.Kubectl("logs", ref, "--all-containers", "--tail=40")
	return out + "\n" + pods + "\n" + logs
}

func expectNothingLeft(g Gomega, s slot) {
	g.Expect(s.leftovers()).To(BeEmpty())
	g.Expect(mountsUnder(s.Dir())).To(BeEmpty())
	g.Expect(cgroupsOf(s)).To(BeEmpty())
	routes, _ := exec.Command("ip", "route").Output()
	g.Expect(string(routes)).NotTo(Or(ContainSubstring(s.PodCIDR()), ContainSubstring(s.ServiceCIDR())))
	procs, _ := exec.Command("pgrep", "-f", s.Dir()).Output()
	g.Expect(strings.TrimSpace(string(procs))).To(BeEmpty(), "no process of the node runs")
}

func mountsUnder(dir string) string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var found []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			found = append(found, f[4])
		}
	}
	return strings.Join(found, " ")
}

func cgroupsOf(s slot) string {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", s.CgroupRoot()))
	return strings.Join(dirs, " ")
}

func tunables() map[string]string {
	m := map[string]string{}
	for _, name := range kernelTunables {
		v, _ := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
		m[name] = strings.TrimSpace(string(v))
	}
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
