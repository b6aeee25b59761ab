#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check the output of `cdiplug manifests` offline, as deploy/check_manifests.py
checks deploy/base.

Three layers:
 1. Schema: every object is checked against the subset of the Kubernetes API
    types it uses, written down below with the upstream type each entry
    mirrors (field names, JSON types, required fields). A field the subset
    does not know is refused, as `kubectl apply --validate=strict` would
    refuse a typo; extend the subset when the command learns a new field.
 2. Consistency: one DeviceClass per DRA resource of the configuration the
    ConfigMap carries, with the CEL selector on the driver and the
    resource attribute and extendedResourceName; RBAC bound to the
    DaemonSet's service account; the admission policy fencing that account's
    ResourceSlice writes to its node and driver; every name by the API's
    rules.
 3. Security: the DaemonSet is as locked down as deploy/base's (the same pod
    and container securityContext, no host namespaces, small limits), and
    mounts only what DRA adds, at the host paths the kubelet dials.

The Helm chart's DRA renderings (tests/helm) pass the same checks; what
only they make so far (the ResourceSlice admission policy, a Service and
ServiceMonitor, NFD's features.d) is checked when present.

Usage: deploy/check_dra_manifests.py FILE|-
Exit status 0 when every check passes.
"""
import json
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_manifests as base  # noqa: E402  (the helpers and the base's render)

# ------------------------------------------------------------------ schema --
# A schema is a JSON type name, or ("object", {field: (required, schema)}),
# ("array", item schema) or ("map", value schema) (a map[string]T). Only the
# fields cdiplug emits are listed; "int" is a JSON integer, "bool" true/false.

S, I, B = "string", "int", "bool"


def obj(**fields):
    return ("object", fields)


def req(schema):
    return (True, schema)


def opt(schema):
    return (False, schema)


def arr(item):
    return ("array", item)


def smap(value):
    return ("map", value)


# k8s.io/apimachinery/pkg/apis/meta/v1 types.go: ObjectMeta (subset). The
# type makes name optional (a pod template has none); the API server wants
# one on every object it stores, which check_schema() asks for.
OBJECT_META = obj(name=opt(S), namespace=opt(S), labels=opt(smap(S)),
                  annotations=opt(smap(S)))
TYPE_META = dict(apiVersion=req(S), kind=req(S))

# k8s.io/api/core/v1 types.go: Namespace, ServiceAccount, ConfigMap.
NAMESPACE = obj(metadata=req(OBJECT_META), **TYPE_META)
SERVICE_ACCOUNT = obj(metadata=req(OBJECT_META), automountServiceAccountToken=opt(B),
                      **TYPE_META)
CONFIG_MAP = obj(metadata=req(OBJECT_META), data=opt(smap(S)), **TYPE_META)

# k8s.io/api/rbac/v1 types.go: PolicyRule (verbs required), RoleRef (all
# three required), Subject (kind and name required), ClusterRole,
# ClusterRoleBinding (roleRef required).
POLICY_RULE = obj(verbs=req(arr(S)), apiGroups=opt(arr(S)), resources=opt(arr(S)),
                  resourceNames=opt(arr(S)))
CLUSTER_ROLE = obj(metadata=req(OBJECT_META), rules=opt(arr(POLICY_RULE)), **TYPE_META)
ROLE_REF = obj(apiGroup=req(S), kind=req(S), name=req(S))
SUBJECT = obj(kind=req(S), name=req(S), apiGroup=opt(S), namespace=opt(S))
CLUSTER_ROLE_BINDING = obj(metadata=req(OBJECT_META), roleRef=req(ROLE_REF),
                           subjects=opt(arr(SUBJECT)), **TYPE_META)

# k8s.io/api/resource/v1 types.go: DeviceClass (spec required),
# DeviceClassSpec (selectors, config, extendedResourceName), DeviceSelector
# (cel, a one-of), CELDeviceSelector (expression required, <= 10 Ki).
CEL_DEVICE_SELECTOR = obj(expression=req(S))
DEVICE_SELECTOR = obj(cel=opt(CEL_DEVICE_SELECTOR))
DEVICE_CLASS_SPEC = obj(selectors=opt(arr(DEVICE_SELECTOR)), extendedResourceName=opt(S))
DEVICE_CLASS = obj(metadata=req(OBJECT_META), spec=req(DEVICE_CLASS_SPEC), **TYPE_META)

# k8s.io/api/core/v1 types.go: the PodSpec subset (Container: name
# required; EnvVar: name required; ObjectFieldSelector: fieldPath
# required; ContainerPort: containerPort required; HTTPGetAction: port
# required; VolumeMount: name and mountPath required; Volume: name
# required; HostPathVolumeSource: path required; Toleration, Capabilities,
# SeccompProfile: type required; ResourceRequirements).
QUANTITIES = smap(S)
SECCOMP = obj(type=req(S))
CONTAINER = obj(
    name=req(S), image=opt(S), imagePullPolicy=opt(S), args=opt(arr(S)),
    env=opt(arr(obj(name=req(S), value=opt(S),
                    valueFrom=opt(obj(fieldRef=opt(obj(fieldPath=req(S),
                                                       apiVersion=opt(S)))))))),
    ports=opt(arr(obj(containerPort=req(I), name=opt(S), protocol=opt(S)))),
    livenessProbe=opt(obj(httpGet=opt(obj(port=req(("int-or-string",)), path=opt(S))),
                          periodSeconds=opt(I), timeoutSeconds=opt(I), failureThreshold=opt(I))),
    readinessProbe=opt(obj(httpGet=opt(obj(port=req(("int-or-string",)), path=opt(S))),
                           periodSeconds=opt(I), timeoutSeconds=opt(I),
                           failureThreshold=opt(I))),
    securityContext=opt(obj(privileged=opt(B), allowPrivilegeEscalation=opt(B),
                            readOnlyRootFilesystem=opt(B),
                            capabilities=opt(obj(drop=opt(arr(S)), add=opt(arr(S)))),
                            seccompProfile=opt(SECCOMP), procMount=opt(S))),
    resources=opt(obj(requests=opt(QUANTITIES), limits=opt(QUANTITIES))),
    volumeMounts=opt(arr(obj(name=req(S), mountPath=req(S), readOnly=opt(B),
                             mountPropagation=opt(S)))))
VOLUME = obj(name=req(S), hostPath=opt(obj(path=req(S), type=opt(S))),
             configMap=opt(obj(name=opt(S))))
POD_SPEC = obj(
    priorityClassName=opt(S), serviceAccountName=opt(S), automountServiceAccountToken=opt(B),
    enableServiceLinks=opt(B), nodeSelector=opt(smap(S)),
    tolerations=opt(arr(obj(operator=opt(S), key=opt(S), effect=opt(S), value=opt(S)))),
    securityContext=opt(obj(runAsUser=opt(I), runAsGroup=opt(I), runAsNonRoot=opt(B),
                            seccompProfile=opt(SECCOMP))),
    containers=req(arr(CONTAINER)), volumes=opt(arr(VOLUME)),
    hostNetwork=opt(B), hostPID=opt(B), hostIPC=opt(B))

# k8s.io/api/apps/v1 types.go: DaemonSet, DaemonSetSpec (selector and
# template required), DaemonSetUpdateStrategy; LabelSelector (meta/v1).
DAEMON_SET = obj(
    metadata=req(OBJECT_META),
    spec=req(obj(selector=req(obj(matchLabels=opt(smap(S)))),
                 updateStrategy=opt(obj(type=opt(S), rollingUpdate=opt(obj(
                     maxUnavailable=opt(("int-or-string",)),
                     maxSurge=opt(("int-or-string",)))))),
                 template=req(obj(metadata=opt(OBJECT_META), spec=opt(POD_SPEC))))),
    **TYPE_META)

# k8s.io/api/admissionregistration/v1 types.go: ValidatingAdmissionPolicy
# (spec required), its spec (validations, matchConstraints, matchConditions,
# variables, failurePolicy), MatchResources, NamedRuleWithOperations (the
# Rule fields inlined), MatchCondition and Variable (name and expression
# required), Validation (expression required); the binding (spec required,
# policyName, validationActions).
RULE_WITH_OPERATIONS = obj(apiGroups=opt(arr(S)), apiVersions=opt(arr(S)),
                           operations=opt(arr(S)), resources=opt(arr(S)), scope=opt(S))
NAMED_EXPRESSION = obj(name=req(S), expression=req(S))
VALIDATION = obj(expression=req(S), message=opt(S), messageExpression=opt(S), reason=opt(S))
VAP = obj(metadata=req(OBJECT_META), spec=req(obj(
    failurePolicy=opt(S),
    matchConstraints=opt(obj(resourceRules=opt(arr(RULE_WITH_OPERATIONS)))),
    matchConditions=opt(arr(NAMED_EXPRESSION)), variables=opt(arr(NAMED_EXPRESSION)),
    validations=opt(arr(VALIDATION)))), **TYPE_META)
VAP_BINDING = obj(metadata=req(OBJECT_META), spec=req(obj(
    policyName=opt(S), validationActions=opt(arr(S)))), **TYPE_META)

# k8s.io/api/core/v1 types.go: Service (ServicePort: port required), and
# the Prometheus operator's monitoring.coreos.com/v1 ServiceMonitor
# (selector required; Endpoint), which the chart makes when asked.
SERVICE = obj(
    metadata=req(OBJECT_META),
    spec=req(obj(clusterIP=opt(S), selector=opt(smap(S)),
                 ports=opt(arr(obj(port=req(I), name=opt(S), protocol=opt(S),
                                   targetPort=opt(("int-or-string",))))))),
    **TYPE_META)
SERVICE_MONITOR = obj(
    metadata=req(OBJECT_META),
    spec=req(obj(selector=req(obj(matchLabels=opt(smap(S)))),
                 namespaceSelector=opt(obj(matchNames=opt(arr(S)))),
                 endpoints=opt(arr(obj(port=opt(S), path=opt(S), interval=opt(S),
                                       scrapeTimeout=opt(S)))))),
    **TYPE_META)

KINDS = {
    ("v1", "Namespace"): NAMESPACE,
    ("v1", "ServiceAccount"): SERVICE_ACCOUNT,
    ("v1", "ConfigMap"): CONFIG_MAP,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): CLUSTER_ROLE,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): CLUSTER_ROLE_BINDING,
    ("resource.k8s.io/v1", "DeviceClass"): DEVICE_CLASS,
    ("apps/v1", "DaemonSet"): DAEMON_SET,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): VAP,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): VAP_BINDING,
    ("v1", "Service"): SERVICE,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
}
CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding", "DeviceClass",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def schema_errors(value, schema, path):
    """The list of schema violations of value at path."""
    if isinstance(schema, tuple) and schema[0] == "int-or-string":
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        return [] if ok else ["%s: must be an integer or a string" % path]
    if schema == S:
        return [] if isinstance(value, str) else ["%s: must be a string" % path]
    if schema == I:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else ["%s: must be an integer" % path]
    if schema == B:
        return [] if isinstance(value, bool) else ["%s: must be true or false" % path]
    kind, inner = schema
    if kind == "array":
        if not isinstance(value, list):
            return ["%s: must be a list" % path]
        return [e for i, v in enumerate(value) for e in schema_errors(v, inner, "%s[%d]" % (path, i))]
    if kind == "map":
        if not isinstance(value, dict):
            return ["%s: must be a map" % path]
        return [e for k, v in value.items() for e in schema_errors(v, inner, "%s[%s]" % (path, k))]
    if not isinstance(value, dict):
        return ["%s: must be an object" % path]
    errors = ["%s.%s: unknown field" % (path, k) for k in value if k not in inner]
    for name, (required, sub) in inner.items():
        if name in value:
            errors += schema_errors(value[name], sub, "%s.%s" % (path, name))
        elif required:
            errors.append("%s.%s: required" % (path, name))
    return errors


# ------------------------------------------------------------------- names --
# k8s.io/apimachinery/pkg/util/validation validation.go.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A qualified name's name part (IsQualifiedName), as extended resource names use.
QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def is_dns_label(s):
    return isinstance(s, str) and len(s) <= 63 and bool(DNS_LABEL.match(s))


def is_dns_subdomain(s):
    return isinstance(s, str) and len(s) <= 253 and bool(DNS_SUBDOMAIN.match(s))


def is_extended_resource_name(s):
    """pkg/apis/core/helper IsExtendedResourceName as the API validates
    extendedResourceName: a qualified name domain/name outside
    kubernetes.io, not starting with "requests."."""
    if not isinstance(s, str) or s.count("/") != 1 or s.startswith("requests."):
        return False
    domain, name = s.split("/")
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    return is_dns_subdomain(domain) and len(name) <= 63 and bool(QUALIFIED_NAME_PART.match(name))


# ------------------------------------------------------------------ checks --


def check_schema(docs, c):
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            c.check(False, "document %d is an object" % i)
            continue
        key = (d.get("apiVersion"), d.get("kind"))
        schema = KINDS.get(key)
        c.check(schema is not None, "document %d: %s %s is a known kind" % (i, key[0], key[1]))
        if schema is None:
            continue
        errors = schema_errors(d, schema, "%s/%s" % (key[1], (d.get("metadata") or {}).get("name")))
        if not isinstance((d.get("metadata") or {}).get("name"), str):
            errors.append("%s: metadata.name: required" % key[1])
        for e in errors:
            print("        %s" % e)
        c.check(not errors, "%s %r matches the API schema subset"
                % (key[1], (d.get("metadata") or {}).get("name")))


def by_kind(docs):
    out = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def check_names(kinds, c):
    ns = [d["metadata"]["name"] for d in kinds.get("Namespace", [])]
    c.check(len(ns) == 1 and is_dns_label(ns[0]), "one Namespace, named by a DNS label (%s)" % ns)
    namespace = ns[0] if ns else None
    for kind, docs in kinds.items():
        for d in docs:
            meta = d["metadata"]
            if kind in CLUSTER_SCOPED:
                c.check("namespace" not in meta, "%s %s is cluster-scoped: no namespace"
                        % (kind, meta["name"]))
            else:
                c.check(meta.get("namespace") == namespace, "%s %s is in namespace %r"
                        % (kind, meta["name"], namespace))
            c.check(is_dns_subdomain(meta["name"]), "%s name %r is a DNS subdomain"
                    % (kind, meta["name"]))
    return namespace


def dra_config(kinds, c):
    """The configuration the ConfigMap carries: (driver, [DRA resource names])."""
    cms = kinds.get("ConfigMap", [])
    c.check(len(cms) == 1 and "config.json" in (cms[0].get("data") or {}),
            "one ConfigMap holds config.json")
    if not cms or "config.json" not in (cms[0].get("data") or {}):
        return None, []
    try:
        cfg = json.loads(cms[0]["data"]["config.json"])
    except ValueError as e:
        c.check(False, "the ConfigMap's config.json is JSON (%s)" % e)
        return None, []
    driver = (cfg.get("dra") or {}).get("driver")
    # One name may stand for one resource per group of nodes ("nodes").
    names = sorted({r["name"] for r in cfg.get("resources", []) if r.get("api") == "dra"})
    c.check(isinstance(driver, str) and len(driver) <= 63 and is_dns_subdomain(driver.lower()),
            "the config names a DRA driver, a DNS subdomain of at most 63 (%r)" % driver)
    c.check(bool(names), "the config has DRA resources (%s)" % names)
    return driver, names


def check_device_classes(kinds, driver, resources, c):
    classes = kinds.get("DeviceClass", [])
    by_res = {}
    for dc in classes:
        spec = dc["spec"]
        by_res.setdefault(spec.get("extendedResourceName"), []).append(dc)
    c.check(sorted(by_res) == sorted(resources) and all(len(v) == 1 for v in by_res.values()),
            "one DeviceClass per DRA resource, by extendedResourceName (%s)" % sorted(by_res, key=str))
    names = [dc["metadata"]["name"] for dc in classes]
    c.check(len(set(names)) == len(names), "DeviceClass names are unique")
    for dc in classes:
        spec, name = dc["spec"], dc["metadata"]["name"]
        res = spec.get("extendedResourceName")
        c.check(is_extended_resource_name(res),
                "DeviceClass %s: extendedResourceName %r is an extended resource name" % (name, res))
        sels = spec.get("selectors") or []
        want = ('device.driver == "%s" && device.attributes["%s"].resource == "%s"'
                % (driver, driver, res))
        c.check(len(sels) == 1 and (sels[0].get("cel") or {}).get("expression") == want,
                "DeviceClass %s: one CEL selector on the driver and the resource attribute" % name)
        c.check(all(len((s.get("cel") or {}).get("expression", "")) <= 10 * 1024 for s in sels),
                "DeviceClass %s: CEL expressions within 10 Ki" % name)


def selects_by_label(kinds):
    """Whether a resource of the ConfigMap's config selects nodes by label:
    serve then watches its Node, which takes list and watch on nodes."""
    try:
        cfg = json.loads(kinds["ConfigMap"][0]["data"]["config.json"])
        return any((r.get("nodes") or {}).get("labels") for r in cfg.get("resources", []))
    except (KeyError, IndexError, ValueError, AttributeError):
        return False


def check_rbac(kinds, namespace, c):
    roles = {d["metadata"]["name"]: d for d in kinds.get("ClusterRole", [])}
    bindings = kinds.get("ClusterRoleBinding", [])
    sas = [d["metadata"]["name"] for d in kinds.get("ServiceAccount", [])]
    ds = (kinds.get("DaemonSet") or [None])[0]
    pod = ds["spec"]["template"].get("spec", {}) if ds else {}
    sa = pod.get("serviceAccountName")
    c.check(sa in sas, "the DaemonSet runs as the ServiceAccount %r the manifests create" % sa)
    c.check(len(bindings) == 1, "one ClusterRoleBinding")
    if len(bindings) != 1:
        return
    b = bindings[0]
    ref = b["roleRef"]
    c.check(ref == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": ref.get("name")} and ref.get("name") in roles,
            "the binding refers to the ClusterRole the manifests create")
    c.check(b.get("subjects") == [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
            "the binding's only subject is the DaemonSet's ServiceAccount")
    role = roles.get(ref.get("name"))
    rules = {}
    for r in (role or {}).get("rules", []):
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                rules.setdefault((g, res), set()).update(r["verbs"])
    want = {
        ("resource.k8s.io", "resourceslices"):
            {"get", "list", "watch", "create", "update", "patch", "delete"},
        ("resource.k8s.io", "resourceclaims"): {"get"},
        ("", "nodes"): {"get", "list", "watch"} if selects_by_label(kinds) else {"get"},
    }
    c.check(rules == want, "the ClusterRole grants exactly what a DRA driver needs (%s)"
            % {"%s/%s" % k: sorted(v) for k, v in rules.items()})
    c.check(all("*" not in r.get("verbs", []) + r.get("resources", []) + r.get("apiGroups", [])
                for r in (role or {}).get("rules", [])), "no wildcard in the ClusterRole")


NFD_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


def check_node_fence(kinds, namespace, driver, c):
    """The ValidatingAdmissionPolicy that fences the driver's ResourceSlice
    writes to its own node and driver, and its binding: bound with Deny,
    failing closed, matching every ResourceSlice write of exactly the
    DaemonSet's service account, taking the node from the token's extra,
    the slice from oldObject on DELETE, and refusing another node, a slice
    without a node, another driver and a token without a node."""
    policies = kinds.get("ValidatingAdmissionPolicy", [])
    bindings = kinds.get("ValidatingAdmissionPolicyBinding", [])
    c.check(len(policies) == 1 and len(bindings) == 1,
            "one ValidatingAdmissionPolicy and one binding")
    if len(policies) != 1 or len(bindings) != 1:
        return
    p, b = policies[0], bindings[0]
    spec, name = p["spec"], p["metadata"]["name"]
    c.check(b["spec"].get("policyName") == name and b["spec"].get("validationActions") == ["Deny"],
            "the binding enforces policy %s with Deny" % name)
    c.check(spec.get("failurePolicy") == "Fail", "the policy fails closed (failurePolicy Fail)")
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
    covered = set()
    for r in rules:
        if "resource.k8s.io" in r.get("apiGroups", []) and "resourceslices" in r.get("resources", []) \
                and "*" in r.get("apiVersions", []):
            covered.update(r.get("operations", []))
    c.check({"CREATE", "UPDATE", "DELETE"} <= covered,
            "it matches CREATE, UPDATE and DELETE of resourceslices in every version (got %s)"
            % sorted(covered))
    ds = (kinds.get("DaemonSet") or [None])[0]
    sa = ((ds or {}).get("spec", {}).get("template", {}).get("spec") or {}).get("serviceAccountName")
    user = 'request.userInfo.username == "system:serviceaccount:%s:%s"' % (namespace, sa)
    conds = [m.get("expression") for m in spec.get("matchConditions", [])]
    c.check(conds == [user], "it applies to the DaemonSet's service account only (%s)" % conds)
    variables = {v["name"]: v["expression"] for v in spec.get("variables", [])}
    node = variables.get("nodeName", "")
    c.check(node.count('"%s"' % NODE_NAME_EXTRA) >= 2 and "request.userInfo.extra" in node,
            "variables.nodeName is the node name in the token's extra (%s)" % NODE_NAME_EXTRA)
    c.check(variables.get("slice") == 'request.operation == "DELETE" ? oldObject : object',
            "variables.slice is the old object on DELETE, the new one otherwise")
    checks = [v.get("expression") for v in spec.get("validations", [])]
    want = ['variables.nodeName != ""',
            'has(variables.slice.spec.nodeName) && variables.slice.spec.nodeName == '
            'variables.nodeName',
            'variables.slice.spec.driver == "%s"' % driver]
    c.check(checks == want, "it refuses a token without a node, another node's or a nodeless "
            "slice, and another driver's (got %s)" % checks)
    c.check(all(v.get("message") or v.get("messageExpression")
                for v in spec.get("validations", [])), "every refusal says why")


def base_daemonset():
    docs = base.render(os.path.join(HERE, "base"))
    return next(d for d in docs if d["kind"] == "DaemonSet")


def check_daemonset(kinds, c):
    dss = kinds.get("DaemonSet", [])
    c.check(len(dss) == 1, "one DaemonSet")
    if not dss:
        return
    ds = dss[0]
    spec = ds["spec"]
    pod = spec["template"].get("spec", {})
    ref = base_daemonset()
    ref_pod = ref["spec"]["template"]["spec"]
    tlabels = (spec["template"].get("metadata") or {}).get("labels", {})
    sel = spec["selector"].get("matchLabels", {})
    c.check(sel and all(tlabels.get(k) == v for k, v in sel.items()),
            "selector matches the pod template's labels")
    c.check(sel == ref["spec"]["selector"]["matchLabels"],
            "selector equals deploy/base's (a DaemonSet's selector is immutable)")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        c.check(not pod.get(key), "%s is not set" % key)
    c.check(pod.get("priorityClassName") == "system-node-critical",
            "priorityClassName is system-node-critical")
    c.check(pod.get("automountServiceAccountToken") is True,
            "the service account token is mounted (DRA talks to the API server)")
    c.check(pod.get("securityContext") == ref_pod.get("securityContext"),
            "the pod securityContext equals deploy/base's")
    containers = pod.get("containers", [])
    c.check(len(containers) == 1 and not pod.get("initContainers"),
            "exactly one container, no init containers")
    if not containers:
        return
    ctr, ref_ctr = containers[0], ref_pod["containers"][0]
    sc = ctr.get("securityContext", {})
    c.check(sc == ref_ctr.get("securityContext"),
            "the container securityContext equals deploy/base's")
    c.check(sc.get("privileged") is False and sc.get("allowPrivilegeEscalation") is False
            and sc.get("readOnlyRootFilesystem") is True, "unprivileged, no escalation, read-only root")
    caps = sc.get("capabilities", {})
    c.check(caps.get("drop") == ["ALL"] and not caps.get("add"), "capabilities: drop [ALL], add nothing")
    c.check((sc.get("seccompProfile") or {}).get("type") == "RuntimeDefault",
            "seccompProfile RuntimeDefault")
    res = ctr.get("resources", {})
    req, lim = res.get("requests", {}), res.get("limits", {})
    have_all = all(k in d for d in (req, lim) for k in ("cpu", "memory"))
    c.check(have_all and all(base.quantity(req[k]) <= base.quantity(lim[k]) for k in ("cpu", "memory"))
            and base.quantity(lim["memory"]) <= 128 * 1024 ** 2 and base.quantity(lim["cpu"]) <= 500,
            "requests and limits set, requests within limits, limits small")

    args = ctr.get("args", [])
    c.check(args[:1] == ["serve"], "container runs 'cdiplug serve'")
    c.check("--no-sandbox" not in args, "--no-sandbox is not given")
    c.check(base.arg_value(args, "--host-root") == base.HOST_ROOT, "--host-root %s" % base.HOST_ROOT)
    c.check(base.arg_value(args, "--node-name") == "$(NODE_NAME)", "--node-name $(NODE_NAME)")
    env = {e["name"]: e for e in ctr.get("env", [])}
    field = ((env.get("NODE_NAME") or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
    c.check(field == "spec.nodeName", "NODE_NAME comes from the downward API's spec.nodeName")
    base.check_rollout(ds, c)
    root = base.arg_value(args, "--kubelet-root") or "/var/lib/kubelet"
    prefix = root.rstrip("/")
    c.check(root.startswith("/"), "--kubelet-root %r is absolute" % root)

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["name"]: m for m in ctr.get("volumeMounts", [])}
    host_paths = {v["hostPath"]["path"]: n for n, v in volumes.items() if "hostPath" in v}
    # The device plugin dir stays /var/lib/kubelet/device-plugins whatever the
    # kubelet's --root-dir (KubeletSocket in k8s.io/kubelet's deviceplugin
    # v1beta1); serve's default, or its --kubelet-dir.
    dp_dir = base.arg_value(args, "--kubelet-dir") or base.KUBELET_DIR
    c.check(dp_dir == base.KUBELET_DIR,
            "the device plugin dir is %s whatever --kubelet-root (got %s)" % (base.KUBELET_DIR, dp_dir))
    writable = {dp_dir, prefix + "/plugins_registry", prefix + "/plugins", base.CDI_DIR}
    # cdiplug manifests --nfd: NFD's local feature dir, where serve keeps its feature file.
    nfd = base.arg_value(args, "--nfd-features-dir")
    c.check(nfd in (None, NFD_FEATURES_DIR), "--nfd-features-dir is NFD's %s" % NFD_FEATURES_DIR)
    if nfd:
        writable.add(nfd)
    read_only = {prefix + "/pod-resources": prefix + "/pod-resources",
                 "/dev": base.HOST_ROOT + "/dev", "/sys": base.HOST_ROOT + "/sys"}
    nfd = base.arg_value(args, "--nfd-features-dir")
    if nfd is not None:
        # NFD's features.d, where cdiplug keeps its feature file.
        c.check(nfd.startswith("/"), "--nfd-features-dir %r is absolute" % nfd)
        writable.add(nfd)
    c.check(set(host_paths) == writable | set(read_only),
            "hostPath volumes are exactly %s (got %s)"
            % (sorted(writable | set(read_only)), sorted(host_paths)))
    for path in sorted(writable):
        m = mounts.get(host_paths.get(path))
        c.check(m is not None and m["mountPath"] == path and not m.get("readOnly"),
                "%s is mounted writable at the same path" % path)
    for path, at in sorted(read_only.items()):
        m = mounts.get(host_paths.get(path))
        c.check(m is not None and m["mountPath"] == at and m.get("readOnly") is True,
                "%s is mounted read-only at %s" % (path, at))
    c.check(all(m.get("mountPropagation") in (None, "None") for m in mounts.values()),
            "no mount propagation from the container to the host")
    c.check(all(m["name"] in volumes for m in mounts.values()), "every mount has its volume")
    cfg_path = base.arg_value(args, "--config") or "/etc/cdiplug/config.json"
    cfg_mount = next((m for m in mounts.values()
                      if m["mountPath"] == os.path.dirname(cfg_path)), None)
    cm_name = (volumes.get((cfg_mount or {}).get("name")) or {}).get("configMap", {}).get("name")
    cms = [d["metadata"]["name"] for d in kinds.get("ConfigMap", [])]
    c.check(cm_name in cms and cfg_mount.get("readOnly") is True,
            "--config %s comes read-only from the ConfigMap the manifests create" % cfg_path)
    sock = base.arg_value(args, "--pod-resources-socket")
    c.check(sock is None or os.path.dirname(sock) == prefix + "/pod-resources",
            "--pod-resources-socket is in the mounted directory")


def check_monitoring(kinds, c):
    """A Service and ServiceMonitor, when the manifests make them, reach the
    DaemonSet's metrics port."""
    services = kinds.get("Service", [])
    monitors = kinds.get("ServiceMonitor", [])
    if not services and not monitors:
        return
    ds = (kinds.get("DaemonSet") or [None])[0]
    tlabels = ((ds["spec"]["template"].get("metadata") or {}).get("labels") or {}) if ds else {}
    c.check(len(services) == 1 and len(monitors) == 1, "one Service and one ServiceMonitor")
    if len(services) != 1 or len(monitors) != 1:
        return
    svc, mon = services[0], monitors[0]
    sel = svc["spec"].get("selector") or {}
    c.check(sel and all(tlabels.get(k) == v for k, v in sel.items()),
            "the Service selects the DaemonSet's pods")
    ports = {p.get("name"): p for p in svc["spec"].get("ports") or []}
    c.check((ports.get("metrics") or {}).get("targetPort") == "metrics",
            "the Service's port 'metrics' targets the container port 'metrics'")
    msel = (mon["spec"].get("selector") or {}).get("matchLabels") or {}
    slabels = svc["metadata"].get("labels") or {}
    c.check(msel and all(slabels.get(k) == v for k, v in msel.items()),
            "the ServiceMonitor selects the Service")
    names = (mon["spec"].get("namespaceSelector") or {}).get("matchNames")
    c.check(names in (None, [svc["metadata"].get("namespace")]),
            "the ServiceMonitor looks in the Service's namespace")
    eps = mon["spec"].get("endpoints") or []
    c.check(eps and all(e.get("port") in ports and e.get("path", "/metrics") == "/metrics"
                        for e in eps), "the ServiceMonitor scrapes /metrics on the Service's port")


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip().split("\n\n")[-2])
        return 2
    try:
        if argv[0] == "-":
            text = sys.stdin.read()
        else:
            with open(argv[0], encoding="utf-8") as f:
                text = f.read()
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        print("dra manifests: cannot read %s: %s" % (argv[0], e))
        print("dra manifests: 0 passed, 1 failed")
        return 1
    c = base.Checker()
    print("read %s: %d objects" % (argv[0], len(docs)))
    check_schema(docs, c)
    if c.failed:
        print("dra manifests: %d passed, %d failed" % (c.passed, c.failed))
        return 1
    kinds = by_kind(docs)
    namespace = check_names(kinds, c)
    driver, resources = dra_config(kinds, c)
    check_device_classes(kinds, driver, resources, c)
    check_rbac(kinds, namespace, c)
    check_node_fence(kinds, namespace, driver, c)
    check_daemonset(kinds, c)
    check_monitoring(kinds, c)
    print("dra manifests: %d passed, %d failed" % (c.passed, c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
