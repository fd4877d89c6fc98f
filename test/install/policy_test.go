package install

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/history"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/restarts"
	"github.com/flagplane/flagplane/workflows/status"
)

// How the API server words a refusal by config/policy, and the message of
// each of its validations.
const (
	policyRefusal       = "ValidatingAdmissionPolicy 'flagplane-manager' with binding 'flagplane-manager' denied request: "
	policyOnlyGenerated = "flagplane-manager may create, change and delete only the ConfigMaps, Roles and RoleBindings it generates"
	policyConfigMapName = "flagplane-manager may write and delete only the ConfigMaps it generates, named flagd."
	policyRole          = "flagplane-manager may write only Roles named flagplane:featureflag-reader:"
	policyRoleBinding   = "flagplane-manager may write only RoleBindings named flagplane:featureflag-reader:"
	policyRestartOnly   = "flagplane-manager may change a Deployment, StatefulSet or DaemonSet only the way `kubectl rollout restart` does"
	policyFlagdChildren = "flagplane-manager may create, change and delete only the Services, Ingresses and HTTPRoutes it generates for Flagds"
	policyRevisions     = "flagplane-manager may create only FeatureFlagRevisions labelled delivery.flagplane.dev/flag-set and controlled by the FeatureFlag of their spec.flagSet"
)

// refusedByPolicy matches the API server's refusal of a request by
// config/policy's validation with that message: 403 Forbidden.
func refusedByPolicy(message string) types.GomegaMatcher {
	return And(
		WithTransform(apierrors.IsForbidden, BeTrue()),
		MatchError(ContainSubstring(policyRefusal+message)),
	)
}

// refusedByEscalationCheck matches RBAC's escalation prevention: a Role or
// RoleBinding that grants more than the requester holds is refused before
// admission (and so before the policy) is consulted.
func refusedByEscalationCheck() types.GomegaMatcher {
	return And(
		WithTransform(apierrors.IsForbidden, BeTrue()),
		MatchError(ContainSubstring("is attempting to grant RBAC permissions not currently held")),
		Not(MatchError(ContainSubstring(policyRefusal))),
	)
}

// refusedByRBAC matches an RBAC authorization refusal (before admission).
func refusedByRBAC() types.GomegaMatcher {
	return And(
		WithTransform(apierrors.IsForbidden, BeTrue()),
		MatchError(MatchRegexp(`User "[^"]+" cannot`)),
		Not(MatchError(ContainSubstring(policyRefusal))),
	)
}

// waitForPolicy waits until the API server enforces config/policy, by
// observing a refusal: a new policy takes a moment to be loaded.
func waitForPolicy(ctx context.Context) {
	GinkgoHelper()
	asManager := clientAs(impersonating(systemNS, managerSA))
	Eventually(func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "flagplane-policy-probe"}}
		return asManager.Create(ctx, cm, client.DryRunAll)
	}).Should(refusedByPolicy(policyOnlyGenerated))
}

// misuse is a request flagplane's manager has no business making, done as
// a dry run (the policy is consulted all the same) on the objects of target.
type misuse func(ctx context.Context, c client.Client, t *target) error

// target holds what the misuse table reaches for.
type target struct {
	ns            string
	foreignCM     string // a ConfigMap of the namespace's owner, unlabelled
	managedCM     string // a ConfigMap labelled managed-by=flagplane, named as generated
	labelledCM    string // a ConfigMap labelled managed-by=flagplane, not named as generated
	labelledRole  string // a Role labelled managed-by=flagplane, not named as generated
	workload      string // a Deployment
	statefulSet   string
	daemonSet     string
	role          string // a managed Role named as generated, on featureflags
	heldClusterRo string // a ClusterRole granting only what the manager holds (get ConfigMaps)
	// flagd is what the manager generates for a Flagd "flags" of ns (not
	// created: the rows create it as a dry run).
	flagd *flagds.Objects
	// flagSet is a FeatureFlag "checkout"; ownedRev a revision it
	// controls, orphanRev one of its name without a controller.
	flagSet             *v1beta1.FeatureFlag
	ownedRev, orphanRev string
}

