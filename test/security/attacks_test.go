package security

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// The attack table: each row is mallory, admin of namespace tenant, trying to
// reach the flags of namespace platform (or privileges) that are not hers,
// with what she may do in her namespace. Each asserts what she sees (Event,
// condition, admission answer, gRPC code) and that nothing was copied,
// granted, injected or served. Rows with a grant are the controls: the same
// path works when the platform team permits it.

var _ = Describe("a tenant reaching for another namespace's flags", func() {
	Describe("through a workload annotation naming another namespace's FeatureFlagSource", func() {
		It("without a ReferenceGrant: nothing injected, copied or granted; an Event on her workload, a condition on the source", func(ctx SpecContext) {
			t := newTenancy(ctx)
			create(ctx, t.mallory, optedIn(t.tenant, "web", t.platform+"/platform-src", ""))

			Expect(injected(firstPod(ctx, t.tenant, "web"))).To(BeEmpty(), "the pod got nothing")
			Consistently(leakedInto(ctx, t.tenant)).Should(BeEmpty(), "no copy of the flag set in her namespace")
			Eventually(warnings(ctx, t.tenant, "Deployment", "web")).Should(ContainElement(And(
				HavePrefix(workflows.EventUnresolvedAnnotation),
				ContainSubstring("no ReferenceGrant in namespace "+t.platform+" permits the pods of namespace "+t.tenant))))
			Eventually(condition(ctx, source(t.platform, "platform-src"), v1beta1.ConditionReferrersPermitted)).Should(And(
				HavePrefix("False/RefNotPermitted"), ContainSubstring("Deployment "+t.tenant+"/web")))
		})

		It("with a ReferenceGrant for her pods (the control): delivered; and taken back, copy and all, when the grant goes", func(ctx SpecContext) {
			t := newTenancy(ctx)
			grant := fixtures.PodReferenceGrant(t.platform, "tenant-pods", t.tenant, v1beta1.FeatureFlagSourceKind, "platform-src")
			create(ctx, k8s, grant)
			create(ctx, t.mallory, optedIn(t.tenant, "web", t.platform+"/platform-src", ""))

			Expect(injected(firstPod(ctx, t.tenant, "web"))).To(ContainElement("volume flagd." + t.platform + ".secret-flags"))
			Eventually(leakedInto(ctx, t.tenant)).Should(ConsistOf("ConfigMap flagd." + t.platform + ".secret-flags"))
			Eventually(condition(ctx, source(t.platform, "platform-src"), v1beta1.ConditionReferrersPermitted)).Should(HavePrefix("True/"))

			By("the platform team deletes the grant")
			Expect(k8s.Delete(ctx, grant)).To(Succeed())
			Eventually(leakedInto(ctx, t.tenant)).Should(BeEmpty(), "the copy goes")
			Eventually(condition(ctx, source(t.platform, "platform-src"), v1beta1.ConditionReferrersPermitted)).Should(HavePrefix("False/RefNotPermitted"))
			By("a pod created now gets nothing")
			Expect(k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(t.tenant), client.MatchingLabels{"app": "web"})).To(Succeed())
			Eventually(func() []string {
				p := firstPod(ctx, t.tenant, "web")
				if p.DeletionTimestamp != nil {
					return []string{"(terminating)"}
				}
				return injected(p)
			}).Should(BeEmpty())
		})

		It("with a ReferenceGrant for another namespace's pods: denied", func(ctx SpecContext) {
			t := newTenancy(ctx)
			other := newNamespace(ctx, "other")
			create(ctx, k8s, fixtures.PodReferenceGrant(t.platform, "other-pods", other, v1beta1.FeatureFlagSourceKind, ""))
			create(ctx, t.mallory, optedIn(t.tenant, "web", t.platform+"/platform-src", ""))
			Expect(injected(firstPod(ctx, t.tenant, "web"))).To(BeEmpty())
			Consistently(leakedInto(ctx, t.tenant)).Should(BeEmpty())
		})

		DescribeTable("with a ReferenceGrant naming another kind: denied",
			func(ctx SpecContext, from, to fixtures.GrantRef) {
				t := newTenancy(ctx)
				from.Name = t.tenant
				create(ctx, k8s, fixtures.Grant("v1", t.platform, "wrong-kind", []fixtures.GrantRef{from}, []fixtures.GrantRef{to}))
				create(ctx, t.mallory, optedIn(t.tenant, "web", t.platform+"/platform-src", ""))
				Expect(injected(firstPod(ctx, t.tenant, "web"))).To(BeEmpty())
				Consistently(leakedInto(ctx, t.tenant)).Should(BeEmpty())
				Eventually(condition(ctx, source(t.platform, "platform-src"), v1beta1.ConditionReferrersPermitted)).Should(HavePrefix("False/RefNotPermitted"))
			},
			Entry("from her FeatureFlagSources, not her pods",
				fixtures.GrantRef{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind},
				fixtures.GrantRef{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind}),
			Entry("to FeatureFlags, not FeatureFlagSources",
				fixtures.GrantRef{Group: "", Kind: "Pod"},
				fixtures.GrantRef{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind}),
			Entry("to another FeatureFlagSource by name",
				fixtures.GrantRef{Group: "", Kind: "Pod"},
				fixtures.GrantRef{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind, Name: "platform-k8s"}),
			Entry("from her StatefulSets, while she uses a Deployment",
				fixtures.GrantRef{Group: "apps", Kind: "StatefulSet"},
				fixtures.GrantRef{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind}),
		)

		It("with the kubernetes provider and a grant of the source only: no Role on the platform's FeatureFlags; a grant of every FeatureFlag is what it takes", func(ctx SpecContext) {
			t := newTenancy(ctx)
			create(ctx, k8s, fixtures.PodReferenceGrant(t.platform, "tenant-pods", t.tenant, v1beta1.FeatureFlagSourceKind, "platform-k8s"))
			create(ctx, t.mallory, optedIn(t.tenant, "web", t.platform+"/platform-k8s", ""))

			Expect(injected(firstPod(ctx, t.tenant, "web"))).NotTo(ContainElement(ContainSubstring(`"provider":"kubernetes"`)),
				"the kubernetes entry is left out of the sidecar")
			Consistently(func() bool {
				return canI(ctx, t.tenant, "default", "list", "featureflags.core.openfeature.dev", t.platform)
			}).
				Should(BeFalse(), "her pods' service account may not list the platform's FeatureFlags")

			By("the platform team grants her pods every FeatureFlag (the control)")
			create(ctx, k8s, fixtures.PodReferenceGrant(t.platform, "tenant-pods-read", t.tenant, v1beta1.FeatureFlagKind, ""))
			Eventually(func() bool {
				return canI(ctx, t.tenant, "default", "list", "featureflags.core.openfeature.dev", t.platform)
			}).Should(BeTrue())
			Expect(canI(ctx, t.tenant, "default", "list", "featureflags.core.openfeature.dev", "")).To(BeFalse(), "never cluster-wide")
		})
	})

	It("through a Job's pod annotation naming another namespace's FeatureFlagSource without a grant: nothing injected or copied", func(ctx SpecContext) {
		t := newTenancy(ctx)
		tmpl := optedIn(t.tenant, "job", t.platform+"/platform-src", "").Spec.Template
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		create(ctx, t.mallory, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: t.tenant, Name: "job"}, Spec: batchv1.JobSpec{Template: tmpl}})
		Expect(injected(firstPod(ctx, t.tenant, "job"))).To(BeEmpty())
		Consistently(leakedInto(ctx, t.tenant)).Should(BeEmpty())
		Eventually(condition(ctx, source(t.platform, "platform-src"), v1beta1.ConditionReferrersPermitted)).Should(And(
			HavePrefix("False/RefNotPermitted"), ContainSubstring("Job.batch "+t.tenant+"/job")))
	})

	It("through a workload annotation naming another namespace's InProcessConfiguration without a grant: no env, an Event, a condition", func(ctx SpecContext) {
		t := newTenancy(ctx)
		create(ctx, t.mallory, optedIn(t.tenant, "web", "", t.platform+"/platform-ipc"))
		Expect(injected(firstPod(ctx, t.tenant, "web"))).To(BeEmpty())
		Eventually(warnings(ctx, t.tenant, "Deployment", "web")).Should(ContainElement(And(
			HavePrefix(workflows.EventUnresolvedAnnotation), ContainSubstring("InProcessConfiguration "+t.platform+"/platform-ipc"))))
		Eventually(condition(ctx, ipc(t.platform, "platform-ipc"), v1beta1.ConditionReferrersPermitted)).Should(HavePrefix("False/RefNotPermitted"))
	})

	Describe("through a FeatureFlagSource of her own", func() {
		It("referencing the platform's flag set without a grant: ResolvedRefs says so; nothing copied", func(ctx SpecContext) {
			t := newTenancy(ctx)
			create(ctx, t.mallory, fixtures.Deployment(t.tenant, "web", nil, nil),
				fixtures.Source(t.tenant, "mine", []v1beta1.Source{fixtures.FileRef(t.platform + "/secret-flags")}, fixtures.Targeting("Deployment", "web")))
			Eventually(condition(ctx, source(t.tenant, "mine"), v1beta1.ConditionResolvedRefs)).Should(HavePrefix("False/RefNotPermitted"))
			Expect(injected(firstPod(ctx, t.tenant, "web"))).NotTo(ContainElement(HavePrefix("volume")))
			Consistently(leakedInto(ctx, t.tenant)).Should(BeEmpty())
		})

		It("reading the platform's flag set with the kubernetes provider under a grant of that one FeatureFlag: no Role (flagd would list them all)", func(ctx SpecContext) {
			t := newTenancy(ctx)
			create(ctx, k8s, fixtures.ReferenceGrant(t.platform, "tenant-sources", t.tenant, "secret-flags"))
			create(ctx, t.mallory, fixtures.Deployment(t.tenant, "web", nil, nil),
				fixtures.Source(t.tenant, "mine", []v1beta1.Source{{Source: t.platform + "/secret-flags", Provider: v1beta1.SyncProviderKubernetes}},
					fixtures.Targeting("Deployment", "web")))
			Eventually(condition(ctx, source(t.tenant, "mine"), v1beta1.ConditionResolvedRefs)).Should(HavePrefix("True/"), "the reference itself is granted")
			Expect(injected(firstPod(ctx, t.tenant, "web"))).NotTo(ContainElement(ContainSubstring(`"provider":"kubernetes"`)))
			Consistently(func() bool {
				return canI(ctx, t.tenant, "default", "list", "featureflags.core.openfeature.dev", t.platform)
			}).Should(BeFalse())
			Expect(canI(ctx, t.tenant, "default", "get", "featureflags.core.openfeature.dev", t.platform)).To(BeFalse())
		})

		It("selecting the platform's workloads by their labels: a selector never leaves its namespace; her own workload of those labels is selected (the control)", func(ctx SpecContext) {
			t := newTenancy(ctx)
			src := fixtures.Source(t.tenant, "everyone", []v1beta1.Source{fixtures.FileRef("bait")}, fixtures.Selecting("tier", "core"))
			create(ctx, t.mallory, fixtures.FlagSet(t.tenant, "bait", "on"), src)
			// Her workload once flagplane has the source: its first pod is
			// admitted with it.
			Eventually(condition(ctx, source(t.tenant, "everyone"), v1beta1.ConditionAccepted)).Should(HavePrefix("True/"))
			create(ctx, t.mallory, fixtures.Deployment(t.tenant, "mine", map[string]string{"tier": "core"}, nil))
			targets := func() []v1beta1.WorkloadReference {
				s := source(t.tenant, "everyone")
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
				return s.Status.Targets
			}
			mine := v1beta1.WorkloadReference{Kind: "Deployment", Name: "mine"} // of the source's namespace: none named

			By("the control: the same selector selects her workload labelled tier=core, which gets the flag set")
			Eventually(targets).Should(ConsistOf(mine))
			Eventually(func() []string { return injected(firstPod(ctx, t.tenant, "mine")) }).Should(ContainElement("volume flagd." + t.tenant + ".bait"))
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: t.tenant, Name: "flagd." + t.tenant + ".bait"}, &corev1.ConfigMap{})).To(Succeed())

			By("the platform's workload of the same labels: neither selected nor written to")
			Consistently(targets).Should(ConsistOf(mine))
			Expect(injected(firstPod(ctx, t.platform, "platform-app"))).NotTo(ContainElement(ContainSubstring("bait")))
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: t.platform, Name: "flagd." + t.tenant + ".bait"}, &corev1.ConfigMap{})).
				To(Satisfy(apierrors.IsNotFound), "nothing of hers is written into the platform's namespace")
		})

		It("naming a workload of another namespace in targetRefs: refused at admission", func(ctx SpecContext) {
			t := newTenancy(ctx)
			err := t.mallory.Create(ctx, fixtures.Source(t.tenant, "reach", []v1beta1.Source{fixtures.FileRef("x")},
				fixtures.Targeting("Deployment", t.platform+"/platform-app")))
			Expect(err).To(MatchError(ContainSubstring("a source targets workloads of its own namespace")))
		})
	})

	It("granting herself: she cannot create a ReferenceGrant or a source in the platform's namespace", func(ctx SpecContext) {
		t := newTenancy(ctx)
		Expect(t.mallory.Create(ctx, fixtures.PodReferenceGrant(t.platform, "mine", t.tenant, v1beta1.FeatureFlagSourceKind, ""))).
			To(Satisfy(apierrors.IsForbidden))
		Expect(t.mallory.Create(ctx, fixtures.Source(t.platform, "mine", []v1beta1.Source{fixtures.FileRef("secret-flags")}))).
			To(Satisfy(apierrors.IsForbidden))
	})
})

