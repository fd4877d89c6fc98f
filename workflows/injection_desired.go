package workflows

import (
	"encoding/json"
	"fmt"
	"reflect"
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
)

// API defaults of FeatureFlagSourceSpec (the CRD fills them in): a value
// equal to its default is not a setting a source makes.
const (
	defaultManagementPort int32 = 8014
	defaultPort           int32 = 8013
	defaultOFREPPort      int32 = 8016
	defaultEvaluator            = "json"
	defaultLogFormat            = "json"
	defaultEnvVarPrefix         = "FLAGD"
)

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

// DesiredInjection computes what a pod of workload gets, from the graph and
// the operator-wide options. It reads no cluster state. A workload no source
// or in-process configuration applies to gets an empty Injection.
func DesiredInjection(v *topology.View, workload topology.Key, opts InjectionOptions) *Injection {
	inj := &Injection{Workload: workload}
	if _, ok := v.Workload(workload); !ok {
		return inj
	}
	m := newSidecarMerge(inj)
	m.mayReadDirectly = func(f topology.Key) bool { return v.MayReadDirectly(workload, f) }
	for _, sk := range v.SourcesOfWorkload(workload) {
		src, ok := v.Source(sk)
		if !ok {
			continue
		}
		inj.Sources = append(inj.Sources, sk)
		m.addSource(v, sk, src, opts)
	}
	env := newEnvMerge(inj)
	if len(m.entries) > 0 {
		inj.Sidecar = m.container(opts)
		inj.Volumes = m.volumes
		inj.ConfigMaps = m.configMaps
		for _, e := range m.appEnv() {
			env.add(e.env, e.from)
		}
	} else if len(inj.Sources) > 0 {
		inj.Warnings = append(inj.Warnings, "no flagd sidecar: none of the entries of the sources can be served")
	}
	for _, ck := range v.InProcessConfigsOfWorkload(workload) {
		c, ok := v.InProcessConfig(ck)
		if !ok {
			continue
		}
		inj.InProcessConfigs = append(inj.InProcessConfigs, ck)
		for _, e := range inProcessEnv(&c.Spec) {
			env.add(e, ck)
		}
	}
	inj.Env = env.list()
	if inj.Sidecar != nil {
		// The sidecar reads the same settings: flagd takes FLAGD_* env vars.
		inj.Sidecar.Env = m.sidecarEnv()
	}
	return inj
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

	managementPort, port, ofrepPort                               setting[int32]
	socketPath, evaluator, logFormat, envVarPrefix, otelCollector setting[string]
	probes, debug                                                 setting[bool]
	securityContext                                               setting[string]

	envVars        []corev1.EnvVar
	envFrom        map[string]topology.Key
	contextValues  map[string]keyedValue
	headerMappings map[string]keyedValue
	cors           []string
	providerArgs   []string
	requests       map[corev1.ResourceName]keyedValue
	limits         map[corev1.ResourceName]keyedValue

	entries    []FlagdSourceConfig
	volumes    []corev1.Volume
	mounts     []corev1.VolumeMount
	configMaps []topology.Key
}

func newSidecarMerge(inj *Injection) *sidecarMerge {
	return &sidecarMerge{
		inj:            inj,
		envFrom:        map[string]topology.Key{},
		contextValues:  map[string]keyedValue{},
		headerMappings: map[string]keyedValue{},
		requests:       map[corev1.ResourceName]keyedValue{},
		limits:         map[corev1.ResourceName]keyedValue{},
	}
}

