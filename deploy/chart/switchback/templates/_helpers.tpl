{{/*
Labels Helm's own tooling expects on every object the release owns, besides
each object's labels from the kustomize base. Pod templates do not get them:
a new chart version must not restart the pods by itself, and the selectors
(immutable) stay the base's.
*/}}
{{- define "switchback.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The switchback image: repository:tag, tag defaulting to the appVersion, @digest when set. */}}
{{- define "switchback.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest }}{{ $ref = printf "%s@%s" $ref .Values.image.digest }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/* The bundled NATS servers' image, as deploy/nats/statefulset.yaml pins it. */}}
{{- define "switchback.natsImage" -}}
{{- $ref := printf "%s:%s" .Values.nats.image.repository .Values.nats.image.tag -}}
{{- if .Values.nats.image.digest }}{{ $ref = printf "%s@%s" $ref .Values.nats.image.digest }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/* "true" when the bundled NATS cluster is rendered (no external URL). */}}
{{- define "switchback.bundledNATS" -}}
{{- if not .Values.nats.external.url }}true{{ end -}}
{{- end }}

{{/* The Secret holding the ca.crt the clients verify NATS with; "" for none. */}}
{{- define "switchback.natsCASecret" -}}
{{- if include "switchback.bundledNATS" . -}}
{{- /* ca.crt of the client port's certificate, never the CA's own Secret (its key signs route certificates: deploy/nats/certificates.yaml). */ -}}
switchback-nats-server-tls
{{- else -}}
{{- .Values.nats.external.caSecret -}}
{{- end -}}
{{- end }}

{{/*
The NATS client flags the controller and the workers share, in the base's
order (deploy/controller.yaml, deploy/worker.yaml).
*/}}
{{- define "switchback.natsArgs" -}}
- --nats-url={{ .Values.nats.external.url | default "tls://switchback-nats:4222" }}
{{- if include "switchback.natsCASecret" . }}
- --nats-ca=/etc/switchback/nats-ca/ca.crt
{{- end }}
- --stream-replicas={{ .Values.nats.streamReplicas }}
{{- end }}

{{/* The mount and the volume of the NATS CA, when there is one. */}}
{{- define "switchback.natsCAMount" -}}
{{- if include "switchback.natsCASecret" . }}
- {name: nats-ca, mountPath: /etc/switchback/nats-ca, readOnly: true}
{{- end }}
{{- end }}
{{- define "switchback.natsCAVolume" -}}
{{- with include "switchback.natsCASecret" . }}
# ca.crt only (deploy/nats/certificates.yaml says why).
- name: nats-ca
  secret:
    secretName: {{ . }}
    items: [{key: ca.crt, path: ca.crt}]
{{- end }}
{{- end }}

{{/* Pod anti-affinity by node for the pods of one app.kubernetes.io/name: (dict "name" NAME "mode" soft|hard). */}}
{{- define "switchback.podAntiAffinity" -}}
podAntiAffinity:
{{- if eq .mode "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
  - topologyKey: kubernetes.io/hostname
    labelSelector:
      matchLabels: {app.kubernetes.io/name: {{ .name }}}
{{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels: {app.kubernetes.io/name: {{ .name }}}
{{- end }}
{{- end }}

{{/* imagePullSecrets of a pod spec, when any. */}}
{{- define "switchback.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end }}
{{- end }}
