{{/*
What several templates share. Names are fixed, as in deploy/: the operator
finds its webhook configurations, Lease and certificate Secret by these
names (arbiter run --webhook-configuration, --lease-name, --webhook-secret,
--webhook-service defaults).
*/}}

{{/* Whether cert-manager issues the webhooks' certificate. */}}
{{- define "arbiter.certManager" -}}
{{- if eq .Values.webhook.certificates "cert-manager" }}true{{ end -}}
{{- end }}

{{/* The Certificate cert-manager keeps the serving certificate for. */}}
{{- define "arbiter.certificateName" -}}arbiter-webhook{{- end }}

{{/* The Secret cert-manager writes it to, mounted into the operator. */}}
{{- define "arbiter.certificateSecret" -}}arbiter-webhook-cert{{- end }}

{{/* Where the operator reads it (arbiter run --webhook-cert-dir). */}}
{{- define "arbiter.certificateDir" -}}/etc/arbiter/webhook-tls{{- end }}

{{/* Where the JobIntegrations are mounted (arbiter run --integrations). */}}
{{- define "arbiter.integrationsFile" -}}/etc/arbiter/integrations/integrations.yaml{{- end }}

{{/* The webhook configurations' annotations: cert-manager's CA injection. */}}
{{- define "arbiter.webhookAnnotations" -}}
{{- if include "arbiter.certManager" . }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "arbiter.certificateName" . }}
{{- end }}
{{- end }}

{{/*
The (group, version) of an integration's spec.jobApiVersion, as a list:
"kubeflow.org/v1" is [kubeflow.org, v1], "v1" is ["", v1].
*/}}
{{- define "arbiter.groupVersion" -}}
{{- $parts := splitList "/" . -}}
{{- if eq (len $parts) 1 -}}
{{- list "" (index $parts 0) | toJson -}}
{{- else -}}
{{- list (index $parts 0) (index $parts 1) | toJson -}}
{{- end -}}
{{- end }}

{{/*
The job-hold webhooks' rules for the integrations of values.yaml (the
operator adds them too once it runs, but only when it keeps the webhook
configurations itself, not under cert-manager).
*/}}
{{- define "arbiter.integrationRules" -}}
{{- range .Values.integrations }}
{{- $gv := include "arbiter.groupVersion" .spec.jobApiVersion | fromJsonArray }}
  - operations: [CREATE]
    apiGroups: [{{ index $gv 0 | quote }}]
    apiVersions: [{{ index $gv 1 | quote }}]
    resources: [{{ .resource | quote }}]
    scope: Namespaced
{{- end }}
{{- end }}

{{/* Refuses values that pass the schema but do not go together. */}}
{{- define "arbiter.check" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas: %d needs leaderElection.enabled: true (without it every replica would write as the leader); set replicas: 1 to run without leader election" (int .Values.replicas)) }}
{{- end }}
{{- with .Values.leaderElection }}
{{- if and .leaseDurationSeconds .renewGraceSeconds (ge (int .renewGraceSeconds) (int .leaseDurationSeconds)) }}
{{- fail (printf "leaderElection.renewGraceSeconds (%d) must be less than leaderElection.leaseDurationSeconds (%d): the leader renews that long before the Lease runs out" (int .renewGraceSeconds) (int .leaseDurationSeconds)) }}
{{- end }}
{{- end }}
{{- $bundles := dict }}
{{- if .Values.defaultBundle.enabled }}
{{- $_ := set $bundles (printf "%s/arbiter-default-bundle" .Release.Namespace) "defaultBundle" }}
{{- end }}
{{- range $i, $b := .Values.extraBundles }}
{{- $key := printf "%s/%s" ($b.namespace | default $.Release.Namespace) $b.name }}
{{- if hasKey $bundles $key }}
{{- fail (printf "extraBundles[%d]: the ConfigMap %s is already made by %s; give each bundle its own name" $i $key (get $bundles $key)) }}
{{- end }}
{{- $_ := set $bundles $key (printf "extraBundles[%d]" $i) }}
{{- end }}
{{- $kinds := dict }}
{{- range $i, $in := .Values.integrations }}
{{- $key := printf "%s %s" $in.spec.jobApiVersion $in.spec.jobKind }}
{{- if hasKey $kinds $key }}
{{- fail (printf "integrations[%d]: %s is already given by %s; give each job kind once" $i $key (get $kinds $key)) }}
{{- end }}
{{- $_ := set $kinds $key (printf "integrations[%d]" $i) }}
{{- end }}
{{- end }}
