package injection

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/topology"
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

// sidecarEnv: the sidecar gets the same variables as the apps, so that
// flagd's own FLAGD_* settings agree with what the apps are told.
func (m *sidecarMerge) sidecarEnv(opts SidecarOptions) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range m.appEnv(opts) {
		out = append(out, e.env)
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
