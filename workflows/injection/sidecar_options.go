package injection

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SidecarOptions are the operator-wide settings of the injected flagd
// sidecar, set once from the manager's flags (--sidecar-image,
// --sidecar-tag, --sidecar-port, --sidecar-cpu-request, ...): the
// OpenFeature Operator's sidecarConfiguration. A setting a
// FeatureFlagSource makes itself (a value other than the API's default)
// overrides them for the workloads it targets.
type SidecarOptions struct {
	// Image is the flagd image, without its tag.
	Image string
	// Tag is the tag of Image. flagplane writes the flags, env vars and
	// --sources of the flagd release it names (Flagd).
	Tag string
	// TagSetting names the setting Tag comes from, for messages:
	// DefaultTagSetting when empty; a Flagd's sidecar options say
	// --flagd-tag.
	TagSetting string
	// Resources are the sidecar's requests and limits where a source sets none.
	Resources corev1.ResourceRequirements

	// Port, ManagementPort, SocketPath, Evaluator, LogFormat and
	// EnvVarPrefix are what flagd and the app containers are told (flags
	// and <prefix>_* env vars) where no source sets them. An empty
	// EnvVarPrefix names the env vars without a prefix, as the OpenFeature
	// Operator does.
	Port, ManagementPort int32
	SocketPath           string
	Evaluator, LogFormat string
	EnvVarPrefix         string
	ProbesEnabled        bool
	DebugLogging         bool
	OtelCollectorURI     string
	// ProviderArgs come before the sources' syncProviderArgs (and, like
	// them, reach flagd only with Options.PassSyncProviderArgs).
	ProviderArgs []string
	// ImagePullSecrets are added to every pod the sidecar is injected into
	// (the Secrets must exist in the pod's namespace), for a registry that
	// needs credentials.
	ImagePullSecrets []string
}

// Defaults of SidecarOptions: the OpenFeature Operator's. The image is
// flagd's published image, the one the OpenFeature Operator injects; the tag
// is the flagd release flagplane is tested with.
const (
	DefaultSidecarImage            = "ghcr.io/open-feature/flagd"
	DefaultSidecarTag              = "v0.16.0"
	DefaultSidecarCPURequest       = "200m"
	DefaultSidecarRAMRequest       = "32M"
	DefaultSidecarCPULimit         = "500m"
	DefaultSidecarRAMLimit         = "64M"
	DefaultSidecarPort       int32 = 8013
	DefaultManagementPort    int32 = 8014
	DefaultOFREPPort         int32 = 8016
	DefaultEvaluator               = "json"
	DefaultLogFormat               = "json"
	DefaultEnvVarPrefix            = "FLAGD"
)

// DefaultSidecarOptions are the SidecarOptions when no flag is given.
func DefaultSidecarOptions() SidecarOptions {
	return SidecarOptions{
		Image: DefaultSidecarImage,
		Tag:   DefaultSidecarTag,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(DefaultSidecarCPURequest),
				corev1.ResourceMemory: resource.MustParse(DefaultSidecarRAMRequest),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(DefaultSidecarCPULimit),
				corev1.ResourceMemory: resource.MustParse(DefaultSidecarRAMLimit),
			},
		},
		Port:           DefaultSidecarPort,
		ManagementPort: DefaultManagementPort,
		Evaluator:      DefaultEvaluator,
		LogFormat:      DefaultLogFormat,
		EnvVarPrefix:   DefaultEnvVarPrefix,
		ProbesEnabled:  true,
	}
}

// ImageReference is the image reference of the sidecar container.
func (o SidecarOptions) ImageReference() string {
	if o.Tag == "" {
		return o.Image
	}
	return o.Image + ":" + o.Tag
}

