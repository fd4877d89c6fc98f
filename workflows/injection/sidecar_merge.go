package injection

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagdversion"
)

// A value of a FeatureFlagSourceSpec equal to the API's default (which the
// CRD fills in) is not a setting the source makes: the operator's default
// (SidecarOptions) applies. The API's defaults are the Default* constants
// of SidecarOptions.

// setting is one merged scalar: its value, and the source it came from.
type setting[T comparable] struct {
	value T
	from  topology.Key
	set   bool
}

// merge records v from src if isSet, reporting a conflict when an earlier
// source set another value.
func (s *setting[T]) merge(inj *Injection, name string, v T, isSet bool, src topology.Key) {
	if !isSet {
		return
	}
	if s.set && s.value != v {
		inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: name,
			Loser: s.from, LoserValue: fmt.Sprint(s.value), Winner: src, WinnerValue: fmt.Sprint(v)})
	}
	s.value, s.from, s.set = v, src, true
}

func (s *setting[T]) or(def T) T {
	if s.set {
		return s.value
	}
	return def
}

type keyedValue struct {
	value string
	from  topology.Key
}

// sidecarMerge accumulates the settings of a workload's sources.
type sidecarMerge struct {
	inj *Injection
	// mayReadDirectly is the tenancy rule for the kubernetes provider.
	mayReadDirectly func(topology.Key) bool
	// defaultProvider is the operator's default provider (topology.View.DefaultSyncProvider).
	defaultProvider v1beta1.SyncProviderType
	// flagd is the injected flagd release: what it takes is all it is told.
	flagd flagdversion.Injected

	managementPort, port, ofrepPort                               setting[int32]
	socketPath, evaluator, logFormat, envVarPrefix, otelCollector setting[string]
	probes, debug                                                 setting[bool]
	securityContext                                               setting[string]
	// keepAliveMinTime (a Go duration) and keepAlivePermit: flagd's sync
	// server's keepalive enforcement (keepAliveEnv).
	keepAliveMinTime setting[string]
	keepAlivePermit  setting[bool]

	envVars        []corev1.EnvVar
	envFrom        map[string]topology.Key
	contextValues  map[string]keyedValue
	headerMappings map[string]keyedValue
	cors           []string
	providerArgs   []string
	// providerArgsFrom are the sources that set syncProviderArgs.
	providerArgsFrom []topology.Key
	requests         map[corev1.ResourceName]keyedValue
	limits           map[corev1.ResourceName]keyedValue

	entries    []FlagdSourceConfig
	kubernetes bool // an entry syncs with the kubernetes provider
	// served follows entries when trackServed (DesiredServed, ContainerOfSource).
	trackServed bool
	served      []ServedEntry
	volumes     []corev1.Volume
	mounts      []corev1.VolumeMount
	configMaps  []topology.Key
	// refusal says why the sidecar was left out: it would pass a limit of
	// what a pod carries (limits.go).
	refusal *Refusal
}

// newSidecarMerge starts a merge for the flagd release opts inject. Its
// maps are made when a source first sets one of their settings: most
// sources set none, and a merge is made for every pod admitted.
func newSidecarMerge(inj *Injection, opts Options) *sidecarMerge {
	return &sidecarMerge{inj: inj, flagd: opts.Sidecar.Flagd()}
}

