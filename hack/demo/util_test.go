package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInjection(t *testing.T) {
	g := NewWithT(t)
	tmplMeta := metav1.ObjectMeta{Annotations: map[string]string{"team": "shop"}}
	tmpl := corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}}}}}

	t.Run("a Pod that is its template has nothing injected", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: *tmplMeta.DeepCopy(), Spec: *tmpl.DeepCopy()}
		// what the API server adds for the service account is not injection
		pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x1"}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x1", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
		NewWithT(t).Expect(addedByInjection(tmplMeta, tmpl, pod)).To(BeEmpty())
	})

	t.Run("the sidecar, its volume, the app's env and the annotation", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: *tmplMeta.DeepCopy(), Spec: *tmpl.DeepCopy()}
		pod.Annotations["flagplane.core.openfeature.dev/injection"] = "abc"
		pod.Spec.InitContainers = []corev1.Container{{Name: "flagd", VolumeMounts: []corev1.VolumeMount{
			{Name: "flags", MountPath: "/etc/flagd"}, {Name: "kube-api-access-x1", MountPath: "/var/run/secrets"}}}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "flags"}, {Name: "kube-api-access-x1"}}
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "FLAGD_PORT", Value: "8013"})
		got := addedByInjection(tmplMeta, tmpl, pod)
		g.Expect(got).To(HaveKeyWithValue("annotations", map[string]string{"flagplane.core.openfeature.dev/injection": "abc"}))
		g.Expect(got).To(HaveKeyWithValue("initContainers", []corev1.Container{{Name: "flagd",
			VolumeMounts: []corev1.VolumeMount{{Name: "flags", MountPath: "/etc/flagd"}}}}))
		g.Expect(got).To(HaveKeyWithValue("volumes", []corev1.Volume{{Name: "flags"}}))
		g.Expect(got).To(HaveKeyWithValue("addedToContainers", map[string]any{
			"web": map[string]any{"env": []corev1.EnvVar{{Name: "FLAGD_PORT", Value: "8013"}}}}))
		g.Expect(got).NotTo(HaveKey("containers"))
	})
}

func TestDefaultVariant(t *testing.T) {
	g := NewWithT(t)
	doc := `{"flags":{"new-checkout":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on"}}}`
	g.Expect(defaultVariant(doc, "new-checkout")).To(Equal("on"))
	g.Expect(defaultVariant(doc, "other")).To(BeEmpty())
	g.Expect(defaultVariant("not json", "new-checkout")).To(BeEmpty())
}

func TestPrefixWriter(t *testing.T) {
	g := NewWithT(t)
	var b bytes.Buffer
	n, err := prefixWriter{w: &b, prefix: "  "}.Write([]byte("one\ntwo\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(8))
	g.Expect(b.String()).To(Equal("  one\n  two\n"))
}
