package workflows

import (
	"maps"
	"slices"
	"strings"
)

// GitOps tools recognise the objects they apply by metadata they put on
// them. An object that flagplane generates and that carried one of these
// keys, copied from the object it is generated for (a Flagd, a source, a
// workload) or from the operator's --labels and --annotations, would look
// like the tool's own: Argo CD, tracking by label, shows it in the
// Application as extraneous (OutOfSync) and prunes it; Flux's controllers
// take it for part of a Kustomization or HelmRelease. And Argo CD's
// per-resource annotations (sync-options, compare-options, hooks, waves)
// would change how Argo CD treats an object it does not even apply. So
// flagplane never puts these keys on what it generates, as labels or as
// annotations, whoever put them on its inputs (GitOpsKey, DropGitOpsKeys).
//
// A tracking key that an Argo CD install configures for itself (its
// application.instanceLabelKey) can be any key: only the default one and
// the documented custom one (argocd.argoproj.io/instance) are known here.
var (
	// gitOpsKeys are single keys:
	//   - app.kubernetes.io/instance: Argo CD's tracking label (tracking
	//     methods label and annotation+label; label is the default before
	//     Argo CD 3.0).
	gitOpsKeys = []string{"app.kubernetes.io/instance"}
	// gitOpsPrefixes are whole families of keys:
	//   - argocd.argoproj.io/: Argo CD's tracking-id annotation (the default
	//     tracking method since Argo CD 3.0), its installation-id, the
	//     custom tracking label argocd.argoproj.io/instance, and every
	//     per-resource setting (sync-options, compare-options, hook,
	//     sync-wave, ...);
	//   - kustomize.toolkit.fluxcd.io/: Flux kustomize-controller's owner
	//     labels (/name, /namespace) and per-object settings (/prune,
	//     /reconcile, /ssa, /force);
	//   - helm.toolkit.fluxcd.io/: Flux helm-controller's owner labels
	//     (/name, /namespace).
	gitOpsPrefixes = []string{"argocd.argoproj.io/", "kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/"}
)

// GitOpsKey tells whether a label or annotation key is a GitOps tool's:
// one that flagplane never puts on a generated object.
func GitOpsKey(key string) bool {
	if slices.Contains(gitOpsKeys, key) {
		return true
	}
	for _, p := range gitOpsPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// DropGitOpsKeys removes the GitOpsKeys from m, in place, and returns m.
func DropGitOpsKeys(m map[string]string) map[string]string {
	maps.DeleteFunc(m, func(k, _ string) bool { return GitOpsKey(k) })
	return m
}
