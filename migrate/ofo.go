package migrate

import "strings"

// What the OpenFeature Operator (v0.9.x) names and marks. Its install
// prefixes every object with "open-feature-operator-" (kustomize namePrefix,
// kept by its Helm chart).
const (
	ofoPrefix = "open-feature-operator-"

	// ofoManagerDeployment is its manager.
	ofoManagerDeployment = ofoPrefix + "controller-manager"

	// Its admission: the pod injector and the FeatureFlag validator, by
	// configuration and by webhook name.
	ofoMutatingConfiguration   = ofoPrefix + "mutating-webhook-configuration"
	ofoValidatingConfiguration = ofoPrefix + "validating-webhook-configuration"
	ofoMutatingWebhook         = "mutate.openfeature.dev"
	ofoValidatingWebhook       = "vfeatureflag.kb.io"

	// ofoKubernetesSync is the ClusterRole and ClusterRoleBinding that let
	// the ServiceAccounts of kubernetes-provider pods read every FeatureFlag
	// and FeatureFlagSource of the cluster; the injector adds each pod's
	// ServiceAccount to the binding.
	ofoKubernetesSync = ofoPrefix + "flagd-kubernetes-sync"

	// Its flagd-proxy, created in its namespace by its manager.
	ofoFlagdProxyDeployment     = "flagd-proxy"
	ofoFlagdProxyService        = "flagd-proxy-svc"
	ofoFlagdProxyPDB            = "flagd-proxy-pdb"
	ofoFlagdProxyServiceAccount = ofoPrefix + "flagd-proxy"

	// ofoManagedByValue is the value of app.kubernetes.io/managed-by on what
	// its manager creates (flagd-proxy).
	ofoManagedByValue = "open-feature-operator"

	// ofoConfigMapAnnotation marks the ConfigMaps its injector generates
	// for the file provider: named like the FeatureFlag, in its namespace,
	// owned by it.
	ofoConfigMapAnnotation = "openfeature.dev/featureflag"

	// ofoAllowKubernetesSync marks pods it injected with the kubernetes provider.
	ofoAllowKubernetesSync = "openfeature.dev/allowkubernetessync"
)

// ofoCRDs are the CRDs of the kinds flagplane serves; ofoOnlyCRDs those it
// does not (yet).
var (
	ofoCRDs     = []string{"featureflags.core.openfeature.dev", "featureflagsources.core.openfeature.dev", "inprocessconfigurations.core.openfeature.dev", "flagds.core.openfeature.dev"}
	ofoOnlyCRDs = map[string]string{
		"featureflagconfigurations.core.openfeature.dev": "FeatureFlagConfiguration",
		"flagsourceconfigurations.core.openfeature.dev":  "FlagSourceConfiguration",
	}
)

// isOFOName tells whether a cluster-scoped name is one of the OpenFeature
// Operator's install.
func isOFOName(name string) bool { return strings.HasPrefix(name, ofoPrefix) }