// revisionOf is revision number of t.flagSet as the history records it,
// with the FeatureFlag's content.
func revisionOf(t *target, number int64) *deliveryv1alpha1.FeatureFlagRevision {
	return history.Desired(t.flagSet, strings.Repeat("a", 32), number, "", true)
}

// ownerRefsPatch patches a revision's ownerReferences to refs (JSON).
func ownerRefsPatch(ctx context.Context, c client.Client, t *target, name, refs string) error {
	return mergePatch(ctx, c, &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name}},
		`{"metadata":{"ownerReferences":`+refs+`}}`)
}

// controllerRefJSON is a controller reference to a FeatureFlag.
func controllerRefJSON(name string, uid apitypes.UID) string {
	return fmt.Sprintf(`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","name":%q,"uid":%q,"controller":true}`, name, uid)
}

// flagdObjects computes, as the manager does, the objects of a Flagd of ns
// with a file source and an Ingress.
func flagdObjects(ns string) *flagds.Objects {
	GinkgoHelper()
	objects := fmt.Sprintf(`
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: flags, namespace: %[1]s}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "on"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: src, namespace: %[1]s}
spec: {sources: [{source: flags, provider: file}]}
---
apiVersion: core.openfeature.dev/v1beta1
kind: Flagd
metadata: {name: flags, namespace: %[1]s, uid: 00000000-0000-0000-0000-00000000f1a9}
spec: {featureFlagSource: src, ingress: {enabled: true}}
`, ns)
	topo := topology.New()
	Expect(manifests.Load(topo, strings.NewReader(objects))).To(Succeed())
	objs := flagds.Desired(topo.Snapshot(), topology.FlagdKey(ns, "flags"), flagds.DefaultOptions())
	Expect(objs.Deployment).NotTo(BeNil())
	return objs
}

// flagdDeployment is the Flagd's Deployment, changed by mutate.
func flagdDeployment(t *target, mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	d := t.flagd.Deployment.DeepCopy()
	if mutate != nil {
		mutate(d)
	}
	return d
}

func managed() map[string]string { return workflows.ManagedLabels() }

func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch string) error {
	return c.Patch(ctx, obj, client.RawPatch(apitypes.MergePatchType, []byte(patch)), client.DryRunAll)
}

