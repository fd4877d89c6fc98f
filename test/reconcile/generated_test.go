package reconcile

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

var _ = Describe("Generated ConfigMap", func() {
	var (
		ns   string
		cm   client.ObjectKey
		good string
	)

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout", "on"), deployment(ns, "web", nil, nil),
			source(ns, "flags", []v1beta1.Source{fileRef("checkout")}, targeting("Deployment", "web")))
		cm = configMapOf(ns, ns, "checkout")
		Eventually(flagContent(ctx, cm, ns, "checkout")).ShouldNot(BeEmpty())
		good = flagContent(ctx, cm, ns, "checkout")()
	})

	It("edited by hand: the content is restored and foreign keys removed", func(ctx SpecContext) {
		update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}, func(c *corev1.ConfigMap) {
			c.Data[ns+"_checkout.flagd.json"] = `{"flags":{}}`
			c.Data["extra.json"] = "{}"
		})
		Eventually(func() map[string]string {
			got := &corev1.ConfigMap{}
			Expect(k8s.Get(ctx, cm, got)).To(Succeed())
			return got.Data
		}).Should(Equal(map[string]string{ns + "_checkout.flagd.json": good}))
	})

	It("deleted by hand: it is created again", func(ctx SpecContext) {
		got := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, cm, got)).To(Succeed())
		remove(ctx, got)
		Eventually(func() bool {
			again := &corev1.ConfigMap{}
			return k8s.Get(ctx, cm, again) == nil && again.UID != got.UID && again.Data[ns+"_checkout.flagd.json"] == good
		}).Should(BeTrue())
	})
})

var _ = Describe("Namespace", func() {
	It("deleted: a consuming namespace stops counting for the flag set", func(ctx SpecContext) {
		flags, team := newNamespace(ctx), newNamespace(ctx)
		create(ctx, flagSet(flags, "shared", "on"), referenceGrant(flags, "team", team, ""),
			source(team, "flags", []v1beta1.Source{fileRef(flags + "/shared")}, targeting("Deployment", "web")),
			deployment(team, "web", nil, nil))
		Eventually(flagSetStatus(ctx, flags, "shared")).Should(HaveField("Namespaces", []string{team}))
		Eventually(configMapExists(ctx, configMapOf(team, flags, "shared"))).Should(BeTrue())

		remove(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Name: team}, &corev1.Namespace{}) }, "60s").ShouldNot(Succeed())
		Eventually(flagSetStatus(ctx, flags, "shared")).Should(And(HaveField("Namespaces", BeEmpty()), HaveField("Sources", int32(0))))
	})
})
