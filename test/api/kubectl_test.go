package api

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("kubectl with the harness's kubeconfig", func() {
	It("lists the three CRDs", func() {
		Expect(kubectl("get", "crd", "-o", "name")).To(And(
			ContainSubstring("customresourcedefinition.apiextensions.k8s.io/featureflags.core.openfeature.dev\n"),
			ContainSubstring("customresourcedefinition.apiextensions.k8s.io/featureflagsources.core.openfeature.dev\n"),
			ContainSubstring("customresourcedefinition.apiextensions.k8s.io/inprocessconfigurations.core.openfeature.dev\n"),
		))
	})

	It("knows the short names ff and ffs", func() {
		out := kubectl("api-resources", "--api-group=core.openfeature.dev")
		Expect(out).To(MatchRegexp(`(?m)^featureflags\s+ff\s+core\.openfeature\.dev/v1beta1\s+true\s+FeatureFlag$`))
		Expect(out).To(MatchRegexp(`(?m)^featureflagsources\s+ffs\s+core\.openfeature\.dev/v1beta1\s+true\s+FeatureFlagSource$`))
		Expect(out).To(MatchRegexp(`(?m)^inprocessconfigurations\s+core\.openfeature\.dev/v1beta1\s+true\s+InProcessConfiguration$`))
	})

	It("explains featureflagsource.spec.targetRefs from the published schema", func() {
		out := kubectl("explain", "featureflagsource.spec.targetRefs")
		Expect(out).To(MatchRegexp(`FIELD:\s+targetRefs <\[\]Object>`))
		Expect(out).To(ContainSubstring("TargetRefs names the workloads of this namespace that get the sidecar"))
		Expect(out).To(MatchRegexp(`(?m)^\s+group\s+<string>`))
		Expect(out).To(MatchRegexp(`(?m)^\s+kind\s+<string> -required-`))
		Expect(out).To(MatchRegexp(`(?m)^\s+name\s+<string> -required-`))
	})
})
