{{/*
Object names are fixed, not derived from the release name: they are the names of the kustomize base, which the
controller's RBAC (the ServiceAccount token it may request), the agent's default --kamikaze-from and its admission
policy refer to. Several objects are cluster-scoped (the CRD, the ClusterRoles), so one release per cluster.
*/}}

{{/* The namespace of every namespaced object. */}}
{{- define "k8sm.namespace" -}}
{{- required "namespace.name is required" .Values.namespace.name -}}
{{- end -}}

{{/* An image reference: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "k8sm.image" -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .chart.AppVersion) -}}
{{- end -}}

{{/*
Refuses values that would install something broken, with the fix in the message. Included once, by namespace.yaml
(which is always rendered, whether or not it creates the Namespace).
*/}}
{{- define "k8sm.checks" -}}
{{- if and .Values.namespace.create (eq .Release.Namespace .Values.namespace.name) -}}
{{- fail (printf "namespace.create=true makes the release own Namespace %s, but Helm keeps the release record in it (--namespace %s), so it must exist before the install and cannot be taken over: either install without --namespace (the release is recorded in your current namespace) or add --set namespace.create=false (with --create-namespace if it does not exist yet)" .Values.namespace.name .Release.Namespace) -}}
{{- end -}}
{{- if and .Values.agent.enabled (ne .Values.namespace.name "k8sm-system") -}}
{{- if not (contains "--kamikaze-from" (cat .Values.agent.command .Values.agent.args)) -}}
{{- fail (printf "namespace.name is %s, but the agent trusts the Http kamikaze from the controller's ServiceAccount in k8sm-system by default: add --kamikaze-from system:serviceaccount:%s:k8sm-controller to agent.args" .Values.namespace.name .Values.namespace.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
