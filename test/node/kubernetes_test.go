package node_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// flagd's kubernetes provider reads the FeatureFlag with the pod's own
// credentials: in-cluster configuration from KUBERNETES_SERVICE_HOST/PORT
// and the service-account token volume at
// /var/run/secrets/kubernetes.io/serviceaccount, both as a kubelet
// provides them.
var _ = Describe("a Pod running flagd with the kubernetes provider", func() {
	// readerPod runs flagd on FeatureFlag ns/flags, as service account sa
	// whose Role grants verbs on featureflags.
	readerPod := func(ctx context.Context, ns, sa string, verbs ...string) *corev1.Pod {
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"featureflags"}, Verbs: verbs}},
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
			Spec: corev1.PodSpec{
				ServiceAccountName: sa,
				Containers: []corev1.Container{flagdContainer("flagd", "start", "--port", "8013", "--management-port", "8014",
					"--sources", `[{"uri":"`+ns+`/flags","provider":"kubernetes"}]`)},
			},
		}
		create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}, role, binding, pod)
		Eventually(getPod(ctx, key(pod))).Should(HaveField("Status.ContainerStatuses", ConsistOf(HaveField("State.Running", Not(BeNil())))))
		return pod
	}

	featureFlag := func(ns, variant string) *v1beta1.FeatureFlag {
		ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags"}}
		ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
			flagKey: {State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: variant},
		}
		return ff
	}

	setVariant := func(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
				return err
			}
			f := ff.Spec.FlagSpec.Flags[flagKey]
			f.DefaultVariant = variant
			ff.Spec.FlagSpec.Flags[flagKey] = f
			return k8s.Update(ctx, ff)
		}).Should(Succeed())
	}

	It("evaluates the FeatureFlag with the pod's own token, and follows an edit", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := featureFlag(ns, "off")
		create(ctx, ff)
		pod := readerPod(ctx, ns, "flagd-reader", "get", "list", "watch")
		addr := addrOf(key(pod), "flagd", 8013)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		By("editing the FeatureFlag")
		edited := time.Now()
		setVariant(ctx, ff, "on")
		Eventually(resolve(addr)).WithPolling(20 * time.Millisecond).Should(Equal(evaluated("on")))
		AddReportEntry("FeatureFlag edit to new value served by flagd's kubernetes provider", time.Since(edited).String())

		By("the token flagd reads is the pod's: its service account's, bound to the pod")
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
		token, err := n.ReadFile(key(pod), "flagd", sa+"token")
		Expect(err).NotTo(HaveOccurred())
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(token)}}
		Expect(k8s.Create(ctx, review)).To(Succeed())
		Expect(review.Status.Authenticated).To(BeTrue(), review.Status.Error)
		Expect(review.Status.User.Username).To(Equal("system:serviceaccount:" + ns + ":flagd-reader"))
		Expect(review.Status.User.Extra).To(HaveKeyWithValue("authentication.kubernetes.io/pod-name", ContainElement(pod.Name)))
		Expect(review.Status.User.Extra).To(HaveKeyWithValue("authentication.kubernetes.io/pod-uid", ContainElement(getUID(ctx, pod))))
		info, err := n.Stat(key(pod), "flagd", sa+"token")
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)), "the pod's only user owns its token, as with a kubelet")
		Expect(info.Sys()).To(HaveField("Uid", BeEquivalentTo(65532)))
		Expect(n.ReadFile(key(pod), "flagd", sa+"namespace")).To(BeEquivalentTo(ns))
		Expect(n.ReadFile(key(pod), "flagd", sa+"ca.crt")).To(Equal(mustRead(cp.CAPath)))
	})

	It("with a Role that lacks list, keeps its first value: flagd's informer cannot list", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := featureFlag(ns, "off")
		create(ctx, ff)
		pod := readerPod(ctx, ns, "flagd-getter", "get", "watch")
		addr := addrOf(key(pod), "flagd", 8013)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		setVariant(ctx, ff, "on")
		Eventually(func() (string, error) { return n.Logs(key(pod), "flagd") }).Should(
			MatchRegexp(`cannot list resource \\?"featureflags\\?"`))
		Consistently(resolve(addr)).Should(Equal(evaluated("off")), "an admin's token would have seen the edit")
		logs, _ := n.Logs(key(pod), "flagd")
		Expect(strings.Count(logs, "system:serviceaccount:"+ns+":flagd-getter")).To(BeNumerically(">", 0),
			"the API server refused the pod's service account")
	})
})

func getUID(ctx context.Context, pod *corev1.Pod) string {
	GinkgoHelper()
	got, err := getPod(ctx, key(pod))()
	Expect(err).NotTo(HaveOccurred())
	return string(got.UID)
}

func mustRead(path string) []byte {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return data
}
