package injection

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// Sidecar container and mount layout.
const (
	// SidecarName is the name of the injected init container.
	SidecarName = "flagd"
	// FlagMountRoot holds one directory per mounted flag set.
	FlagMountRoot = "/etc/flagd"
	// FlagdProxySelectorPrefix starts the selector a flagd-proxy source sends
	// to the sync server: "core.openfeature.dev/<namespace>/<name>", the
	// form of the OpenFeature Operator's flagd-proxy.
	FlagdProxySelectorPrefix = "core.openfeature.dev/"
	// AnnotationAllowKubernetesSync, "true" on a pod whose sidecar reads a
	// FeatureFlag with the kubernetes provider: the mark the OpenFeature
	// Operator puts on such pods, which tools select them by. flagplane
	// grants their permissions from the graph, not from this mark.
	AnnotationAllowKubernetesSync = "openfeature.dev/allowkubernetessync"
	// AnnotationSidecarSecurityContext, on a FeatureFlagSource, relaxes the
	// sidecar's hardened securityContext: a JSON corev1.SecurityContext whose
	// set fields replace the hardened ones. It is honoured only when the
	// operator allows it (Options.AllowSecurityContextOverride, off
	// by default: whoever may edit a source could otherwise run a privileged
	// container in every pod it targets) and only for workloads of the
	// source's own namespace. It takes effect for pods created after it is
	// set (it is metadata, not spec: it starts no rollout).
	AnnotationSidecarSecurityContext = v1beta1.AnnotationSidecarSecurityContext
)

// Options are the operator-wide inputs of the injection; the rest
// comes from the graph.
type Options struct {
	// Sidecar is the image and the defaults of the sidecar.
	Sidecar SidecarOptions
	// InProcess are the defaults of in-process configurations.
	InProcess InProcessOptions
	// SyncServer is the address (host:port) of flagplane's built-in flagd
	// sync server, which sidecars of flagd-proxy sources sync from. Empty
	// leaves such sources out, with a warning.
	SyncServer string
	// SyncServerTLS makes sidecars connect to SyncServer with TLS, trusting
	// the CA bundle at SyncServerCertPath in the sidecar (the system roots
	// when empty).
	SyncServerTLS      bool
	SyncServerCertPath string
	// SyncServerHeaders returns the gRPC headers by which the sidecar of a
	// pod of a namespace proves that namespace to the sync server (the sync
	// server's namespace token: flagd v0.16 sends only fixed headers written
	// into its arguments). It must be deterministic, as the rollout
	// fingerprint hashes its result. nil sends no headers.
	SyncServerHeaders func(namespace string) (map[string]string, error)
	// PassSyncProviderArgs passes spec.syncProviderArgs to the sidecar as
	// --sync-provider-args, as the OpenFeature Operator did. flagd v0.16.0
	// (the default image) has no such flag and exits on it, so by default
	// the args are left out, with a warning.
	PassSyncProviderArgs bool
	// AllowSecurityContextOverride honours AnnotationSidecarSecurityContext
	// on sources, for workloads of their own namespace. Off, the annotation
	// is ignored with a warning and the hardened securityContext applies.
	AllowSecurityContextOverride bool
}

// DefaultOptions are the options of an operator started without flags.
func DefaultOptions() Options {
	return Options{Sidecar: DefaultSidecarOptions(), InProcess: DefaultInProcessOptions()}
}

