{{/* The chart's name, and the release's object names (the release name
alone when it already contains the chart's name). */}}
{{- define "encoder-server.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "encoder-server.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "encoder-server.component" -}}
{{- ternary "gpu" "cpu" .Values.gpu.enabled }}
{{- end }}

{{/* Labels that select this release's pods. */}}
{{- define "encoder-server.selectorLabels" -}}
app.kubernetes.io/name: {{ include "encoder-server.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "encoder-server.component" . }}
{{- end }}

{{- define "encoder-server.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "encoder-server.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The container's ports: gRPC is the image's ENTRYPOINT --listen, HTTP
is --port (the image's 80 needs a privileged bind), health is
--health-listen. */}}
{{- define "encoder-server.grpcPort" -}}50051{{- end }}
{{- define "encoder-server.httpPort" -}}9090{{- end }}
{{- define "encoder-server.healthPort" -}}50052{{- end }}
{{/* KServe routes to one HTTP port, 8080 by its convention. */}}
{{- define "encoder-server.kservePort" -}}8080{{- end }}

{{- define "encoder-server.modelsConfigMap" -}}
{{- printf "%s-models" (include "encoder-server.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Serves the model repository ConfigMap (no Hub ids given). */}}
{{- define "encoder-server.useRepository" -}}
{{- if and (not .Values.models.ids) .Values.models.repository }}true{{ end }}
{{- end }}

{{/* The model repository as JSON. */}}
{{- define "encoder-server.repositoryJson" -}}
{{- toPrettyJson .Values.models.repository }}
{{- end }}

{{/* The models' flags of the Deployment: the Hub ids and their cache,
else the repository ConfigMap. */}}
{{- define "encoder-server.modelArgs" -}}
{{- if .Values.models.ids }}
{{- range .Values.models.ids }}
- --model-id={{ . }}
{{- end }}
- --huggingface-hub-cache=/data
{{- with .Values.models.revision }}
- --revision={{ . }}
{{- end }}
{{- if .Values.models.hubOffline }}
- --hub-offline
{{- end }}
{{- if .Values.models.hfTokenSecret.name }}
- --hf-token-file=/hf-token/{{ .Values.models.hfTokenSecret.key }}
{{- end }}
{{- else if include "encoder-server.useRepository" . }}
- --models=/models/repository.json
{{- end }}
{{- end }}

{{/* Precision and drain flags, the same for the Deployment and the KServe
runtime. */}}
{{- define "encoder-server.serveArgs" -}}
{{- with .Values.dtype }}
- --dtype={{ . }}
{{- end }}
- --drain-grace={{ .Values.drain.graceSeconds }}s
{{- if not (kindIs "invalid" .Values.drain.unreadySeconds) }}
- --drain-unready={{ .Values.drain.unreadySeconds }}s
{{- end }}
{{- end }}

{{- define "encoder-server.authArgs" -}}
{{- if .Values.auth.enabled }}
- --auth-token-file=/auth/{{ .Values.auth.tokenKey }}
{{- end }}
{{- end }}

{{/* Environment: ENCODER_API_KEY from a Secret, then extraEnv. */}}
{{- define "encoder-server.env" -}}
{{- if .Values.auth.apiKeySecret.name }}
- name: ENCODER_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auth.apiKeySecret.name }}
      key: {{ .Values.auth.apiKeySecret.key }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Requests and limits, with the GPU count in both when gpu.enabled. */}}
{{- define "encoder-server.resources" -}}
{{- $resources := deepCopy .Values.resources }}
{{- if .Values.gpu.enabled }}
{{- $_ := set $resources "requests" (merge (dict "nvidia.com/gpu" (int .Values.gpu.count)) (default (dict) $resources.requests)) }}
{{- $_ := set $resources "limits" (merge (dict "nvidia.com/gpu" (int .Values.gpu.count)) (default (dict) $resources.limits)) }}
{{- end }}
{{- toYaml $resources }}
{{- end }}

{{- define "encoder-server.tolerations" -}}
{{- $tolerations := list }}
{{- if and .Values.gpu.enabled .Values.gpu.tolerate }}
{{- $tolerations = append $tolerations (dict "key" "nvidia.com/gpu" "operator" "Exists" "effect" "NoSchedule") }}
{{- end }}
{{- range .Values.tolerations }}
{{- $tolerations = append $tolerations . }}
{{- end }}
{{- if $tolerations }}
{{- toYaml $tolerations }}
{{- end }}
{{- end }}

{{/* Mounts and volumes of the model sources and the auth Secret, shared
by the Deployment and the KServe runtime (TLS, the Deployment's only, is
added there). */}}
{{- define "encoder-server.modelMounts" -}}
{{- if include "encoder-server.useRepository" . }}
- name: models
  mountPath: /models
  readOnly: true
{{- end }}
{{- if .Values.models.ids }}
- name: cache
  mountPath: /data
{{- end }}
{{- if .Values.models.hfTokenSecret.name }}
- name: hf-token
  mountPath: /hf-token
  readOnly: true
{{- end }}
{{- end }}

{{- define "encoder-server.modelVolumes" -}}
{{- if include "encoder-server.useRepository" . }}
- name: models
  configMap:
    name: {{ include "encoder-server.modelsConfigMap" . }}
{{- end }}
{{- if .Values.models.ids }}
- name: cache
{{- if .Values.models.cache.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ .Values.models.cache.existingClaim }}
{{- else if .Values.models.cache.create }}
  persistentVolumeClaim:
    claimName: {{ include "encoder-server.fullname" . }}-cache
{{- else }}
  emptyDir:
    sizeLimit: {{ .Values.models.cache.sizeLimit }}
{{- end }}
{{- end }}
{{- if .Values.models.hfTokenSecret.name }}
- name: hf-token
  secret:
    secretName: {{ .Values.models.hfTokenSecret.name }}
{{- end }}
{{- end }}

{{- define "encoder-server.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "encoder-server.containerSecurityContext" -}}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* topologySpreadConstraints, each without a labelSelector given this
release's pod selector. */}}
{{- define "encoder-server.topologySpreadConstraints" -}}
{{- $constraints := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not $c.labelSelector }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "encoder-server.selectorLabels" $ | fromYaml)) }}
{{- end }}
{{- $constraints = append $constraints $c }}
{{- end }}
{{- if $constraints }}
{{- toYaml $constraints }}
{{- end }}
{{- end }}
