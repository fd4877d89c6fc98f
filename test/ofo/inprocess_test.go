package ofo

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
)

// inProcessEnv is the env the in-process scenario asserts on both app
// containers, in its order: the two configurations merged, the later one's
// non-default values (prefix, host) over the earlier one's, the earlier
// one's env vars kept under the later one's prefix.
var inProcessEnv = []corev1.EnvVar{
	{Name: "my-second-prefix_name2", Value: "val2"},
	{Name: "my-second-prefix_name1", Value: "val1"},
	{Name: "my-second-prefix_HOST", Value: "my-host"},
	{Name: "my-second-prefix_PORT", Value: "8015"},
	{Name: "my-second-prefix_TLS", Value: "true"},
	{Name: "my-second-prefix_CACHE", Value: "lru"},
	{Name: "my-second-prefix_MAX_CACHE_SIZE", Value: "11"},
	{Name: "my-second-prefix_RESOLVER", Value: "in-process"},
	{Name: "my-second-prefix_OFFLINE_FLAG_SOURCE_PATH", Value: "my-path"},
}

var _ = Describe("in-process", func() {
	It("merges the two InProcessConfigurations a pod names into one env, in every app container", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		apply(ns, "in-process", "install.yaml")

		By("the pod as the scenario's assert has it")
		withEnv := func(name string) types.GomegaMatcher {
			return And(container(name, "busybox:1.37.0"), HaveField("Env", Equal(inProcessEnv)))
		}
		pod := theAppPod(ctx, ns, And(
			haveLabel("app", appLabel),
			haveContainers(withEnv("open-feature-e2e-test"), withEnv("open-feature-e2e-test2")),
			runningOnNode(),
		))
		Expect(pod.Spec.InitContainers).To(BeEmpty(), "in-process: no sidecar")
		// There is no flagd to ask: the env is what the scenario checks. The
		// node runs both busybox containers, their command aside, as
		// placeholders (an OpenFeature SDK reading this env would sync from
		// my-host:8015, which does not exist here either).
		for _, c := range pod.Spec.Containers {
			Expect(n.Logs(key(pod), c.Name)).To(ContainSubstring("idle placeholder"), c.Name)
		}
	})
})
