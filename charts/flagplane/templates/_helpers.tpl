{{/*
The namespace the chart installs into: the release's, or defaultNamespace
when the release's is "default" (no --namespace given), as the OpenFeature
Operator's chart does. A namespace-scoped install is always the release's.
*/}}
{{- define "flagplane.namespace" -}}
{{- if and (eq .Release.Namespace "default") (not .Values.namespaced.enabled) -}}
{{- .Values.defaultNamespace -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
Whether to render the team's (namespaced) objects, and the cluster-scoped
ones. Cluster-wide, both. Namespace-scoped, as namespaced.teamObjects and
namespaced.clusterObjects say. Non-empty means true.
*/}}
{{- define "flagplane.teamObjects" -}}
{{- if or (not .Values.namespaced.enabled) .Values.namespaced.teamObjects -}}true{{- end -}}
{{- end -}}
{{- define "flagplane.clusterObjects" -}}
{{- if or (not .Values.namespaced.enabled) .Values.namespaced.clusterObjects -}}true{{- end -}}
{{- end -}}

{{/*
Names of the webhook configurations: flagplane's, or a team's in the
namespace-scoped mode, so that several teams' live side by side.
*/}}
{{- define "flagplane.mutatingWebhookConfiguration" -}}
flagplane-injector{{ if .Values.namespaced.enabled }}-{{ include "flagplane.namespace" . }}{{ end }}
{{- end -}}
{{- define "flagplane.validatingWebhookConfiguration" -}}
flagplane-validator{{ if .Values.namespaced.enabled }}-{{ include "flagplane.namespace" . }}{{ end }}
{{- end -}}

{{/*
The namespaces a namespace-scoped manager watches.
*/}}
{{- define "flagplane.watchedNamespaces" -}}
{{- toJson (prepend .Values.namespaced.extraNamespaces (include "flagplane.namespace" .)) -}}
{{- end -}}

{{/*
Labels of every object: kustomize's (config/default) and, with helmLabels,
Helm's. Call with (dict "ctx" $ "component" "manager"); component may be empty.
*/}}
{{- define "flagplane.labels" -}}
{{- if .component -}}
app.kubernetes.io/name: flagplane
app.kubernetes.io/component: {{ .component }}
{{ end -}}
app.kubernetes.io/part-of: flagplane
{{- if .ctx.Values.helmLabels }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- end }}
{{- end -}}

{{/*
The manager's Pods, as its Deployment, Services, disruption budget and
network policy select them. Never changes: a Deployment's selector cannot.
*/}}
{{- define "flagplane.selectorLabels" -}}
app.kubernetes.io/name: flagplane
app.kubernetes.io/component: manager
{{- end -}}

{{/*
The manager's image.
*/}}
{{- define "flagplane.image" -}}
{{- $img := .Values.controllerManager.manager.image -}}
{{- $tag := $img.tag | default .Chart.AppVersion -}}
{{- $img.repository }}{{ with $tag }}:{{ . }}{{ end -}}
{{- end -}}

{{/*
key:value,key2:value2, the format of --labels and --annotations.
*/}}
{{- define "flagplane.keyValues" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s:%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/*
The value of app.kubernetes.io/managed-by on what the manager generates
(managedBy, --managed-by): a label value, which the admission policy's CEL
quotes as it is.
*/}}
{{- define "flagplane.managedBy" -}}
{{- $v := toString (.Values.managedBy | default "flagplane") -}}
{{- if or (gt (len $v) 63) (not (regexMatch "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" $v)) -}}
{{- fail (printf "managedBy %q is not a label value: at most 63 letters, digits, '-', '_' and '.', beginning and ending with a letter or digit" $v) -}}
{{- end -}}
{{- $v -}}
{{- end -}}

{{/*
The port of an address (":8081" -> 8081).
*/}}
{{- define "flagplane.port" -}}
{{- regexReplaceAll "^.*:" (toString .) "" -}}
{{- end -}}

