package node_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/flagdapi"
)

// flagdImage is what flagplane's webhook would inject, with a registry:
// the node runs it as the real flagd binary.
const flagdImage = "ghcr.io/open-feature/flagd:v0.16.0"

// flagKey is the one flag of flagFile.
const flagKey = "x"

// newNamespace creates a namespace for a spec; when the spec fails, the
// logs of every container that ran in it are attached to the report.
func newNamespace(ctx context.Context) string {
	ns, err := cp.NewNamespace(ctx, "node")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			AddReportEntry("container logs of namespace "+ns, n.LogsOf(ns))
		}
	})
	return ns
}

// flagFile is a flagd flag definition with one boolean flag, flagKey.
func flagFile(defaultVariant string) string {
	return `{"flags":{"` + flagKey + `":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"` + defaultVariant + `"}}}`
}

// flagdContainer runs flagd with args, declares its evaluation and
// management ports, and runs as the sidecar flagplane injects does.
func flagdContainer(name string, args ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: flagdImage, Args: args,
		Ports: []corev1.ContainerPort{{Name: "flagd", ContainerPort: 8013}, {Name: "flagd-mgmt", ContainerPort: 8014}},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), RunAsNonRoot: ptr.To(true),
			ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
		},
	}
}

func httpProbe(path string, port int) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port)}},
		PeriodSeconds: 1, FailureThreshold: 3,
	}
}

func key(pod *corev1.Pod) k8stypes.NamespacedName {
	return k8stypes.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

func create(ctx context.Context, objs ...client.Object) {
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// getPod returns the pod as the API server has it now.
func getPod(ctx context.Context, k k8stypes.NamespacedName) func() (*corev1.Pod, error) {
	return func() (*corev1.Pod, error) {
		pod := &corev1.Pod{}
		return pod, k8s.Get(ctx, k, pod)
	}
}

// haveCondition matches a pod with condition t in status s.
func haveCondition(t corev1.PodConditionType, s corev1.ConditionStatus) types.GomegaMatcher {
	return HaveField("Status.Conditions", ContainElement(And(HaveField("Type", t), HaveField("Status", s))))
}

func beReady() types.GomegaMatcher { return haveCondition(corev1.PodReady, corev1.ConditionTrue) }

// gone tells whether the pod object no longer exists.
func gone(ctx context.Context, k k8stypes.NamespacedName) func() (bool, error) {
	return func() (bool, error) {
		err := k8s.Get(ctx, k, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

// processGone tells whether a process has exited (and been reaped).
func processGone(pid int) func() bool {
	return func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err)
	}
}

// evaluation is a boolean evaluation by flagd's HTTP API.
type evaluation = flagdapi.Evaluation

// resolve evaluates flagKey over flagd's HTTP (Connect) API at addr.
func resolve(addr string) func() (evaluation, error) {
	return func() (evaluation, error) {
		return flagdapi.Resolve(context.Background(), addr, flagdapi.Boolean, flagKey, nil)
	}
}

func evaluated(variant string) evaluation {
	return evaluation{Value: variant == "on", Variant: variant, Reason: "STATIC"}
}

// addrOf is the address the node gives a container's declared port.
func addrOf(k k8stypes.NamespacedName, container string, port int32) string {
	GinkgoHelper()
	addr, ok := n.Addr(k, container, port)
	Expect(ok).To(BeTrue(), "no host port for %s %s:%d", k, container, port)
	return addr
}

// pidOf is the pid of a container's process.
func pidOf(k k8stypes.NamespacedName, container string) int {
	GinkgoHelper()
	pid, ok := n.PID(k, container)
	Expect(ok).To(BeTrue(), "container %s of %s has no process", container, k)
	return pid
}

// flagdOnConfigMap is a Pod whose flagd reads its flags from a ConfigMap
// volume, as flagplane's file provider delivers them (the mount path and
// file name it injects), and that ConfigMap with the given default variant.
func flagdOnConfigMap(ns, name, variant string) (*corev1.ConfigMap, *corev1.Pod) {
	dir := "/etc/flagd/" + ns + "_" + name
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-flags"},
		Data:       map[string]string{ns + "_" + name + ".flagd.json": flagFile(variant)},
	}
	flagd := flagdContainer("flagd", "start", "--port", "8013", "--management-port", "8014",
		"--sources", `[{"uri":"`+dir+"/"+ns+"_"+name+`.flagd.json","provider":"file"}]`)
	flagd.VolumeMounts = []corev1.VolumeMount{{Name: "flags", MountPath: dir, ReadOnly: true}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{flagd},
			Volumes: []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}},
			}}},
		},
	}
	return cm, pod
}

// setFlagFile edits the flag file of a ConfigMap of flagdOnConfigMap.
func setFlagFile(cm *corev1.ConfigMap, variant string) {
	for k := range cm.Data {
		cm.Data[k] = flagFile(variant)
	}
}

// environOf reads a process's environment.
func environOf(pid int) map[string]string {
	GinkgoHelper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	Expect(err).NotTo(HaveOccurred())
	env := map[string]string{}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	return env
}

// startTicks is when a process started, in clock ticks since boot.
func startTicks(pid int) int64 {
	GinkgoHelper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	Expect(err).NotTo(HaveOccurred())
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ticks, err := strconv.ParseInt(fields[19], 10, 64) // field 22 of stat(5)
	Expect(err).NotTo(HaveOccurred())
	return ticks
}

// percentile of durations, p in [0, 100].
func percentile(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[(len(s)-1)*p/100]
}

// clockTicks is USER_HZ, the unit of a process's start time in /proc: 100
// on every Linux architecture Go supports.
const clockTicks = 100
