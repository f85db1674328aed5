{{/*
Names, labels and the small pieces of logic every template shares.
*/}}

{{/* The chart's name, overridable. */}}
{{- define "gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource's name: the release name, with the chart name unless the
release name already contains it. Cut to 50 characters so suffixes still fit in 63. */}}
{{- define "gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gateway.labels" -}}
helm.sh/chart: {{ include "gateway.chart" . }}
{{ include "gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is given. */}}
{{- define "gateway.imageRef" -}}
{{- if .digest }}
{{- printf "%s@%s" .repository .digest }}
{{- else }}
{{- printf "%s:%s" .repository (toString .tag) }}
{{- end }}
{{- end }}

{{- define "gateway.image" -}}
{{- $image := deepCopy .Values.image }}
{{- $_ := set $image "tag" (default .Chart.AppVersion .Values.image.tag) }}
{{- include "gateway.imageRef" $image }}
{{- end }}

{{/* The Service's in-cluster DNS names, the serving certificate's SANs. */}}
{{- define "gateway.dnsNames" -}}
{{- $name := include "gateway.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $names := list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.%s" $name $ns .Values.tls.clusterDomain) "localhost" }}
{{- concat $names .Values.tls.extraDNSNames | uniq | toJson }}
{{- end }}

{{- define "gateway.ipAddresses" -}}
{{- concat (list "127.0.0.1") .Values.tls.extraIPAddresses | uniq | toJson }}
{{- end }}

{{/* Names of the Secrets the pods mount: the chart's own, or the ones given in values. */}}
{{- define "gateway.tlsSecretName" -}}
{{- if eq .Values.tls.mode "existingSecret" }}
{{- required "tls.existingSecret.name is required with tls.mode=existingSecret" .Values.tls.existingSecret.name }}
{{- else }}
{{- printf "%s-tls" (include "gateway.fullname" .) }}
{{- end }}
{{- end }}

{{- define "gateway.tokensSecretName" -}}
{{- default (printf "%s-tokens" (include "gateway.fullname" .)) .Values.auth.tokenAuthFile.existingSecret }}
{{- end }}

{{/* Where the admin token is: the chart's token Secret, or auth.adminToken. */}}
{{- define "gateway.adminTokenSecretName" -}}
{{- if .Values.auth.tokenAuthFile.existingSecret }}
{{- .Values.auth.adminToken.existingSecret }}
{{- else }}
{{- include "gateway.tokensSecretName" . }}
{{- end }}
{{- end }}

{{- define "gateway.adminTokenKey" -}}
{{- if .Values.auth.tokenAuthFile.existingSecret }}
{{- .Values.auth.adminToken.key }}
{{- else }}
{{- "token" }}
{{- end }}
{{- end }}

{{- define "gateway.serviceAccountKeySecretName" -}}
{{- default (printf "%s-service-account-key" (include "gateway.fullname" .)) .Values.auth.serviceAccountTokens.existingSecret }}
{{- end }}

{{- define "gateway.proxyClientSecretName" -}}
{{- default (printf "%s-proxy-client" (include "gateway.fullname" .)) .Values.aggregator.proxyClient.existingSecret }}
{{- end }}

{{- define "gateway.claimName" -}}
{{- default (printf "%s-data" (include "gateway.fullname" .)) .Values.storage.embedded.persistence.existingClaim }}
{{- end }}

{{- define "gateway.issuer" -}}
{{- default (printf "https://%s.%s.svc" (include "gateway.fullname" .) .Release.Namespace) .Values.auth.serviceAccountTokens.issuer }}
{{- end }}

{{/* The data of an existing Secret of this release (empty when absent or when rendering
without a cluster): what keeps generated keys and certificates across upgrades. */}}
{{- define "gateway.existingSecretData" -}}
{{- $secret := lookup "v1" "Secret" .context.Release.Namespace .name }}
{{- if and $secret $secret.data }}
{{- toJson $secret.data }}
{{- else }}
{{- "{}" }}
{{- end }}
{{- end }}

{{/* Values that cannot be expressed in values.schema.json, or whose schema message would be
cryptic: checked here, with a message that says what to change. */}}
{{- define "gateway.validate" -}}
{{- if and (eq .Values.storage.mode "embedded") (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "replicaCount=%d needs storage.mode=etcd: the embedded store is one SQLite file on one volume and serves a single replica; set replicaCount=1 or use storage.mode=etcd with storage.etcd.endpoints" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (eq .Values.storage.mode "etcd") (not .Values.storage.etcd.endpoints) }}
{{- fail "storage.mode=etcd needs storage.etcd.endpoints (the etcd client URLs, e.g. https://etcd-0.etcd:2379)" }}
{{- end }}
{{- if and (eq .Values.tls.mode "existingSecret") (not .Values.tls.existingSecret.name) }}
{{- fail "tls.mode=existingSecret needs tls.existingSecret.name (a kubernetes.io/tls Secret in the release namespace)" }}
{{- end }}
{{- if and .Values.auth.tokenAuthFile.existingSecret .Values.apiServices (not .Values.auth.adminToken.existingSecret) }}
{{- fail "with auth.tokenAuthFile.existingSecret, registering apiServices needs auth.adminToken.existingSecret: a Secret holding a token of that file whose user is in system:masters" }}
{{- end }}
{{- $seen := dict }}
{{- range .Values.apiServices }}
{{- $name := printf "%s.%s" .version .group }}
{{- if hasKey $seen $name }}
{{- fail (printf "apiServices: %s is listed twice" $name) }}
{{- end }}
{{- $_ := set $seen $name true }}
{{- end }}
{{- end }}
