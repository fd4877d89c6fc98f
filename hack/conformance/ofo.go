package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/test/realnode"
)

// The OpenFeature Operator itself on the real node, as the control of its
// own suite (-operator ofo): built from a checkout, installed as its
// Makefile's deploy-operator does (kustomize config/default), with one
// change: cert-manager is not installed. Its Issuer and Certificates are
// left out, and what cert-manager would make of them is made here: each
// Certificate's Secret (a CA and a serving certificate for its dnsNames),
// and the CA in the caBundle of every object that asks cert-manager's CA
// injector for it (annotation cert-manager.io/inject-ca-from).

// ofoImage is the reference OFO's manager is installed under.
const ofoImage = "ghcr.io/open-feature/open-feature-operator:conformance"

// buildOFO builds OFO's manager from a checkout, with the checkout's own
// api module, into out. The checkout is copied first: its go.mod is not
// edited.
func buildOFO(ctx context.Context, ofoDir, out string) error {
	if _, err := os.Stat(filepath.Join(ofoDir, "api", "go.mod")); err != nil {
		return fmt.Errorf("%s has no api module: building OFO's manager needs a checkout of open-feature-operator, not its module zip: %w", ofoDir, err)
	}
	tmp, err := os.MkdirTemp("", "flagplane-ofo-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := copyTree(ofoDir, src, nil, ".git"); err != nil {
		return err
	}
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = os.Stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return nil
	}
	// Its api module is not served by the Go module proxy (a workspace
	// still asks for the required version's go.mod): a replace points the
	// requirement at the checkout's.
	if err := run("mod", "edit", "-replace", "github.com/open-feature/open-feature-operator/api=./api"); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return run("build", "-trimpath", "-o", out, "./cmd/main.go")
}

// ofoManifests renders OFO's config/default with kubectl's kustomize, its
// manager image set to ofoImage, cert-manager's objects replaced as the
// file's comment says.
func ofoManifests(c *realnode.Cluster, ofoDir string) ([]byte, error) {
	out, err := c.Kubectl("kustomize", filepath.Join(ofoDir, "config", "default"))
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize config/default: %w\n%s", err, out)
	}
	var objs []*unstructured.Unstructured
	for doc := range strings.SplitSeq(out, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("reading OFO's manifests: %w", err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	ca, err := newCA()
	if err != nil {
		return nil, err
	}
	var kept []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().Group != "cert-manager.io" {
			kept = append(kept, o)
			continue
		}
		if o.GetKind() != "Certificate" {
			continue // the Issuer
		}
		secret, err := ca.secretFor(o)
		if err != nil {
			return nil, err
		}
		kept = append(kept, secret)
	}
	caPEM := base64.StdEncoding.EncodeToString(ca.certPEM)
	for _, o := range kept {
		if o.GetAnnotations()["cert-manager.io/inject-ca-from"] == "" {
			continue
		}
		if err := injectCA(o, caPEM); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	for _, o := range kept {
		if o.GetKind() == "Deployment" {
			if err := setManagerImage(o); err != nil {
				return nil, err
			}
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}

// installOFO applies OFO's manifests and waits until its webhook answers.
func installOFO(ctx context.Context, c *realnode.Cluster, ofoDir string) error {
	manifests, err := ofoManifests(c, ofoDir)
	if err != nil {
		return err
	}
	say("$ kubectl kustomize %s/config/default | (cert-manager's objects made here) | kubectl apply --server-side -f -", ofoDir)
	out, err := c.KubectlWithInput(bytes.NewReader(manifests), "apply", "--server-side", "-f", "-")
	fmt.Print(out)
	if err != nil {
		return fmt.Errorf("applying OFO's manifests: %w", err)
	}
	out, err = c.Kubectl("-n", "open-feature-operator-system", "rollout", "status", "deployment", "--timeout=5m")
	fmt.Print(out)
	if err != nil {
		return fmt.Errorf("OFO's manager did not become ready: %w", err)
	}
	// Ready replicas take requests once kube-proxy has their endpoints:
	// wait until the webhook answers a dry-run through its Service.
	probe := "apiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlag\nmetadata: {name: probe, namespace: default}\n" +
		"spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {on: true}, defaultVariant: \"on\"}}}}\n"
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.KubectlWithInput(strings.NewReader(probe), "create", "--dry-run=server", "-f", "-")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("OFO's webhook does not answer: %w\n%s", err, out)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// setManagerImage gives OFO's manager container ofoImage, and the flagd
// containers it injects the CPU request flagplane's get in the run
// (cpuRequest: OFO's 200m for each of the suite's flagds does not fit a
// 2-core node).
func setManagerImage(o *unstructured.Unstructured) error {
	containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return err
	}
	for i, c := range containers {
		m, ok := c.(map[string]any)
		if !ok || m["name"] != "manager" {
			continue
		}
		m["image"] = ofoImage
		m["imagePullPolicy"] = "IfNotPresent"
		args, _ := m["args"].([]any)
		for j, a := range args {
			if s, ok := a.(string); ok && strings.HasPrefix(s, "--sidecar-cpu-request=") {
				args[j] = "--sidecar-cpu-request=" + cpuRequest
			}
		}
		containers[i] = m
	}
	return unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
}

// injectCA sets caBundle where cert-manager's CA injector would: every
// webhook of a webhook configuration, and a CRD's conversion webhook.
func injectCA(o *unstructured.Unstructured, caPEM string) error {
	switch o.GetKind() {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return err
		}
		for i, h := range hooks {
			m, ok := h.(map[string]any)
			if !ok {
				continue
			}
			if err := unstructured.SetNestedField(m, caPEM, "clientConfig", "caBundle"); err != nil {
				return err
			}
			hooks[i] = m
		}
		return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
	case "CustomResourceDefinition":
		if _, found, _ := unstructured.NestedMap(o.Object, "spec", "conversion", "webhook"); !found {
			return nil
		}
		return unstructured.SetNestedField(o.Object, caPEM, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	}
	return nil
}

// ca is a self-signed CA, as OFO's selfsigned Issuer gives each Certificate.
type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA() (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "open-feature-operator conformance CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// secretFor is the Secret cert-manager would write for a Certificate: a
// serving certificate for its dnsNames, signed by the CA.
func (a *ca) secretFor(certificate *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name, _, _ := unstructured.NestedString(certificate.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(certificate.Object, "spec", "dnsNames")
	if name == "" || len(dnsNames) == 0 {
		return nil, errors.New("a Certificate of OFO's without secretName or dnsNames: " + certificate.GetName())
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	enc := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": name, "namespace": certificate.GetNamespace()},
		"data": map[string]any{
			"tls.crt": enc(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			"tls.key": enc(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
			"ca.crt":  enc(a.certPEM),
		},
	}}, nil
}
