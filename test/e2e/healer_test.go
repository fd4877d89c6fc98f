package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/webhooks"
)

// The OpenFeature Operator's own e2e manifests create the workload before
// its source: its pods are admitted with nothing to inject.
var _ = Describe("the healer", func() {
	It("rolls a Deployment created before its source: the new pod serves the flag, and the Event says the workload was targeted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, deployment(ns, "web", appImage, nil))
		old := readyUninjectedPod(ctx, ns, "web")
		Expect(old.Spec.InitContainers).To(BeEmpty())

		By("creating the FeatureFlag and the source that targets the Deployment")
		create(ctx, flagSet(ns, "checkout", "off"), source(ns, "flags", "web", fixtures.FileRef("checkout")))
		next := successor(ctx, old)
		Eventually(resolve(flagdAddr(next))).Should(Equal(evaluated("off")))
		Eventually(func() error { return k8s.Get(ctx, key(old), &corev1.Pod{}) }).Should(Satisfy(apierrors.IsNotFound))
		Eventually(eventsAbout(ctx, ns, "Deployment", "web")).Should(ContainElement(And(
			HaveField("Reason", webhooks.EventTargeted),
			HaveField("Note", ContainSubstring("FeatureFlagSource "+ns+"/flags")))))
	})
})
