package security

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/workflows/injection"
)

// secretFlag is the flag of the platform's flag set: a tenant that can read
// it anywhere has won.
const secretFlag = "launch-codes"

// tenancy is the world of one row of the attack table: a platform namespace
// with a flag set, sources (file and kubernetes provider) and an in-process
// configuration, and a tenant namespace whose admin, mallory, attacks.
type tenancy struct {
	platform, tenant string
	// mallory is a client as the tenant's namespace admin (the built-in
	// admin role, with flagplane's editor rules aggregated into it).
	mallory client.Client
}

const tenantUser = "mallory"

func newTenancy(ctx context.Context) *tenancy {
	GinkgoHelper()
	t := &tenancy{platform: newNamespace(ctx, "platform"), tenant: newNamespace(ctx, "tenant")}
	Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.tenant, Name: "mallory-is-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantUser}},
	})).To(Succeed())
	t.mallory = impersonating(tenantUser)

	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: t.platform, Name: "secret-flags"}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		secretFlag: {State: "ENABLED", Variants: json.RawMessage(`{"red":"0000","blue":"1234"}`), DefaultVariant: "red"},
	}
	platformWorkload := fixtures.Deployment(t.platform, "platform-app", map[string]string{"app": "platform-app", "tier": "core"}, nil)
	create(ctx, k8s, ff, platformWorkload,
		fixtures.Source(t.platform, "platform-src", []v1beta1.Source{fixtures.FileRef("secret-flags")}, fixtures.Targeting("Deployment", "platform-app")),
		fixtures.Source(t.platform, "platform-k8s", []v1beta1.Source{{Source: "secret-flags", Provider: v1beta1.SyncProviderKubernetes}}),
		&v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: t.platform, Name: "platform-ipc"},
			Spec: v1beta1.InProcessConfigurationSpec{Host: "flags.platform.svc", Port: 9999}},
	)
	// Mallory's rights are in place once the API server says so.
	Eventually(func() error {
		return t.mallory.List(ctx, &appsv1.DeploymentList{}, client.InNamespace(t.tenant))
	}).Should(Succeed())
	return t
}

// impersonating is a client that acts as user.
func impersonating(user string) client.Client {
	GinkgoHelper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, prefix)
	Expect(err).NotTo(HaveOccurred())
	return ns
}

func create(ctx context.Context, c client.Client, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(c.Create(ctx, o)).To(Succeed(), "creating %T %s/%s", o, o.GetNamespace(), o.GetName())
	}
}

// optedIn is a Deployment of ns whose pod template opts in the OpenFeature
// Operator way, naming sources (and in-process configurations) by annotation.
func optedIn(ns, name, sources, ipcs string) *appsv1.Deployment {
	a := map[string]string{v1beta1.AnnotationEnabled: "true"}
	if sources != "" {
		a[v1beta1.AnnotationFeatureFlagSource] = sources
	}
	if ipcs != "" {
		a[v1beta1.AnnotationInProcessConfiguration] = ipcs
	}
	return fixtures.Deployment(ns, name, map[string]string{"app": name}, a)
}

// leakedInto lists the objects of ns (ConfigMaps) that hold the platform's secret flag.
func leakedInto(ctx context.Context, ns string) func() []string {
	return func() []string {
		var list corev1.ConfigMapList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, cm := range list.Items {
			for _, v := range cm.Data {
				if strings.Contains(v, secretFlag) {
					out = append(out, "ConfigMap "+cm.Name)
				}
			}
		}
		return out
	}
}

// firstPod waits for the first pod of a Deployment (created by the
// ReplicaSet controller, admitted by flagplane's webhook) and returns it.
func firstPod(ctx context.Context, ns, app string) corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Eventually(func() int {
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		return len(pods.Items)
	}).Should(BeNumerically(">", 0), "no pod of %s/%s", ns, app)
	return pods.Items[0]
}

// injected describes what flagplane put into a pod: its flagd sidecar and
// the flag volumes and env it got.
func injected(p corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.InitContainers {
		if c.Name == injection.SidecarName {
			out = append(out, "sidecar "+strings.Join(c.Args, " "))
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, "flagd.") {
			out = append(out, "volume "+v.ConfigMap.Name)
		}
	}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "FLAGD_") {
				out = append(out, "env "+e.Name+"="+e.Value)
			}
		}
	}
	return out
}

// canI asks the API server whether a service account may do something:
// resource is "<plural>" or "<plural>.<group>", namespace "" for all.
func canI(ctx context.Context, saNamespace, sa, verb, resource, namespace string) bool {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	Expect(err).NotTo(HaveOccurred())
	res, group, _ := strings.Cut(resource, ".")
	review, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + saNamespace + ":" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: group, Resource: res,
			},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return review.Status.Allowed
}

// warnings lists "Reason: note" of the Warning Events about an object.
func warnings(ctx context.Context, ns, kind, name string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Regarding.Kind == kind && e.Regarding.Name == name {
				out = append(out, e.Reason+": "+e.Note)
			}
		}
		return out
	}
}

