{{/*
The command line of `gateway serve` as a YAML list, one flag per item, built from the values.
The paths are where deployment.yaml mounts the Secrets and ConfigMaps.
*/}}
{{- define "gateway.args" -}}
{{- $v := .Values }}
{{- $a := list (printf "--secure-port=%d" (int $v.containerPort)) }}
{{- $a = append $a (printf "--bind-address=%s" $v.server.bindAddress) }}
{{- if $v.server.advertisePodIP }}
{{- $a = append $a "--advertise-address=$(POD_IP)" }}
{{- end }}
{{- $a = append $a (printf "--service-cluster-ip-range=%s" $v.server.serviceClusterIPRange) }}
{{- /* serving certificate */}}
{{- $a = append $a "--tls-cert-file=/etc/gateway/tls/tls.crt" }}
{{- $a = append $a "--tls-private-key-file=/etc/gateway/tls/tls.key" }}
{{- if $v.tls.caKey }}
{{- $a = append $a (printf "--root-ca-file=/etc/gateway/tls/%s" $v.tls.caKey) }}
{{- end }}
{{- /* storage */}}
{{- if eq $v.storage.mode "embedded" }}
{{- $a = append $a "--data-dir=/var/lib/gateway" }}
{{- else }}
{{- $a = append $a (printf "--etcd-servers=%s" (join "," $v.storage.etcd.endpoints)) }}
{{- $a = append $a (printf "--etcd-prefix=%s" $v.storage.etcd.prefix) }}
{{- $a = append $a (printf "--etcd-compaction-interval=%s" (toString $v.storage.etcd.compactionInterval)) }}
{{- if $v.storage.etcd.tls.existingSecret }}
{{- $a = append $a "--etcd-cafile=/etc/gateway/etcd/ca.crt" }}
{{- $a = append $a "--etcd-certfile=/etc/gateway/etcd/tls.crt" }}
{{- $a = append $a "--etcd-keyfile=/etc/gateway/etcd/tls.key" }}
{{- end }}
{{- end }}
{{- /* authentication and authorization */}}
{{- $a = append $a (printf "--anonymous-auth=%t" $v.auth.anonymous) }}
{{- $a = append $a (printf "--authorization-mode=%s" (join "," $v.auth.authorizationModes)) }}
{{- $a = append $a "--token-auth-file=/etc/gateway/tokens/tokens.csv" }}
{{- if $v.auth.clientCA.existingSecret }}
{{- $a = append $a "--client-ca-file=/etc/gateway/client-ca/ca.crt" }}
{{- end }}
{{- $a = append $a "--service-account-signing-key-file=/etc/gateway/service-account/sa.key" }}
{{- $a = append $a "--service-account-key-file=/etc/gateway/service-account/sa.key" }}
{{- $a = append $a (printf "--service-account-issuer=%s" (include "gateway.issuer" .)) }}
{{- with $v.auth.serviceAccountTokens.audiences }}
{{- $a = append $a (printf "--api-audiences=%s" (join "," .)) }}
{{- end }}
{{- /* aggregation: the identity shown to backends, and its CA published to them */}}
{{- $a = append $a "--proxy-client-cert-file=/etc/gateway/proxy-client/tls.crt" }}
{{- $a = append $a "--proxy-client-key-file=/etc/gateway/proxy-client/tls.key" }}
{{- $a = append $a "--requestheader-client-ca-file=/etc/gateway/proxy-client/ca.crt" }}
{{- $a = append $a (printf "--requestheader-allowed-names=%s" (join "," $v.aggregator.proxyClient.allowedNames)) }}
{{- $a = append $a (printf "--enable-aggregator-routing=%t" $v.aggregator.enableAggregatorRouting) }}
{{- /* limits and timeouts */}}
{{- $a = append $a (printf "--max-requests-inflight=%d" (int $v.server.maxRequestsInflight)) }}
{{- $a = append $a (printf "--max-mutating-requests-inflight=%d" (int $v.server.maxMutatingRequestsInflight)) }}
{{- $a = append $a (printf "--request-timeout=%s" (toString $v.server.requestTimeout)) }}
{{- $a = append $a (printf "--min-request-timeout=%d" (int $v.server.minRequestTimeout)) }}
{{- $a = append $a (printf "--shutdown-delay-duration=%s" (toString $v.server.shutdownDelayDuration)) }}
{{- $a = append $a (printf "--event-ttl=%s" (toString $v.server.eventTTL)) }}
{{- with $v.server.corsAllowedOrigins }}
{{- $a = append $a (printf "--cors-allowed-origins=%s" (join "," .)) }}
{{- end }}
{{- /* audit */}}
{{- if $v.audit.enabled }}
{{- $a = append $a "--audit-policy-file=/etc/gateway/audit/policy.yaml" }}
{{- if eq $v.audit.log.destination "file" }}
{{- $a = append $a "--audit-log-path=/var/log/gateway/audit.log" }}
{{- $a = append $a (printf "--audit-log-maxsize=%d" (int $v.audit.log.maxSize)) }}
{{- $a = append $a (printf "--audit-log-maxbackup=%d" (int $v.audit.log.maxBackup)) }}
{{- $a = append $a (printf "--audit-log-maxage=%d" (int $v.audit.log.maxAge)) }}
{{- else }}
{{- $a = append $a "--audit-log-path=-" }}
{{- end }}
{{- end }}
{{- /* logging */}}
{{- $a = append $a (printf "--log-format=%s" $v.logging.format) }}
{{- $a = append $a (printf "--v=%d" (int $v.logging.verbosity)) }}
{{- range $v.extraArgs }}
{{- $a = append $a (toString .) }}
{{- end }}
{{- toYaml $a }}
{{- end }}