// Injection is what a pod of a workload gets. The zero value injects nothing.
type Injection struct {
	// Workload is the workload the injection was computed for.
	Workload topology.Key `json:"workload"`
	// Sidecar is the flagd init container; nil when no source applies or
	// none of its entries can be served.
	Sidecar *corev1.Container `json:"sidecar,omitempty"`
	// Volumes are the ConfigMap volumes the sidecar mounts.
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// Env are the env vars of every app container.
	Env []corev1.EnvVar `json:"env,omitempty"`
	// ImagePullSecrets are added to the pod with the sidecar
	// (SidecarOptions.ImagePullSecrets).
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// PodAnnotations are set on the pod: AnnotationAllowKubernetesSync
	// when the sidecar syncs from the kubernetes provider.
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// ConfigMaps are the generated ConfigMaps the volumes mount (topology
	// keys): they must exist before a pod that mounts them is admitted.
	ConfigMaps []topology.Key `json:"configMaps,omitempty"`
	// Sources and InProcessConfigs are what was merged, in merge order.
	Sources          []topology.Key `json:"sources,omitempty"`
	InProcessConfigs []topology.Key `json:"inProcessConfigs,omitempty"`
	// Conflicts are the settings of a source (or configuration) that a
	// later one overrode.
	Conflicts []SettingConflict `json:"conflicts,omitempty"`
	// PolicyDecisions are the sidecar settings the FeatureFlagSourcePolicies
	// of the workload's namespace decided; PolicyNotes the blocks of theirs
	// that did not apply, or lost a setting to another policy.
	PolicyDecisions []PolicyDecision `json:"policyDecisions,omitempty"`
	PolicyNotes     []PolicyNote     `json:"policyNotes,omitempty"`
	// Warnings say what was left out and why.
	Warnings []string `json:"warnings,omitempty"`
	// FlagdVersionGaps are the settings the injected flagd release cannot
	// take, left out (and among the Warnings).
	FlagdVersionGaps []VersionGap `json:"flagdVersionGaps,omitempty"`
}

// SettingConflict is one setting two sources (or in-process
// configurations) of a workload set differently: Winner's value is injected.
type SettingConflict struct {
	Setting     string       `json:"setting"`
	Loser       topology.Key `json:"loser"`
	LoserValue  string       `json:"loserValue"`
	Winner      topology.Key `json:"winner"`
	WinnerValue string       `json:"winnerValue"`
}

func (c SettingConflict) String() string {
	return fmt.Sprintf("%s: %s %s sets %s but %s %s overrides it with %s", c.Setting,
		c.Loser.Kind, c.Loser.Namespace+"/"+c.Loser.Name, c.LoserValue,
		c.Winner.Kind, c.Winner.Namespace+"/"+c.Winner.Name, c.WinnerValue)
}

// ConflictsOfSource lists the settings of a source that another
// source (or in-process configuration) overrides on some workload it
// applies to, in workload order, at most limit of them (0: all). The status
// of a source reports them, so that the losing side of a merge is never
// silent.
func ConflictsOfSource(v *topology.View, source topology.Key, limit int, opts Options) []SettingConflict {
	var out []SettingConflict
	// Only where something else applies too is there anything to lose against.
	for _, w := range v.ContestedWorkloadsOfSource(source) {
		for _, c := range Desired(v, w, opts).Conflicts {
			if c.Loser == source && !slices.ContainsFunc(out, func(other SettingConflict) bool { return other == c }) {
				out = append(out, c)
				if limit > 0 && len(out) == limit {
					return out
				}
			}
		}
	}
	return out
}

// Fingerprint hashes the injection a pod of the workload would get now —
// Desired rendered with the options the webhook injects with — and tells
// whether any of its sources asks for a rollout on change. Equal
// fingerprints mean the webhook would inject the same thing; "" means it
// would inject nothing. A flag edit changes only the content of a mounted
// ConfigMap, never the fingerprint.
func Fingerprint(v *topology.View, workload topology.Key, opts Options) (string, bool) {
	inj := Desired(v, workload, opts)
	return inj.Fingerprint(), inj.RolloutOnChange(v)
}

// RolloutOnChange tells whether one of the sources of the injection asks
// for rolloutOnChange.
func (inj *Injection) RolloutOnChange(v *topology.View) bool {
	for _, sk := range inj.Sources {
		if src, ok := v.Source(sk); ok && src.Spec.RolloutOnChange != nil && *src.Spec.RolloutOnChange {
			return true
		}
	}
	return false
}

// Empty tells whether the injection adds nothing to a pod.
func (inj *Injection) Empty() bool {
	return inj == nil || (inj.Sidecar == nil && len(inj.Volumes) == 0 && len(inj.Env) == 0)
}

