// Package certs keeps the admission webhook server's certificates without
// cert-manager: a self-signed CA and a serving certificate it signs, stored
// in one Secret in the operator's namespace, the CA bundle injected into
// flagplane's webhook configurations, both renewed well before they expire.
//
// Every replica runs a Manager: they share the Secret (creation and updates
// are optimistic, a replica that loses a race reads the winner's), serve the
// certificate it holds from memory, and agree on the bundle. The bundle
// keeps the previous CA for as long as it is valid, so that a CA renewal
// never leaves a serving certificate that the API server does not trust.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Secret data keys. tls.crt and tls.key make the Secret a kubernetes.io/tls
// Secret that a cert-manager-style mount could use too.
const (
	KeyCACert  = "ca.crt" // the bundle: the current CA first, then the previous one while valid
	KeyCAKey   = "ca.key" // the current CA's key
	KeyTLSCert = "tls.crt"
	KeyTLSKey  = "tls.key"
)

// Bundle is the content of the certificate Secret.
type Bundle struct {
	// CAs are the trusted CAs, the current (signing) one first.
	CAs   []*x509.Certificate
	CAKey *ecdsa.PrivateKey
	// Serving is the serving certificate and its key.
	Serving    *x509.Certificate
	ServingKey *ecdsa.PrivateKey
}

// Policy says what certificates to keep.
type Policy struct {
	// CommonName of the CA.
	CommonName string
	// DNSNames (and IP addresses, written as such) the serving certificate covers.
	DNSNames []string
	// CAValidity and ServingValidity are the lifetimes of new certificates.
	CAValidity, ServingValidity time.Duration
	// RenewFraction: a certificate is renewed when less than this fraction of
	// its lifetime is left (1/3 by default).
	RenewFraction float64
}

// Action is what a check asks for.
type Action int

// Actions, in increasing order of work.
const (
	Keep         Action = iota // nothing to do
	IssueServing               // a new serving certificate from the current CA
	IssueCA                    // a new CA, then a new serving certificate
)

func (a Action) String() string {
	return [...]string{"keep", "issue a serving certificate", "issue a CA and a serving certificate"}[a]
}

// Check is one rule about the current bundle.
type Check func(b *Bundle, p Policy, now time.Time) (Action, string)

// Checks run in order; the first that asks for something decides, as in
// cert-manager's issuing checks.
var Checks = []Check{
	checkCAPresent,
	checkCAFresh,
	checkServingPresent,
	checkServingSignedByCA,
	checkServingNames,
	checkServingFresh,
}

// Decide runs the checks and returns the action and why.
func Decide(b *Bundle, p Policy, now time.Time) (Action, string) {
	for _, c := range Checks {
		if a, why := c(b, p, now); a != Keep {
			return a, why
		}
	}
	return Keep, "certificates are valid"
}

func checkCAPresent(b *Bundle, _ Policy, _ time.Time) (Action, string) {
	if b == nil || len(b.CAs) == 0 || b.CAKey == nil {
		return IssueCA, "no CA"
	}
	if !publicKeyMatches(b.CAs[0], b.CAKey) {
		return IssueCA, "the CA key does not match the CA"
	}
	return Keep, ""
}

func checkCAFresh(b *Bundle, p Policy, now time.Time) (Action, string) {
	if due(b.CAs[0], p, now) {
		return IssueCA, fmt.Sprintf("the CA expires at %s", b.CAs[0].NotAfter.Format(time.RFC3339))
	}
	return Keep, ""
}

func checkServingPresent(b *Bundle, _ Policy, _ time.Time) (Action, string) {
	if b.Serving == nil || b.ServingKey == nil {
		return IssueServing, "no serving certificate"
	}
	if !publicKeyMatches(b.Serving, b.ServingKey) {
		return IssueServing, "the serving key does not match the serving certificate"
	}
	return Keep, ""
}

func checkServingSignedByCA(b *Bundle, _ Policy, _ time.Time) (Action, string) {
	if err := b.Serving.CheckSignatureFrom(b.CAs[0]); err != nil {
		return IssueServing, "the serving certificate is not signed by the current CA"
	}
	return Keep, ""
}

func checkServingNames(b *Bundle, p Policy, _ time.Time) (Action, string) {
	for _, n := range p.DNSNames {
		if ip := net.ParseIP(n); ip != nil {
			if !slices.ContainsFunc(b.Serving.IPAddresses, ip.Equal) {
				return IssueServing, "the serving certificate does not cover " + n
			}
		} else if !slices.Contains(b.Serving.DNSNames, n) {
			return IssueServing, "the serving certificate does not cover " + n
		}
	}
	return Keep, ""
}

