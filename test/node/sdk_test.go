package node_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// sdkClientImage stands for an application image built on the OpenFeature
// Go SDK: the suite maps it to the SDK client of test/realclients.
const sdkClientImage = "example.com/shop/sdk-app:1.0"

// An application container of a known test image runs as its binary: here
// the OpenFeature Go SDK with flagd's in-process provider, syncing from the
// flagd sidecar of its pod through the sidecar's remapped sync port.
var _ = Describe("an app container of a known test image", func() {
	It("runs as its binary: the OpenFeature SDK evaluates the flags its flagd sidecar serves", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		cm, pod := flagdOnConfigMap(ns, "web", "off")
		sidecar := pod.Spec.Containers[0]
		sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		sidecar.Ports = append(sidecar.Ports, corev1.ContainerPort{Name: "flagd-sync", ContainerPort: 8015})
		sidecar.StartupProbe = httpProbe("/healthz", 8014)
		pod.Spec.InitContainers = []corev1.Container{sidecar}
		pod.Spec.Containers = []corev1.Container{{
			Name: "app", Image: sdkClientImage,
			Args: []string{"-target", "127.0.0.1:$(FLAGD_SYNC_PORT)", "-flag", flagKey, "-type", "boolean",
				// The pod's own token: flagd's sync service ignores it, the
				// client needs one to send.
				"-token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
			Env: []corev1.EnvVar{{Name: "FLAGD_SYNC_PORT", Value: "8015"}},
		}}
		create(ctx, cm, pod)

		logs := func() (string, error) { return n.Logs(key(pod), "app") }
		Eventually(logs).Should(ContainSubstring(`"reason":"STATIC","value":false,"variant":"off"}`))
		Expect(getPod(ctx, key(pod))()).To(HaveField("Status.ContainerStatuses", ConsistOf(
			HaveField("ImageID", HavePrefix("flagplane-node://flagplane-sdkclient@sha256:")))))

		By("editing the ConfigMap: file → flagd → gRPC stream → the SDK")
		setFlagFile(cm, "on")
		edited := time.Now()
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		Eventually(logs).WithPolling(20 * time.Millisecond).Should(ContainSubstring(`"reason":"STATIC","value":true,"variant":"on"}`))
		AddReportEntry("ConfigMap edit to new value in the OpenFeature SDK (file → sidecar → gRPC → in-process provider)", time.Since(edited).String())
	})
})