// Validate reports settings that would make every injected pod invalid.
func (o SidecarOptions) Validate() error {
	var errs []error
	if o.Image == "" {
		errs = append(errs, errors.New("sidecar image is empty"))
	}
	for _, name := range sortedResourceNames(o.Resources.Requests) {
		req := o.Resources.Requests[name]
		if lim, ok := o.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, fmt.Errorf("sidecar %s request %s exceeds its limit %s", name, req.String(), lim.String()))
		}
	}
	for _, port := range []struct {
		name string
		v    int32
	}{{"port", o.Port}, {"management port", o.ManagementPort}} {
		if port.v < 1 || port.v > 65535 {
			errs = append(errs, fmt.Errorf("sidecar %s %d is not a port", port.name, port.v))
		}
	}
	if o.Port == o.ManagementPort {
		errs = append(errs, fmt.Errorf("sidecar port and management port are both %d", o.Port))
	}
	if o.LogFormat != "json" && o.LogFormat != "console" {
		errs = append(errs, fmt.Errorf("sidecar log format %q is not json or console", o.LogFormat))
	}
	if err := validateEnvVarPrefix(o.EnvVarPrefix); err != nil {
		errs = append(errs, fmt.Errorf("sidecar env var prefix: %w", err))
	}
	for _, s := range o.ImagePullSecrets {
		if msgs := validation.IsDNS1123Subdomain(s); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("image pull secret %q: %s", s, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// InProcessOptions are the operator-wide defaults of in-process
// configurations (the manager's --in-process-* flags, the OpenFeature
// Operator's inProcessConfiguration): every InProcessConfiguration a pod
// names is merged over them (see MergeInProcessConfigs).
type InProcessOptions struct {
	Port                  int32
	Host                  string
	SocketPath            string
	TLS                   bool
	OfflineFlagSourcePath string
	Selector              string
	Cache                 string
	CacheMaxSize          int
	EnvVarPrefix          string
}

// Defaults of InProcessOptions, as in the OpenFeature Operator (and the
// InProcessConfiguration CRD's defaults).
const (
	DefaultInProcessPort         int32 = 8015
	DefaultInProcessHost               = "localhost"
	DefaultInProcessCache              = "lru"
	DefaultInProcessCacheMaxSize       = 1000
)

// DefaultInProcessOptions are the InProcessOptions when no flag is given.
func DefaultInProcessOptions() InProcessOptions {
	return InProcessOptions{
		Port:         DefaultInProcessPort,
		Host:         DefaultInProcessHost,
		Cache:        DefaultInProcessCache,
		CacheMaxSize: DefaultInProcessCacheMaxSize,
		EnvVarPrefix: DefaultEnvVarPrefix,
	}
}

// Validate reports settings that would make every in-process pod misconfigured.
func (o InProcessOptions) Validate() error {
	var errs []error
	if o.Port < 1 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("in-process port %d is not a port", o.Port))
	}
	if o.Cache != "lru" && o.Cache != "disabled" {
		errs = append(errs, fmt.Errorf("in-process cache %q is not lru or disabled", o.Cache))
	}
	if o.CacheMaxSize < 0 {
		errs = append(errs, fmt.Errorf("in-process cache max size %d is negative", o.CacheMaxSize))
	}
	if err := validateEnvVarPrefix(o.EnvVarPrefix); err != nil {
		errs = append(errs, fmt.Errorf("in-process env var prefix: %w", err))
	}
	return errors.Join(errs...)
}

// validateEnvVarPrefix: a prefix starts every injected env var name
// ("<prefix>_NAME"), so it must be a valid env var name itself. Empty is
// allowed: no prefix.
func validateEnvVarPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if msgs := validation.IsEnvVarName(prefix); len(msgs) > 0 {
		return fmt.Errorf("%q: %s", prefix, strings.Join(msgs, "; "))
	}
	return nil
}

// EnvVarKey names an env var: "<prefix>_<name>", or name alone when the
// prefix is blank, as the OpenFeature Operator names them.
func EnvVarKey(prefix, name string) string {
	if strings.TrimSpace(prefix) == "" {
		return name
	}
	return prefix + "_" + name
}

// unprefixedEnvVarPrefixes start the env var names of a FeatureFlagSource
// that reach the sidecar and the app containers unprefixed: the credentials
// that flagd's cloud-storage syncs (gocloud) read under their vendors' own
// names, as the OpenFeature Operator leaves them.
var unprefixedEnvVarPrefixes = []string{"AZURE_STORAGE", "AWS_", "GOOGLE_"}

// SourceEnvVarKey names a FeatureFlagSource's env var in the pod: prefixed,
// unless it is a cloud-storage credential (unprefixedEnvVarPrefixes).
func SourceEnvVarKey(prefix, name string) string {
	for _, credentialPrefix := range unprefixedEnvVarPrefixes {
		if strings.HasPrefix(name, credentialPrefix) {
			return name
		}
	}
	return EnvVarKey(prefix, name)
}
