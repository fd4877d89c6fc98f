package app

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/injection"
)

func parse(args ...string) (Options, error) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.Validate()
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(g Gomega, o Options)
		wantErr string
	}{
		{
			name: "defaults are cluster-wide, no leader election, OpenFeature Operator sidecar resources",
			check: func(g Gomega, o Options) {
				g.Expect(o.Namespaces).To(BeEmpty())
				g.Expect(o.LeaderElection).To(BeFalse())
				g.Expect(o.MetricsBindAddress).To(Equal(":8443"))
				g.Expect(o.MetricsSecure).To(BeTrue(), "metrics and the topology only to authenticated, authorized callers")
				g.Expect(o.HealthProbeBindAddress).To(Equal(":8081"))
				g.Expect(o.WebhookPort).To(Equal(9443))
				g.Expect(o.TopologyEndpoint).To(BeTrue())
				g.Expect(o.Sidecar.ImageReference()).To(Equal(injection.DefaultSidecarImage+":v0.16.0"), "the image the OpenFeature Operator injects")
				g.Expect(o.DefaultSyncProvider).To(Equal(v1beta1.SyncProviderFile))
				g.Expect(o.Sidecar.Port).To(Equal(int32(8013)))
				g.Expect(o.Sidecar.EnvVarPrefix).To(Equal("FLAGD"))
				g.Expect(o.Sidecar.ProbesEnabled).To(BeTrue())
				g.Expect(o.InProcess).To(Equal(injection.DefaultInProcessOptions()))
				g.Expect(o.Admission.FlagsValidation).To(BeTrue())
				g.Expect(o.StrictValidation).To(BeFalse())
				g.Expect(o.Sidecar.Resources.Requests.Cpu().String()).To(Equal("200m"))
				g.Expect(o.Sidecar.Resources.Limits.Memory().String()).To(Equal("64M"))
			},
		},
		{
			name: "namespaces are a comma-separated list; repeating appends; duplicates and blanks are dropped",
			args: []string{"--namespaces", "team-a, team-b,", "--namespaces=team-c,team-a"},
			check: func(g Gomega, o Options) {
				g.Expect(o.Namespaces).To(Equal([]string{"team-a", "team-b", "team-c"}))
			},
		},
		{
			name:    "a namespace must be a DNS label",
			args:    []string{"--namespaces=Team_A"},
			wantErr: `--namespaces: "Team_A" is not a namespace name`,
		},
		{
			name: "the revision history keeps 10 revisions of a flag set unless told",
			check: func(g Gomega, o Options) {
				g.Expect(o.RevisionHistoryLimit).To(Equal(10))
			},
		},
		{
			name: "--revision-history-limit",
			args: []string{"--revision-history-limit=3"},
			check: func(g Gomega, o Options) {
				g.Expect(o.RevisionHistoryLimit).To(Equal(3))
			},
		},
		{
			name:    "--revision-history-limit must not be negative",
			args:    []string{"--revision-history-limit=-1"},
			wantErr: "--revision-history-limit must not be negative, not -1",
		},
		{
			name: "Prometheus gates' queries are confined by the label namespace unless told",
			check: func(g Gomega, o Options) {
				g.Expect(o.PrometheusNamespaceLabel).To(Equal("namespace"))
			},
		},
		{
			name: "--prometheus-namespace-label",
			args: []string{"--prometheus-namespace-label=kubernetes_namespace"},
			check: func(g Gomega, o Options) {
				g.Expect(o.PrometheusNamespaceLabel).To(Equal("kubernetes_namespace"))
			},
		},
		{
			name:    "--prometheus-namespace-label must be a label name",
			args:    []string{"--prometheus-namespace-label=name-space"},
			wantErr: `--prometheus-namespace-label "name-space" is not a Prometheus label name`,
		},
		{
			name: "gates are read every 5 s unless told",
			check: func(g Gomega, o Options) {
				g.Expect(o.GateInterval).To(Equal(5 * time.Second))
			},
		},
		{
			name:    "--gate-interval is at least 1s",
			args:    []string{"--gate-interval=500ms"},
			wantErr: "--gate-interval must be at least 1s, not 500ms",
		},
		{
			name: "--revision-history-limit may be 100",
			args: []string{"--revision-history-limit=100"},
			check: func(g Gomega, o Options) {
				g.Expect(o.RevisionHistoryLimit).To(Equal(100))
			},
		},
		{
			name:    "--revision-history-limit is at most 100",
			args:    []string{"--revision-history-limit=101"},
			wantErr: "--revision-history-limit must be at most 100 (the most revisions flagplane keeps of a flag set), not 101",
		},
		{
			name: "a namespace holds at most 1000 revisions unless told",
			check: func(g Gomega, o Options) {
				g.Expect(o.RevisionNamespaceLimit).To(Equal(1000))
			},
		},
		{
			name: "--revision-namespace-limit=0 is no bound",
			args: []string{"--revision-namespace-limit=0"},
			check: func(g Gomega, o Options) {
				g.Expect(o.RevisionNamespaceLimit).To(Equal(0))
			},
		},
		{
			name:    "--revision-namespace-limit must not be negative",
			args:    []string{"--revision-namespace-limit=-1"},
			wantErr: "--revision-namespace-limit must not be negative, not -1",
		},
		{
			name: "leader election",
			args: []string{"--leader-elect", "--leader-election-namespace=ops", "--leader-election-id=x"},
			check: func(g Gomega, o Options) {
				g.Expect(o.LeaderElection).To(BeTrue())
				g.Expect(o.LeaderElectionNamespace).To(Equal("ops"))
				g.Expect(o.LeaderElectionID).To(Equal("x"))
			},
		},
		{
			name:    "leader election needs an id",
			args:    []string{"--leader-elect", "--leader-election-id="},
			wantErr: "--leader-election-id is empty",
		},
		{
			name: "sidecar image, tag and resources",
			args: []string{"--sidecar-image=mirror/flagd", "--sidecar-tag=v0.12.1", "--sidecar-cpu-request=100m",
				"--sidecar-ram-limit=128Mi", "--sidecar-cpu-limit=0"},
			check: func(g Gomega, o Options) {
				g.Expect(o.Sidecar.ImageReference()).To(Equal("mirror/flagd:v0.12.1"))
				g.Expect(o.Sidecar.Resources.Requests).To(Equal(corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32M"),
				}))
				g.Expect(o.Sidecar.Resources.Limits).To(Equal(corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}), "a limit of 0 is no limit")
			},
		},
		{name: "a quantity must parse", args: []string{"--sidecar-ram-request=lots"}, wantErr: "invalid value"},
		{
			name: "the OpenFeature Operator's sidecarConfiguration values",
			args: []string{"--sidecar-port=9013", "--sidecar-management-port=9014", "--sidecar-socket-path=/tmp/f.sock",
				"--sidecar-evaluator=json", "--sidecar-log-format=console", "--sidecar-env-var-prefix=", "--sidecar-probes-enabled=false",
				"--sidecar-debug-logging", "--sidecar-otel-collector-uri=otel:4317", "--sidecar-sync-provider=kubernetes",
				"--image-pull-secrets=regcred, other", "--sidecar-sync-provider-args", "--sidecar-provider-args=a=b,c=d"},
			check: func(g Gomega, o Options) {
				s := o.Sidecar
				g.Expect([]int32{s.Port, s.ManagementPort}).To(Equal([]int32{9013, 9014}))
				g.Expect([]string{s.SocketPath, s.LogFormat, s.EnvVarPrefix, s.OtelCollectorURI}).To(Equal([]string{"/tmp/f.sock", "console", "", "otel:4317"}))
				g.Expect(s.ProbesEnabled).To(BeFalse())
				g.Expect(s.DebugLogging).To(BeTrue())
				g.Expect(s.ImagePullSecrets).To(Equal([]string{"regcred", "other"}))
				g.Expect(s.ProviderArgs).To(Equal([]string{"a=b", "c=d"}))
				g.Expect(o.DefaultSyncProvider).To(Equal(v1beta1.SyncProviderKubernetes))
			},
		},
		{name: "an unknown sync provider", args: []string{"--sidecar-sync-provider=ftp"}, wantErr: `unknown sync provider "ftp"`},
		{name: "provider args need them passed", args: []string{"--sidecar-provider-args=a=b"}, wantErr: "--sidecar-provider-args needs --sidecar-sync-provider-args"},
		{
			name: "the OpenFeature Operator's inProcessConfiguration values",
			args: []string{"--in-process-port=9015", "--in-process-host=sync", "--in-process-socket-path=/s", "--in-process-tls",
				"--in-process-offline-flag-source-path=/f.json", "--in-process-selector=sel", "--in-process-cache=disabled",
				"--in-process-cache-max-size=10", "--in-process-env-var-prefix=OF"},
			check: func(g Gomega, o Options) {
				g.Expect(o.InProcess).To(Equal(injection.InProcessOptions{Port: 9015, Host: "sync", SocketPath: "/s", TLS: true,
					OfflineFlagSourcePath: "/f.json", Selector: "sel", Cache: "disabled", CacheMaxSize: 10, EnvVarPrefix: "OF"}))
			},
		},
		{name: "an in-process cache flagd does not know", args: []string{"--in-process-cache=fifo"}, wantErr: `in-process cache "fifo"`},
		{
			name: "labels and annotations in the OpenFeature Operator's format; validation switches",
			args: []string{"--labels=team:platform,tier:infra", "--annotations=backup.example.com/skip:true", "--strict-validation", "--flags-validation=false"},
			check: func(g Gomega, o Options) {
				g.Expect(o.Generated.Labels).To(Equal(map[string]string{"team": "platform", "tier": "infra"}))
				g.Expect(o.Generated.Annotations).To(Equal(map[string]string{"backup.example.com/skip": "true"}))
				g.Expect(o.StrictValidation).To(BeTrue())
				g.Expect(o.Admission.FlagsValidation).To(BeFalse())
			},
		},
		{name: "a label that is not key:value", args: []string{"--labels=team=platform"}, wantErr: `"team=platform" is not key:value`},
		{name: "flagplane's own label", args: []string{"--labels=app.kubernetes.io/managed-by:helm"}, wantErr: "is flagplane's"},
		{name: "managed-by: flagplane by default", check: func(g Gomega, o Options) {
			g.Expect(o.Generated.ManagedByValue()).To(Equal("flagplane"))
			g.Expect(o.Generated.OwnedValues()).To(Equal([]string{"flagplane"}))
		}},
		{name: "managed-by: the OpenFeature Operator's", args: []string{"--managed-by=open-feature-operator"}, check: func(g Gomega, o Options) {
			g.Expect(o.Generated.ManagedLabels()).To(Equal(map[string]string{v1beta1.LabelManagedBy: "open-feature-operator"}))
			g.Expect(o.Generated.OwnedValues()).To(Equal([]string{"open-feature-operator", "flagplane"}))
		}},
		{name: "managed-by: not a label value", args: []string{"--managed-by=open feature operator"}, wantErr: `--managed-by "open feature operator" is not a label value`},
		{name: "managed-by: too long", args: []string{"--managed-by=" + strings.Repeat("x", 64)}, wantErr: "is not a label value"},
		{name: "managed-by: empty", args: []string{"--managed-by="}, wantErr: "empty"},
		{name: "request above limit", args: []string{"--sidecar-cpu-request=2"}, wantErr: "sidecar flags: sidecar cpu request 2 exceeds its limit 500m"},
		{name: "webhook port", args: []string{"--webhook-port=70000"}, wantErr: "--webhook-port 70000 is not a port"},
		{name: "workers", args: []string{"--workers=0"}, wantErr: "--workers must be at least 1"},
		{
			name: "plain HTTP metrics, e.g. on loopback",
			args: []string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:8080"},
			check: func(g Gomega, o Options) {
				g.Expect(o.MetricsSecure).To(BeFalse())
				g.Expect(o.MetricsBindAddress).To(Equal("127.0.0.1:8080"))
			},
		},
		{name: "a metrics certificate needs secure serving", args: []string{"--metrics-secure=false", "--metrics-cert-dir=/certs"},
			wantErr: "--metrics-cert-dir needs --metrics-secure"},
		{
			name: "metrics, probes and the topology endpoint",
			args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:9000", "--topology-endpoint=false"},
			check: func(g Gomega, o Options) {
				g.Expect(o.MetricsBindAddress).To(Equal("0"))
				g.Expect(o.HealthProbeBindAddress).To(Equal("127.0.0.1:9000"))
				g.Expect(o.TopologyEndpoint).To(BeFalse())
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := parse(tt.args...)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, o)
		})
	}
}

func TestDefaultOptionsAreIndependent(t *testing.T) {
	g := NewWithT(t)
	a, b := DefaultOptions(), DefaultOptions()
	a.Sidecar.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	g.Expect(b.Sidecar.Resources.Requests.Cpu().String()).To(Equal("200m"))
}
