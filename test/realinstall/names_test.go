package realinstall

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The longest names, as the real kubelet and container runtime meet them:
// the kubelet writes a ConfigMap's data keys as file names, runc makes the
// mount path's directories in the container, and Linux takes no file name
// past 255 bytes.
var _ = Describe("names at their limits on a real node", func() {
	It("file: a FeatureFlag of 253 characters in a namespace of 63: the kubelet mounts its ConfigMap and flagd reads its file at their shortened names, and serves every edit", func(ctx SpecContext) {
		// A generated name is cut to 58 characters and gets 5 more: 63.
		ns := newNamespace(ctx, strings.Repeat("n", validation.DNS1123LabelMaxLength))
		Expect(ns).To(HaveLen(validation.DNS1123LabelMaxLength))
		name := "checkout." + strings.Repeat("f", validation.DNS1123SubdomainMaxLength-len("checkout."))
		ff := fixtures.FlagSet(ns, name, "off")
		optedIn := map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef(name)}), app(ns, "web", optedIn))

		f := topology.FlagSetKey(ns, name)
		Expect(len(topology.FlagSetID(f))).To(BeNumerically("<", len(ns)+1+len(name)), "the directory's name is shortened")
		Expect(len(topology.ConfigMapDataKey(f))).To(BeNumerically("<", len(ns)+1+len(name)+len(".flagd.json")), "the data key is shortened")
		Eventually(func(g Gomega) {
			var cm corev1.ConfigMap
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(f)}, &cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKey(topology.ConfigMapDataKey(f)))
		}).WithTimeout(deliveryTimeout).Should(Succeed(), func() string {
			src := &v1beta1.FeatureFlagSource{}
			_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "src"}, src)
			return fmt.Sprintf("the ConfigMap, under its data key, through the chart's admission policy; the source's conditions: %v\n%s",
				src.Status.Conditions, fixtures.Events(ctx, k8s, ns))
		})

		pod := injectedPod(ctx, ns, "web")
		Expect(pod.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", topology.ConfigMapName(f))))
		Expect(sidecarArgs(pod)).To(ContainElement(ContainSubstring(`"uri":"` + injection.FlagFilePath(f) + `"`)))
		addr := flagdAddr(pod)
		serves(addr, "off")

		edited := time.Now()
		setVariant(ctx, ff, "on")
		AddReportEntry("file, longest names: edit to served", fmtDuration(serves(addr, "on").Sub(edited)))
	})
})
