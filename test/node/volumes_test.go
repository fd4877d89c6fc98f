package node

import (
	"io/fs"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/test/node/atomicwriter"
)

func TestKeysPayload(t *testing.T) {
	data := map[string][]byte{"a": []byte("A"), "b": []byte("B")}
	for _, tc := range []struct {
		name     string
		items    []corev1.KeyToPath
		optional *bool
		want     atomicwriter.Payload
		err      string
	}{{
		name: "every key, with the default mode",
		want: atomicwriter.Payload{"a": {Data: []byte("A"), Mode: 0o644}, "b": {Data: []byte("B"), Mode: 0o644}},
	}, {
		name:  "items at their paths, with their modes",
		items: []corev1.KeyToPath{{Key: "a", Path: "dir/a.json", Mode: ptr.To[int32](0o400)}},
		want:  atomicwriter.Payload{"dir/a.json": {Data: []byte("A"), Mode: 0o400}},
	}, {
		name:  "a missing key",
		items: []corev1.KeyToPath{{Key: "c", Path: "c"}},
		err:   `configmap "flags" references non-existent key "c"`,
	}, {
		name:     "a missing key of an optional ConfigMap",
		items:    []corev1.KeyToPath{{Key: "c", Path: "c"}, {Key: "a", Path: "a"}},
		optional: ptr.To(true),
		want:     atomicwriter.Payload{"a": {Data: []byte("A"), Mode: 0o644}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := keysPayload("configmap", "flags", data, tc.items, tc.optional, 0o644)
			if tc.err != "" {
				g.Expect(err).To(MatchError(tc.err))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestDownwardPayload(t *testing.T) {
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}},
	}
	got, err := downwardPayload(pod, []corev1.DownwardAPIVolumeFile{
		{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
		{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "cpu_m", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
	}, 0o644, &nodeFacts{ip: "127.0.0.1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(atomicwriter.Payload{
		"namespace": {Data: []byte("shop"), Mode: 0o644},
		"labels":    {Data: []byte("a=\"1\"\nb=\"2\""), Mode: 0o644},
		"cpu_m":     {Data: []byte("250"), Mode: 0o644},
	}))
}

func TestFSUserAndGroup(t *testing.T) {
	g := NewWithT(t)
	as := func(uid *int64) *corev1.SecurityContext { return &corev1.SecurityContext{RunAsUser: uid} }
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "flagd", SecurityContext: as(ptr.To[int64](65532))}},
		Containers:     []corev1.Container{{Name: "app", SecurityContext: as(ptr.To[int64](65532))}},
	}}
	g.Expect(fsUserOf(pod)).To(HaveValue(BeEquivalentTo(65532)), "every container runs as 65532")
	pod.Spec.Containers[0].SecurityContext = nil
	g.Expect(fsUserOf(pod)).To(BeNil(), "the app runs as the image's user")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)}
	g.Expect(fsUserOf(pod)).To(HaveValue(BeEquivalentTo(65532)), "the pod's runAsUser applies to the app")

	pod.Spec.SecurityContext.FSGroup = ptr.To[int64](2000)
	payload := atomicwriter.Payload{"token": {Data: []byte("t"), Mode: 0o600}}
	applyFSGroup(payload, pod)
	g.Expect(payload["token"].Mode).To(Equal(fs.FileMode(0o640)))
	g.Expect(payload["token"].GID).To(HaveValue(Equal(2000)))
}

func TestContainerIdentity(t *testing.T) {
	g := NewWithT(t)
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SupplementalGroups: []int64{3000}, FSGroup: ptr.To[int64](2000)}}}
	id, err := containerIdentity(pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](65532)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.uid).To(HaveValue(Equal(65532)))
	g.Expect(id.gid).To(HaveValue(Equal(65532)))
	g.Expect(id.groups).To(Equal([]int{3000, 2000}))

	_, err = containerIdentity(pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}})
	g.Expect(err).To(MatchError(ContainSubstring("runAsNonRoot and image will run as root")))
	_, err = containerIdentity(pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}})
	g.Expect(err).To(MatchError(ContainSubstring("breaks non-root policy")))
}