// describePolicy is the misuse table: what the manager's ServiceAccount
// could do with the RBAC of config/default alone, and which the API server
// refuses because of config/policy. Each row runs twice: as the installed
// manager, and as a look-alike — a ServiceAccount of the same name in
// another namespace, bound to cluster-admin — to show that the policy by
// itself refuses what RBAC would allow (some rows are refused to the
// installed manager by RBAC or its escalation check before the policy is
// consulted: that row then says so).
func describePolicy() {
	var (
		t         = &target{}
		asManager client.Client
		lookAlike client.Client
	)

	BeforeAll(func(ctx SpecContext) {
		asManager = clientAs(impersonating(systemNS, managerSA))
		// A ServiceAccount named like the manager, elsewhere, with every
		// permission: the policy matches it by name and confines it too.
		rogue := newNamespace(ctx, "look-alike")
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: rogue, Name: managerSA}})).To(Succeed())
		admin := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "flagplane-look-alike-" + rogue},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: managerSA, Namespace: rogue}},
		}
		Expect(k8s.Create(ctx, admin)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, admin))).To(Succeed()) })
		lookAlike = clientAs(impersonating(rogue, managerSA))
		Eventually(func() bool { return canI(serviceAccount(rogue, managerSA), "*", "*") }).Should(BeTrue())

		t.ns = newNamespace(ctx, "target")
		t.foreignCM, t.managedCM = "app-config", topology.ConfigMapName(topology.FlagSetKey(t.ns, "checkout"))
		t.labelledCM, t.labelledRole = "app-settings", "app-reader"
		t.workload, t.statefulSet, t.daemonSet = "web", "db", "agent"
		t.role = rbac.Name(topology.WorkloadKey(topology.KindDeployment, t.ns, t.workload))
		t.heldClusterRo = "flagplane-test-configmap-reader-" + t.ns
		t.flagd = flagdObjects(t.ns)
		held := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: t.heldClusterRo},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
		for _, o := range []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.foreignCM}, Data: map[string]string{"k": "v"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.managedCM, Labels: managed()}, Data: map[string]string{"k": "v"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.labelledCM, Labels: managed()}, Data: map[string]string{"k": "v"}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.labelledRole, Labels: managed()},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"featureflags"}, Verbs: []string{"get"}}}},
			fixtures.Deployment(t.ns, t.workload, nil, nil),
			fixtures.StatefulSet(t.ns, t.statefulSet),
			fixtures.DaemonSet(t.ns, t.daemonSet),
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.role, Labels: managed()},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"featureflags"}, Verbs: []string{"get", "list", "watch"}}}},
			held,
		} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, held))).To(Succeed()) })

		// A FeatureFlag (no webhook is installed any more) with a revision
		// it controls, and one of its name without a controller.
		t.flagSet = fixtures.FlagSet(t.ns, "checkout", "on")
		Expect(k8s.Create(ctx, t.flagSet)).To(Succeed())
		owned, orphan := revisionOf(t, 1), revisionOf(t, 2)
		orphan.OwnerReferences = nil
		for _, r := range []*deliveryv1alpha1.FeatureFlagRevision{owned, orphan} {
			Expect(k8s.Create(ctx, r)).To(Succeed())
		}
		t.ownedRev, t.orphanRev = owned.Name, orphan.Name
	})

	// Controls: what the manager does is admitted, to both identities, so
	// that a refusal below is about the misuse and not about the identity.
	DescribeTable("admits what the manager does",
		func(ctx SpecContext, do misuse) {
			Expect(do(ctx, asManager, t)).To(Succeed(), "as the installed manager")
			Expect(do(ctx, lookAlike, t)).To(Succeed(), "as a look-alike")
		},
		Entry("create a generated ConfigMap", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns,
				Name: topology.ConfigMapName(topology.FlagSetKey(t.ns, "other")), Labels: managed()}}, client.DryRunAll)
		})),
		Entry("change a generated ConfigMap's content", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.managedCM}}, `{"data":{"k":"w"}}`)
		})),
		Entry("delete a generated ConfigMap", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.managedCM}}, client.DryRunAll)
		})),
		Entry("bind its Role to a ServiceAccount", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerBinding(t, "Role", t.role, rbacv1.ServiceAccountKind), client.DryRunAll)
		})),
		Entry("delete a generated Role", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.role}}, client.DryRunAll)
		})),
		Entry("restart a Deployment as `kubectl rollout restart` does", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return restart(ctx, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}})
		})),
		Entry("restart a StatefulSet", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return restart(ctx, c, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.statefulSet}})
		})),
		Entry("restart a DaemonSet (the API server bumps its template generation annotation)", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return restart(ctx, c, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.daemonSet}})
		})),
		Entry("create a Flagd's Deployment", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, nil), client.DryRunAll)
		})),
		Entry("create a Flagd's Service", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, t.flagd.Service.DeepCopy(), client.DryRunAll)
		})),
		Entry("create a Flagd's Ingress", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, t.flagd.Ingress.DeepCopy(), client.DryRunAll)
		})),
		Entry("record a FeatureFlag's revision", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, revisionOf(t, 3), client.DryRunAll)
		})),
		Entry("adopt a revision left without a controller", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return ownerRefsPatch(ctx, c, t, t.orphanRev, "["+controllerRefJSON(t.flagSet.Name, t.flagSet.UID)+"]")
		})),
		Entry("prune a revision its FeatureFlag controls", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.ownedRev}}, client.DryRunAll)
		})),
	)

	DescribeTable("refuses the manager's misuse",
		func(ctx SpecContext, do misuse, byManager, byLookAlike types.GomegaMatcher) {
			Expect(do(ctx, asManager, t)).To(byManager, "as the installed manager")
			Expect(do(ctx, lookAlike, t)).To(byLookAlike, "as a look-alike with cluster-admin")
		},
		// ConfigMaps
		Entry("edit kube-system's extension-apiserver-authentication ConfigMap", misuse(func(ctx context.Context, c client.Client, _ *target) error {
			return mergePatch(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"}},
				`{"data":{"client-ca-file":"forged"}}`)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		Entry("create a ConfigMap without the label", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "flagd.unlabelled"}}, client.DryRunAll)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		Entry("create a labelled ConfigMap under a name it does not generate (kube-root-ca.crt)", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "kube-root-ca.crt", Labels: managed()}}, client.DryRunAll)
		}), refusedByPolicy(policyConfigMapName), refusedByPolicy(policyConfigMapName)),
		Entry("change an unlabelled ConfigMap", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.foreignCM}}, `{"data":{"k":"w"}}`)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		Entry("delete an unlabelled ConfigMap", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.foreignCM}}, client.DryRunAll)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		Entry("strip the label from a managed ConfigMap", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.managedCM}},
				`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		Entry("label someone else's ConfigMap to take it over", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.foreignCM}},
				`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"flagplane"}}}`)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		Entry("create a ConfigMap labelled with another value (the OpenFeature Operator's, which this install does not use)", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: topology.ConfigMapName(topology.FlagSetKey(t.ns, "other")),
				Labels: map[string]string{v1beta1.LabelManagedBy: "open-feature-operator"}}}, client.DryRunAll)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		Entry("delete a labelled ConfigMap of a name it does not generate", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.labelledCM}}, client.DryRunAll)
		}), refusedByPolicy(policyConfigMapName), refusedByPolicy(policyConfigMapName)),
		Entry("delete a labelled Role of a name it does not generate", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.labelledRole}}, client.DryRunAll)
		}), refusedByPolicy(policyRole), refusedByPolicy(policyRole)),
		Entry("write a sync report in a namespace other than its own (a forged delivery status)", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "flagplane-sync-report-x",
				Labels: map[string]string{status.SyncReportLabel: "true"}}}, client.DryRunAll)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		// RoleBindings
		Entry("bind cluster-admin (a ClusterRole) with a RoleBinding", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerBinding(t, "ClusterRole", "cluster-admin", rbacv1.ServiceAccountKind), client.DryRunAll)
		}), refusedByEscalationCheck(), refusedByPolicy(policyRoleBinding)),
		Entry("bind a ClusterRole that grants only what it holds itself (get ConfigMaps)", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerBinding(t, "ClusterRole", t.heldClusterRo, rbacv1.ServiceAccountKind), client.DryRunAll)
		}), refusedByPolicy(policyRoleBinding), refusedByPolicy(policyRoleBinding)),
		Entry("bind its Role to a user", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerBinding(t, "Role", t.role, rbacv1.UserKind), client.DryRunAll)
		}), refusedByPolicy(policyRoleBinding), refusedByPolicy(policyRoleBinding)),
		Entry("bind its Role to a group", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerBinding(t, "Role", t.role, rbacv1.GroupKind), client.DryRunAll)
		}), refusedByPolicy(policyRoleBinding), refusedByPolicy(policyRoleBinding)),
		Entry("create a RoleBinding without the label", misuse(func(ctx context.Context, c client.Client, t *target) error {
			rb := readerBinding(t, "Role", t.role, rbacv1.ServiceAccountKind)
			rb.Labels = nil
			return c.Create(ctx, rb, client.DryRunAll)
		}), refusedByPolicy(policyOnlyGenerated), refusedByPolicy(policyOnlyGenerated)),
		// Roles
		Entry("create a Role on Secrets", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerRole(t, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}), client.DryRunAll)
		}), refusedByEscalationCheck(), refusedByPolicy(policyRole)),
		Entry("create a Role on everything (*)", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerRole(t, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}), client.DryRunAll)
		}), refusedByEscalationCheck(), refusedByPolicy(policyRole)),
		Entry("create a Role on ConfigMaps, which it holds itself", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, readerRole(t, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}), client.DryRunAll)
		}), refusedByPolicy(policyRole), refusedByPolicy(policyRole)),
		Entry("widen its Role to FeatureFlagSources, which it reads itself", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.role}},
				`{"rules":[{"apiGroups":["core.openfeature.dev"],"resources":["featureflags","featureflagsources"],"verbs":["get","list","watch"]}]}`)
		}), refusedByPolicy(policyRole), refusedByPolicy(policyRole)),
		Entry("create a Role under a name it does not generate", misuse(func(ctx context.Context, c client.Client, t *target) error {
			r := readerRole(t, rbacv1.PolicyRule{APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: []string{"featureflags"}, Verbs: []string{"get"}})
			r.Name = "flag-reader"
			return c.Create(ctx, r, client.DryRunAll)
		}), refusedByPolicy(policyRole), refusedByPolicy(policyRole)),
		// Workloads
		Entry("change a Deployment's image", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}},
				client.RawPatch(apitypes.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"evil:1"}]}}}}`)), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("scale a Deployment through its spec", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}}, `{"spec":{"replicas":50}}`)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("scale a StatefulSet through its spec", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.statefulSet}}, `{"spec":{"replicas":0}}`)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("change a DaemonSet's containers", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Patch(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.daemonSet}},
				client.RawPatch(apitypes.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","securityContext":{"privileged":true}}]}}}}`)), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("scale a Deployment through its scale subresource", misuse(func(ctx context.Context, c client.Client, t *target) error {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}}
			return c.SubResource("scale").Patch(ctx, d, client.RawPatch(apitypes.MergePatchType, []byte(`{"spec":{"replicas":50}}`)),
				client.DryRunAll)
		}), refusedByRBAC(), refusedByPolicy(policyRestartOnly)),
		Entry("add another annotation to the pod template", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}},
				`{"spec":{"template":{"metadata":{"annotations":{"openfeature.dev/enabled":"true"}}}}}`)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("label a Deployment (to be selected by a source)", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}},
				`{"metadata":{"labels":{"tier":"web"}}}`)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("delete a Deployment", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}}, client.DryRunAll)
		}), refusedByRBAC(), refusedByPolicy(policyRestartOnly)),
		Entry("create a Deployment", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, fixtures.Deployment(t.ns, "miner", nil, nil), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		// A Flagd's Deployment, as the manager would write it, but for one thing
		Entry("create a labelled Deployment that no Flagd controls", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) { d.OwnerReferences = nil }), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("create a Deployment controlled by a Flagd of another name", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) { d.Name = "miner" }), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("create a Flagd's Deployment without the label", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) { delete(d.Labels, "app.kubernetes.io/managed-by") }), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("create a Flagd's Deployment with a privileged flagd", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
				d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
			}), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("create a Flagd's Deployment with another container", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "miner", Image: "miner:1"})
			}), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("create a Flagd's Deployment mounting the node's disk", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
					VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			}), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		Entry("create a Flagd's Deployment on the node's network", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true }), client.DryRunAll)
		}), refusedByPolicy(policyRestartOnly), refusedByPolicy(policyRestartOnly)),
		// Services, Ingresses
		Entry("redirect the kubernetes Service", misuse(func(ctx context.Context, c client.Client, _ *target) error {
			return mergePatch(ctx, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}},
				`{"spec":{"ports":[{"name":"https","port":443,"targetPort":1234}]}}`)
		}), refusedByPolicy(policyFlagdChildren), refusedByPolicy(policyFlagdChildren)),
		Entry("delete an unlabelled Service", misuse(func(ctx context.Context, c client.Client, _ *target) error {
			return c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}}, client.DryRunAll)
		}), refusedByPolicy(policyFlagdChildren), refusedByPolicy(policyFlagdChildren)),
		Entry("create a labelled Service that no Flagd controls", misuse(func(ctx context.Context, c client.Client, t *target) error {
			s := t.flagd.Service.DeepCopy()
			s.OwnerReferences = nil
			return c.Create(ctx, s, client.DryRunAll)
		}), refusedByPolicy(policyFlagdChildren), refusedByPolicy(policyFlagdChildren)),
		Entry("create a Flagd's Ingress without the label", misuse(func(ctx context.Context, c client.Client, t *target) error {
			i := t.flagd.Ingress.DeepCopy()
			i.Labels = nil
			return c.Create(ctx, i, client.DryRunAll)
		}), refusedByPolicy(policyFlagdChildren), refusedByPolicy(policyFlagdChildren)),
		// FeatureFlagRevisions
		Entry("create a revision no FeatureFlag controls", misuse(func(ctx context.Context, c client.Client, t *target) error {
			r := revisionOf(t, 3)
			r.OwnerReferences = nil
			return c.Create(ctx, r, client.DryRunAll)
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("create a revision controlled by a FeatureFlag other than its spec.flagSet's", misuse(func(ctx context.Context, c client.Client, t *target) error {
			r := revisionOf(t, 3)
			r.OwnerReferences[0].Name = "other"
			return c.Create(ctx, r, client.DryRunAll)
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("create a revision without its flag-set label", misuse(func(ctx context.Context, c client.Client, t *target) error {
			r := revisionOf(t, 3)
			r.Labels = nil
			return c.Create(ctx, r, client.DryRunAll)
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("relabel a revision", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.ownedRev}},
				`{"metadata":{"labels":{"delivery.flagplane.dev/flag-set":"other"}}}`)
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("adopt a revision left without a controller into a FeatureFlag of another name", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return ownerRefsPatch(ctx, c, t, t.orphanRev, "["+controllerRefJSON("other", t.flagSet.UID)+"]")
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("adopt a revision left without a controller and annotate it on the way", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return mergePatch(ctx, c, &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.orphanRev}},
				`{"metadata":{"annotations":{"x":"y"},"ownerReferences":[`+controllerRefJSON(t.flagSet.Name, t.flagSet.UID)+`]}}`)
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("take over a revision another FeatureFlag controls", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return ownerRefsPatch(ctx, c, t, t.ownedRev, "["+controllerRefJSON(t.flagSet.Name, "00000000-0000-0000-0000-00000000beef")+"]")
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("strip a revision of its controller", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return ownerRefsPatch(ctx, c, t, t.ownedRev, "null")
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
		Entry("delete a revision no FeatureFlag controls", misuse(func(ctx context.Context, c client.Client, t *target) error {
			return c.Delete(ctx, &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.orphanRev}}, client.DryRunAll)
		}), refusedByPolicy(policyRevisions), refusedByPolicy(policyRevisions)),
	)

	It("admits the manager's sync report in its own namespace only, and only labelled", func(ctx SpecContext) {
		// As syncserver.Reporter writes it: server-side apply, labelled.
		report := func(ns string, labelled bool) *corev1ac.ConfigMapApplyConfiguration {
			ac := corev1ac.ConfigMap(syncserver.ReportName("flagplane-manager-0"), ns).WithData(map[string]string{"report": "{}"})
			if labelled {
				ac.WithLabels(map[string]string{status.SyncReportLabel: "true"})
			}
			return ac
		}
		apply := func(c client.Client, ac *corev1ac.ConfigMapApplyConfiguration) error {
			return c.Apply(ctx, ac, client.FieldOwner(syncserver.ReportFieldManager), client.ForceOwnership, client.DryRunAll)
		}
		Expect(apply(asManager, report(systemNS, true))).To(Succeed(), "its own namespace, labelled")
		Expect(apply(asManager, report(systemNS, false))).To(refusedByPolicy(policyOnlyGenerated), "unlabelled")
		Expect(apply(asManager, report(t.ns, true))).To(refusedByPolicy(policyOnlyGenerated), "another namespace")
		Expect(apply(lookAlike, report(systemNS, true))).To(refusedByPolicy(policyOnlyGenerated), "a look-alike, in the installed manager's namespace")
	})

	It("confines a manager with --managed-by=open-feature-operator by the chart's policy rendered with that value", func(ctx SpecContext) {
		const ofo = "open-feature-operator"
		c := ofoPolicyProbe(ctx)
		labelled := func(value string) map[string]string { return map[string]string{v1beta1.LabelManagedBy: value} }
		generated := topology.ConfigMapName(topology.FlagSetKey(t.ns, "other"))
		withLabel := func(value string) func(*appsv1.Deployment) {
			return func(d *appsv1.Deployment) {
				d.Labels[v1beta1.LabelManagedBy] = value
				d.Spec.Template.Labels[v1beta1.LabelManagedBy] = value
			}
		}
		svc := t.flagd.Service.DeepCopy()
		svc.Labels[v1beta1.LabelManagedBy] = ofo

		By("admitted: its own value, and flagplane's (what it made before it moved)")
		Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: generated, Labels: labelled(ofo)}}, client.DryRunAll)).To(Succeed())
		Expect(mergePatch(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.managedCM}},
			`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"open-feature-operator"}}}`)).To(Succeed(), "relabelling what it made as flagplane")
		Expect(c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.managedCM}}, client.DryRunAll)).To(Succeed())
		Expect(c.Create(ctx, flagdDeployment(t, withLabel(ofo)), client.DryRunAll)).To(Succeed())
		Expect(c.Create(ctx, svc, client.DryRunAll)).To(Succeed())

		By("refused: anything else, and the message names the value")
		refused := func(message string) types.GomegaMatcher {
			return And(WithTransform(apierrors.IsForbidden, BeTrue()), MatchError(ContainSubstring(message)))
		}
		onlyOFO := "labelled app.kubernetes.io/managed-by=open-feature-operator (or flagplane), before and after the change"
		Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: generated, Labels: labelled("Helm")}}, client.DryRunAll)).
			To(refused(policyOnlyGenerated + ": " + onlyOFO))
		Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: generated}}, client.DryRunAll)).To(refused(onlyOFO))
		Expect(mergePatch(ctx, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.foreignCM}},
			`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"open-feature-operator"}}}`)).To(refused(onlyOFO), "labelling someone else's to take it over")
		Expect(c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.labelledCM}}, client.DryRunAll)).
			To(refused(policyConfigMapName), "a name it does not generate")
		Expect(c.Create(ctx, flagdDeployment(t, withLabel("Helm")), client.DryRunAll)).To(refused("labelled app.kubernetes.io/managed-by=open-feature-operator (or flagplane), controlled by the Flagd of its name"))
		Expect(c.Create(ctx, flagdDeployment(t, func(d *appsv1.Deployment) { withLabel(ofo)(d); d.OwnerReferences = nil }), client.DryRunAll)).
			To(refused(policyRestartOnly), "labelled, but no Flagd controls it")
		Expect(restart(ctx, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.workload}})).To(Succeed(), "rollouts as ever")
	})

	It("leaves what it refused unchanged", func(ctx SpecContext) {
		// Every row above was a dry run; this checks that none was applied
		// for real (a matcher that accepts too much would show here too).
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "extension-apiserver-authentication"}, cm)).To(Succeed())
		Expect(cm.Data).NotTo(HaveKeyWithValue("client-ca-file", "forged"))
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: t.ns, Name: t.workload}, d)).To(Succeed())
		Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(1))))
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("app:1"))
		for name, controlled := range map[string]bool{t.ownedRev: true, t.orphanRev: false} {
			r := &deliveryv1alpha1.FeatureFlagRevision{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: t.ns, Name: name}, r)).To(Succeed())
			Expect(metav1.IsControlledBy(r, t.flagSet)).To(Equal(controlled), name)
			Expect(r.Labels).To(HaveKeyWithValue(deliveryv1alpha1.FlagSetLabel, "checkout"))
		}
	})
}

