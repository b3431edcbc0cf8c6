{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "latency-tuner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name, plus the chart name unless the release name contains it. */}}
{{- define "latency-tuner.fullname" -}}
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

{{- define "latency-tuner.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "latency-tuner.labels" -}}
helm.sh/chart: {{ include "latency-tuner.chart" . }}
{{ include "latency-tuner.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: latency-tuner
{{- end }}

{{/* Labels that select the operator pods; never change them after a release (selectors are immutable). */}}
{{- define "latency-tuner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "latency-tuner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* A shard's workload name: the full name, plus "-shard-<index>" when there are shards. */}}
{{- define "latency-tuner.shardName" -}}
{{- $root := index . 0 }}{{ $shard := index . 1 }}
{{- if gt (int $root.Values.sharding.shards) 1 }}
{{- printf "%s-shard-%d" (include "latency-tuner.fullname" $root | trunc 55 | trimSuffix "-") $shard }}
{{- else }}
{{- include "latency-tuner.fullname" $root }}
{{- end }}
{{- end }}

{{/* The label telling a shard's pods apart; nothing without shards (the selector is immutable:
  a release without shards keeps the selector it was installed with). */}}
{{- define "latency-tuner.shardLabel" -}}
{{- $root := index . 0 }}{{ $shard := index . 1 }}
{{- if gt (int $root.Values.sharding.shards) 1 }}
latencytuner.io/shard: {{ $shard | quote }}
{{- end }}
{{- end }}

{{/* The kopf peering a shard's replicas share; the operator adds the same suffix itself. */}}
{{- define "latency-tuner.peeringName" -}}
{{- $root := index . 0 }}{{ $shard := index . 1 }}
{{- if gt (int $root.Values.sharding.shards) 1 }}
{{- printf "%s-shard-%d" $root.Values.peering.name $shard }}
{{- else }}
{{- $root.Values.peering.name }}
{{- end }}
{{- end }}

{{- define "latency-tuner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "latency-tuner.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* More than one replica: kopf peering (one active replica); one replica: standalone. */}}
{{- define "latency-tuner.peering" -}}
{{- if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{/* Checks the schema cannot express; each failure says what to change. */}}
{{- define "latency-tuner.validate" -}}
{{- if and .Values.prometheus.ca.existingSecret .Values.prometheus.ca.existingConfigMap }}
{{- fail "prometheus.ca: set existingSecret or existingConfigMap, not both" }}
{{- end }}
{{- if and (eq .Values.metricsSource "prometheus") (not .Values.prometheus.url) }}
{{- fail "prometheus.url is required when metricsSource is \"prometheus\" (or set metricsSource: scrape)" }}
{{- end }}
{{- if ne (len .Values.watchNamespaces) (len (uniq .Values.watchNamespaces)) }}
{{- fail "watchNamespaces lists a namespace twice" }}
{{- end }}
{{- end }}

{{/*
RBAC rules for everything the operator touches inside a namespace. Rendered into the
ClusterRole when watching cluster-wide, and into one Role per watched namespace otherwise.
No wildcards and no Secrets: the operator reads pods and deployments, patches only
deployments and its own LatencyTargets, and writes events.
*/}}
{{- define "latency-tuner.namespacedRules" -}}
# Its own resource: watch, add/remove kopf's finalizer and annotations (patch), status writes.
- apiGroups: ["tuning.latencytuner.io"]
  resources: ["latencytargets"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["tuning.latencytuner.io"]
  resources: ["latencytargets/status"]
  verbs: ["patch"]
- apiGroups: ["tuning.latencytuner.io"]
  resources: ["latencytargets/finalizers"]
  verbs: ["patch"]
# The tuned vLLM Deployments: watched (an in-memory index instead of a GET per reconcile),
# read by name until the watch has them, then patch one container's args per trial. Canary
# trials create a sibling Deployment owned by the LatencyTarget and delete it when judged.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "patch", "create", "delete"]
# The quality gate's prompts: the ConfigMap a LatencyTarget names, in its own namespace. RBAC
# cannot select by label: the operator itself uses only ConfigMaps labelled
# latencytuner.io/quality-samples=true, so a LatencyTarget never lends this right to its author.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
# CrashLoopBackOff / restarts of a trial, and pod IPs in scrape mode.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# Events on LatencyTargets (kopf posts core events; events.k8s.io for newer clients).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* kopf's keep-alives in the shared peering object (only with more than one replica). */}}
{{- define "latency-tuner.peeringRule" -}}
- apiGroups: ["kopf.dev"]
  resources: [{{ . | quote }}]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}

{{/* Cluster-scoped reads, needed in both modes. */}}
{{- define "latency-tuner.clusterReadRules" -}}
# kopf watches CRDs to notice its resources appearing or changing.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- if .Values.rbac.readNodes }}
# GPU product and interconnect from node labels (nvidia.com/gpu.product, ...).
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get"]
{{- end }}
{{- end }}