// condition returns "Status/Reason: message" of a condition of an object.
func condition(ctx context.Context, obj client.Object, condType string) func() string {
	return func() string {
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *v1beta1.FeatureFlagSource:
			conds = o.Status.Conditions
		case *v1beta1.InProcessConfiguration:
			conds = o.Status.Conditions
		case *v1beta1.FeatureFlag:
			conds = o.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, condType)
		if c == nil {
			return "missing"
		}
		return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
	}
}

func source(ns, name string) *v1beta1.FeatureFlagSource {
	return &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func ipc(ns, name string) *v1beta1.InProcessConfiguration {
	return &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// --- the sync server ---

// syncClient is a client of the operator's sync server presenting token.
func syncClient(token string) syncv1grpc.FlagSyncServiceClient {
	GinkgoHelper()
	conn, err := grpc.NewClient(op.SyncAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(conn.Close)
	return syncv1grpc.NewFlagSyncServiceClient(&bearer{conn: conn, token: token})
}

// bearer sends a fixed authorization header, as flagd and SDKs do.
type bearer struct {
	conn  *grpc.ClientConn
	token string
}

func (b *bearer) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return b.conn.Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+b.token), method, args, reply, opts...)
}

func (b *bearer) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return b.conn.NewStream(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+b.token), desc, method, opts...)
}

// fetch asks for a flag set by flagd-proxy selector and returns the gRPC code
// and, when served, whether the content holds the secret flag.
func fetch(ctx context.Context, c syncv1grpc.FlagSyncServiceClient, ns, name string) (codes.Code, bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.FetchAllFlags(ctx, &syncv1.FetchAllFlagsRequest{Selector: injection.FlagdProxySelectorPrefix + ns + "/" + name})
	if err != nil {
		return status.Code(err), false
	}
	return codes.OK, strings.Contains(resp.GetFlagConfiguration(), secretFlag)
}

// serviceAccountToken asks the API server for a token of a service account.
func serviceAccountToken(ctx context.Context, ns, sa, audience string) string {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// signedToken is a service-account token signed with the API server's own
// key, valid or expired: what the API server would have issued, without
// waiting ten minutes for one to expire.
func signedToken(ctx context.Context, ns, sa, audience string, expires time.Time) string {
	GinkgoHelper()
	return signJWT(tokenClaims(ctx, ns, sa, audience, expires), apiServerSigningKey())
}

// tokenClaims are the claims of a service-account token as the API server
// issues them.
func tokenClaims(ctx context.Context, ns, sa, audience string, expires time.Time) map[string]any {
	GinkgoHelper()
	account := &corev1.ServiceAccount{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, account)).To(Succeed())
	now := time.Now()
	return map[string]any{
		"aud": []string{audience}, "iss": cp.ServiceAccountIssuer(), "sub": "system:serviceaccount:" + ns + ":" + sa,
		"iat": now.Add(-time.Hour).Unix(), "nbf": now.Add(-time.Hour).Unix(), "exp": expires.Unix(),
		"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": sa, "uid": string(account.UID)}},
	}
}

// apiServerSigningKey is the key the API server signs service-account
// tokens with.
func apiServerSigningKey() crypto.Signer {
	GinkgoHelper()
	raw, err := os.ReadFile(cp.ServiceAccountSigningKeyPath())
	Expect(err).NotTo(HaveOccurred())
	block, _ := pem.Decode(raw)
	Expect(block).NotTo(BeNil(), "no PEM in the signing key file")
	key, err := parsePrivateKey(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return key
}

// attackerKey is a key of the attacker's own, generated now, of the kind
// the API server signs with: a token it signs differs from a genuine one
// by its key alone.
func attackerKey() crypto.Signer {
	GinkgoHelper()
	var key crypto.Signer
	var err error
	switch k := apiServerSigningKey().(type) {
	case *rsa.PrivateKey:
		key, err = rsa.GenerateKey(rand.Reader, k.N.BitLen())
	case *ecdsa.PrivateKey:
		key, err = ecdsa.GenerateKey(k.Curve, rand.Reader)
	default:
		err = fmt.Errorf("signing key of type %T", k)
	}
	Expect(err).NotTo(HaveOccurred())
	return key
}

// signJWT is a compact JWT of claims signed with key: RS256 for an RSA
// key, ES256 for a P-256 one.
func signJWT(claims map[string]any, key crypto.Signer) string {
	GinkgoHelper()
	alg := "RS256"
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		alg = "ES256"
	}
	signing := jwtSegment(map[string]string{"alg": alg, "typ": "JWT"}) + "." + jwtSegment(claims)
	digest := sha256.Sum256([]byte(signing))
	var sig []byte
	var err error
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
	case *ecdsa.PrivateKey:
		var r, s *big.Int
		if r, s, err = ecdsa.Sign(rand.Reader, k, digest[:]); err == nil {
			sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		}
	default:
		err = fmt.Errorf("signing key of type %T", key)
	}
	Expect(err).NotTo(HaveOccurred())
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// unsignedJWT is claims under the header {"alg":"none"}, followed by
// signature: "" for none at all.
func unsignedJWT(claims map[string]any, signature string) string {
	return jwtSegment(map[string]string{"alg": "none", "typ": "JWT"}) + "." + jwtSegment(claims) + "." + signature
}

func jwtSegment(v any) string {
	GinkgoHelper()
	data, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return base64.RawURLEncoding.EncodeToString(data)
}

func parsePrivateKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}