func (m *sidecarMerge) addSource(v *topology.View, sk topology.Key, src *v1beta1.FeatureFlagSource, opts Options) {
	s := &src.Spec
	inj := m.inj
	m.managementPort.merge(inj, "managementPort", s.ManagementPort, s.ManagementPort != 0 && s.ManagementPort != DefaultManagementPort, sk)
	m.port.merge(inj, "port", s.Port, s.Port != 0 && s.Port != DefaultSidecarPort, sk)
	m.ofrepPort.merge(inj, "ofrepPort", s.OFREPPort, s.OFREPPort != 0 && s.OFREPPort != DefaultOFREPPort, sk)
	m.socketPath.merge(inj, "socketPath", s.SocketPath, s.SocketPath != "", sk)
	m.evaluator.merge(inj, "evaluator", s.Evaluator, s.Evaluator != "" && s.Evaluator != DefaultEvaluator, sk)
	m.logFormat.merge(inj, "logFormat", s.LogFormat, s.LogFormat != "" && s.LogFormat != DefaultLogFormat, sk)
	m.envVarPrefix.merge(inj, "envVarPrefix", s.EnvVarPrefix, s.EnvVarPrefix != "" && s.EnvVarPrefix != DefaultEnvVarPrefix, sk)
	m.otelCollector.merge(inj, "otelCollectorUri", s.OtelCollectorUri, s.OtelCollectorUri != "", sk)
	m.probes.merge(inj, "probesEnabled", ptr.Deref(s.ProbesEnabled, true), s.ProbesEnabled != nil, sk)
	m.debug.merge(inj, "debugLogging", ptr.Deref(s.DebugLogging, false), s.DebugLogging != nil, sk)
	if s.KeepAliveMinTime != nil {
		m.keepAliveMinTime.merge(inj, "keepAliveMinTime", s.KeepAliveMinTime.Duration.String(), true, sk)
	}
	m.keepAlivePermit.merge(inj, "keepAlivePermitWithoutStream", ptr.Deref(s.KeepAlivePermitWithoutStream, false), s.KeepAlivePermitWithoutStream != nil, sk)
	if sc := src.Annotations[AnnotationSidecarSecurityContext]; sc != "" {
		switch {
		case !opts.AllowSecurityContextOverride:
			inj.Warnings = append(inj.Warnings, fmt.Sprintf("%s: annotation %s ignored: the operator does not allow sources to relax the sidecar's securityContext",
				keyString(sk), AnnotationSidecarSecurityContext))
		case sk.Namespace != inj.Workload.Namespace:
			inj.Warnings = append(inj.Warnings, fmt.Sprintf("%s: annotation %s ignored: a source relaxes the sidecar's securityContext only for workloads of its own namespace",
				keyString(sk), AnnotationSidecarSecurityContext))
		default:
			m.securityContext.merge(inj, "sidecar securityContext", sc, true, sk)
		}
	}

	for _, e := range s.EnvVars {
		if i := envIndex(m.envVars, e.Name); i >= 0 {
			if !envEqual(m.envVars[i], e) {
				inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: "envVars[" + e.Name + "]",
					Loser: m.envFrom[e.Name], LoserValue: envValue(m.envVars[i]), Winner: sk, WinnerValue: envValue(e)})
			}
			m.envVars[i] = *e.DeepCopy()
		} else {
			m.envVars = append(m.envVars, *e.DeepCopy())
		}
		setKey(&m.envFrom, e.Name, sk)
	}
	mergeMap(inj, "contextValues", &m.contextValues, s.ContextValues, sk)
	mergeMap(inj, "headerToContextMappings", &m.headerMappings, s.HeaderToContextMappings, sk)
	for _, origin := range s.CORS {
		if !slices.Contains(m.cors, origin) {
			m.cors = append(m.cors, origin)
		}
	}
	for _, a := range s.SyncProviderArgs {
		if !slices.Contains(m.providerArgs, a) {
			m.providerArgs = append(m.providerArgs, a)
		}
	}
	if len(s.SyncProviderArgs) > 0 {
		m.providerArgsFrom = append(m.providerArgsFrom, sk)
		// A release known to lack the flag leaves them out whatever the
		// operator says (a VersionGap, see container); else the operator's
		// consent does.
		if !opts.PassSyncProviderArgs && (!m.flagd.Vouched || m.lacksFlag("sync-provider-args") == "") {
			inj.Warnings = append(inj.Warnings, fmt.Sprintf("%s: syncProviderArgs left out: they reach flagd only with --sidecar-sync-provider-args", keyString(sk)))
		}
	}
	mergeResources(inj, "resources.requests", &m.requests, s.Resources.Requests, sk)
	mergeResources(inj, "resources.limits", &m.limits, s.Resources.Limits, sk)

	// The references of the entries, by entry index (one per entry that
	// names a flag set; FlagSetRefs lists them in entry order).
	refs := v.FlagSetRefs(sk)
	for i, e := range s.Sources {
		m.addEntry(sk, i, e, s.DefaultSyncProvider, refs, opts)
	}
}