// readerRole is a managed Role named as the manager names them, with rule.
func readerRole(t *target, rule rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.role, Labels: managed()}, Rules: []rbacv1.PolicyRule{rule}}
}

// readerBinding is a managed RoleBinding named as the manager names them,
// binding roleKind/roleName to one subject of subjectKind.
func readerBinding(t *target, roleKind, roleName, subjectKind string) *rbacv1.RoleBinding {
	subject := rbacv1.Subject{Kind: subjectKind, Name: "web"}
	switch subjectKind {
	case rbacv1.ServiceAccountKind:
		subject.Namespace = t.ns
	default:
		subject.APIGroup = rbacv1.GroupName
	}
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: t.role, Labels: managed()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName},
		Subjects:   []rbacv1.Subject{subject},
	}
}

// restart patches a workload as the manager's rollout workflow and healer do.
func restart(ctx context.Context, c client.Client, obj client.Object) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"2026-01-01T00:00:00Z"}}}}}`, restarts.RestartedAtAnnotation)
	return c.Patch(ctx, obj, client.RawPatch(apitypes.StrategicMergePatchType, []byte(patch)), client.DryRunAll)
}

// ofoPolicyProbe installs the admission policy of the chart rendered with
// managedBy=open-feature-operator, bound to a probe ServiceAccount with
// every permission (so that the policy alone decides) instead of the
// manager's (whose requests config/default's policy confines), and returns
// a client of that ServiceAccount once the policy is enforced. Only the
// policy's name and whom it matches differ from what the chart renders.
func ofoPolicyProbe(ctx context.Context) client.Client {
	GinkgoHelper()
	const probe = "ofo-policy-probe"
	ns := newNamespace(ctx, "ofo-policy")
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: probe}})).To(Succeed())
	admin := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flagplane-" + probe + "-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: probe, Namespace: ns}},
	}
	Expect(k8s.Create(ctx, admin)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, admin))).To(Succeed()) })

	rendered := objects(helmTemplate(systemNS, "managedBy=open-feature-operator"))
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for key, into := range map[string]any{
		"ValidatingAdmissionPolicy/<nil>/flagplane-manager":        policy,
		"ValidatingAdmissionPolicyBinding/<nil>/flagplane-manager": binding,
	} {
		Expect(rendered).To(HaveKey(key))
		b, err := yaml.Marshal(rendered[key])
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(b, into)).To(Succeed())
	}
	Expect(policy.Spec.Variables).To(ContainElement(admissionregistrationv1.Variable{Name: "managedBy", Expression: "'open-feature-operator'"}),
		"the chart sets the value in the policy's CEL")
	Expect(policy.Spec.MatchConditions).To(HaveLen(1))
	policy.ObjectMeta = metav1.ObjectMeta{Name: "flagplane-" + probe}
	policy.Spec.MatchConditions[0].Expression = fmt.Sprintf("request.userInfo.username == %q", serviceAccount(ns, probe))
	binding.ObjectMeta = metav1.ObjectMeta{Name: policy.Name}
	binding.Spec.PolicyName = policy.Name
	for _, o := range []client.Object{policy, binding} {
		Expect(k8s.Create(ctx, o)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, o))).To(Succeed()) })
	}
	c := clientAs(impersonating(ns, probe))
	Eventually(func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "flagplane-policy-probe"}}
		return c.Create(ctx, cm, client.DryRunAll)
	}).Should(MatchError(ContainSubstring("ValidatingAdmissionPolicy '" + policy.Name + "'")))
	return c
}
