package syncserver

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestEnsureNamespaceTokenKeys(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "flagplane-system", Name: DefaultNamespaceTokenKeySecret}

	t.Run("absent: created with one fresh key, then read by the next replica", func(t *testing.T) {
		g := NewWithT(t)
		c := fake.NewClientBuilder().Build()
		keys, created, err := EnsureNamespaceTokenKeys(ctx, c, c, key.Namespace, key.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(created).To(BeTrue())
		g.Expect(keys.Keys).To(HaveLen(1))
		g.Expect(len(keys.Keys[0])).To(BeNumerically(">=", MinKeyLen))
		secret := &corev1.Secret{}
		g.Expect(c.Get(ctx, key, secret)).To(Succeed())
		g.Expect(secret.Data).To(HaveKey(NamespaceTokenKeySecretKey))

		again, created, err := EnsureNamespaceTokenKeys(ctx, c, c, key.Namespace, key.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(created).To(BeFalse())
		g.Expect(again.Keys).To(Equal(keys.Keys), "replicas share the key")
		token, err := keys.Issue("shop")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.HeadersFor("shop")).To(HaveKeyWithValue("authorization", "Bearer "+token))
	})
	t.Run("present: its keys, in order, the first signing", func(t *testing.T) {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Data: map[string][]byte{NamespaceTokenKeySecretKey: []byte("\n  " + string(bytes32('a')) + "\n" + string(bytes32('b')) + "\n")}}).Build()
		keys, created, err := EnsureNamespaceTokenKeys(ctx, c, c, key.Namespace, key.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(created).To(BeFalse())
		g.Expect(keys.Keys).To(Equal([][]byte{bytes32('a'), bytes32('b')}))
	})
	t.Run("another replica created it meanwhile: its keys are used", func(t *testing.T) {
		g := NewWithT(t)
		theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Data: map[string][]byte{NamespaceTokenKeySecretKey: bytes32('z')}}
		c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				g.Expect(c.Create(ctx, theirs.DeepCopy())).To(Succeed())
				return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, obj.GetName())
			},
		}).Build()
		keys, created, err := EnsureNamespaceTokenKeys(ctx, c, c, key.Namespace, key.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(created).To(BeFalse())
		g.Expect(keys.Keys).To(Equal([][]byte{bytes32('z')}))
	})
	t.Run("a key too short is refused, not used", func(t *testing.T) {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Data: map[string][]byte{NamespaceTokenKeySecretKey: []byte("short")}}).Build()
		_, _, err := EnsureNamespaceTokenKeys(ctx, c, c, key.Namespace, key.Name)
		g.Expect(err).To(MatchError(ContainSubstring("at least 32 bytes")))
	})
}

func bytes32(c byte) []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestConfigKeySecret(t *testing.T) {
	g := NewWithT(t)
	c := DefaultConfig()
	c.NamespaceTokenKeySecret = "flagplane-sync-keys"
	c.SecretNamespace = "ops"
	g.Expect(c.Validate()).To(Succeed())
	ns, name := c.keySecret()
	g.Expect([]string{ns, name}).To(Equal([]string{"ops", "flagplane-sync-keys"}))
	c.NamespaceTokenKeySecret = "other/keys"
	ns, name = c.keySecret()
	g.Expect([]string{ns, name}).To(Equal([]string{"other", "keys"}))
	c.NamespaceTokenKeyFile = "/etc/keys"
	g.Expect(c.Validate()).To(MatchError(ContainSubstring("exclude each other")))
	c.NamespaceTokenKeyFile, c.NamespaceTokenKeySecret = "", "Bad_Name"
	g.Expect(c.Validate()).To(MatchError(ContainSubstring(`--sync-namespace-token-key-secret "Bad_Name"`)))
}
