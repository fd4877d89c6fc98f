package workflows

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestGitOpsKey: the keys by which Argo CD and Flux know their objects, and
// Argo CD's per-resource settings, are a GitOps tool's; the recommended
// labels other than app.kubernetes.io/instance, flagplane's own and
// look-alikes are not.
func TestGitOpsKey(t *testing.T) {
	for key, want := range map[string]bool{
		// Argo CD: tracking label (label, annotation+label), tracking
		// annotation (annotation), custom tracking label, settings.
		"app.kubernetes.io/instance":         true,
		"argocd.argoproj.io/tracking-id":     true,
		"argocd.argoproj.io/instance":        true,
		"argocd.argoproj.io/sync-options":    true,
		"argocd.argoproj.io/compare-options": true,
		"argocd.argoproj.io/sync-wave":       true,
		"argocd.argoproj.io/hook":            true,
		"argocd.argoproj.io/installation-id": true,
		// Flux: kustomize-controller's and helm-controller's owner labels,
		// kustomize-controller's per-object settings.
		"kustomize.toolkit.fluxcd.io/name":      true,
		"kustomize.toolkit.fluxcd.io/namespace": true,
		"kustomize.toolkit.fluxcd.io/prune":     true,
		"kustomize.toolkit.fluxcd.io/ssa":       true,
		"helm.toolkit.fluxcd.io/name":           true,
		"helm.toolkit.fluxcd.io/namespace":      true,
		// Not a GitOps tool's.
		v1beta1.LabelManagedBy:      false,
		"app.kubernetes.io/name":    false,
		"app.kubernetes.io/part-of": false,
		"app.kubernetes.io/version": false,
		"app":                       false,
		"instance":                  false,
		"argocd.argoproj.io":        false,
		"example.com/argocd.argoproj.io/sync-options":      false,
		"kustomize.toolkit.fluxcd.io":                      false,
		"source.toolkit.fluxcd.io/name":                    false,
		"kubectl.kubernetes.io/restartedAt":                false,
		"kubectl.kubernetes.io/last-applied-configuration": false,
	} {
		if got := GitOpsKey(key); got != want {
			t.Errorf("GitOpsKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestDropGitOpsKeys(t *testing.T) {
	g := NewWithT(t)
	m := map[string]string{"team": "a", "app.kubernetes.io/instance": "shop", "argocd.argoproj.io/tracking-id": "shop:/ConfigMap:ns/x",
		"kustomize.toolkit.fluxcd.io/name": "apps"}
	g.Expect(DropGitOpsKeys(m)).To(Equal(map[string]string{"team": "a"}))
	g.Expect(m).To(Equal(map[string]string{"team": "a"}), "in place")
	g.Expect(DropGitOpsKeys(nil)).To(BeNil())
}

// TestObjectMetadataWithoutGitOpsKeys: the operator's --labels and
// --annotations (the chart's labels and annotations, which also go on the
// manager's pods) put no GitOps tool's key on generated objects.
func TestObjectMetadataWithoutGitOpsKeys(t *testing.T) {
	g := NewWithT(t)
	gen := GeneratedMetadata{
		Labels:      map[string]string{"team": "a", "app.kubernetes.io/instance": "flagplane", "kustomize.toolkit.fluxcd.io/name": "infra"},
		Annotations: map[string]string{"argocd.argoproj.io/tracking-id": "infra:apps/Deployment:flagplane-system/flagplane-manager"},
	}
	g.Expect(gen.ObjectLabels()).To(Equal(map[string]string{"team": "a", v1beta1.LabelManagedBy: v1beta1.ManagedByValue}))
	g.Expect(gen.ObjectAnnotations()).To(BeNil(), "nothing left")
	g.Expect(gen.Labels).To(HaveKey("app.kubernetes.io/instance"), "the settings themselves are left alone")
	gen.Annotations["example.com/owner"] = "team-a"
	g.Expect(gen.ObjectAnnotations()).To(Equal(map[string]string{"example.com/owner": "team-a"}))
}