{{/*
Flags from values that are set (not null): the OpenFeature Operator's
operator-level settings, one flag each (docs/openfeature-operator.md).
*/}}
{{- define "flagplane.valueFlags" -}}
{{- $flags := list -}}
{{- $s := .Values.sidecarConfiguration -}}
{{- range $value, $flag := dict
  "port" "--sidecar-port"
  "managementPort" "--sidecar-management-port"
  "socketPath" "--sidecar-socket-path"
  "envVarPrefix" "--sidecar-env-var-prefix"
  "defaultSyncProvider" "--sidecar-sync-provider"
  "evaluator" "--sidecar-evaluator"
  "logFormat" "--sidecar-log-format"
  "probesEnabled" "--sidecar-probes-enabled"
  "debugLogging" "--sidecar-debug-logging"
  "otelCollectorUri" "--sidecar-otel-collector-uri" }}
{{- if not (kindIs "invalid" (index $s $value)) }}
{{- $flags = append $flags (printf "%s=%v" $flag (index $s $value)) }}
{{- end }}
{{- end }}
{{- with $s.image.repository }}{{ $flags = append $flags (printf "--sidecar-image=%s" .) }}{{ end }}
{{- with $s.image.tag }}{{ $flags = append $flags (printf "--sidecar-tag=%s" .) }}{{ end }}
{{- with $s.providerArgs }}
{{- $flags = append $flags (printf "--sidecar-provider-args=%s" .) }}
{{- $flags = append $flags "--sidecar-sync-provider-args=true" }}
{{- end }}
{{- with $s.resources.limits.cpu }}{{ $flags = append $flags (printf "--sidecar-cpu-limit=%v" .) }}{{ end }}
{{- with $s.resources.limits.memory }}{{ $flags = append $flags (printf "--sidecar-ram-limit=%v" .) }}{{ end }}
{{- with $s.resources.requests.cpu }}{{ $flags = append $flags (printf "--sidecar-cpu-request=%v" .) }}{{ end }}
{{- with $s.resources.requests.memory }}{{ $flags = append $flags (printf "--sidecar-ram-request=%v" .) }}{{ end }}
{{- $p := .Values.inProcessConfiguration -}}
{{- range $value, $flag := dict
  "port" "--in-process-port"
  "host" "--in-process-host"
  "socketPath" "--in-process-socket-path"
  "tls" "--in-process-tls"
  "offlineFlagSourcePath" "--in-process-offline-flag-source-path"
  "selector" "--in-process-selector"
  "envVarPrefix" "--in-process-env-var-prefix" }}
{{- if not (kindIs "invalid" (index $p $value)) }}
{{- $flags = append $flags (printf "%s=%v" $flag (index $p $value)) }}
{{- end }}
{{- end }}
{{- if not (kindIs "invalid" $p.cache.type) }}{{ $flags = append $flags (printf "--in-process-cache=%v" $p.cache.type) }}{{ end }}
{{- if not (kindIs "invalid" $p.cache.size) }}{{ $flags = append $flags (printf "--in-process-cache-max-size=%v" $p.cache.size) }}{{ end }}
{{- $f := .Values.flagdConfiguration -}}
{{- range $value, $flag := dict
  "port" "--flagd-port"
  "ofrepPort" "--flagd-ofrep-port"
  "syncPort" "--flagd-sync-port"
  "managementPort" "--flagd-management-port"
  "debugLogging" "--flagd-debug-logging" }}
{{- if not (kindIs "invalid" (index $f $value)) }}
{{- $flags = append $flags (printf "%s=%v" $flag (index $f $value)) }}
{{- end }}
{{- end }}
{{- with $f.image.repository }}{{ $flags = append $flags (printf "--flagd-image=%s" .) }}{{ end }}
{{- with $f.image.tag }}{{ $flags = append $flags (printf "--flagd-tag=%s" .) }}{{ end }}
{{- with .Values.imagePullSecrets }}
{{- $names := list }}
{{- range . }}{{ $names = append $names .name }}{{ end }}
{{- $flags = append $flags (printf "--image-pull-secrets=%s" (join "," $names)) }}
{{- end }}
{{- with .Values.labels }}{{ $flags = append $flags (printf "--labels=%s" (include "flagplane.keyValues" .)) }}{{ end }}
{{- $managedBy := include "flagplane.managedBy" . }}
{{- if ne $managedBy "flagplane" }}{{ $flags = append $flags (printf "--managed-by=%s" $managedBy) }}{{ end }}
{{- with .Values.annotations }}{{ $flags = append $flags (printf "--annotations=%s" (include "flagplane.keyValues" .)) }}{{ end }}
{{- if not (kindIs "invalid" .Values.managerConfig.flagsValidationEnabled) }}
{{- $flags = append $flags (printf "--flags-validation=%v" .Values.managerConfig.flagsValidationEnabled) }}
{{- end }}
{{- range .Values.extraArgs }}{{ $flags = append $flags . }}{{ end }}
{{- toJson $flags -}}
{{- end -}}

{{/*
The sync server's port.
*/}}
{{- define "flagplane.syncPort" -}}
{{- .Values.flagdProxyConfiguration.port | default .Values.sync.port -}}
{{- end -}}

{{/*
The YAML documents of the chart's files matching a glob, which `make
manifests` copies from config/ (where they are generated or written):
(dict "ctx" $ "glob" "files/crds/*.yaml"). A list of objects, as JSON.
*/}}
{{- define "flagplane.filesDocuments" -}}
{{- $docs := list -}}
{{- range $path, $_ := .ctx.Files.Glob .glob -}}
{{- range regexSplit "(?m)^---[ \t]*$" ($.ctx.Files.Get $path) -1 -}}
{{- $doc := fromYaml . -}}
{{- if $doc.kind -}}
{{- $docs = append $docs $doc -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $docs -}}
{{- end -}}

{{/*
An object of the chart's files, with flagplane's labels added, as YAML:
(dict "ctx" $ "object" $obj).
*/}}
{{- define "flagplane.labelled" -}}
{{- $obj := deepCopy .object -}}
{{- $meta := $obj.metadata -}}
{{- $labels := merge (include "flagplane.labels" (dict "ctx" .ctx "component" "") | fromYaml) ($meta.labels | default dict) -}}
{{- $_ := set $meta "labels" $labels -}}
{{- toYaml $obj -}}
{{- end -}}

{{/*
The namespaces a webhook is sent. Cluster-wide: all but the system ones and
flagplane's own. Namespace-scoped: the team's (watched) namespaces only.
(dict "ctx" $ "injection" true) also leaves out the namespaces labelled
flagplane.core.openfeature.dev/injection=disabled.
*/}}
{{- define "flagplane.webhookNamespaceSelector" -}}
{{- $ctx := .ctx -}}
matchExpressions:
{{- if $ctx.Values.namespaced.enabled }}
- key: kubernetes.io/metadata.name
  operator: In
  values: {{ include "flagplane.watchedNamespaces" $ctx }}
{{- else }}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values: [kube-system, kube-public, kube-node-lease, {{ include "flagplane.namespace" $ctx }}]
{{- end }}
{{- if .injection }}
- key: flagplane.core.openfeature.dev/injection
  operator: NotIn
  values: [disabled]
{{- end }}
{{- end -}}
