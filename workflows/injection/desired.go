package injection

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagdversion"
)

// A value of a FeatureFlagSourceSpec equal to the API's default (which the
// CRD fills in) is not a setting the source makes: the operator's default
// (SidecarOptions) applies. The API's defaults are the Default* constants
// of SidecarOptions.

// Env var names, after the prefix, as in the OpenFeature Operator.
const (
	envManagementPort = "MANAGEMENT_PORT"
	envPort           = "PORT"
	envEvaluator      = "EVALUATOR"
	envLogFormat      = "LOG_FORMAT"
	envResolver       = "RESOLVER"
	envSocketPath     = "SOCKET_PATH"
	envHost           = "HOST"
	envTLS            = "TLS"
	envOfflinePath    = "OFFLINE_FLAG_SOURCE_PATH"
	envSelector       = "SOURCE_SELECTOR"
	envCache          = "CACHE"
	envCacheMaxSize   = "MAX_CACHE_SIZE"
)

// FlagdSourceConfig is one entry of flagd's --sources JSON, with the field
// names of flagd v0.16.0 (core/pkg/sync.SourceConfig).
type FlagdSourceConfig struct {
	URI        string `json:"uri"`
	Provider   string `json:"provider"`
	AuthHeader string `json:"authHeader,omitempty"`
	CertPath   string `json:"certPath,omitempty"`
	TLS        bool   `json:"tls,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
	Selector   string `json:"selector,omitempty"`
	Interval   uint32 `json:"interval,omitempty"`
	// Headers are sent with every gRPC request of a grpc source.
	Headers map[string]string `json:"headers,omitempty"`
}

// Desired computes what a pod of workload gets, from the graph and
// the operator-wide options. It reads no cluster state. A workload no source
// or in-process configuration applies to gets an empty Injection.
func Desired(v *topology.View, workload topology.Key, opts Options) *Injection {
	inj, _ := desired(v, workload, opts, false)
	return inj
}

// DesiredServed is Desired, with what the sidecar's flagd serves, in the
// order of its --sources (flagd answers a flag key that several hold from
// the last). For flagplane diff: admission calls Desired and does not pay
// for the list.
func DesiredServed(v *topology.View, workload topology.Key, opts Options) (*Injection, []ServedEntry) {
	inj, m := desired(v, workload, opts, true)
	if m == nil {
		return inj, nil
	}
	return inj, m.served
}

// EffectiveSetting is one sidecar setting in force on a workload and the
// object it comes from: a source, a FeatureFlagSourcePolicy (Block says
// which of its blocks), or the operator's default when From is empty.
type EffectiveSetting struct {
	Setting string       `json:"setting"`
	Value   string       `json:"value"`
	From    topology.Key `json:"from"`
	Block   string       `json:"block,omitempty"`
}

// DesiredWithSettings is Desired, with the sidecar settings a source or a
// policy sets on the workload's sidecar and what each comes from, by
// setting (the rest are the operator's, SidecarOptions; none when the
// workload gets no sidecar). For explain: admission calls Desired and
// does not pay for the list.
func DesiredWithSettings(v *topology.View, workload topology.Key, opts Options) (*Injection, []EffectiveSetting) {
	inj, m := desired(v, workload, opts, false)
	if inj.Sidecar == nil || m == nil {
		return inj, nil
	}
	settings := m.settings(workload.Namespace).Settings
	blocks := map[string]string{} // the merge keeps values and origins; the decisions keep the blocks
	for _, d := range inj.PolicyDecisions {
		blocks[d.Setting] = d.Block
	}
	out := make([]EffectiveSetting, 0, len(settings))
	for _, path := range slices.Sorted(maps.Keys(settings)) {
		s := settings[path]
		e := EffectiveSetting{Setting: path, Value: s.Text(), From: s.From}
		if s.From.Kind == topology.KindSourcePolicy {
			e.Block = blocks[path]
		}
		out = append(out, e)
	}
	return inj, out
}

func desired(v *topology.View, workload topology.Key, opts Options, trackServed bool) (*Injection, *sidecarMerge) {
	inj := &Injection{Workload: workload}
	if _, ok := v.Workload(workload); !ok {
		return inj, nil
	}
	m := newSidecarMerge(inj, opts)
	m.trackServed = trackServed
	m.mayReadDirectly = func(f topology.Key) bool { return v.MayReadDirectly(workload, f) }
	m.defaultProvider = v.DefaultSyncProvider()
	// The operator's provider args come first, as the OpenFeature
	// Operator's sidecarConfiguration.providerArgs do.
	m.providerArgs = slices.Clone(opts.Sidecar.ProviderArgs)
	sources := v.SourcesOfWorkload(workload)
	entries := 0
	for _, sk := range sources {
		if src, ok := v.Source(sk); ok {
			entries += len(src.Spec.Sources)
		}
	}
	m.entries = make([]FlagdSourceConfig, 0, entries)
	for _, sk := range sources {
		src, ok := v.Source(sk)
		if !ok {
			continue
		}
		inj.Sources = append(inj.Sources, sk)
		m.addSource(v, sk, src, opts)
	}
	if len(inj.Sources) > 0 {
		m.applyPolicies(v.SourcePoliciesOfNamespace(workload.Namespace), workload.Namespace)
	}
	var env *envMerge
	var sidecarEnv []corev1.EnvVar
	var sidecar *corev1.Container
	var appEnv []sourcedEnv
	if len(m.entries) > 0 {
		sidecar, appEnv = m.container(opts), m.appEnv(opts.Sidecar)
		// A sidecar that could not start is left out (limits.go).
		if m.checkLimits(sidecar, appEnv); m.refusal != nil {
			sidecar = nil
		}
	}
	if sidecar != nil {
		inj.Sidecar = sidecar
		inj.Volumes = m.volumes
		inj.ConfigMaps = m.configMaps
		for _, s := range opts.Sidecar.ImagePullSecrets {
			inj.ImagePullSecrets = append(inj.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
		if m.kubernetes {
			inj.PodAnnotations = map[string]string{AnnotationAllowKubernetesSync: "true"}
		}
		env = newEnvMerge(inj, len(appEnv))
		// The sidecar reads the same settings: flagd takes FLAGD_* env vars.
		sidecarEnv = make([]corev1.EnvVar, 0, len(appEnv))
		for _, e := range appEnv {
			env.add(e.env, e.from)
			own := e.env
			if own.ValueFrom != nil {
				own.ValueFrom = own.ValueFrom.DeepCopy() // the pod's two containers share nothing
			}
			sidecarEnv = append(sidecarEnv, own)
		}
	} else if len(inj.Sources) > 0 && m.refusal == nil {
		inj.Warnings = append(inj.Warnings, "no flagd sidecar: none of the entries of the sources can be served")
	}
	ipm := newInProcessMerge(inj)
	for _, ck := range v.InProcessConfigsOfWorkload(workload) {
		c, ok := v.InProcessConfig(ck)
		if !ok {
			continue
		}
		inj.InProcessConfigs = append(inj.InProcessConfigs, ck)
		ipm.add(ck, &c.Spec)
	}
	if len(inj.InProcessConfigs) > 0 {
		ipEnv := ipm.env(opts.InProcess)
		if env == nil {
			env = newEnvMerge(inj, len(ipEnv))
		}
		for _, e := range ipEnv {
			if n := EnvStringBytes(e.env); n > MaxArgBytes {
				// No app container could start with it (limits.go).
				inj.Warnings = append(inj.Warnings, fmt.Sprintf("%s: env var %s left out: it would be %d bytes, over the %d bytes of %s",
					keyString(e.from), e.env.Name, n, MaxArgBytes, limitArg))
				continue
			}
			env.add(e.env, e.from)
		}
	}
	inj.Env = env.list()
	if inj.Sidecar != nil {
		// container wrote flagd's own variables; the apps' come first.
		inj.Sidecar.Env = append(sidecarEnv, inj.Sidecar.Env...)
	}
	return inj, m
}

// SourceContainer is flagd's container for one source alone, rendered by
// the sidecar's code: a Flagd's Deployment runs it (as a regular
// container: the caller drops the restartPolicy and sets its own ports).
type SourceContainer struct {
	// Container is the sidecar container, with its env; nil when none of
	// the source's entries can be served.
	Container *corev1.Container
	// Served is what its flagd serves, as for Injection.
	Served []ServedEntry
	// Volumes are the ConfigMap volumes it mounts, ConfigMaps the
	// generated ConfigMaps they are (topology keys).
	Volumes    []corev1.Volume
	ConfigMaps []topology.Key
	// Warnings say what was left out and why.
	Warnings []string
	// FlagdVersionGaps are what was left out because the injected flagd
	// release cannot take it (among the Warnings too).
	FlagdVersionGaps []VersionGap
	// Flagd is the flagd release the container runs.
	Flagd flagdversion.Injected
	// PodAnnotations are what the pods get, as for Injection
	// (AnnotationAllowKubernetesSync when flagd reads with the kubernetes
	// provider).
	PodAnnotations map[string]string
	// PolicyDecisions and PolicyNotes are as for Injection.
	PolicyDecisions []PolicyDecision
	PolicyNotes     []PolicyNote
	// Port and ManagementPort are flagd's ports in force: the source's,
	// else the options'. OFREPPort is the source's, 0 where it sets none.
	Port, ManagementPort, OFREPPort int32
}

// ContainerOfSource renders the sidecar of one source for owner (a Flagd:
// its namespace is the pod's, for tenancy and the sync server's
// credentials), as Desired does for a workload the source alone applies to.
// It reads no cluster state.
func ContainerOfSource(v *topology.View, owner, source topology.Key, opts Options) SourceContainer {
	inj := &Injection{Workload: owner, Sources: []topology.Key{source}}
	src, ok := v.Source(source)
	if !ok {
		return SourceContainer{Warnings: []string{keyString(source) + " does not exist"}}
	}
	m := newSidecarMerge(inj, opts)
	m.trackServed = true // a Flagd's few entries; flagplane diff reads them
	m.mayReadDirectly = func(fs topology.Key) bool { return v.MayReadDirectly(owner, fs) }
	m.defaultProvider = v.DefaultSyncProvider()
	m.providerArgs = slices.Clone(opts.Sidecar.ProviderArgs)
	m.addSource(v, source, src, opts)
	m.applyPolicies(v.SourcePoliciesOfNamespace(owner.Namespace), owner.Namespace)
	if len(m.entries) == 0 {
		return SourceContainer{Warnings: inj.Warnings, FlagdVersionGaps: inj.FlagdVersionGaps, Flagd: m.flagd}
	}
	c := m.container(opts)
	c.Env = append(m.sidecarEnv(opts.Sidecar), c.Env...)
	if m.checkLimits(c, nil); m.refusal != nil {
		return SourceContainer{Warnings: inj.Warnings, FlagdVersionGaps: inj.FlagdVersionGaps, Flagd: m.flagd}
	}
	out := SourceContainer{Container: c, Served: m.served, Volumes: m.volumes, ConfigMaps: m.configMaps, Warnings: inj.Warnings,
		FlagdVersionGaps: inj.FlagdVersionGaps, Flagd: m.flagd,
		PolicyDecisions: inj.PolicyDecisions, PolicyNotes: inj.PolicyNotes,
		Port: m.port.or(opts.Sidecar.Port), ManagementPort: m.managementPort.or(opts.Sidecar.ManagementPort)}
	if m.ofrepPort.set {
		out.OFREPPort = m.ofrepPort.value
	}
	if m.kubernetes {
		out.PodAnnotations = map[string]string{AnnotationAllowKubernetesSync: "true"}
	}
	return out
}

// ServedEntry is one of flagd's sources: a FeatureFlag (whatever the
// provider), or a source flagplane does not see into (URI and Provider).
type ServedEntry struct {
	FlagSet  topology.Key `json:"flagSet,omitzero"`
	URI      string       `json:"uri,omitempty"`
	Provider string       `json:"provider,omitempty"`
}

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

// distinctSources gives every grpc entry that shares its URI with another
// a URI of its own. flagd v0.16 keeps the flags of a source under its URI,
// and replaces them all with each payload that URI sends: the flag sets
// of two streams from one sync server (flagd-proxy entries, which differ
// by selector only) replaced each other, and flagd served the last one
// received (the test node showed it with 100 flagd-proxy entries, one
// flag set left and flagd never ready). A host:port URI is the same
// target with the dns scheme, flagd's gRPC client's default, and a query
// that names the selector, which the resolver ignores; a URI with a scheme
// of its own is left as it is. Entries with a URI of their own are
// unchanged, so that a single flagd-proxy entry is what the OpenFeature
// Operator writes.
func distinctSources(entries []FlagdSourceConfig) []FlagdSourceConfig {
	uses := map[string]int{}
	for _, e := range entries {
		if e.Provider == string(v1beta1.SyncProviderGRPC) {
			uses[e.URI]++
		}
	}
	var out []FlagdSourceConfig
	for i, e := range entries {
		if e.Provider != string(v1beta1.SyncProviderGRPC) || uses[e.URI] < 2 || strings.Contains(e.URI, "://") {
			continue
		}
		if out == nil {
			out = slices.Clone(entries)
		}
		out[i].URI = "dns:///" + e.URI + "?selector=" + url.QueryEscape(e.Selector)
	}
	if out == nil {
		return entries
	}
	return out
}

// equal tells whether two entries are the same flagd source.
func (c FlagdSourceConfig) equal(o FlagdSourceConfig) bool {
	return c.URI == o.URI && c.Provider == o.Provider && c.AuthHeader == o.AuthHeader && c.CertPath == o.CertPath &&
		c.TLS == o.TLS && c.ProviderID == o.ProviderID && c.Selector == o.Selector && c.Interval == o.Interval &&
		maps.Equal(c.Headers, o.Headers)
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

// container renders the sidecar.
func (m *sidecarMerge) container(opts Options) *corev1.Container {
	mgmt := m.managementPort.or(opts.Sidecar.ManagementPort)
	port := m.port.or(opts.Sidecar.Port)
	sources, _ := json.Marshal(distinctSources(m.entries)) // plain data: cannot fail
	args := make([]string, 0, 16+2*(len(m.contextValues)+len(m.headerMappings)+len(m.cors)+len(m.providerArgs)))
	args = append(args, "start",
		"--management-port", strconv.Itoa(int(mgmt)),
		"--port", strconv.Itoa(int(port)),
		"--log-format", m.logFormat.or(opts.Sidecar.LogFormat),
	)
	if m.ofrepPort.set {
		args = append(args, "--ofrep-port", strconv.Itoa(int(m.ofrepPort.value)))
	}
	if sp := m.socketPath.or(opts.Sidecar.SocketPath); sp != "" {
		args = append(args, "--socket-path", sp)
	}
	args = append(args, "--sources", string(sources))
	if m.debug.or(opts.Sidecar.DebugLogging) {
		args = append(args, "--debug")
	}
	if otel := m.otelCollector.or(opts.Sidecar.OtelCollectorURI); otel != "" {
		args = append(args, "--metrics-exporter", "otel", "--otel-collector-uri", otel)
	}
	args = m.flagArgs(args, "context-value", "contextValues", keyedSources(m.contextValues), keyedArgs(m.contextValues)...)
	args = m.flagArgs(args, "context-from-header", "headerToContextMappings", keyedSources(m.headerMappings), keyedArgs(m.headerMappings)...)
	args = m.flagArgs(args, "cors-origin", "cors", m.inj.Sources, m.cors...)
	// syncProviderArgs reach flagd with the operator's consent
	// (PassSyncProviderArgs), and never a release known to exit on them.
	// One flagplane does not vouch for gets them, as asked.
	if opts.PassSyncProviderArgs {
		if why := m.lacksFlag("sync-provider-args"); why == "" || !m.flagd.Vouched {
			for _, a := range m.providerArgs {
				args = append(args, "--sync-provider-args", a)
			}
		}
	}
	if why := m.lacksFlag("sync-provider-args"); why != "" && m.flagd.Vouched {
		for _, src := range m.providerArgsFrom {
			m.gap(src, "syncProviderArgs", why)
		}
	}

	c := &corev1.Container{
		Name:            SidecarName,
		Image:           opts.Sidecar.ImageReference(),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		// The port names are the OpenFeature Operator's ("flagd",
		// "management"), which PodMonitors of flagd's metrics name.
		Ports: []corev1.ContainerPort{
			{Name: "flagd", ContainerPort: port, Protocol: corev1.ProtocolTCP},
			{Name: "management", ContainerPort: mgmt, Protocol: corev1.ProtocolTCP},
			{Name: "flagd-ofrep", ContainerPort: m.ofrepPort.or(DefaultOFREPPort), Protocol: corev1.ProtocolTCP},
		},
		// flagd's own variables; callers put the apps' before them.
		Env:                      m.keepAliveEnv(),
		VolumeMounts:             m.mounts,
		Resources:                m.resources(opts.Sidecar.Resources),
		SecurityContext:          m.securityContextFor(),
		RestartPolicy:            ptr.To(corev1.ContainerRestartPolicyAlways),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if m.probes.or(opts.Sidecar.ProbesEnabled) {
		c.StartupProbe = httpProbe("/healthz", mgmt, 1, 60)
		c.LivenessProbe = httpProbe("/healthz", mgmt, 10, 3)
		c.ReadinessProbe = httpProbe(m.readinessPath(), mgmt, 5, 3)
	}
	return c
}

// readinessPath is what the sidecar's readiness probe asks flagd:
// /readyz, which answers 200 once every source has synced, unless the
// sidecar reads two or more sources over gRPC. flagd (v0.13 to v0.16 at
// least) marks a gRPC source ready through a sync.Once of the whole
// process, so only the first of them ever is, and /readyz answers 412 for
// good: the test node showed a pod of 100 flagd-proxy entries, serving all
// of them, never Ready. Such a sidecar is probed on /healthz, which
// answers once flagd serves; its app containers start after the startup
// probe either way. Nothing is left out: no warning.
func (m *sidecarMerge) readinessPath() string {
	grpcSources := 0
	for _, e := range m.entries {
		if e.Provider == string(v1beta1.SyncProviderGRPC) {
			grpcSources++
		}
	}
	if grpcSources < 2 {
		return "/readyz"
	}
	return "/healthz"
}

// ContextArgs reads back, from a flagd container's args as container
// writes them, what that flagd adds to every evaluation's context: the
// static context values (--context-value KEY=VALUE) and the headers it maps
// into the context (--context-from-header HEADER=KEY). Both are nil when
// there are none.
func ContextArgs(args []string) (values, headers map[string]string) {
	for i := 0; i+1 < len(args); i++ {
		var into *map[string]string
		switch args[i] {
		case "--context-value":
			into = &values
		case "--context-from-header":
			into = &headers
		default:
			continue
		}
		i++
		if k, v, ok := strings.Cut(args[i], "="); ok {
			setKey(into, k, v)
		}
	}
	return values, headers
}

func httpProbe(path string, port int32, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
		PeriodSeconds:    period,
		FailureThreshold: failures,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
	}
}

// HardenedSecurityContext is the sidecar's securityContext unless a source
// relaxes it: flagd needs no privilege, no capability, no writable root
// filesystem, and runs as the non-root user of its image.
func HardenedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](65532),
		RunAsGroup:               ptr.To[int64](65532),
		AllowPrivilegeEscalation: ptr.To(false),
		Privileged:               ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ParseSecurityContextOverride reads the AnnotationSidecarSecurityContext of a source.
func ParseSecurityContextOverride(value string) (*corev1.SecurityContext, error) {
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	sc := &corev1.SecurityContext{}
	if err := dec.Decode(sc); err != nil {
		return nil, fmt.Errorf("annotation %s must be a JSON securityContext: %w", AnnotationSidecarSecurityContext, err)
	}
	return sc, nil
}

func (m *sidecarMerge) securityContextFor() *corev1.SecurityContext {
	sc := HardenedSecurityContext()
	if !m.securityContext.set {
		return sc
	}
	override, err := ParseSecurityContextOverride(m.securityContext.value)
	if err != nil {
		m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: %v; the hardened securityContext applies", keyString(m.securityContext.from), err))
		return sc
	}
	// Fields the override sets replace the hardened ones.
	if override.RunAsNonRoot != nil {
		sc.RunAsNonRoot = override.RunAsNonRoot
	}
	if override.RunAsUser != nil {
		sc.RunAsUser = override.RunAsUser
	}
	if override.RunAsGroup != nil {
		sc.RunAsGroup = override.RunAsGroup
	}
	if override.AllowPrivilegeEscalation != nil {
		sc.AllowPrivilegeEscalation = override.AllowPrivilegeEscalation
	}
	if override.Privileged != nil {
		sc.Privileged = override.Privileged
	}
	if override.ReadOnlyRootFilesystem != nil {
		sc.ReadOnlyRootFilesystem = override.ReadOnlyRootFilesystem
	}
	if override.Capabilities != nil {
		sc.Capabilities = override.Capabilities
	}
	if override.SeccompProfile != nil {
		sc.SeccompProfile = override.SeccompProfile
	}
	if override.SELinuxOptions != nil {
		sc.SELinuxOptions = override.SELinuxOptions
	}
	if override.AppArmorProfile != nil {
		sc.AppArmorProfile = override.AppArmorProfile
	}
	if override.ProcMount != nil {
		sc.ProcMount = override.ProcMount
	}
	if override.WindowsOptions != nil {
		sc.WindowsOptions = override.WindowsOptions
	}
	return sc
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

// sourcedEnv is an env var for the app containers, with the source it comes from.
type sourcedEnv struct {
	env  corev1.EnvVar
	from topology.Key
}

// appEnv: what points the app containers' flagd providers at the sidecar.
// The sources' own env vars are prefixed too, except the cloud-storage
// credentials flagd reads under their vendors' names (SourceEnvVarKey).
func (m *sidecarMerge) appEnv(opts SidecarOptions) []sourcedEnv {
	prefix := m.envVarPrefix.or(opts.EnvVarPrefix)
	out := make([]sourcedEnv, 0, len(m.envVars)+6)
	add := func(name, value string, src topology.Key) {
		out = append(out, sourcedEnv{env: corev1.EnvVar{Name: EnvVarKey(prefix, name), Value: value}, from: src})
	}
	first := topology.Key{}
	if len(m.inj.Sources) > 0 {
		first = m.inj.Sources[0]
	}
	pick := func(s topology.Key, set bool) topology.Key {
		if set {
			return s
		}
		return first
	}
	for _, e := range m.envVars {
		ev := *e.DeepCopy()
		ev.Name = SourceEnvVarKey(prefix, e.Name)
		out = append(out, sourcedEnv{env: ev, from: m.envFrom[e.Name]})
	}
	add(envManagementPort, strconv.Itoa(int(m.managementPort.or(opts.ManagementPort))), pick(m.managementPort.from, m.managementPort.set))
	add(envPort, strconv.Itoa(int(m.port.or(opts.Port))), pick(m.port.from, m.port.set))
	add(envEvaluator, m.evaluator.or(opts.Evaluator), pick(m.evaluator.from, m.evaluator.set))
	add(envLogFormat, m.logFormat.or(opts.LogFormat), pick(m.logFormat.from, m.logFormat.set))
	add(envResolver, "rpc", first)
	if sp := m.socketPath.or(opts.SocketPath); sp != "" {
		add(envSocketPath, sp, pick(m.socketPath.from, m.socketPath.set))
	}
	return out
}

// keepAliveEnv: flagd's own settings of its sync server's keepalive
// enforcement (FeatureFlagSource keepAliveMinTime and
// keepAlivePermitWithoutStream), for the sidecar or a Flagd's container
// only: the apps' SDKs do not read them. They are env vars, as the
// OpenFeature Operator writes them, under flagd's own prefix FLAGD_ (flagd
// binds its flags under it whatever the sources' envVarPrefix), and only
// for a release that reads them; for an older one each is left out, with
// a gap (FlagdVersionSupported).
func (m *sidecarMerge) keepAliveEnv() []corev1.EnvVar {
	var out []corev1.EnvVar
	add := func(flag, what string, from topology.Key, value string) {
		if why := m.lacksFlag(flag); why != "" {
			m.gap(from, what, why)
			return
		}
		out = append(out, corev1.EnvVar{Name: flagdversion.EnvVar(flag), Value: value})
	}
	if m.keepAliveMinTime.set {
		add("keep-alive-min-time", "keepAliveMinTime", m.keepAliveMinTime.from, m.keepAliveMinTime.value)
	}
	if m.keepAlivePermit.set {
		add("keep-alive-permit-without-stream", "keepAlivePermitWithoutStream", m.keepAlivePermit.from, strconv.FormatBool(m.keepAlivePermit.value))
	}
	return out
}

// sidecarEnv: the sidecar gets the same variables as the apps, so that
// flagd's own FLAGD_* settings agree with what the apps are told.
func (m *sidecarMerge) sidecarEnv(opts SidecarOptions) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range m.appEnv(opts) {
		out = append(out, e.env)
	}
	return out
}

// inProcessMerge merges the InProcessConfigurations of a workload into one
// configuration, as the OpenFeature Operator does: it starts from the
// operator's defaults (InProcessOptions) and, in order, a configuration's
// value replaces the current one where it is not the API's default (a port
// other than 8015, a host other than localhost, tls true, a cache other
// than lru, a size other than 1000, a prefix other than FLAGD, any socket
// path, offline path or selector). Their env vars are concatenated, the
// last one of a name winning, in the order the OpenFeature Operator gives
// them. A value that replaces another configuration's value is a
// SettingConflict.
type inProcessMerge struct {
	inj                                                    *Injection
	port                                                   setting[int32]
	host, socketPath, offlinePath, selector, cache, prefix setting[string]
	tls                                                    setting[bool]
	cacheMaxSize                                           setting[int]
	envVars                                                []corev1.EnvVar
	envFrom                                                map[string]topology.Key
}

func newInProcessMerge(inj *Injection) *inProcessMerge {
	return &inProcessMerge{inj: inj}
}

func (m *inProcessMerge) add(k topology.Key, s *v1beta1.InProcessConfigurationSpec) {
	inj := m.inj
	m.port.merge(inj, "in-process port", s.Port, s.Port != 0 && s.Port != DefaultInProcessPort, k)
	m.host.merge(inj, "in-process host", s.Host, s.Host != "" && s.Host != DefaultInProcessHost, k)
	m.socketPath.merge(inj, "in-process socketPath", s.SocketPath, s.SocketPath != "", k)
	m.offlinePath.merge(inj, "in-process offlineFlagSourcePath", s.OfflineFlagSourcePath, s.OfflineFlagSourcePath != "", k)
	m.selector.merge(inj, "in-process selector", s.Selector, s.Selector != "", k)
	m.cache.merge(inj, "in-process cache", s.Cache, s.Cache != "" && s.Cache != DefaultInProcessCache, k)
	m.cacheMaxSize.merge(inj, "in-process cacheMaxSize", s.CacheMaxSize, s.CacheMaxSize != 0 && s.CacheMaxSize != DefaultInProcessCacheMaxSize, k)
	m.prefix.merge(inj, "in-process envVarPrefix", s.EnvVarPrefix, s.EnvVarPrefix != "" && s.EnvVarPrefix != DefaultEnvVarPrefix, k)
	m.tls.merge(inj, "in-process tls", s.TLS, s.TLS, k)
	if len(s.EnvVars) == 0 {
		return
	}
	for _, e := range s.EnvVars {
		if i := envIndex(m.envVars, e.Name); i >= 0 && !envEqual(m.envVars[i], e) {
			inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: "in-process envVars[" + e.Name + "]",
				Loser: m.envFrom[e.Name], LoserValue: envValue(m.envVars[i]), Winner: k, WinnerValue: envValue(e)})
		}
		setKey(&m.envFrom, e.Name, k)
		m.envVars = append(m.envVars, *e.DeepCopy())
	}
	m.envVars = lastOfEachName(m.envVars)
}

// lastOfEachName keeps the last env var of each name, in the order the
// OpenFeature Operator leaves them after each merge: from the last one
// backwards. Injected env vars are compared in order by tools that check a
// pod against the OpenFeature Operator's, so the order is kept.
func lastOfEachName(in []corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(in))
	for i := len(in) - 1; i >= 0; i-- {
		if envIndex(out, in[i].Name) < 0 {
			out = append(out, in[i])
		}
	}
	return out
}

// env: what points an app's in-process flagd provider at its sync source,
// the env vars the OpenFeature Operator sets, in its order, with what each
// comes from (the configuration that set it, else the first one).
func (m *inProcessMerge) env(opts InProcessOptions) []sourcedEnv {
	first := m.inj.InProcessConfigs[0]
	pick := func(s topology.Key, set bool) topology.Key {
		if set {
			return s
		}
		return first
	}
	prefix := m.prefix.or(opts.EnvVarPrefix)
	var out []sourcedEnv
	add := func(name, value string, from topology.Key) {
		out = append(out, sourcedEnv{env: corev1.EnvVar{Name: EnvVarKey(prefix, name), Value: value}, from: from})
	}
	for _, e := range m.envVars {
		ev := *e.DeepCopy()
		ev.Name = EnvVarKey(prefix, e.Name)
		out = append(out, sourcedEnv{env: ev, from: m.envFrom[e.Name]})
	}
	add(envHost, m.host.or(opts.Host), pick(m.host.from, m.host.set))
	add(envPort, strconv.Itoa(int(m.port.or(opts.Port))), pick(m.port.from, m.port.set))
	add(envTLS, strconv.FormatBool(m.tls.or(opts.TLS)), pick(m.tls.from, m.tls.set))
	add(envCache, m.cache.or(opts.Cache), pick(m.cache.from, m.cache.set))
	add(envCacheMaxSize, strconv.Itoa(m.cacheMaxSize.or(opts.CacheMaxSize)), pick(m.cacheMaxSize.from, m.cacheMaxSize.set))
	add(envResolver, "in-process", first)
	if v := m.socketPath.or(opts.SocketPath); v != "" {
		add(envSocketPath, v, pick(m.socketPath.from, m.socketPath.set))
	}
	if v := m.offlinePath.or(opts.OfflineFlagSourcePath); v != "" {
		add(envOfflinePath, v, pick(m.offlinePath.from, m.offlinePath.set))
	}
	if v := m.selector.or(opts.Selector); v != "" {
		add(envSelector, v, pick(m.selector.from, m.selector.set))
	}
	return out
}

// envMerge merges the app env vars of the sidecar and of in-process
// configurations by name: a later one overrides, and says so.
type envMerge struct {
	inj  *Injection
	vars []corev1.EnvVar
	// from[i] set vars[i].
	from []topology.Key
}

// newEnvMerge starts a merge of about n vars.
func newEnvMerge(inj *Injection, n int) *envMerge {
	return &envMerge{inj: inj, vars: make([]corev1.EnvVar, 0, n), from: make([]topology.Key, 0, n)}
}

func (m *envMerge) add(e corev1.EnvVar, src topology.Key) {
	if i := envIndex(m.vars, e.Name); i >= 0 {
		if !envEqual(m.vars[i], e) {
			m.inj.Conflicts = append(m.inj.Conflicts, SettingConflict{Setting: "env " + e.Name,
				Loser: m.from[i], LoserValue: envValue(m.vars[i]), Winner: src, WinnerValue: envValue(e)})
		}
		m.vars[i], m.from[i] = e, src
		return
	}
	m.vars = append(m.vars, e)
	m.from = append(m.from, src)
}

// setKey sets m[k], making m first if it is nil.
func setKey[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// list is the merged vars, nil when there are none (m may be nil).
func (m *envMerge) list() []corev1.EnvVar {
	if m == nil || len(m.vars) == 0 {
		return nil
	}
	return m.vars
}

func envEqual(a, b corev1.EnvVar) bool { return envValue(a) == envValue(b) }

func envValue(e corev1.EnvVar) string {
	if e.ValueFrom == nil {
		return strconv.Quote(e.Value)
	}
	b, _ := json.Marshal(e.ValueFrom)
	return string(b)
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

func keyString(k topology.Key) string {
	return string(k.Kind) + " " + k.Namespace + "/" + k.Name
}