func checkServingFresh(b *Bundle, p Policy, now time.Time) (Action, string) {
	if due(b.Serving, p, now) {
		return IssueServing, fmt.Sprintf("the serving certificate expires at %s", b.Serving.NotAfter.Format(time.RFC3339))
	}
	return Keep, ""
}

// due tells whether less than the renew fraction of a certificate's lifetime is left.
func due(c *x509.Certificate, p Policy, now time.Time) bool {
	f := p.RenewFraction
	if f <= 0 || f >= 1 {
		f = 1.0 / 3
	}
	life := c.NotAfter.Sub(c.NotBefore)
	return now.After(c.NotAfter.Add(-time.Duration(float64(life) * f)))
}

func publicKeyMatches(c *x509.Certificate, k *ecdsa.PrivateKey) bool {
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	return ok && pub.Equal(&k.PublicKey)
}

// Apply carries out an action on a bundle and returns the new bundle.
func Apply(b *Bundle, a Action, p Policy, now time.Time) (*Bundle, error) {
	next := &Bundle{}
	if b != nil {
		*next = *b
	}
	if a == IssueCA {
		ca, key, err := newCA(p, now)
		if err != nil {
			return nil, err
		}
		// The previous CA stays trusted while it is valid: serving
		// certificates it signed (other replicas may still serve one) keep
		// working until they are replaced.
		cas := []*x509.Certificate{ca}
		if b != nil && len(b.CAs) > 0 && now.Before(b.CAs[0].NotAfter) && b.CAKey != nil && publicKeyMatches(b.CAs[0], b.CAKey) {
			cas = append(cas, b.CAs[0])
		}
		next.CAs, next.CAKey = cas, key
	}
	if a >= IssueServing {
		cert, key, err := newServing(next.CAs[0], next.CAKey, p, now)
		if err != nil {
			return nil, err
		}
		next.Serving, next.ServingKey = cert, key
	}
	// Drop expired CAs from the bundle.
	next.CAs = slices.DeleteFunc(slices.Clone(next.CAs), func(c *x509.Certificate) bool { return now.After(c.NotAfter) })
	return next, nil
}

func newCA(p Policy, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: p.CommonName},
		NotBefore:             now.Add(-time.Minute), // clock skew
		NotAfter:              now.Add(p.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the CA: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func newServing(ca *x509.Certificate, caKey *ecdsa.PrivateKey, p Policy, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: firstOr(p.DNSNames, p.CommonName)},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(p.ServingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range p.DNSNames {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	if ca.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = ca.NotAfter // a certificate outliving its CA is useless
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// Encode renders a bundle as Secret data.
func Encode(b *Bundle) (map[string][]byte, error) {
	caKey, err := x509.MarshalECPrivateKey(b.CAKey)
	if err != nil {
		return nil, err
	}
	key, err := x509.MarshalECPrivateKey(b.ServingKey)
	if err != nil {
		return nil, err
	}
	var cas bytes.Buffer
	for _, c := range b.CAs {
		_ = pem.Encode(&cas, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return map[string][]byte{
		KeyCACert:  cas.Bytes(),
		KeyCAKey:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: caKey}),
		KeyTLSCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Serving.Raw}),
		KeyTLSKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}),
	}, nil
}

// Decode reads Secret data. What is missing or does not parse is left nil,
// for the checks to notice: a damaged Secret is repaired, not fatal.
func Decode(data map[string][]byte) *Bundle {
	b := &Bundle{}
	rest := data[KeyCACert]
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			b.CAs = append(b.CAs, c)
		}
	}
	b.CAKey = decodeKey(data[KeyCAKey])
	if block, _ := pem.Decode(data[KeyTLSCert]); block != nil {
		b.Serving, _ = x509.ParseCertificate(block.Bytes)
	}
	b.ServingKey = decodeKey(data[KeyTLSKey])
	return b
}

func decodeKey(p []byte) *ecdsa.PrivateKey {
	block, _ := pem.Decode(p)
	if block == nil {
		return nil
	}
	k, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil
	}
	return k
}

// CABundle is the PEM bundle to trust: every CA of the bundle.
func (b *Bundle) CABundle() []byte {
	var out bytes.Buffer
	for _, c := range b.CAs {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
}

// errNoCertificate is what the server says while no certificate is loaded.
var errNoCertificate = errors.New("the webhook serving certificate is not ready yet")
