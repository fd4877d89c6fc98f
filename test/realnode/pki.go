package realnode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's one certificate authority, which signs every serving
// and client certificate, as kubeadm's cluster CA does.
type pki struct {
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAPath string
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "flagplane-realnode-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, cert: cert, key: key, CAPath: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(p.CAPath, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// certSpec is who a certificate names: the CN and O of a client (the API
// server's user and groups), or the names and addresses of a server.
type certSpec struct {
	name   string // file name stem
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool
	client bool
}

// issue writes <name>.crt and <name>.key and returns their paths.
func (p *pki) issue(s certSpec) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     s.dns,
		IPAddresses:  s.ips,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		return "", "", fmt.Errorf("signing the certificate of %s: %w", s.cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(p.dir, s.name+".crt"), filepath.Join(p.dir, s.name+".key")
	if err := os.WriteFile(certPath, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// serviceAccountKeys writes the key pair with which the API server signs
// service-account tokens (sa.key) and checks them (sa.pub).
func (p *pki) serviceAccountKeys() (keyPath, pubPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	if err := os.WriteFile(keyPath, pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, os.WriteFile(pubPath, pemBlock("PUBLIC KEY", pubDER), 0o644)
}

// kubeconfig writes a kubeconfig for a user authenticated by the client
// certificate of s, for the API server at server.
func (p *pki) kubeconfig(path, server string, s certSpec) error {
	s.client = true
	certPath, keyPath, err := p.issue(s)
	if err != nil {
		return err
	}
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: realnode
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: realnode
  context: {cluster: realnode, user: %s}
current-context: realnode
`, server, p.CAPath, s.cn, certPath, keyPath, s.cn)
	return os.WriteFile(path, []byte(content), 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