var _ = Describe("a tenant reaching for another namespace's flags through the sync server", func() {
	It("with a valid token of her own namespace, asking for the platform's flag set: PermissionDenied; her own is served (the control)", func(ctx SpecContext) {
		t := newTenancy(ctx)
		create(ctx, t.mallory, fixtures.FlagSet(t.tenant, "own", "on"))
		for _, c := range []struct {
			credential string
			client     syncv1grpc.FlagSyncServiceClient
		}{
			{"projected service-account token", syncClient(serviceAccountToken(ctx, t.tenant, "default", "flagplane"))},
			{"namespace token", syncClient(nsToken(t.tenant))},
		} {
			By(c.credential)
			Eventually(func() codes.Code { code, _ := fetch(ctx, c.client, t.tenant, "own"); return code }).Should(Equal(codes.OK))
			code, leaked := fetch(ctx, c.client, t.platform, "secret-flags")
			Expect(code).To(Equal(codes.PermissionDenied))
			Expect(leaked).To(BeFalse())
			code, _ = fetch(ctx, c.client, t.platform, "does-not-exist")
			Expect(code).To(Equal(codes.PermissionDenied), "the same answer whether or not it exists")
		}
	})

	It("entitled exactly while a grant lets her pods use a platform source that resolves the flag set", func(ctx SpecContext) {
		t := newTenancy(ctx)
		create(ctx, k8s, fixtures.Source(t.platform, "platform-proxy", []v1beta1.Source{{Source: "secret-flags", Provider: v1beta1.SyncProviderFlagdProxy}}))
		create(ctx, t.mallory, optedIn(t.tenant, "web", t.platform+"/platform-proxy", ""))
		cl := syncClient(nsToken(t.tenant))
		Consistently(func() codes.Code { code, _ := fetch(ctx, cl, t.platform, "secret-flags"); return code }).Should(Equal(codes.PermissionDenied))

		grant := fixtures.PodReferenceGrant(t.platform, "tenant-pods", t.tenant, v1beta1.FeatureFlagSourceKind, "platform-proxy")
		create(ctx, k8s, grant)
		Eventually(func() codes.Code { code, _ := fetch(ctx, cl, t.platform, "secret-flags"); return code }).Should(Equal(codes.OK))
		By("a pod admitted now syncs from the sync server")
		Expect(k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(t.tenant), client.MatchingLabels{"app": "web"})).To(Succeed())
		Eventually(func() []string { return injected(firstPod(ctx, t.tenant, "web")) }).Should(ContainElement(ContainSubstring(op.SyncAddress)))

		Expect(k8s.Delete(ctx, grant)).To(Succeed())
		Eventually(func() codes.Code { code, _ := fetch(ctx, cl, t.platform, "secret-flags"); return code }).Should(Equal(codes.PermissionDenied))
	})

	DescribeTable("with a token that is not a valid one: Unauthenticated",
		func(ctx SpecContext, token func(*tenancy) string) {
			t := newTenancy(ctx)
			create(ctx, t.mallory, fixtures.FlagSet(t.tenant, "own", "on"))
			code, _ := fetch(ctx, syncClient(token(t)), t.tenant, "own")
			Expect(code).To(Equal(codes.Unauthenticated))
		},
		Entry("forged: JWT-shaped, signed by nobody", func(*tenancy) string {
			return "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6eDp5In0.c2lnbmF0dXJl"
		}),
		Entry("forged: the control's claims, signed with a key of her own", func(t *tenancy) string {
			return signJWT(tokenClaims(context.Background(), t.tenant, "default", "flagplane", time.Now().Add(time.Hour)), attackerKey())
		}),
		Entry(`forged: the control's claims with alg "none" and no signature`, func(t *tenancy) string {
			return unsignedJWT(tokenClaims(context.Background(), t.tenant, "default", "flagplane", time.Now().Add(time.Hour)), "")
		}),
		Entry(`forged: a genuine token's claims and signature under alg "none"`, func(t *tenancy) string {
			claims := tokenClaims(context.Background(), t.tenant, "default", "flagplane", time.Now().Add(time.Hour))
			genuine := signJWT(claims, apiServerSigningKey())
			return unsignedJWT(claims, genuine[strings.LastIndexByte(genuine, '.')+1:])
		}),
		Entry("expired: signed with the API server's key, expired a minute ago", func(t *tenancy) string {
			return signedToken(context.Background(), t.tenant, "default", "flagplane", time.Now().Add(-time.Minute))
		}),
		Entry("for another audience", func(t *tenancy) string {
			return serviceAccountToken(context.Background(), t.tenant, "default", "some-other-service")
		}),
		Entry("a namespace token whose namespace was changed", func(t *tenancy) string {
			return tamperedNamespaceToken(nsToken(t.tenant), t.tenant, t.platform)
		}),
	)

	It("the control of the forged-token rows: the same claims, signed with the API server's key and not expired, are accepted", func(ctx SpecContext) {
		t := newTenancy(ctx)
		create(ctx, t.mallory, fixtures.FlagSet(t.tenant, "own", "on"))
		code, _ := fetch(ctx, syncClient(signedToken(ctx, t.tenant, "default", "flagplane", time.Now().Add(time.Hour))), t.tenant, "own")
		Expect(code).To(Equal(codes.OK))
	})
})