// Fingerprint hashes what the injection adds to a pod (sidecar, volumes,
// env): equal fingerprints, equal pods. "" for an empty injection.
func (inj *Injection) Fingerprint() string {
	if inj.Empty() {
		return ""
	}
	b, _ := json.Marshal(struct {
		Sidecar          *corev1.Container             `json:"sidecar,omitempty"`
		Volumes          []corev1.Volume               `json:"volumes,omitempty"`
		Env              []corev1.EnvVar               `json:"env,omitempty"`
		ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
		PodAnnotations   map[string]string             `json:"podAnnotations,omitempty"`
	}{inj.Sidecar, inj.Volumes, inj.Env, inj.ImagePullSecrets, inj.PodAnnotations}) // plain data: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Same tells whether two injections add the same to a pod: what equal
// Fingerprints say, without hashing (nil and empty lists are equal, as the
// fingerprint's JSON leaves both out).
func (inj *Injection) Same(o *Injection) bool {
	if inj.Empty() || o.Empty() {
		return inj.Empty() == o.Empty()
	}
	return equality.Semantic.DeepEqual(inj.Sidecar, o.Sidecar) && equality.Semantic.DeepEqual(inj.Volumes, o.Volumes) &&
		equality.Semantic.DeepEqual(inj.Env, o.Env) && equality.Semantic.DeepEqual(inj.ImagePullSecrets, o.ImagePullSecrets) &&
		equality.Semantic.DeepEqual(inj.PodAnnotations, o.PodAnnotations)
}

// ApplyTo adds the injection to a pod spec and tells whether it changed
// anything, with warnings for what it had to leave out. It is idempotent: a
// pod that already has the sidecar init container gets nothing, and an env
// var an app container defines itself keeps the container's value.
// PodAnnotations are the caller's to set on the pod's metadata.
func (inj *Injection) ApplyTo(spec *corev1.PodSpec) (changed bool, warnings []string) {
	if inj.Empty() {
		return false, nil
	}
	if inj.Sidecar != nil {
		for _, c := range spec.InitContainers {
			if c.Name == inj.Sidecar.Name {
				return false, nil // injected already
			}
		}
		for _, c := range spec.Containers {
			if c.Name == inj.Sidecar.Name {
				return false, []string{fmt.Sprintf("flagplane did not inject its flagd sidecar: the pod has a container named %q already", c.Name)}
			}
		}
		for _, v := range inj.Volumes {
			if i := volumeIndex(spec.Volumes, v.Name); i >= 0 {
				return false, []string{fmt.Sprintf("flagplane did not inject its flagd sidecar: the pod has a volume named %q already", v.Name)}
			}
		}
		spec.Volumes = append(spec.Volumes, deepCopyVolumes(inj.Volumes)...)
		spec.InitContainers = append(spec.InitContainers, *inj.Sidecar.DeepCopy())
		for _, s := range inj.ImagePullSecrets {
			if !slices.Contains(spec.ImagePullSecrets, s) {
				spec.ImagePullSecrets = append(spec.ImagePullSecrets, s)
			}
		}
		changed = true
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for _, e := range inj.Env {
			if envIndex(c.Env, e.Name) >= 0 {
				warnings = append(warnings, fmt.Sprintf("container %q sets %s itself: flagplane left its value alone", c.Name, e.Name))
				continue
			}
			c.Env = append(c.Env, *e.DeepCopy())
			changed = true
		}
	}
	return changed, warnings
}

// Without returns a copy of the injection without the given ConfigMaps
// (topology keys): their volumes, mounts and --sources entries. A sidecar
// left without any source is dropped, with the env vars it brought; those
// of in-process configurations stay. The admission webhook uses it for a
// ConfigMap it cannot make exist: a pod never mounts a missing ConfigMap.
func (inj *Injection) Without(cms ...topology.Key) *Injection {
	out := *inj
	if inj.Sidecar == nil || len(cms) == 0 {
		return &out
	}
	out.Sidecar = inj.Sidecar.DeepCopy()
	configMaps := map[string]bool{} // ConfigMap names
	files := map[string]bool{}      // file URIs
	for _, cm := range cms {
		configMaps[topology.ConfigMapName(cm.FlagSet())] = true
		files[FlagFilePath(cm.FlagSet())] = true
	}
	drop := map[string]bool{} // volume names
	for _, v := range inj.Volumes {
		if v.ConfigMap != nil && configMaps[v.ConfigMap.Name] {
			drop[v.Name] = true
		}
	}
	out.ConfigMaps = slices.DeleteFunc(slices.Clone(inj.ConfigMaps), func(k topology.Key) bool { return slices.Contains(cms, k) })
	out.Volumes = slices.DeleteFunc(deepCopyVolumes(inj.Volumes), func(v corev1.Volume) bool { return drop[v.Name] })
	out.Sidecar.VolumeMounts = slices.DeleteFunc(out.Sidecar.VolumeMounts, func(m corev1.VolumeMount) bool { return drop[m.Name] })
	remaining := 0
	for i, a := range out.Sidecar.Args {
		if a != "--sources" || i+1 >= len(out.Sidecar.Args) {
			continue
		}
		var entries []FlagdSourceConfig
		if json.Unmarshal([]byte(out.Sidecar.Args[i+1]), &entries) != nil {
			break
		}
		entries = slices.DeleteFunc(entries, func(e FlagdSourceConfig) bool { return files[e.URI] })
		b, _ := json.Marshal(entries)
		out.Sidecar.Args[i+1] = string(b)
		remaining = len(entries)
	}
	if remaining == 0 {
		sidecarEnv := inj.Sidecar.Env
		out.Env = slices.DeleteFunc(slices.Clone(inj.Env), func(e corev1.EnvVar) bool {
			return slices.ContainsFunc(sidecarEnv, func(s corev1.EnvVar) bool { return s.Name == e.Name && envEqual(s, e) })
		})
		out.Sidecar, out.Volumes, out.ImagePullSecrets, out.PodAnnotations = nil, nil, nil, nil
	}
	return &out
}

func volumeIndex(vs []corev1.Volume, name string) int {
	for i := range vs {
		if vs[i].Name == name {
			return i
		}
	}
	return -1
}

func envIndex(env []corev1.EnvVar, name string) int {
	for i := range env {
		if env[i].Name == name {
			return i
		}
	}
	return -1
}

func deepCopyVolumes(vs []corev1.Volume) []corev1.Volume {
	out := make([]corev1.Volume, len(vs))
	for i := range vs {
		vs[i].DeepCopyInto(&out[i])
	}
	return out
}

// FlagMountDir is the directory the sidecar mounts a flag set's ConfigMap
// at: "/etc/flagd/<namespace>_<name>", as in the OpenFeature Operator, or
// the shortened ID when that would be too long a file name
// (topology.FlagSetID).
func FlagMountDir(flagSet topology.Key) string {
	return FlagMountRoot + "/" + topology.FlagSetID(flagSet)
}

// FlagFilePath is the file flagd reads a mounted flag set from: the
// ConfigMap's data key in FlagMountDir.
func FlagFilePath(flagSet topology.Key) string {
	return FlagMountDir(flagSet) + "/" + topology.ConfigMapDataKey(flagSet)
}

// FlagVolumeName is the pod volume of a flag set's ConfigMap: a DNS label
// ("flagd-" + the flag set's name, cut to fit, + 8 hex digits of a hash of
// namespace/name), readable. Two flag sets may share it (their names alike
// in the first 40 characters, their 32-bit hashes equal: rare, but a tenant
// can search for it): flagVolumeNameAmong keeps a pod's volumes apart.
func FlagVolumeName(flagSet topology.Key) string {
	sum := sha256.Sum256([]byte(flagSet.Namespace + "/" + flagSet.Name))
	name := strings.ReplaceAll(strings.ToLower(flagSet.Name), ".", "-")
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-")
	return "flagd-" + name + "-" + hex.EncodeToString(sum[:4])
}

// flagVolumeNameAmong is the name of a flag set's volume beside volumes:
// FlagVolumeName, unless one of volumes has it already; then the first of
// FlagVolumeName + "-2", "-3", ... that none has. A name with such a
// suffix is never another flag set's FlagVolumeName, which ends in "-" and
// 8 hex digits, and stays a DNS label (at most 55 + 8 characters).
func flagVolumeNameAmong(volumes []corev1.Volume, flagSet topology.Key) string {
	base := FlagVolumeName(flagSet)
	name := base
	for n := 2; volumeIndex(volumes, name) >= 0; n++ {
		name = base + "-" + strconv.Itoa(n)
	}
	return name
}