// addEntry turns one spec.sources entry into a flagd source (and, for a
// file source, its volume and mount), or a warning saying why it cannot be.
func (m *sidecarMerge) addEntry(sk topology.Key, i int, e v1beta1.Source, def v1beta1.SyncProviderType,
	refs []topology.FlagSetRef, opts Options) {
	provider := topology.ProviderInForce(e, def, m.defaultProvider)
	var cfg FlagdSourceConfig
	var f topology.Key
	if provider.ReferencesFlagSet() {
		ref, ok := refOfEntry(refs, i)
		if !ok || ref.State != topology.RefResolved {
			why := "the FeatureFlag does not exist"
			if ok && ref.State == topology.RefNotPermitted {
				why = "the FeatureFlag is in another namespace and no ReferenceGrant permits it"
			}
			m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: %s", keyString(sk), i, e.Source, why))
			return
		}
		f = ref.FlagSet
		var headers map[string]string
		switch provider {
		case v1beta1.SyncProviderFile:
			m.mount(f, topology.ConfigMapKey(f, m.inj.Workload.Namespace))
		case v1beta1.SyncProviderKubernetes:
			if !m.mayReadDirectly(f) {
				m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: the kubernetes provider reads every FeatureFlag of namespace %s, "+
					"which needs a ReferenceGrant there for the pods of namespace %s to all FeatureFlags; use the file or flagd-proxy provider for one flag set",
					keyString(sk), i, e.Source, f.Namespace, m.inj.Workload.Namespace))
				return
			}
			m.kubernetes = true
		case v1beta1.SyncProviderFlagdProxy:
			if opts.SyncServer == "" {
				m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: no sync server is configured for flagd-proxy", keyString(sk), i, e.Source))
				return
			}
			if opts.SyncServerHeaders != nil {
				h, err := opts.SyncServerHeaders(m.inj.Workload.Namespace)
				if err != nil {
					m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: no sync server credential for namespace %s: %v",
						keyString(sk), i, e.Source, m.inj.Workload.Namespace, err))
					return
				}
				headers = h
			}
		}
		cfg = flagSetSourceConfig(provider, f, opts, headers)
	} else {
		cfg = remoteSourceConfig(provider, e)
	}
	if why := m.lacksForEntry(cfg); why != "" {
		if provider == v1beta1.SyncProviderFlagdProxy && len(cfg.Headers) > 0 && m.flagd.Facts.HasProvider(cfg.Provider) {
			why += ", which carries the sync server's credential for namespace " + m.inj.Workload.Namespace
		}
		m.gap(sk, fmt.Sprintf("sources[%d] %q", i, e.Source), why)
		return
	}
	if !slices.ContainsFunc(m.entries, cfg.equal) {
		m.entries = append(m.entries, cfg)
		if m.trackServed {
			served := ServedEntry{URI: cfg.URI, Provider: cfg.Provider}
			if provider.ReferencesFlagSet() {
				served = ServedEntry{FlagSet: f}
			}
			m.served = append(m.served, served)
		}
	}
}

// refOfEntry finds the reference of entry i.
func refOfEntry(refs []topology.FlagSetRef, i int) (topology.FlagSetRef, bool) {
	for _, r := range refs {
		if r.Index == i {
			return r, true
		}
	}
	return topology.FlagSetRef{}, false
}

