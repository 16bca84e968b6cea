{{- define "synctide.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "synctide.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "synctide.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "synctide.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "synctide.fullname" .) -}}
{{- end -}}

{{- define "synctide.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end -}}

{{/*
The Postgres URL of role `user` (dict "root" . "user" <role>). `uselibpqcompat=true` makes
node-postgres read `sslmode` as libpq does (without it `require` verifies the server's certificate
like `verify-full`); with `postgres.caSecret` the CA file is passed as `sslrootcert`.
*/}}
{{- define "synctide.databaseUrl" -}}
{{- $pg := .root.Values.postgres -}}
{{- if and (eq $pg.sslmode "verify-ca") (not $pg.caSecret.name) -}}
{{- fail "postgres.sslmode=verify-ca needs postgres.caSecret.name: the CA the server's certificate must be signed by" -}}
{{- end -}}
{{- printf "postgres://%s@%s:%v/%s?sslmode=%s&uselibpqcompat=true" .user $pg.host $pg.port $pg.database $pg.sslmode -}}
{{- if $pg.caSecret.name }}&sslrootcert=/etc/synctide/postgres-ca/{{ $pg.caSecret.key }}{{ end -}}
{{- end -}}

{{/* The environment every Synctide container shares: servers, Temporal TLS, secrets as files. */}}
{{- define "synctide.env" -}}
- name: NODE_ENV
  value: production
- name: MIGRATE_ON_START
  value: "false"
- name: DATABASE_URL
  value: {{ include "synctide.databaseUrl" (dict "root" . "user" .Values.postgres.appUser) | quote }}
- name: DATABASE_PASSWORD_FILE
  value: /run/secrets/synctide/database-password
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: TEMPORAL_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
- name: TEMPORAL_STARTUP_WAIT_SECONDS
  value: {{ .Values.temporal.startupWaitSeconds | quote }}
{{- if or .Values.temporal.tls.enabled .Values.temporal.tls.mtls .Values.temporal.apiKey }}
- name: TEMPORAL_TLS
  value: "true"
{{- end }}
{{- with .Values.temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if and .Values.temporal.tls.existingSecret .Values.temporal.tls.ca }}
- name: TEMPORAL_TLS_CA
  value: /etc/synctide/temporal-tls/ca.crt
{{- end }}
{{- if and .Values.temporal.tls.existingSecret .Values.temporal.tls.mtls }}
- name: TEMPORAL_TLS_CERT
  value: /etc/synctide/temporal-tls/tls.crt
- name: TEMPORAL_TLS_KEY
  value: /etc/synctide/temporal-tls/tls.key
{{- end }}
{{- if .Values.temporal.apiKey }}
- name: TEMPORAL_API_KEY_FILE
  value: /run/secrets/synctide/temporal-api-key
{{- end }}
- name: ADMIN_API_KEY_FILE
  value: /run/secrets/synctide/admin-api-key
- name: CREDENTIALS_KEY_FILE
  value: /run/secrets/synctide/credentials-key
{{- range $name, $value := .Values.env }}
{{- if has $name (list "API_SHUTDOWN_GRACE_SECONDS" "WORKER_SHUTDOWN_GRACE_SECONDS") }}
{{- fail (printf "env.%s: set api.shutdownGraceSeconds or worker.shutdownGraceSeconds instead (the pods' terminationGracePeriodSeconds follow those)" $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* The Postgres CA (postgres.caSecret): every container that connects to Postgres mounts it when set. */}}
{{- define "synctide.postgresCaMount" -}}
- name: postgres-ca
  mountPath: /etc/synctide/postgres-ca
  readOnly: true
{{- end -}}

{{- define "synctide.postgresCaVolume" -}}
- name: postgres-ca
  secret:
    secretName: {{ .Values.postgres.caSecret.name }}
    items:
      - key: {{ .Values.postgres.caSecret.key }}
        path: {{ .Values.postgres.caSecret.key }}
{{- end -}}

{{- define "synctide.volumeMounts" -}}
- name: secrets
  mountPath: /run/secrets/synctide
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.postgres.caSecret.name }}
{{ include "synctide.postgresCaMount" . }}
{{- end }}
{{- if .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  mountPath: /etc/synctide/temporal-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "synctide.volumes" -}}
- name: secrets
  secret:
    secretName: {{ include "synctide.secretName" . }}
- name: tmp
  emptyDir: {}
{{- if .Values.postgres.caSecret.name }}
{{ include "synctide.postgresCaVolume" . }}
{{- end }}
{{- if .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.tls.existingSecret }}
{{- end }}
{{- end -}}