var _ = Describe("squatting on a name flagplane generates", func() {
	It("a ConfigMap made by a user is neither taken over nor deleted; the source says why; flagplane takes the name once it is free", func(ctx SpecContext) {
		t := newTenancy(ctx)
		name := topology.ConfigMapName(topology.FlagSetKey(t.tenant, "flags"))
		squat := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.tenant, Name: name}, Data: map[string]string{"mine": "do not touch"}}
		create(ctx, t.mallory, squat)
		create(ctx, t.mallory, fixtures.FlagSet(t.tenant, "flags", "on"), fixtures.Deployment(t.tenant, "web", nil, nil),
			fixtures.Source(t.tenant, "src", []v1beta1.Source{fixtures.FileRef("flags")}, fixtures.Targeting("Deployment", "web")))

		Eventually(condition(ctx, source(t.tenant, "src"), v1beta1.ConditionProgrammed)).Should(And(
			HavePrefix("False/"+v1beta1.ReasonApplyFailed), ContainSubstring("ConfigMap "+t.tenant+"/"+name+" exists and is not managed by flagplane")))
		Consistently(func() map[string]string {
			cm := &corev1.ConfigMap{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(squat), cm)).To(Succeed())
			return cm.Data
		}).Should(Equal(squat.Data), "not taken over, not deleted")
		Expect(injected(firstPod(ctx, t.tenant, "web"))).NotTo(ContainElement(HavePrefix("volume")), "the pod does not mount somebody else's ConfigMap")

		By("the user deletes it")
		Expect(t.mallory.Delete(ctx, squat)).To(Succeed())
		Eventually(func() map[string]string {
			cm := &corev1.ConfigMap{}
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(squat), cm)
			return cm.Labels
		}, 2*time.Minute).Should(HaveKeyWithValue(v1beta1.LabelManagedBy, v1beta1.ManagedByValue), "retried with backoff until the name is free")
		Eventually(condition(ctx, source(t.tenant, "src"), v1beta1.ConditionProgrammed)).Should(HavePrefix("True/"))
	})

	It("a Role made by a user under the name of a workload's grant is not bound to the workload's service account", func(ctx SpecContext) {
		t := newTenancy(ctx)
		name := rbac.Name(topology.WorkloadKey(topology.KindDeployment, t.tenant, "web"))
		squat := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.tenant, Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}
		create(ctx, t.mallory, squat)
		d := fixtures.Deployment(t.tenant, "web", nil, nil)
		d.Spec.Template.Spec.ServiceAccountName = "default"
		create(ctx, t.mallory, fixtures.FlagSet(t.tenant, "flags", "on"), d,
			fixtures.Source(t.tenant, "src", []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderKubernetes}}, fixtures.Targeting("Deployment", "web")))

		Eventually(condition(ctx, source(t.tenant, "src"), v1beta1.ConditionProgrammed)).Should(And(
			HavePrefix("False/"+v1beta1.ReasonApplyFailed), ContainSubstring("exists and is not managed by flagplane")))
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: t.tenant, Name: name}, &rbacv1.RoleBinding{})
		}).Should(Satisfy(apierrors.IsNotFound), "no binding to a Role flagplane does not control")
		Expect(canI(ctx, t.tenant, "default", "list", "configmaps", t.tenant)).To(BeFalse())
		got := &rbacv1.Role{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(squat), got)).To(Succeed())
		Expect(got.Rules).To(Equal(squat.Rules), "not taken over")
	})
})

