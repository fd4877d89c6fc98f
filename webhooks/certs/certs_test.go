package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPolicy() Policy {
	p := DefaultPolicy([]string{"flagplane-webhook.flagplane-system.svc", "127.0.0.1"})
	p.CAValidity, p.ServingValidity = 300*24*time.Hour, 30*24*time.Hour
	return p
}

func issue(t *testing.T, p Policy, now time.Time) *Bundle {
	t.Helper()
	b, err := Apply(nil, IssueCA, p, now)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecide(t *testing.T) {
	p := testPolicy()
	fresh := issue(t, p, t0)
	otherCA := issue(t, p, t0)
	foreignServing := *fresh
	foreignServing.Serving, foreignServing.ServingKey = otherCA.Serving, otherCA.ServingKey
	swappedKey := *fresh
	swappedKey.ServingKey = otherCA.ServingKey
	renamed := p
	renamed.DNSNames = append(renamed.DNSNames, "flagplane-webhook.other.svc")

	cases := []struct {
		name   string
		bundle *Bundle
		policy Policy
		now    time.Time
		want   Action
		why    string
	}{
		{"nothing yet", nil, p, t0, IssueCA, "no CA"},
		{"damaged secret", Decode(map[string][]byte{KeyCACert: []byte("junk")}), p, t0, IssueCA, "no CA"},
		{"fresh", fresh, p, t0.Add(time.Hour), Keep, "certificates are valid"},
		{"serving cert with two thirds of its life gone", fresh, p, t0.Add(21 * 24 * time.Hour), IssueServing, "the serving certificate expires"},
		{"serving cert just before that", fresh, p, t0.Add(19 * 24 * time.Hour), Keep, "certificates are valid"},
		{"CA with two thirds of its life gone", fresh, p, t0.Add(201 * 24 * time.Hour), IssueCA, "the CA expires"},
		{"serving cert of another CA", &foreignServing, p, t0, IssueServing, "not signed by the current CA"},
		{"serving key of another cert", &swappedKey, p, t0, IssueServing, "does not match"},
		{"a name to cover more", fresh, renamed, t0, IssueServing, "does not cover flagplane-webhook.other.svc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a, why := Decide(tc.bundle, tc.policy, tc.now)
			g.Expect(a).To(Equal(tc.want), why)
			g.Expect(why).To(ContainSubstring(tc.why))
		})
	}
}

// TestRenewalKeepsTrust: after every renewal the serving certificate
// verifies against the bundle, and after a CA renewal the bundle still
// trusts certificates of the previous CA.
func TestRenewalKeepsTrust(t *testing.T) {
	g := NewWithT(t)
	p := testPolicy()
	b := issue(t, p, t0)
	old := b.Serving
	now := t0
	for i := 0; i < 40; i++ { // ten months in steps of a week
		now = now.Add(7 * 24 * time.Hour)
		a, _ := Decide(b, p, now)
		if a == Keep {
			continue
		}
		next, err := Apply(b, a, p, now)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(actionOf(next, p, now)).To(Equal(Keep))
		g.Expect(verify(next.CABundle(), next.Serving, now)).To(Succeed(), "new certificate, new bundle")
		if now.Before(b.Serving.NotAfter) {
			g.Expect(verify(next.CABundle(), b.Serving, now)).To(Succeed(), "the certificate still served elsewhere stays trusted")
		}
		b = next
	}
	g.Expect(b.Serving.SerialNumber).NotTo(Equal(old.SerialNumber))
	g.Expect(b.CAs[0].NotBefore.After(t0)).To(BeTrue(), "the CA was renewed within ten months of a 300-day CA")
}

func actionOf(b *Bundle, p Policy, now time.Time) Action {
	a, _ := Decide(b, p, now)
	return a
}

func verify(bundle []byte, c *x509.Certificate, now time.Time) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	_, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: "flagplane-webhook.flagplane-system.svc"})
	return err
}

func TestEncodeDecode(t *testing.T) {
	g := NewWithT(t)
	b := issue(t, testPolicy(), t0)
	data, err := Encode(b)
	g.Expect(err).NotTo(HaveOccurred())
	back := Decode(data)
	g.Expect(actionOf(back, testPolicy(), t0)).To(Equal(Keep))
	_, err = tls.X509KeyPair(data[KeyTLSCert], data[KeyTLSKey])
	g.Expect(err).NotTo(HaveOccurred())
}

func TestManagerEnsure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "flagplane-injector"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.flagplane.core.openfeature.dev"}}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "flagplane-validator"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "a"}, {Name: "b"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(mutating, validating).Build()
	now := t0
	opts := Options{Namespace: "flagplane-system", SecretName: "flagplane-webhook-cert", Policy: testPolicy(),
		MutatingWebhooks: []string{"flagplane-injector"}, ValidatingWebhooks: []string{"flagplane-validator", "absent"},
		Now: func() time.Time { return now }}
	m := New(c, c, opts)
	_, err := m.GetCertificate(nil)
	g.Expect(err).To(HaveOccurred(), "nothing to serve before the first pass")

	g.Expect(m.Ensure(ctx)).To(Succeed())
	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "flagplane-system", Name: "flagplane-webhook-cert"}, secret)).To(Succeed())
	g.Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
	served, err := m.GetCertificate(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served.Certificate[0]).To(Equal(Decode(secret.Data).Serving.Raw))
	bundleOf := func() [][]byte {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "flagplane-injector"}, mutating)).To(Succeed())
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "flagplane-validator"}, validating)).To(Succeed())
		return [][]byte{mutating.Webhooks[0].ClientConfig.CABundle, validating.Webhooks[0].ClientConfig.CABundle, validating.Webhooks[1].ClientConfig.CABundle}
	}
	for _, b := range bundleOf() {
		g.Expect(b).To(Equal(secret.Data[KeyCACert]))
	}

	By := func(string) {}
	By("a second replica reads the same Secret and serves the same certificate")
	other := New(c, c, opts)
	g.Expect(other.Ensure(ctx)).To(Succeed())
	o, _ := other.GetCertificate(nil)
	g.Expect(o.Certificate[0]).To(Equal(served.Certificate[0]))

	By("someone re-applies the manifests: the bundle is injected again")
	mutating.Webhooks[0].ClientConfig.CABundle = nil
	g.Expect(c.Update(ctx, mutating)).To(Succeed())
	g.Expect(m.Ensure(ctx)).To(Succeed())
	g.Expect(bundleOf()[0]).To(Equal(secret.Data[KeyCACert]))

	By("three weeks later the serving certificate is renewed, the CA kept")
	now = t0.Add(21 * 24 * time.Hour)
	g.Expect(m.Ensure(ctx)).To(Succeed())
	renewed, _ := m.GetCertificate(nil)
	g.Expect(renewed.Certificate[0]).NotTo(Equal(served.Certificate[0]))
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "flagplane-system", Name: "flagplane-webhook-cert"}, secret)).To(Succeed())
	g.Expect(bundleOf()[0]).To(Equal(secret.Data[KeyCACert]))
	g.Expect(Decode(secret.Data).CAs).To(HaveLen(1))
}
