package realnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// to it through kube-proxy, then stops the node and checks that nothing of
// it is left on the machine and the host's sysctls are as before.
func TestNode(t *testing.T) {
	g := NewWithT(t)
	before := tunables()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Log: testWriter{t}})
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
	g.Expect(c.Healthy()).To(Succeed())

	g.Expect(c.Stop()).To(Succeed())
	stopped = true
	expectNothingLeft(g, s)
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
