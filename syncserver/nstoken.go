package syncserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"
)

// NamespaceTokens issues and checks flagplane's own namespace tokens: an
// HMAC-SHA256 over a namespace, with a key only flagplane holds.
//
// They exist for the injected flagd sidecar. flagd (v0.16) can send only a
// fixed header that is written into its arguments when the pod is admitted,
// so it cannot present the kubelet's rotating service-account token; the
// webhook puts a namespace token there instead (see SidecarHeaders).
//
// A namespace token proves "a workload of namespace N" and nothing else: it
// grants what N is entitled to, and it is readable by whoever can read N's
// pod specs, who can as a rule read N's generated ConfigMaps too. It does not
// expire; rotating the key (Keys[0] signs, every key verifies) revokes the
// tokens of the keys dropped.
type NamespaceTokens struct {
	// Keys verify tokens; the first one also signs. Each must be at least
	// 32 bytes. Replicas of the operator must share them.
	Keys [][]byte
}

// namespaceTokenPrefix marks and versions namespace tokens, so that a chain
// hands other tokens (service-account JWTs) to the next authenticator
// without a cryptographic check.
const namespaceTokenPrefix = "fpns1."

// namespaceTokenContext separates these MACs from any other use of the key.
const namespaceTokenContext = "flagplane sync namespace token v1\x00"

// MinKeyLen is the shortest key NamespaceTokens accepts.
const MinKeyLen = 32

var _ Authenticator = (*NamespaceTokens)(nil)

// Validate checks the keys.
func (n *NamespaceTokens) Validate() error {
	if len(n.Keys) == 0 {
		return errors.New("namespace tokens need at least one key")
	}
	for _, k := range n.Keys {
		if len(k) < MinKeyLen {
			return errors.New("namespace token keys must be at least 32 bytes")
		}
	}
	return nil
}

// Issue returns the token of a namespace, signed with the first key.
func (n *NamespaceTokens) Issue(namespace string) (string, error) {
	if err := n.Validate(); err != nil {
		return "", err
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return "", errors.New("invalid namespace " + namespace + ": " + strings.Join(errs, "; "))
	}
	enc := base64.RawURLEncoding
	return namespaceTokenPrefix + enc.EncodeToString([]byte(namespace)) + "." + enc.EncodeToString(mac(n.Keys[0], namespace)), nil
}

// HeadersFor returns the gRPC headers by which an injected sidecar of a pod
// of namespace proves it: its namespace token, as SidecarHeaders sends it.
// The result is deterministic (the webhook's rollout fingerprint hashes it),
// so changing the signing key rolls out every workload that syncs from the
// server; add a new key second (verifying only), then move it first, and
// drop the old one once the rollouts are done.
func (n *NamespaceTokens) HeadersFor(namespace string) (map[string]string, error) {
	token, err := n.Issue(namespace)
	if err != nil {
		return nil, err
	}
	return SidecarHeaders(token), nil
}

// Authenticate implements Authenticator. Tokens without the namespace-token
// prefix are declined with Unauthenticated, for the next authenticator.
func (n *NamespaceTokens) Authenticate(_ context.Context, token string) (Identity, error) {
	rest, ok := strings.CutPrefix(token, namespaceTokenPrefix)
	if !ok {
		return Identity{}, status.Error(codes.Unauthenticated, "not a flagplane namespace token")
	}
	invalid := status.Error(codes.Unauthenticated, "invalid flagplane namespace token")
	nsPart, macPart, ok := strings.Cut(rest, ".")
	if !ok {
		return Identity{}, invalid
	}
	// Strict decoding: one token per namespace and key, no malleable variants.
	enc := base64.RawURLEncoding.Strict()
	ns, err1 := enc.DecodeString(nsPart)
	got, err2 := enc.DecodeString(macPart)
	if err1 != nil || err2 != nil || len(validation.IsDNS1123Label(string(ns))) > 0 {
		return Identity{}, invalid
	}
	for _, k := range n.Keys {
		if len(k) >= MinKeyLen && hmac.Equal(got, mac(k, string(ns))) {
			return Identity{Namespace: string(ns)}, nil
		}
	}
	return Identity{}, invalid
}

func mac(key []byte, namespace string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(namespaceTokenContext))
	h.Write([]byte(namespace))
	return h.Sum(nil)
}
