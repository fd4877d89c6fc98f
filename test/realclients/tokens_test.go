package realclients

import (
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/syncserver"
)

var _ = Describe("a projected service-account token checked by TokenReview", func() {
	It("proves its namespace and service account, and its expiry bounds the streams it opens", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		requested := time.Now()
		token, err := os.ReadFile(serviceAccountToken(ctx, ns, "default"))
		Expect(err).NotTo(HaveOccurred())

		id, err := (&syncserver.TokenReviews{Reviewer: k8s}).Authenticate(ctx, string(token))
		Expect(err).NotTo(HaveOccurred())
		Expect(id.Namespace).To(Equal(ns))
		Expect(id.ServiceAccount).To(Equal("default"))
		// serviceAccountToken asks for 600 s; the API server's clock and
		// ours agree here, up to the second it rounds to.
		Expect(id.Expires).To(BeTemporally("~", requested.Add(600*time.Second), 5*time.Second))
	})
})
