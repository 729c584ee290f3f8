{{/*
Names are fixed, not derived from the release: the manager looks its Secret, Lease and webhook
configurations up by these names, and one installation serves the whole cluster.
*/}}

{{- define "kthena-py.labels" -}}
app.kubernetes.io/name: kthena-py
app.kubernetes.io/part-of: kthena-py
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The manager pods' selector (the same as manifests/default, so a kustomize install can be taken over). */}}
{{- define "kthena-py.selectorLabels" -}}
app.kubernetes.io/name: kthena-py
app.kubernetes.io/component: controller-manager
{{- end -}}

{{- define "kthena-py.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default "latest" }}
{{- end -}}
{{- end -}}

{{/* The image of ModelCache download and cleanup Jobs: modelCache.downloaderImage, else the manager's own. */}}
{{- define "kthena-py.downloaderImage" -}}
{{- $values := .Values.modelCache | default dict -}}
{{- $repository := dig "downloaderImage" "repository" "" $values -}}
{{- if $repository -}}
{{ $repository }}:{{ dig "downloaderImage" "tag" "" $values | default "latest" }}
{{- else -}}
{{ include "kthena-py.image" . }}
{{- end -}}
{{- end -}}

{{/* The downloader image of ModelBooster pods: modelBooster.downloaderImage, else the project's downloader when
modelBooster.useProjectDownloader, else empty (the manager's default: ConfigMap, then Kthena's image). */}}
{{- define "kthena-py.boosterDownloaderImage" -}}
{{- $values := .Values.modelBooster | default dict -}}
{{- if $values.downloaderImage -}}
{{ $values.downloaderImage }}
{{- else if $values.useProjectDownloader -}}
{{ include "kthena-py.downloaderImage" . }}
{{- end -}}
{{- end -}}

{{/* clientConfig of one webhook; call with (dict "root" $ "path" "/validate-...") */}}
{{- define "kthena-py.webhookClientConfig" -}}
{{- if .root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" .root.Values.webhook.url) .path | quote }}
{{- else }}
service:
  name: kthena-py-webhook-service
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- end }}
{{- end -}}

{{- define "kthena-py.webhookCommon" -}}
failurePolicy: {{ .Values.webhook.failurePolicy }}
matchPolicy: Equivalent
sideEffects: None
admissionReviewVersions: ["v1"]
timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
{{- with .Values.webhook.namespaceSelector }}
namespaceSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "kthena-py.injectCA" -}}
{{- if .Values.webhook.certManager.enabled }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/kthena-py-serving-cert
{{- end }}
{{- end -}}

{{/* The activator pods' selector (the same as manifests/activator). */}}
{{- define "kthena-py.activatorSelectorLabels" -}}
app.kubernetes.io/name: kthena-py
app.kubernetes.io/component: activator
{{- end -}}

{{/* The activator's image: activator.image.repository (and tag), else the manager's image (the same console script). */}}
{{- define "kthena-py.activatorImage" -}}
{{- $image := .Values.activator.image | default dict -}}
{{- if $image.repository -}}
{{ $image.repository }}:{{ $image.tag | default "latest" }}
{{- else -}}
{{ include "kthena-py.image" . }}
{{- end -}}
{{- end -}}
