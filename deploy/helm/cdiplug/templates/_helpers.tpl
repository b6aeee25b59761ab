{{/* SPDX-License-Identifier: Apache-2.0 */}}

{{/* The namespace of every namespaced object. */}}
{{- define "cdiplug.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{- define "cdiplug.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) -}}
{{- end -}}

{{/* The config value as an object, whichever way it came: a map, or a
string holding its JSON (--set-file config=config.json, as NVIDIA's
charts take theirs). The string is parsed once, in place, so every
template reads .Values.config as a map; each template that reads it
includes this first (Helm gives no order among templates). Helm's fromJson
says a failed parse as an "Error" key, which no config has (cdiplug refuses
unknown keys). */}}
{{- define "cdiplug.loadConfig" -}}
{{- if kindIs "string" .Values.config -}}
{{- $cfg := fromJson .Values.config -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "config: the string given (--set-file config=FILE) is no JSON object: %s" (get $cfg "Error")) -}}
{{- end -}}
{{- $_ := set .Values "config" $cfg -}}
{{- end -}}
{{- end -}}

{{/* "true" when the config serves resources through DRA (it has a "dra"
section), "" when only through device plugins. */}}
{{- define "cdiplug.dra" -}}
{{- include "cdiplug.loadConfig" . -}}
{{- if hasKey (.Values.config | default dict) "dra" -}}true{{- end -}}
{{- end -}}

{{/* A string as a CEL string literal: in double quotes, with '\' and '"'
escaped, so no value can end the literal and change the expression. */}}
{{- define "cdiplug.celString" -}}
{{- printf "\"%s\"" (. | replace "\\" "\\\\" | replace "\"" "\\\"" | replace "\n" "\\n" | replace "\r" "\\r") -}}
{{- end -}}

{{/* kubeletRoot without a trailing '/': the prefix of the kubelet's paths. */}}
{{- define "cdiplug.kubelet" -}}
{{- regexReplaceAll "/+$" (toString .Values.kubeletRoot) "" -}}
{{- end -}}

{{/* Every object's labels: the selector's one (which deploy/base and
`cdiplug manifests` share, so either may replace the other in place) and
Helm's. */}}
{{- define "cdiplug.labels" -}}
app.kubernetes.io/name: cdiplug
app.kubernetes.io/instance: {{ .Release.Name | toJson }}
app.kubernetes.io/version: {{ .Chart.AppVersion | toJson }}
app.kubernetes.io/managed-by: {{ .Release.Service | toJson }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | toJson }}
{{- end -}}

