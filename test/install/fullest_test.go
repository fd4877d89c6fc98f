package install

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/webhooks/certs"
)

// describeFullest installs config/default with every component (sync
// server, cert-manager, ServiceMonitor, NetworkPolicy) over the install of
// the sections before, and runs its manager: cert-manager's part is done by
// the suite (stand-in CRDs, the certificate Secret, the CA injection).
func describeFullest() {
	var (
		mgr     *installedManager
		certDir string
	)

	BeforeAll(func(ctx SpecContext) {
		kubectl("apply", "--server-side", "-f", filepath.Join(rootDir, "test", "install", "testdata", "stand-in-crds.yaml"))
		Eventually(func() error {
			_, err := cp.Kubectl("get", "certificates.cert-manager.io,issuers.cert-manager.io,servicemonitors.monitoring.coreos.com", "-A")
			return err
		}).Should(Succeed())
		kubectl("apply", "--server-side", "--force-conflicts", "-k", combinationDir(clusterWide, fullest))
		DeferCleanup(func() {
			// A later section installs no webhook of this install: these
			// must not call a manager that is gone.
			kubectl("delete", "mutatingwebhookconfiguration", "flagplane-injector", "--ignore-not-found")
			kubectl("delete", "validatingwebhookconfiguration", "flagplane-validator", "--ignore-not-found")
		})
	})

	It("installs every component's objects", func() {
		for _, obj := range []string{
			"service/flagplane-sync",
			"certificate.cert-manager.io/flagplane-webhook",
			"issuer.cert-manager.io/flagplane-selfsigned",
			"servicemonitor.monitoring.coreos.com/flagplane-manager",
			"networkpolicy.networking.k8s.io/flagplane-manager",
		} {
			Expect(kubectl("get", obj, "-n", systemNS, "-o", "name")).To(Equal(obj+"\n"), obj)
		}
		Expect(kubectl("get", "mutatingwebhookconfiguration", "flagplane-injector",
			"-o", `jsonpath={.metadata.annotations.cert-manager\.io/inject-ca-from}`)).To(Equal(systemNS + "/flagplane-webhook"))
		Expect(kubectl("get", "certificate.cert-manager.io", "flagplane-webhook", "-n", systemNS, "-o", "jsonpath={.spec.dnsNames}")).
			To(ContainSubstring("flagplane-webhook." + systemNS + ".svc"))
	})

	It("gives the manager the arguments, port and certificate volume of every component, each once", func(ctx SpecContext) {
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-manager"}, d)).To(Succeed())
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		Expect(c.Args).To(ContainElements("--sync-bind-address=:8015", "--webhook-certificates=external",
			"--webhook-cert-dir=/etc/flagplane/webhook-certs"))
		Expect(c.Ports).To(ContainElement(HaveField("Name", "sync")))
		Expect(c.VolumeMounts).To(ConsistOf(HaveField("MountPath", "/etc/flagplane/webhook-certs")))
		Expect(pod.Volumes).To(ConsistOf(HaveField("Secret.SecretName", "flagplane-webhook-cert")))
	})

	It("runs its manager: certificates from cert-manager's Secret, the sync server, admission", func(ctx SpecContext) {
		// What cert-manager does: the Certificate's Secret, mounted into the
		// manager, and the CA injected into both webhook configurations.
		bundle, err := certs.Apply(nil, certs.IssueCA, certs.DefaultPolicy([]string{
			"flagplane-webhook." + systemNS + ".svc", "127.0.0.1"}), time.Now())
		Expect(err).NotTo(HaveOccurred())
		data, err := certs.Encode(bundle)
		Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "flagplane-webhook-cert"}}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, secret))).To(Succeed())
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "flagplane-webhook-cert"},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"ca.crt": bundle.CABundle(), "tls.crt": data[certs.KeyTLSCert], "tls.key": data[certs.KeyTLSKey]}}
		Eventually(func() error { return k8s.Create(ctx, secret) }).Should(Succeed())
		certDir = GinkgoT().TempDir()
		for _, k := range []string{"tls.crt", "tls.key"} {
			Expect(os.WriteFile(filepath.Join(certDir, k), secret.Data[k], 0o600)).To(Succeed())
		}
		injectCA(ctx, bundle.CABundle(), "flagplane-injector", "flagplane-validator")

		mgr = runInstalled(ctx, systemNS, func(o *app.Options) {
			Expect(o.Admission.Certificates).To(Equal("external"))
			Expect(o.WebhookCertDir).To(Equal("/etc/flagplane/webhook-certs"), "where the Secret is mounted")
			o.WebhookCertDir = certDir
		})
		Expect(mgr.Admission.Certificates).To(BeNil(), "cert-manager keeps them, not the manager")
		pointWebhooksAt(ctx, mgr.webhookBase, "flagplane-injector", "flagplane-validator")
		expectServing(ctx, mgr, "flagplane-validator", newNamespace(ctx, "fullest"))

		By("serving flagd.sync.v1")
		Expect(mgr.Sync).NotTo(BeNil())
		conn, err := net.DialTimeout("tcp", mgr.syncAddr(), time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(conn.Close()).To(Succeed())
	})
}

// injectCA sets caBundle on every webhook of the named configurations, as
// cert-manager's CA injector does.
func injectCA(ctx context.Context, bundle []byte, mutating, validating string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: mutating}, m)).To(Succeed())
		for i := range m.Webhooks {
			m.Webhooks[i].ClientConfig.CABundle = bundle
		}
		g.Expect(k8s.Update(ctx, m)).To(Succeed())
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: validating}, v)).To(Succeed())
		for i := range v.Webhooks {
			v.Webhooks[i].ClientConfig.CABundle = bundle
		}
		g.Expect(k8s.Update(ctx, v)).To(Succeed())
	}).Should(Succeed())
}
