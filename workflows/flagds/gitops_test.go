package flagds

import (
	"maps"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// gitOpsFlagd is a Flagd as Argo CD (tracking by label and annotation, with
// its sync options) and Flux (its owner labels) apply it, whose spec also
// asks for their keys on its objects.
const gitOpsFlagd = `
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: shop-flags, namespace: shop, uid: ff-uid}
spec:
  flagSpec:
    flags:
      new-checkout: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: shop, namespace: shop}
spec:
  sources: [{source: shop-flags, provider: file}]
---
apiVersion: core.openfeature.dev/v1beta1
kind: Flagd
metadata:
  name: flags
  namespace: shop
  uid: flagd-uid
  labels:
    app.kubernetes.io/instance: shop
    kustomize.toolkit.fluxcd.io/name: apps
    kustomize.toolkit.fluxcd.io/namespace: flux-system
  annotations:
    argocd.argoproj.io/tracking-id: shop:core.openfeature.dev/Flagd:shop/flags
    argocd.argoproj.io/sync-options: ServerSideApply=true
    kustomize.toolkit.fluxcd.io/prune: disabled
    service.beta.kubernetes.io/aws-load-balancer-internal: "true"
spec:
  featureFlagSource: shop
  labels:
    team: checkout
    app.kubernetes.io/instance: shop
    helm.toolkit.fluxcd.io/name: shop
  annotations:
    sidecar.istio.io/inject: "false"
    argocd.argoproj.io/compare-options: IgnoreExtraneous
  ingress:
    enabled: true
    annotations:
      nginx.ingress.kubernetes.io/ssl-redirect: "false"
      argocd.argoproj.io/sync-wave: "2"
  gatewayApiRoutes:
    enabled: true
    annotations:
      example.com/route: "yes"
      kustomize.toolkit.fluxcd.io/ssa: Merge
`

// TestNoGitOpsKeysOnFlagdObjects: whatever a Flagd carries or asks for, its
// Deployment (and pods), Service, Ingress and HTTPRoute carry no GitOps
// tool's key, and keep every other label and annotation they get.
func TestNoGitOpsKeysOnFlagdObjects(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New()
	g.Expect(manifests.Load(topo, strings.NewReader(gitOpsFlagd))).To(Succeed())
	opts := goldenFlagdOptions()
	opts.Generated = workflows.GeneratedMetadata{
		Labels:      map[string]string{"cost-center": "a", "argocd.argoproj.io/instance": "infra"},
		Annotations: map[string]string{"example.com/owner": "platform", "argocd.argoproj.io/tracking-id": "infra:apps/Deployment:flagplane-system/flagplane-manager"},
	}
	objs := Desired(topo.Snapshot(), topology.FlagdKey("shop", "flags"), opts)
	g.Expect(objs.Invalid).To(BeEmpty())
	g.Expect(objs.Deployment).NotTo(BeNil())
	g.Expect(objs.Ingress).NotTo(BeNil())
	g.Expect(objs.HTTPRoute).NotTo(BeNil())

	for what, meta := range map[string][2]map[string]string{
		"Deployment":   {objs.Deployment.Labels, objs.Deployment.Annotations},
		"pod template": {objs.Deployment.Spec.Template.Labels, objs.Deployment.Spec.Template.Annotations},
		"Service":      {objs.Service.Labels, objs.Service.Annotations},
		"Ingress":      {objs.Ingress.Labels, objs.Ingress.Annotations},
		"HTTPRoute":    {objs.HTTPRoute.GetLabels(), objs.HTTPRoute.GetAnnotations()},
	} {
		labels, annotations := meta[0], meta[1]
		for k := range maps.Keys(labels) {
			g.Expect(workflows.GitOpsKey(k)).To(BeFalse(), "%s: label %s", what, k)
		}
		for k := range maps.Keys(annotations) {
			g.Expect(workflows.GitOpsKey(k)).To(BeFalse(), "%s: annotation %s", what, k)
		}
		g.Expect(labels).To(And(HaveKeyWithValue("team", "checkout"), HaveKeyWithValue("cost-center", "a")), what)
		g.Expect(annotations).To(And(HaveKeyWithValue("sidecar.istio.io/inject", "false"), HaveKeyWithValue("example.com/owner", "platform")), what)
	}
	g.Expect(objs.Service.Annotations).To(HaveKeyWithValue("service.beta.kubernetes.io/aws-load-balancer-internal", "true"),
		"the Flagd's own annotations still go on its Service, as in the OpenFeature Operator")
	g.Expect(objs.Ingress.Annotations).To(HaveKeyWithValue("nginx.ingress.kubernetes.io/ssl-redirect", "false"))
	g.Expect(objs.HTTPRoute.GetAnnotations()).To(HaveKeyWithValue("example.com/route", "yes"))
}
