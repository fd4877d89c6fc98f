package gitops

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/gitopshealth"
)

// kubectl runs kubectl against the control plane and fails the spec if it
// fails.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := cp.Kubectl(args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

// live is obj as the API server holds it, unstructured, as GitOps tools
// read it.
func live(ctx context.Context, obj client.Object) *unstructured.Unstructured {
	GinkgoHelper()
	u, err := fixtures.Live(ctx, k8s, cp.Scheme, obj)
	Expect(err).NotTo(HaveOccurred())
	return u
}

// kstatusOf is kstatus's verdict on an object: its status, ": ", its
// message.
func kstatusOf(u *unstructured.Unstructured) string {
	GinkgoHelper()
	res, err := status.Compute(u)
	Expect(err).NotTo(HaveOccurred())
	return fmt.Sprintf("%s: %s", res.Status, res.Message)
}

// allDelivered tells whether a FeatureFlag's status.delivered ("n/m") says
// that every consumer holds its revision.
func allDelivered(delivered string) bool {
	n, m, ok := strings.Cut(delivered, "/")
	return ok && n == m
}

// argoStatus is what Argo CD calls each kstatus status.
var argoStatus = map[string]string{current: "Healthy", inProgress: "Progressing", failed: "Degraded"}

// verdict is what the readers of health give one state of an object:
// kstatus's status (which Flux gives too), Argo CD's, and the testdata
// file of the kind's Argo CD check the state is recorded as ("": none).
type verdict struct {
	kstatus, argo, testdata string
}

// verdictOf is the verdict of every state but a rollout waiting for a
// person: Argo CD's name for kstatus's status, recorded under the
// status's file.
func verdictOf(want string) verdict {
	return verdict{kstatus: want, argo: argoStatus[want], testdata: testdataNames[want]}
}

// expectTools checks that every reader of health gives want (kstatus's
// Current, InProgress or Failed) for obj as the API server holds it:
// kstatus itself, flagplane's Argo CD health check for the kind run as
// Argo CD runs it, and its Flux healthCheckExprs evaluated as Flux does.
// Argo CD shows the message of the condition that decided.
func expectTools(ctx context.Context, obj client.Object, want string) {
	GinkgoHelper()
	expectVerdictOn(live(ctx, obj), verdictOf(want))
}

// expectToolsOn is expectTools on one version of an object.
func expectToolsOn(u *unstructured.Unstructured, want string) {
	GinkgoHelper()
	expectVerdictOn(u, verdictOf(want))
}

// expectVerdict is expectTools for a verdict whose Argo CD status is not
// the one verdictOf gives (a rollout's Suspended), or recorded elsewhere.
func expectVerdict(ctx context.Context, obj client.Object, want verdict) {
	GinkgoHelper()
	expectVerdictOn(live(ctx, obj), want)
}

func expectVerdictOn(u *unstructured.Unstructured, want verdict) {
	GinkgoHelper()
	Expect(kstatusOf(u)).To(HavePrefix(want.kstatus), "kstatus on %s %s", u.GetKind(), u.GetName())
	argo, err := gitopshealth.Argo(u)
	Expect(err).NotTo(HaveOccurred())
	Expect(argo.Status).To(Equal(want.argo), "Argo CD's health of %s %s: %s", u.GetKind(), u.GetName(), argo.Message)
	Expect(argo.Message).NotTo(BeEmpty())
	if want.kstatus != current {
		_, msg, _ := strings.Cut(kstatusOf(u), ": ")
		Expect(argo.Message).To(Equal(msg), "Argo CD and kstatus show the same message")
	}
	flux, err := gitopshealth.Flux(u)
	Expect(err).NotTo(HaveOccurred())
	Expect(flux).To(Equal(want.kstatus), "Flux's healthCheckExprs on %s %s", u.GetKind(), u.GetName())
	recordTestdata(u, want.testdata, argo)
}

// condition is "<status>/<reason>" of obj's condition t, as the API server
// holds it ("" while absent).
func condition(ctx context.Context, obj client.Object, t string) func() string {
	return func() string {
		u := live(ctx, obj)
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == t {
				return fmt.Sprintf("%s/%s", m["status"], m["reason"])
			}
		}
		return ""
	}
}