func (m *sidecarMerge) addSource(v *topology.View, sk topology.Key, src *v1beta1.FeatureFlagSource, opts InjectionOptions) {
	s := &src.Spec
	inj := m.inj
	m.managementPort.merge(inj, "managementPort", s.ManagementPort, s.ManagementPort != 0 && s.ManagementPort != defaultManagementPort, sk)
	m.port.merge(inj, "port", s.Port, s.Port != 0 && s.Port != defaultPort, sk)
	m.ofrepPort.merge(inj, "ofrepPort", s.OFREPPort, s.OFREPPort != 0 && s.OFREPPort != defaultOFREPPort, sk)
	m.socketPath.merge(inj, "socketPath", s.SocketPath, s.SocketPath != "", sk)
	m.evaluator.merge(inj, "evaluator", s.Evaluator, s.Evaluator != "" && s.Evaluator != defaultEvaluator, sk)
	m.logFormat.merge(inj, "logFormat", s.LogFormat, s.LogFormat != "" && s.LogFormat != defaultLogFormat, sk)
	m.envVarPrefix.merge(inj, "envVarPrefix", s.EnvVarPrefix, s.EnvVarPrefix != "" && s.EnvVarPrefix != defaultEnvVarPrefix, sk)
	m.otelCollector.merge(inj, "otelCollectorUri", s.OtelCollectorUri, s.OtelCollectorUri != "", sk)
	m.probes.merge(inj, "probesEnabled", ptr.Deref(s.ProbesEnabled, true), s.ProbesEnabled != nil, sk)
	m.debug.merge(inj, "debugLogging", ptr.Deref(s.DebugLogging, false), s.DebugLogging != nil, sk)
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
		m.envFrom[e.Name] = sk
	}
	mergeMap(inj, "contextValues", m.contextValues, s.ContextValues, sk)
	mergeMap(inj, "headerToContextMappings", m.headerMappings, s.HeaderToContextMappings, sk)
	for _, o := range s.CORS {
		if !slices.Contains(m.cors, o) {
			m.cors = append(m.cors, o)
		}
	}
	for _, a := range s.SyncProviderArgs {
		if !slices.Contains(m.providerArgs, a) {
			m.providerArgs = append(m.providerArgs, a)
		}
	}
	if len(s.SyncProviderArgs) > 0 && !opts.PassSyncProviderArgs {
		inj.Warnings = append(inj.Warnings, fmt.Sprintf("%s: syncProviderArgs left out: flagd v0.16 has no --sync-provider-args", keyString(sk)))
	}
	mergeResources(inj, "resources.requests", m.requests, s.Resources.Requests, sk)
	mergeResources(inj, "resources.limits", m.limits, s.Resources.Limits, sk)

	refs := map[int]topology.FlagSetRef{}
	for _, r := range v.FlagSetRefs(sk) {
		refs[r.Index] = r
	}
	for i, e := range s.Sources {
		m.addEntry(sk, i, e, s.DefaultSyncProvider, refs, opts)
	}
}

// addEntry turns one spec.sources entry into a flagd source (and, for a
// file source, its volume and mount), or a warning saying why it cannot be.
func (m *sidecarMerge) addEntry(sk topology.Key, i int, e v1beta1.Source, def v1beta1.SyncProviderType,
	refs map[int]topology.FlagSetRef, opts InjectionOptions) {
	provider := e.Provider
	if provider == "" {
		provider = def
	}
	if provider == "" {
		provider = v1beta1.SyncProviderFile
	}
	var cfg FlagdSourceConfig
	if provider.ReferencesFlagSet() {
		ref, ok := refs[i]
		if !ok || ref.State != topology.RefResolved {
			why := "the FeatureFlag does not exist"
			if ok && ref.State == topology.RefNotPermitted {
				why = "the FeatureFlag is in another namespace and no ReferenceGrant permits it"
			}
			m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: %s", keyString(sk), i, e.Source, why))
			return
		}
		f := ref.FlagSet
		switch provider {
		case v1beta1.SyncProviderFile:
			m.mount(f, topology.ConfigMapKey(f, m.inj.Workload.Namespace))
			cfg = FlagdSourceConfig{URI: FlagFilePath(f), Provider: string(v1beta1.SyncProviderFile)}
		case v1beta1.SyncProviderKubernetes:
			if !m.mayReadDirectly(f) {
				m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: the kubernetes provider reads every FeatureFlag of namespace %s, "+
					"which needs a ReferenceGrant there for the pods of namespace %s to all FeatureFlags; use the file or flagd-proxy provider for one flag set",
					keyString(sk), i, e.Source, f.Namespace, m.inj.Workload.Namespace))
				return
			}
			cfg = FlagdSourceConfig{URI: f.Namespace + "/" + f.Name, Provider: string(v1beta1.SyncProviderKubernetes)}
		case v1beta1.SyncProviderFlagdProxy:
			if opts.SyncServer == "" {
				m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: no sync server is configured for flagd-proxy", keyString(sk), i, e.Source))
				return
			}
			cfg = FlagdSourceConfig{URI: opts.SyncServer, Provider: string(v1beta1.SyncProviderGRPC),
				Selector: FlagdProxySelectorPrefix + f.Namespace + "/" + f.Name, TLS: opts.SyncServerTLS}
			if opts.SyncServerTLS {
				cfg.CertPath = opts.SyncServerCertPath
			}
			if opts.SyncServerHeaders != nil {
				h, err := opts.SyncServerHeaders(m.inj.Workload.Namespace)
				if err != nil {
					m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: sources[%d] %q left out: no sync server credential for namespace %s: %v",
						keyString(sk), i, e.Source, m.inj.Workload.Namespace, err))
					return
				}
				cfg.Headers = h
			}
		}
	} else {
		cfg = remoteSourceConfig(provider, e)
	}
	if !slices.ContainsFunc(m.entries, func(x FlagdSourceConfig) bool { return reflect.DeepEqual(x, cfg) }) {
		m.entries = append(m.entries, cfg)
	}
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
	name := FlagVolumeName(f)
	m.volumes = append(m.volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: topology.ConfigMapName(f)}},
	}})
	m.mounts = append(m.mounts, corev1.VolumeMount{Name: name, MountPath: FlagMountDir(f), ReadOnly: true})
}

