package reconcile

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows"
)

// Serial: it restarts the operator that the other specs rely on.
var _ = Describe("Startup", Serial, func() {
	It("rebuilds the graph from the caches, removes what nobody needs and repairs what changed while it was down", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout", "on")
		create(ctx, ff, deployment(ns, "web", nil, nil),
			source(ns, "flags", []v1beta1.Source{fileRef("checkout")}, targeting("Deployment", "web")))
		cm := configMapOf(ns, ns, "checkout")
		Eventually(configMapExists(ctx, cm)).Should(BeTrue())

		operator.stop()
		orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd.gone.away", Labels: workflows.ManagedLabels()}}
		create(ctx, orphan)
		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.DefaultVariant = "off"
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		operator = startOperator()

		Expect(configMapExists(ctx, objectKey(ns, orphan.Name))()).To(BeFalse(), "removed before ready")
		Expect(defaultVariantIn(flagContent(ctx, cm, ns, "checkout")())).To(Equal("off"), "repaired before ready")
	})
})