var _ = It("relaxing the sidecar's securityContext from a source she writes: ignored unless the operator allows it (off by default)", func(ctx SpecContext) {
	t := newTenancy(ctx)
	src := fixtures.Source(t.tenant, "src", []v1beta1.Source{fixtures.FileRef("flags")}, fixtures.Targeting("Deployment", "web"))
	src.Annotations = map[string]string{injection.AnnotationSidecarSecurityContext: `{"privileged": true, "runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": true}`}
	create(ctx, t.mallory, fixtures.FlagSet(t.tenant, "flags", "on"), src, fixtures.Deployment(t.tenant, "web", nil, nil))
	var sidecar *corev1.Container
	pod := firstPod(ctx, t.tenant, "web")
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == injection.SidecarName {
			sidecar = &pod.Spec.InitContainers[i]
		}
	}
	Expect(sidecar).NotTo(BeNil())
	Expect(sidecar.SecurityContext).To(Equal(injection.HardenedSecurityContext()))
})

// nsToken is the sync server's namespace token of ns, as the webhook writes
// it into the sidecars of that namespace.
func nsToken(ns string) string {
	GinkgoHelper()
	h, err := op.NamespaceTokens.HeadersFor(ns)
	Expect(err).NotTo(HaveOccurred())
	token, ok := strings.CutPrefix(h["authorization"], "Bearer ")
	Expect(ok).To(BeTrue(), "headers %v", h)
	return token
}

// tamperedNamespaceToken replaces the namespace a namespace token
// ("fpns1.<namespace, base64url>.<MAC>") names, keeping its MAC.
func tamperedNamespaceToken(token, from, to string) string {
	GinkgoHelper()
	enc := base64.RawURLEncoding
	tampered := strings.Replace(token, "."+enc.EncodeToString([]byte(from))+".", "."+enc.EncodeToString([]byte(to))+".", 1)
	Expect(tampered).NotTo(Equal(token), "unexpected namespace token format: %s", token)
	return tampered
}