// container renders the sidecar.
func (m *sidecarMerge) container(opts InjectionOptions) *corev1.Container {
	mgmt := m.managementPort.or(defaultManagementPort)
	port := m.port.or(defaultPort)
	sources, _ := json.Marshal(m.entries) // plain data: cannot fail
	args := []string{"start",
		"--management-port", strconv.Itoa(int(mgmt)),
		"--port", strconv.Itoa(int(port)),
		"--log-format", m.logFormat.or(defaultLogFormat),
	}
	if m.ofrepPort.set {
		args = append(args, "--ofrep-port", strconv.Itoa(int(m.ofrepPort.value)))
	}
	if m.socketPath.set {
		args = append(args, "--socket-path", m.socketPath.value)
	}
	args = append(args, "--sources", string(sources))
	if m.debug.or(false) {
		args = append(args, "--debug")
	}
	if m.otelCollector.set {
		args = append(args, "--metrics-exporter", "otel", "--otel-collector-uri", m.otelCollector.value)
	}
	for _, k := range sortedKeys(m.contextValues) {
		args = append(args, "--context-value", k+"="+m.contextValues[k].value)
	}
	for _, k := range sortedKeys(m.headerMappings) {
		args = append(args, "--context-from-header", k+"="+m.headerMappings[k].value)
	}
	for _, o := range m.cors {
		args = append(args, "--cors-origin", o)
	}
	if opts.PassSyncProviderArgs {
		for _, a := range m.providerArgs {
			args = append(args, "--sync-provider-args", a)
		}
	}

	c := &corev1.Container{
		Name:            SidecarName,
		Image:           opts.Sidecar.ImageReference(),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		Ports: []corev1.ContainerPort{
			{Name: "flagd", ContainerPort: port, Protocol: corev1.ProtocolTCP},
			{Name: "flagd-mgmt", ContainerPort: mgmt, Protocol: corev1.ProtocolTCP},
			{Name: "flagd-ofrep", ContainerPort: m.ofrepPort.or(defaultOFREPPort), Protocol: corev1.ProtocolTCP},
		},
		VolumeMounts:             m.mounts,
		Resources:                m.resources(opts.Sidecar.Resources),
		SecurityContext:          m.securityContextFor(),
		RestartPolicy:            ptr.To(corev1.ContainerRestartPolicyAlways),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if m.probes.or(true) {
		c.StartupProbe = httpProbe("/healthz", mgmt, 1, 60)
		c.LivenessProbe = httpProbe("/healthz", mgmt, 10, 3)
		c.ReadinessProbe = httpProbe("/readyz", mgmt, 5, 3)
	}
	return c
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
	o, err := ParseSecurityContextOverride(m.securityContext.value)
	if err != nil {
		m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: %v; the hardened securityContext applies", keyString(m.securityContext.from), err))
		return sc
	}
	// Fields the override sets replace the hardened ones.
	if o.RunAsNonRoot != nil {
		sc.RunAsNonRoot = o.RunAsNonRoot
	}
	if o.RunAsUser != nil {
		sc.RunAsUser = o.RunAsUser
	}
	if o.RunAsGroup != nil {
		sc.RunAsGroup = o.RunAsGroup
	}
	if o.AllowPrivilegeEscalation != nil {
		sc.AllowPrivilegeEscalation = o.AllowPrivilegeEscalation
	}
	if o.Privileged != nil {
		sc.Privileged = o.Privileged
	}
	if o.ReadOnlyRootFilesystem != nil {
		sc.ReadOnlyRootFilesystem = o.ReadOnlyRootFilesystem
	}
	if o.Capabilities != nil {
		sc.Capabilities = o.Capabilities
	}
	if o.SeccompProfile != nil {
		sc.SeccompProfile = o.SeccompProfile
	}
	if o.SELinuxOptions != nil {
		sc.SELinuxOptions = o.SELinuxOptions
	}
	if o.AppArmorProfile != nil {
		sc.AppArmorProfile = o.AppArmorProfile
	}
	if o.ProcMount != nil {
		sc.ProcMount = o.ProcMount
	}
	if o.WindowsOptions != nil {
		sc.WindowsOptions = o.WindowsOptions
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
func (m *sidecarMerge) appEnv() []sourcedEnv {
	prefix := m.envVarPrefix.or(defaultEnvVarPrefix)
	var out []sourcedEnv
	add := func(name, value string, src topology.Key) {
		out = append(out, sourcedEnv{env: corev1.EnvVar{Name: prefix + "_" + name, Value: value}, from: src})
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
		ev.Name = prefix + "_" + e.Name
		out = append(out, sourcedEnv{env: ev, from: m.envFrom[e.Name]})
	}
	add(envManagementPort, strconv.Itoa(int(m.managementPort.or(defaultManagementPort))), pick(m.managementPort.from, m.managementPort.set))
	add(envPort, strconv.Itoa(int(m.port.or(defaultPort))), pick(m.port.from, m.port.set))
	add(envEvaluator, m.evaluator.or(defaultEvaluator), pick(m.evaluator.from, m.evaluator.set))
	add(envLogFormat, m.logFormat.or(defaultLogFormat), pick(m.logFormat.from, m.logFormat.set))
	add(envResolver, "rpc", first)
	if m.socketPath.set {
		add(envSocketPath, m.socketPath.value, m.socketPath.from)
	}
	return out
}

// sidecarEnv: the sidecar gets the same variables as the apps, so that
// flagd's own FLAGD_* settings agree with what the apps are told.
func (m *sidecarMerge) sidecarEnv() []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range m.appEnv() {
		out = append(out, e.env)
	}
	return out
}

// inProcessEnv: what points an app's in-process flagd provider at its sync
// source, as the OpenFeature Operator sets it.
func inProcessEnv(s *v1beta1.InProcessConfigurationSpec) []corev1.EnvVar {
	prefix := s.EnvVarPrefix
	if prefix == "" {
		prefix = defaultEnvVarPrefix
	}
	host := s.Host
	if host == "" {
		host = "localhost"
	}
	port := s.Port
	if port == 0 {
		port = 8015
	}
	cache := s.Cache
	if cache == "" {
		cache = "lru"
	}
	var out []corev1.EnvVar
	add := func(name, value string) { out = append(out, corev1.EnvVar{Name: prefix + "_" + name, Value: value}) }
	for _, e := range s.EnvVars {
		ev := *e.DeepCopy()
		ev.Name = prefix + "_" + e.Name
		out = append(out, ev)
	}
	add(envHost, host)
	add(envPort, strconv.Itoa(int(port)))
	add(envTLS, strconv.FormatBool(s.TLS))
	add(envCache, cache)
	add(envCacheMaxSize, strconv.Itoa(s.CacheMaxSize))
	add(envResolver, "in-process")
	if s.SocketPath != "" {
		add(envSocketPath, s.SocketPath)
	}
	if s.OfflineFlagSourcePath != "" {
		add(envOfflinePath, s.OfflineFlagSourcePath)
	}
	if s.Selector != "" {
		add(envSelector, s.Selector)
	}
	return out
}

// envMerge merges the app env vars of the sidecar and of in-process
// configurations by name: a later one overrides, and says so.
type envMerge struct {
	inj  *Injection
	vars []corev1.EnvVar
	from map[string]topology.Key
}

func newEnvMerge(inj *Injection) *envMerge {
	return &envMerge{inj: inj, from: map[string]topology.Key{}}
}

func (m *envMerge) add(e corev1.EnvVar, src topology.Key) {
	if i := envIndex(m.vars, e.Name); i >= 0 {
		if !envEqual(m.vars[i], e) {
			m.inj.Conflicts = append(m.inj.Conflicts, SettingConflict{Setting: "env " + e.Name,
				Loser: m.from[e.Name], LoserValue: envValue(m.vars[i]), Winner: src, WinnerValue: envValue(e)})
		}
		m.vars[i] = e
	} else {
		m.vars = append(m.vars, e)
	}
	m.from[e.Name] = src
}

func (m *envMerge) list() []corev1.EnvVar { return m.vars }

func envEqual(a, b corev1.EnvVar) bool { return envValue(a) == envValue(b) }

func envValue(e corev1.EnvVar) string {
	if e.ValueFrom == nil {
		return strconv.Quote(e.Value)
	}
	b, _ := json.Marshal(e.ValueFrom)
	return string(b)
}

func mergeMap(inj *Injection, name string, into map[string]keyedValue, from map[string]string, src topology.Key) {
	for _, k := range sortedKeys(from) {
		v := from[k]
		if old, ok := into[k]; ok && old.value != v {
			inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: name + "[" + k + "]",
				Loser: old.from, LoserValue: old.value, Winner: src, WinnerValue: v})
		}
		into[k] = keyedValue{value: v, from: src}
	}
}

func mergeResources(inj *Injection, name string, into map[corev1.ResourceName]keyedValue, from corev1.ResourceList, src topology.Key) {
	for _, r := range sortedResourceNames(from) {
		q := from[r]
		v := q.String()
		if old, ok := into[r]; ok {
			oq := resource.MustParse(old.value)
			if oq.Cmp(q) != 0 {
				inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: name + "[" + string(r) + "]",
					Loser: old.from, LoserValue: old.value, Winner: src, WinnerValue: v})
			}
		}
		into[r] = keyedValue{value: v, from: src}
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
