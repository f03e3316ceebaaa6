{{/* Names and labels. */}}
{{- define "redstring.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "redstring.fullname" -}}
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

{{- define "redstring.selectorLabels" -}}
app.kubernetes.io/name: {{ include "redstring.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "redstring.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "redstring.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: redstring
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* A pod template's labels: (list $ COMPONENT). The selector's, then
commonLabels and podLabels, which no selector holds. */}}
{{- define "redstring.podLabels" -}}
{{- $ := index . 0 }}
{{- include "redstring.selectorLabels" $ }}
app.kubernetes.io/component: {{ index . 1 }}
{{- with $.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- with $.Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pods' ServiceAccount: serviceAccountName, else the one created, else none. */}}
{{- define "redstring.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "redstring.fullname" .) .Values.serviceAccountName }}
{{- else }}
{{- .Values.serviceAccountName }}
{{- end }}
{{- end }}

{{- define "redstring.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
The non-secret settings, as REDSTRING_* name: value lines. The ConfigMap holds
them for the workers; the topics hook Job (which runs before the ConfigMap
exists on a first install) gets them as plain env values.
*/}}
{{- define "redstring.settings" -}}
REDSTRING_KAFKA_BOOTSTRAP: {{ .Values.kafka.bootstrap | quote }}
REDSTRING_KAFKA_SECURITY_PROTOCOL: {{ .Values.kafka.securityProtocol | quote }}
{{- with .Values.kafka.sasl.mechanism }}
REDSTRING_KAFKA_SASL_MECHANISM: {{ . | quote }}
{{- end }}
{{- with .Values.kafka.sasl.username }}
REDSTRING_KAFKA_SASL_USERNAME: {{ . | quote }}
{{- end }}
{{- if .Values.kafka.tls.caSecret.name }}
REDSTRING_KAFKA_SSL_CAFILE: {{ printf "/etc/redstring/kafka-ca/%s" .Values.kafka.tls.caSecret.key | quote }}
{{- end }}
{{- with .Values.kafka.tls.clientCertSecret }}
{{- if .name }}
REDSTRING_KAFKA_SSL_CERTFILE: {{ printf "/etc/redstring/kafka-client/%s" .certKey | quote }}
REDSTRING_KAFKA_SSL_KEYFILE: {{ printf "/etc/redstring/kafka-client/%s" .keyKey | quote }}
{{- end }}
{{- end }}
{{- /* librdkafka properties passed through: client.id -> REDSTRING_KAFKA__CLIENT_ID.
A number from a values file arrives as a float: written as the integer it is. */}}
{{- range $property, $value := .Values.kafka.properties }}
{{- if kindIs "float64" $value }}{{ $value = int64 $value }}{{ end }}
REDSTRING_KAFKA__{{ $property | replace "." "_" | upper }}: {{ $value | toString | quote }}
{{- end }}
REDSTRING_TOPIC: {{ .Values.topic.name | quote }}
REDSTRING_PARTITIONS: {{ .Values.topic.partitions | quote }}
REDSTRING_REPLICATION_FACTOR: {{ .Values.topic.replicationFactor | quote }}
REDSTRING_GROUP_ID: {{ .Values.topic.groupId | quote }}
REDSTRING_NEO4J_URI: {{ .Values.neo4j.uri | quote }}
REDSTRING_NEO4J_USER: {{ .Values.neo4j.user | quote }}
REDSTRING_NEO4J_DATABASE: {{ .Values.neo4j.database | quote }}
REDSTRING_PG_SCHEMA: {{ .Values.postgres.schema | quote }}
{{- if and (not .Values.postgres.dsnSecret.name) .Values.postgres.dsn }}
REDSTRING_PG_DSN: {{ .Values.postgres.dsn | quote }}
{{- end }}
REDSTRING_EMBEDDING_MODEL: {{ .Values.embedding.model | quote }}
REDSTRING_EMBEDDING_DIMENSION: {{ .Values.embedding.dimension | quote }}
REDSTRING_BATCH_SIZE: {{ .Values.projection.batchSize | quote }}
REDSTRING_BATCH_WAIT_MS: {{ .Values.projection.batchWaitMs | quote }}
REDSTRING_FETCH_MAX_WAIT_MS: {{ .Values.projection.fetchMaxWaitMs | quote }}
REDSTRING_SHARE_UNITS_UP_TO: {{ .Values.projection.shareUnitsUpTo | quote }}
REDSTRING_BATCH_MAX_BYTES: {{ .Values.projection.batchMaxBytes | int64 | quote }}
REDSTRING_READ_AHEAD_BYTES: {{ .Values.projection.readAheadBytes | int64 | quote }}
REDSTRING_APPLY_MAX_BYTES: {{ .Values.projection.applyMaxBytes | int64 | quote }}
REDSTRING_BATCH_MAX_ENTITIES: {{ .Values.projection.batchMaxEntities | int64 | quote }}
REDSTRING_WRITE_CHUNK_ENTITIES: {{ .Values.projection.writeChunkEntities | int64 | quote }}
REDSTRING_MAX_ENTITIES_PER_EVENT: {{ .Values.projection.maxEntitiesPerEvent | int64 | quote }}
REDSTRING_MAX_RELATIONSHIPS_PER_EVENT: {{ .Values.projection.maxRelationshipsPerEvent | int64 | quote }}
REDSTRING_MAX_PROPERTY_KEYS: {{ .Values.projection.maxPropertyKeys | int64 | quote }}
REDSTRING_MAX_ALIAS_DEPTH: {{ .Values.projection.maxAliasDepth | int64 | quote }}
REDSTRING_STALL_AFTER_S: {{ .Values.projection.stallAfterSeconds | quote }}
REDSTRING_APPLIED_EVENT_RETENTION_DAYS: {{ .Values.projection.appliedEventRetentionDays | quote }}
REDSTRING_SESSION_TIMEOUT_S: {{ .Values.projection.sessionTimeoutSeconds | quote }}
REDSTRING_TRANSACTION_TIMEOUT_S: {{ .Values.projection.transactionTimeoutSeconds | quote }}
REDSTRING_GC_YOUNG_THRESHOLD: {{ .Values.projection.gcYoungThreshold | int64 | quote }}
REDSTRING_HEAP_TRIM_INTERVAL_S: {{ .Values.projection.heapTrimIntervalSeconds | quote }}
REDSTRING_HTTP_HOST: "0.0.0.0"
REDSTRING_HTTP_PORT: {{ .Values.httpPort | quote }}
REDSTRING_LOG_LEVEL: {{ .Values.projection.logLevel | quote }}
REDSTRING_CONTROL_MAX_AGE_S: {{ .Values.projection.controlMaxAgeSeconds | quote }}
{{- if .Values.projection.controlKeyId }}
REDSTRING_CONTROL_KEY_ID: {{ .Values.projection.controlKeyId | quote }}
{{- end }}
{{- end }}

{{/* A secretKeyRef env entry: (list NAME secretRef). */}}
{{- define "redstring.secretEnv" -}}
{{- $name := index . 0 }}{{- $ref := index . 1 -}}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name | quote }}
      key: {{ $ref.key | quote }}
{{- end }}

{{/* Secrets, every one by reference to an existing Secret, then extraEnv. */}}
{{- define "redstring.env" -}}
{{- if .Values.kafka.sasl.passwordSecret.name }}
{{ include "redstring.secretEnv" (list "REDSTRING_KAFKA_SASL_PASSWORD" .Values.kafka.sasl.passwordSecret) }}
{{- end }}
{{- if .Values.kafka.sasl.oauthbearerClientSecret.name }}
{{ include "redstring.secretEnv" (list "REDSTRING_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET" .Values.kafka.sasl.oauthbearerClientSecret) }}
{{- end }}
{{- if .Values.kafka.tls.keyPasswordSecret.name }}
{{ include "redstring.secretEnv" (list "REDSTRING_KAFKA_SSL_KEY_PASSWORD" .Values.kafka.tls.keyPasswordSecret) }}
{{- end }}
{{- if .Values.neo4j.passwordSecret.name }}
{{ include "redstring.secretEnv" (list "REDSTRING_NEO4J_PASSWORD" .Values.neo4j.passwordSecret) }}
{{- end }}
{{- if .Values.postgres.dsnSecret.name }}
{{ include "redstring.secretEnv" (list "REDSTRING_PG_DSN" .Values.postgres.dsnSecret) }}
{{- else if .Values.postgres.passwordSecret.name }}
{{ include "redstring.secretEnv" (list "PGPASSWORD" .Values.postgres.passwordSecret) }}
{{- end }}
{{- if .Values.controlKeySecret.name }}
{{ include "redstring.secretEnv" (list "REDSTRING_CONTROL_KEY" .Values.controlKeySecret) }}
{{- end }}
{{- if .Values.controlKeysSecret.name }}
{{ include "redstring.secretEnv" (list "REDSTRING_CONTROL_KEYS" .Values.controlKeysSecret) }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Checks that cannot be expressed in values.schema.json. */}}
{{- define "redstring.validate" -}}
{{- include "redstring.validateKafka" . }}
{{- if and (not .Values.postgres.dsnSecret.name) (not .Values.postgres.dsn) }}
{{- fail "set postgres.dsnSecret.name (an existing Secret holding the DSN) or postgres.dsn (a DSN without a password, with postgres.passwordSecret)" }}
{{- end }}
{{- if and .Values.replay.tenant (not .Values.controlKeySecret.name) (not .Values.controlKeysSecret.name) }}
{{- fail "replay.tenant needs controlKeySecret.name or controlKeysSecret.name: the workers accept only signed replay requests" }}
{{- end }}
{{- end }}

{{/*
Kafka's settings, as streams/kafka/config.py judges them at a worker's start
(refused here, at install, rather than in a crash loop), and the pass-through
properties: none that has its own value (FIRST_CLASS there), no secret in the
ConfigMap.
*/}}
{{- define "redstring.validateKafka" -}}
{{- $kafka := .Values.kafka }}
{{- $firstClass := dict
  "bootstrap.servers" "kafka.bootstrap"
  "security.protocol" "kafka.securityProtocol"
  "sasl.mechanism" "kafka.sasl.mechanism"
  "sasl.mechanisms" "kafka.sasl.mechanism"
  "sasl.username" "kafka.sasl.username"
  "sasl.password" "kafka.sasl.passwordSecret"
  "ssl.ca.location" "kafka.tls.caSecret"
  "ssl.certificate.location" "kafka.tls.clientCertSecret"
  "ssl.key.location" "kafka.tls.clientCertSecret"
  "ssl.key.password" "kafka.tls.keyPasswordSecret"
  "sasl.oauthbearer.client.secret" "kafka.sasl.oauthbearerClientSecret"
  "group.id" "topic.groupId"
  "session.timeout.ms" "projection.sessionTimeoutSeconds" }}
{{- range $property, $_ := $kafka.properties }}
{{- if hasKey $firstClass $property }}
{{- fail (printf "kafka.properties.%s: set %s instead (one source of truth)" $property (get $firstClass $property)) }}
{{- else if or (regexMatch "password|secret" $property) (has $property (list "ssl.key.pem" "sasl.oauthbearer.config")) }}
{{- fail (printf "kafka.properties.%s is secret and would be in the ConfigMap in clear: pass it from an existing Secret (extraEnv with valueFrom.secretKeyRef, or extraEnvFrom)" $property) }}
{{- end }}
{{- end }}
{{- $sasl := hasPrefix "SASL_" $kafka.securityProtocol }}
{{- if and $sasl (not $kafka.sasl.mechanism) }}
{{- fail (printf "kafka.securityProtocol=%s needs kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)" $kafka.securityProtocol) }}
{{- end }}
{{- if and $kafka.sasl.mechanism (not $sasl) }}
{{- fail (printf "kafka.sasl.mechanism=%s is set but kafka.securityProtocol=%s does not use SASL: use SASL_SSL" $kafka.sasl.mechanism $kafka.securityProtocol) }}
{{- end }}
{{- if and (or $kafka.tls.caSecret.name $kafka.tls.clientCertSecret.name) (not (hasSuffix "SSL" $kafka.securityProtocol)) }}
{{- fail (printf "kafka.tls is set but kafka.securityProtocol=%s does not use TLS: use SSL or SASL_SSL" $kafka.securityProtocol) }}
{{- end }}
{{- if and $kafka.tls.keyPasswordSecret.name (not $kafka.tls.clientCertSecret.name) }}
{{- fail "kafka.tls.keyPasswordSecret is the password of a client key: set kafka.tls.clientCertSecret too" }}
{{- end }}
{{- if eq $kafka.tls.clientCertSecret.certKey $kafka.tls.clientCertSecret.keyKey }}
{{- fail "kafka.tls.clientCertSecret: certKey and keyKey name the same key of the Secret" }}
{{- end }}
{{- end }}

{{/* Volumes and mounts shared by the workers and the jobs. */}}
{{- define "redstring.volumes" -}}
- name: tmp
  emptyDir: {}
{{- if .Values.kafka.tls.caSecret.name }}
- name: kafka-ca
  secret:
    secretName: {{ .Values.kafka.tls.caSecret.name | quote }}
    items:
      - key: {{ .Values.kafka.tls.caSecret.key | quote }}
        path: {{ .Values.kafka.tls.caSecret.key | quote }}
{{- end }}
{{- with .Values.kafka.tls.clientCertSecret }}
{{- if .name }}
- name: kafka-client-cert
  secret:
    secretName: {{ .name | quote }}
    items:
      - key: {{ .certKey | quote }}
        path: {{ .certKey | quote }}
      - key: {{ .keyKey | quote }}
        path: {{ .keyKey | quote }}
        {{- if $.Values.podSecurityContext.fsGroup }}
        # 0440: the private key readable by the pod's fsGroup only.
        mode: 288
        {{- end }}
{{- end }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "redstring.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.kafka.tls.caSecret.name }}
- name: kafka-ca
  mountPath: /etc/redstring/kafka-ca
  readOnly: true
{{- end }}
{{- if .Values.kafka.tls.clientCertSecret.name }}
- name: kafka-client-cert
  mountPath: /etc/redstring/kafka-client
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pod-level settings every pod of the chart shares. */}}
{{- define "redstring.podCommon" -}}
automountServiceAccountToken: false
{{- with include "redstring.serviceAccountName" . }}
serviceAccountName: {{ . | quote }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . | quote }}
  {{- end }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  {{- include "redstring.volumes" . | nindent 2 }}
{{- end }}

{{/*
The autoscaler in charge of the workers' replicas: "keda", "hpa" or "" (none,
also while an offline replay holds them at 0).
*/}}
{{- define "redstring.autoscaler" -}}
{{- if not (and .Values.replay.tenant .Values.replay.offline) }}
{{- if .Values.autoscaling.keda.enabled }}keda{{ else if .Values.autoscaling.hpa.enabled }}hpa{{ end }}
{{- end }}
{{- end }}

{{/* The autoscaler's ceiling: maxReplicas, else the partition count; never above it. */}}
{{- define "redstring.maxReplicas" -}}
{{- $partitions := int .Values.topic.partitions }}
{{- $max := int .Values.autoscaling.maxReplicas | default $partitions }}
{{- if gt $max $partitions }}
{{- fail (printf "autoscaling.maxReplicas=%d is more than topic.partitions=%d: a worker beyond the partition count stands idle" $max $partitions) }}
{{- end }}
{{- if gt (int .Values.autoscaling.minReplicas) $max }}
{{- fail (printf "autoscaling.minReplicas=%d is more than the ceiling, %d" (int .Values.autoscaling.minReplicas) $max) }}
{{- end }}
{{- $max }}
{{- end }}