// remoteSourceConfig passes a remote source through to flagd. A grpc URI
// loses its grpc:// or grpcs:// prefix, which flagd's --sources (unlike
// --uri) hands to the gRPC dialer as it is; grpcs:// means TLS.
func remoteSourceConfig(provider v1beta1.SyncProviderType, e v1beta1.Source) FlagdSourceConfig {
	cfg := FlagdSourceConfig{URI: e.Source, Provider: string(provider)}
	switch provider {
	case v1beta1.SyncProviderHTTP:
		if e.HttpSyncBearerToken != "" {
			cfg.AuthHeader = "Bearer " + e.HttpSyncBearerToken
		}
		cfg.Interval = e.Interval
	case v1beta1.SyncProviderGRPC:
		cfg.TLS, cfg.CertPath, cfg.ProviderID, cfg.Selector = e.TLS, e.CertPath, e.ProviderID, e.Selector
		if rest, ok := strings.CutPrefix(cfg.URI, "grpcs://"); ok {
			cfg.URI, cfg.TLS = rest, true
		} else if rest, ok := strings.CutPrefix(cfg.URI, "grpc://"); ok {
			cfg.URI = rest
		}
	case v1beta1.SyncProviderGCS, v1beta1.SyncProviderAzureBlob, v1beta1.SyncProviderS3:
		cfg.Interval = e.Interval
	}
	return cfg
}

func (m *sidecarMerge) mount(f, cm topology.Key) {
	if slices.Contains(m.configMaps, cm) {
		return
	}
	m.configMaps = append(m.configMaps, cm)
	name := flagVolumeNameAmong(m.volumes, f)
	m.volumes = append(m.volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: topology.ConfigMapName(f)}},
	}})
	m.mounts = append(m.mounts, corev1.VolumeMount{Name: name, MountPath: FlagMountDir(f), ReadOnly: true})
}

// resources are the operator's defaults with what the sources set over
// them. A request a source raises above a limit it did not set lifts that
// limit to the request: the pod would be invalid otherwise.
func (m *sidecarMerge) resources(defaults corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *defaults.DeepCopy()
	set := func(list *corev1.ResourceList, from map[corev1.ResourceName]keyedValue) {
		for name, kv := range from {
			if *list == nil {
				*list = corev1.ResourceList{}
			}
			(*list)[name] = resource.MustParse(kv.value)
		}
	}
	set(&out.Requests, m.requests)
	set(&out.Limits, m.limits)
	for _, name := range sortedResourceNames(out.Requests) {
		req := out.Requests[name]
		lim, ok := out.Limits[name]
		if !ok || req.Cmp(lim) <= 0 {
			continue
		}
		if kv, bySource := m.limits[name]; bySource {
			m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: %s limit %s is below the request %s: raised to the request",
				keyString(kv.from), name, lim.String(), req.String()))
		}
		out.Limits[name] = req.DeepCopy()
	}
	if len(out.Requests) == 0 {
		out.Requests = nil
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	return out
}

// setKey sets m[k], making m first if it is nil.
func setKey[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

func mergeMap(inj *Injection, name string, into *map[string]keyedValue, from map[string]string, src topology.Key) {
	if len(from) == 0 {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(from)) {
		v := from[k]
		if old, ok := (*into)[k]; ok && old.value != v {
			inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: name + "[" + k + "]",
				Loser: old.from, LoserValue: old.value, Winner: src, WinnerValue: v})
		}
		setKey(into, k, keyedValue{value: v, from: src})
	}
}

func mergeResources(inj *Injection, name string, into *map[corev1.ResourceName]keyedValue, from corev1.ResourceList, src topology.Key) {
	if len(from) == 0 {
		return
	}
	for _, r := range sortedResourceNames(from) {
		q := from[r]
		v := q.String()
		if old, ok := (*into)[r]; ok {
			oq := resource.MustParse(old.value)
			if oq.Cmp(q) != 0 {
				inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: name + "[" + string(r) + "]",
					Loser: old.from, LoserValue: old.value, Winner: src, WinnerValue: v})
			}
		}
		setKey(into, r, keyedValue{value: v, from: src})
	}
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
