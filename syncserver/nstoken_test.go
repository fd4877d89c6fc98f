package syncserver

import (
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, MinKeyLen) }

func TestNamespaceTokens(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	old := &NamespaceTokens{Keys: [][]byte{key(1)}}
	rotated := &NamespaceTokens{Keys: [][]byte{key(2), key(1)}}
	other := &NamespaceTokens{Keys: [][]byte{key(3)}}

	tok, err := old.Issue("shop")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tok).To(HavePrefix("fpns1."))

	id, err := old.Authenticate(ctx, tok)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(Identity{Namespace: "shop"}))

	// A rotated key set still verifies the old key's tokens, and signs with the new key.
	_, err = rotated.Authenticate(ctx, tok)
	g.Expect(err).NotTo(HaveOccurred())
	newTok, _ := rotated.Issue("shop")
	g.Expect(newTok).NotTo(Equal(tok))
	_, err = old.Authenticate(ctx, newTok)
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))

	// Another key refuses.
	_, err = other.Authenticate(ctx, tok)
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))

	// A MAC moved to another namespace refuses.
	shopPart := strings.Split(tok, ".")[1]
	adminTok, _ := old.Issue("admin")
	forged := strings.Replace(adminTok, strings.Split(adminTok, ".")[1], shopPart, 1)
	_, err = old.Authenticate(ctx, forged)
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))
	forged = strings.Replace(tok, shopPart, strings.Split(adminTok, ".")[1], 1)
	_, err = old.Authenticate(ctx, forged)
	g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated))

	for _, bad := range []string{"", "fpns1.", "fpns1.x", "fpns1.!!.!!", "eyJhbGciOi.jwt.like"} {
		_, err = old.Authenticate(ctx, bad)
		g.Expect(status.Code(err)).To(Equal(codes.Unauthenticated), bad)
	}
}

func TestNamespaceTokensRefuseWeakKeysAndBadNamespaces(t *testing.T) {
	g := NewWithT(t)
	_, err := (&NamespaceTokens{}).Issue("shop")
	g.Expect(err).To(HaveOccurred())
	_, err = (&NamespaceTokens{Keys: [][]byte{[]byte("short")}}).Issue("shop")
	g.Expect(err).To(MatchError(ContainSubstring("32 bytes")))
	_, err = (&NamespaceTokens{Keys: [][]byte{key(1)}}).Issue("Not_A_Namespace")
	g.Expect(err).To(HaveOccurred())
	// A short key configured beside a good one never verifies anything.
	weak := &NamespaceTokens{Keys: [][]byte{key(1), []byte("short")}}
	g.Expect(weak.Validate()).To(HaveOccurred())
}

func FuzzNamespaceTokensAuthenticate(f *testing.F) {
	n := &NamespaceTokens{Keys: [][]byte{key(7)}}
	tok, _ := n.Issue("shop")
	f.Add(tok)
	f.Add("fpns1..")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := n.Authenticate(context.Background(), s)
		if err == nil && s != tok {
			// Only a token issued with the key proves a namespace.
			if again, _ := n.Issue(id.Namespace); again != s {
				t.Fatalf("accepted %q for namespace %q, but the token of that namespace is %q", s, id.Namespace, again)
			}
		}
	})
}

func TestHeadersFor(t *testing.T) {
	g := NewWithT(t)
	n := &NamespaceTokens{Keys: [][]byte{key(4)}}
	h, err := n.HeadersFor("shop")
	g.Expect(err).NotTo(HaveOccurred())
	tok, _ := n.Issue("shop")
	g.Expect(h).To(Equal(map[string]string{"authorization": "Bearer " + tok}))
	again, _ := n.HeadersFor("shop")
	g.Expect(again).To(Equal(h), "deterministic")
	_, err = n.HeadersFor("Not A Namespace")
	g.Expect(err).To(HaveOccurred())
}
