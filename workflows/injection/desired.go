package injection

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagdversion"
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

func keyString(k topology.Key) string {
	return string(k.Kind) + " " + k.Namespace + "/" + k.Name
}