{{/* The values `cdiplug manifests` refuses, refused alike, by name. */}}
{{- define "cdiplug.validate" -}}
{{- include "cdiplug.loadConfig" . -}}
{{- $ns := include "cdiplug.namespace" . -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" $ns) -}}
{{- fail (printf "namespace.name %q: must be a DNS label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)" $ns) -}}
{{- end -}}
{{- if and .Values.namespace.create (eq $ns .Release.Namespace) -}}
{{- fail (printf "namespace.create: the chart would make namespace %q, the release's own (helm --namespace), which Helm needs before the chart's objects exist: install the release in another namespace, or set namespace.create=false" $ns) -}}
{{- end -}}
{{- $image := include "cdiplug.image" . -}}
{{- if regexMatch "[\\x00-\\x20\\x7f]" $image -}}
{{- fail (printf "image %q: holds a space or a control character" $image) -}}
{{- end -}}
{{- if not (hasPrefix "/" (toString .Values.kubeletRoot)) -}}
{{- fail (printf "kubeletRoot %q: must be an absolute path (the host's, as hostPath volumes and the kubelet see it)" (toString .Values.kubeletRoot)) -}}
{{- end -}}
{{- $port := int .Values.metrics.port -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "metrics.port %v: must be a port number from 1 to 65535" .Values.metrics.port) -}}
{{- end -}}
{{- if not (kindIs "map" .Values.config) -}}
{{- fail "config: must be an object, the JSON of cdiplug's config file" -}}
{{- end -}}
{{- $dra := include "cdiplug.dra" . -}}
{{- if $dra -}}
{{- $driver := get (.Values.config.dra | default dict) "driver" -}}
{{- if not (and (kindIs "string" $driver) (le (len $driver) 63) (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" (lower $driver))) -}}
{{- fail (printf "config.dra.driver %v: must be a DNS subdomain of at most 63 characters, e.g. cdiplug.example.com" (toJson $driver)) -}}
{{- end -}}
{{- end -}}
{{- range $i, $r := (.Values.config.resources | default list) -}}
{{- $name := "" -}}
{{- if kindIs "map" $r -}}{{- $name = toString (get $r "name") -}}{{- end -}}
{{- if and (kindIs "map" $r) (not (include "cdiplug.resourceNameOK" $name)) -}}
{{- fail (printf "config.resources[%d].name %q: must be <domain>/<name> as cdiplug check has it: a lowercase DNS subdomain, not kubernetes.io's, then 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit" $i $name) -}}
{{- end -}}
{{- if and (kindIs "map" $r) (eq (toString (get $r "api")) "dra") (not $dra) -}}
{{- fail (printf "config.resources[%d]: \"api\": \"dra\" needs a \"dra\": {\"driver\": ...} section in config" $i) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when a resource name is one the config takes
(cfg_resource_name_problem): a lowercase DNS subdomain of at most 253, not
kubernetes.io's, '/', a name part of 1 to 63; "" otherwise. */}}
{{- define "cdiplug.resourceNameOK" -}}
{{- $domain := regexReplaceAll "/.*$" . "" -}}
{{- if and (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$" .) (le (len $domain) 253) (not (regexMatch "^(requests\\.|(.*\\.)?kubernetes\\.io$)" $domain)) -}}
{{- $ok := true -}}
{{- range $label := splitList "." $domain -}}
{{- if gt (len $label) 63 -}}{{- $ok = false -}}{{- end -}}
{{- end -}}
{{- if $ok -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* FNV-1a, 32 bits, of a string, as 8 hex digits (base_fnv1a32). Sprig
has no XOR: a byte is XORed into the hash's low byte bit by bit. */}}
{{- define "cdiplug.fnv1a32" -}}
{{- $s := . -}}
{{- $h := 2166136261 -}}
{{- range $i := until (len $s) -}}
{{- $b := int (index $s $i) -}}
{{- $lo := mod $h 256 -}}
{{- $x := 0 -}}
{{- range $bit := list 1 2 4 8 16 32 64 128 -}}
{{- if ne (mod (div $lo $bit) 2) (mod (div $b $bit) 2) -}}
{{- $x = add $x $bit -}}
{{- end -}}
{{- end -}}
{{- $h = mod (mul (add (sub $h $lo) $x) 16777619) 4294967296 -}}
{{- end -}}
{{- printf "%08x" $h -}}
{{- end -}}

{{/* The DeviceClass name for resource "domain/name", as `cdiplug
manifests` makes it: "<name>.<domain>", lowercased, '_' made '-'; when that
is no DNS subdomain of at most 253: "cdiplug-<FNV-1a of the resource
name>.<domain>", or without the domain when even that is too long. */}}
{{- define "cdiplug.className" -}}
{{- $res := . -}}
{{- if not (contains "/" $res) -}}
{{- fail (printf "config: resource %q has no domain/ (cdiplug check names the field)" $res) -}}
{{- end -}}
{{- $domain := regexReplaceAll "/.*$" $res "" -}}
{{- $name := printf "%s.%s" (trimPrefix (printf "%s/" $domain) $res) $domain | lower | replace "_" "-" -}}
{{- $ok := le (len $name) 253 -}}
{{- range $label := splitList "." $name -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" $label) -}}
{{- $ok = false -}}
{{- end -}}
{{- end -}}
{{- if not $ok -}}
{{- $name = printf "cdiplug-%s.%s" (include "cdiplug.fnv1a32" $res) $domain -}}
{{- if gt (len $name) 253 -}}
{{- $name = printf "cdiplug-%s" (include "cdiplug.fnv1a32" $res) -}}
{{- end -}}
{{- end -}}
{{- $name -}}
{{- end -}}
