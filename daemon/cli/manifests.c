/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug manifests: the Kubernetes objects that serve the config's DRA
 * resources, printed to stdout: a DeviceClass per DRA resource (with
 * extendedResourceName, so pods that ask for the resource by name are
 * served through DRA), the driver's ServiceAccount and RBAC, the
 * admission policy that fences its ResourceSlice writes to its own node
 * and driver, the config as a ConfigMap and a DaemonSet that runs
 * `cdiplug serve` on every node.
 *
 * The output is a multi-document YAML stream whose documents are JSON
 * objects printed by cJSON: JSON is YAML, so `kubectl apply -f -` and
 * kustomize read it as they read deploy/, while every string is escaped by
 * a JSON printer rather than quoted by hand (a resource name, a path or
 * the config's text can hold anything YAML would read as syntax). One
 * document per object keeps each one apart for `kubectl diff` and for
 * review; a JSON "List" would be one line-noise object. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "config.h"
#include "log.h"

#include "cli-internal.h"

#define CONFIG_DIR "/etc/cdiplug"
#define CONFIG_FILE "config.json"

/* The objects that do not depend on a resource, written as the JSON they
 * become with ' for " (no value here holds a quote), and with @NAME@
 * placeholders that fill() replaces in the parsed strings, never in the
 * text: a value cannot break out of its string. The DaemonSet follows
 * deploy/base/daemonset.yaml (the comments there say why each setting);
 * what differs is what DRA needs: the service account's token, for the
 * API server; the kubelet's plugin registry and plugin dirs, mounted at
 * their host paths since the kubelet dials the socket path the driver
 * names; the node's name from the downward API. */
static const char *const fixed_objects[] = {
        "{'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': '@NS@',"
        " 'labels': {'app.kubernetes.io/name': 'cdiplug'}}}",

        "{'apiVersion': 'v1', 'kind': 'ServiceAccount', 'metadata': {'name': 'cdiplug',"
        " 'namespace': '@NS@', 'labels': {'app.kubernetes.io/name': 'cdiplug'}}}",

        /* What a DRA driver's node part needs, and no more (issue 24):
         * its node's ResourceSlices, the claims it prepares, the Node it
         * names as their owner. Namespace-independent, so one role serves
         * every install; the bindings carry the namespace. */
        "{'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRole',"
        " 'metadata': {'name': 'cdiplug-dra', 'labels': {'app.kubernetes.io/name': 'cdiplug'}},"
        " 'rules': ["
        "  {'apiGroups': ['resource.k8s.io'], 'resources': ['resourceslices'],"
        "   'verbs': ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']},"
        "  {'apiGroups': ['resource.k8s.io'], 'resources': ['resourceclaims'], 'verbs': ['get']},"
        "  {'apiGroups': [''], 'resources': ['nodes'], 'verbs': ['get']}]}",

        "{'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRoleBinding',"
        " 'metadata': {'name': 'cdiplug-dra-@NS@', 'labels': {'app.kubernetes.io/name': 'cdiplug'}},"
        " 'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'ClusterRole',"
        "  'name': 'cdiplug-dra'},"
        " 'subjects': [{'kind': 'ServiceAccount', 'name': 'cdiplug', 'namespace': '@NS@'}]}",

        "{'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'cdiplug-config',"
        " 'namespace': '@NS@', 'labels': {'app.kubernetes.io/name': 'cdiplug'}},"
        " 'data': {'" CONFIG_FILE "': '@CONFIG@'}}",
};

static const char daemonset[] =
        "{'apiVersion': 'apps/v1', 'kind': 'DaemonSet',"
        " 'metadata': {'name': 'cdiplug', 'namespace': '@NS@',"
        "  'labels': {'app.kubernetes.io/name': 'cdiplug',"
        "   'app.kubernetes.io/component': 'dra-driver'}},"
        " 'spec': {"
        /* deploy/base's selector: a DaemonSet's selector cannot change,
         * and this one may replace that one in place. */
        "  'selector': {'matchLabels': {'app.kubernetes.io/name': 'cdiplug'}},"
        /* The new pod starts beside the old one and registers its own
         * sockets (POD_UID) before the old one stops: the kubelet always
         * has an instance to call (issue 29). */
        "  'updateStrategy': {'type': 'RollingUpdate',"
        "   'rollingUpdate': {'maxSurge': 1, 'maxUnavailable': 0}},"
        "  'template': {"
        "   'metadata': {'labels': {'app.kubernetes.io/name': 'cdiplug',"
        "     'app.kubernetes.io/component': 'dra-driver'},"
        "    'annotations': {'prometheus.io/scrape': 'true', 'prometheus.io/port': '10391',"
        "     'prometheus.io/path': '/metrics'}},"
        "   'spec': {"
        "    'priorityClassName': 'system-node-critical',"
        "    'serviceAccountName': 'cdiplug',"
        "    'automountServiceAccountToken': true,"
        "    'enableServiceLinks': false,"
        "    'nodeSelector': {'kubernetes.io/os': 'linux'},"
        "    'tolerations': [{'operator': 'Exists'}],"
        "    'securityContext': {'runAsUser': 0, 'runAsGroup': 0, 'runAsNonRoot': false,"
        "     'seccompProfile': {'type': 'RuntimeDefault'}},"
        "    'containers': [{"
        "     'name': 'cdiplug', 'image': '@IMAGE@', 'imagePullPolicy': 'IfNotPresent',"
        "     'args': ['serve', '--config=" CONFIG_DIR "/" CONFIG_FILE "',"
        "      '--kubelet-root=@KUBELET_ROOT@', '--cdi-dir=/etc/cdi', '--host-root=/host',"
        "      '--log-format=json', '--metrics-address=$(POD_IP):10391',"
        "      '--pod-resources-socket=@KUBELET@/pod-resources/kubelet.sock',"
        "      '--node-name=$(NODE_NAME)'],"
        "     'env': ["
        "      {'name': 'POD_IP', 'valueFrom': {'fieldRef': {'fieldPath': 'status.podIP'}}},"
        "      {'name': 'NODE_NAME', 'valueFrom': {'fieldRef': {'fieldPath': 'spec.nodeName'}}},"
        "      {'name': 'POD_UID', 'valueFrom': {'fieldRef': {'fieldPath': 'metadata.uid'}}}],"
        "     'ports': [{'name': 'metrics', 'containerPort': 10391, 'protocol': 'TCP'}],"
        "     'livenessProbe': {'httpGet': {'path': '/healthz', 'port': 'metrics'},"
        "      'periodSeconds': 10, 'timeoutSeconds': 5, 'failureThreshold': 3},"
        "     'readinessProbe': {'httpGet': {'path': '/readyz', 'port': 'metrics'},"
        "      'periodSeconds': 10, 'timeoutSeconds': 5},"
        "     'securityContext': {'privileged': false, 'allowPrivilegeEscalation': false,"
        "      'readOnlyRootFilesystem': true, 'capabilities': {'drop': ['ALL']},"
        "      'seccompProfile': {'type': 'RuntimeDefault'}},"
        "     'resources': {'requests': {'cpu': '10m', 'memory': '16Mi'},"
        "      'limits': {'cpu': '100m', 'memory': '64Mi'}},"
        "     'volumeMounts': ["
        "      {'name': 'device-plugins', 'mountPath': '@DP_DIR@'},"
        "      {'name': 'plugins-registry', 'mountPath': '@KUBELET@/plugins_registry'},"
        "      {'name': 'plugins', 'mountPath': '@KUBELET@/plugins'},"
        "      {'name': 'cdi', 'mountPath': '/etc/cdi'},"
        "      {'name': 'pod-resources', 'mountPath': '@KUBELET@/pod-resources', 'readOnly': true},"
        "      {'name': 'config', 'mountPath': '" CONFIG_DIR "', 'readOnly': true},"
        "      {'name': 'host-dev', 'mountPath': '/host/dev', 'readOnly': true},"
        "      {'name': 'host-sys', 'mountPath': '/host/sys', 'readOnly': true}]}],"
        "    'volumes': ["
        /* The kubelet's device plugin dir is not below its --root-dir:
         * serve's default, the same whatever --kubelet-root. */
        "     {'name': 'device-plugins',"
        "      'hostPath': {'path': '@DP_DIR@', 'type': 'Directory'}},"
        /* The kubelet makes the registry dir when it starts: a missing
         * one means another --root-dir, which a pod that fails to start
         * says better than a socket nobody watches. */
        "     {'name': 'plugins-registry',"
        "      'hostPath': {'path': '@KUBELET@/plugins_registry', 'type': 'Directory'}},"
        "     {'name': 'plugins',"
        "      'hostPath': {'path': '@KUBELET@/plugins', 'type': 'DirectoryOrCreate'}},"
        "     {'name': 'cdi', 'hostPath': {'path': '/etc/cdi', 'type': 'DirectoryOrCreate'}},"
        "     {'name': 'pod-resources',"
        "      'hostPath': {'path': '@KUBELET@/pod-resources', 'type': 'DirectoryOrCreate'}},"
        "     {'name': 'config', 'configMap': {'name': 'cdiplug-config'}},"
        "     {'name': 'host-dev', 'hostPath': {'path': '/dev', 'type': 'Directory'}},"
        "     {'name': 'host-sys', 'hostPath': {'path': '/sys', 'type': 'Directory'}}]}}}}";

struct placeholder {
        const char *key; /* "@NS@" */
        const char *value;
};

/* RBAC cannot say "only your own node's slices": the ClusterRole lets
 * every node's instance write every ResourceSlice. This policy and its
 * binding narrow the driver's service account to slices whose
 * spec.nodeName is the node named in its own token (the API server adds
 * the node of a pod-bound token to the user's extra, on by default since
 * 1.30) and whose spec.driver is the config's driver. The CEL text comes
 * from node_fence_cel(), as placeholders, so its quotes never meet the
 * template's. */
static const char *const node_fence_objects[] = {
        "{'apiVersion': 'admissionregistration.k8s.io/v1', 'kind': 'ValidatingAdmissionPolicy',"
        " 'metadata': {'name': 'cdiplug-dra-node-@NS@',"
        "  'labels': {'app.kubernetes.io/name': 'cdiplug'}},"
        " 'spec': {"
        /* Fail closed: when the policy cannot be evaluated, the write
         * waits rather than goes through unchecked. */
        "  'failurePolicy': 'Fail',"
        "  'matchConstraints': {'resourceRules': [{'apiGroups': ['resource.k8s.io'],"
        "   'apiVersions': ['*'], 'operations': ['CREATE', 'UPDATE', 'DELETE'],"
        "   'resources': ['resourceslices']}]},"
        "  'matchConditions': [{'name': 'cdiplug-service-account', 'expression': '@CEL_USER@'}],"
        "  'variables': ["
        "   {'name': 'nodeName', 'expression': '@CEL_NODE@'},"
        "   {'name': 'slice', 'expression': '@CEL_SLICE@'}],"
        "  'validations': ["
        "   {'expression': '@CEL_HAS_NODE@', 'reason': 'Forbidden', 'message': '@MSG_NO_NODE@'},"
        "   {'expression': '@CEL_SAME_NODE@', 'reason': 'Forbidden',"
        "    'messageExpression': '@MSG_OTHER_NODE@'},"
        "   {'expression': '@CEL_DRIVER@', 'reason': 'Forbidden',"
        "    'message': '@MSG_OTHER_DRIVER@'}]}}",

        "{'apiVersion': 'admissionregistration.k8s.io/v1',"
        " 'kind': 'ValidatingAdmissionPolicyBinding',"
        " 'metadata': {'name': 'cdiplug-dra-node-@NS@',"
        "  'labels': {'app.kubernetes.io/name': 'cdiplug'}},"
        " 'spec': {'policyName': 'cdiplug-dra-node-@NS@', 'validationActions': ['Deny']}}",
};

/* s with every placeholder replaced, in a new string. */
static int expand(const char *s, const struct placeholder *ph, size_t n_ph, char **ret) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return -ENOMEM;
        while (*s) {
                size_t k = 0;
                while (k < n_ph && strncmp(s, ph[k].key, strlen(ph[k].key)) != 0)
                        k++;
                if (k < n_ph) {
                        fputs(ph[k].value, f);
                        s += strlen(ph[k].key);
                } else
                        fputc(*s++, f);
        }
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}

/* Every string value (not key) of the tree, expanded: each list of
 * siblings walked in turn, the lists below them kept on a stack (the
 * templates are this file's: 256 pending lists is far more than any
 * holds). */
static int fill(cJSON *root, const struct placeholder *ph, size_t n_ph) {
        cJSON *pending[256];
        size_t n = 0;

        pending[n++] = root;
        while (n > 0) {
                for (cJSON *item = pending[--n]; item; item = item->next) {
                        if (cJSON_IsString(item) && strchr(item->valuestring, '@')) {
                                _cleanup_free_ char *v = NULL;
                                int r = expand(item->valuestring, ph, n_ph, &v);
                                if (r < 0)
                                        return r;
                                if (!cJSON_SetValuestring(item, v))
                                        return -ENOMEM;
                        }
                        if (item->child) {
                                if (n == ELEMENTSOF(pending))
                                        return -E2BIG;
                                pending[n++] = item->child;
                        }
                }
        }
        return 0;
}

/* A template above, parsed and filled. */
static int from_template(const char *tmpl, const struct placeholder *ph, size_t n_ph, cJSON **ret) {
        _cleanup_free_ char *text = strdup(tmpl);
        cJSON *obj;
        int r;

        if (!text)
                return -ENOMEM;
        for (char *p = text; *p; p++)
                if (*p == '\'')
                        *p = '"';
        obj = cJSON_Parse(text);
        /* The templates are this file's own: one that does not parse is
         * a bug the manifests test catches. */
        if (!obj)
                return -EINVAL;
        r = fill(obj, ph, n_ph);
        if (r < 0) {
                cJSON_Delete(obj);
                return r;
        }
        *ret = obj;
        return 0;
}

#define NODE_NAME_KEY "\"authentication.kubernetes.io/node-name\""

/* The policy's CEL, with the namespace and driver in it: both are DNS
 * names (checked before), so they stand in CEL string literals as they
 * are. Then the two objects, appended to docs. */
static int node_fence(const char *ns, const char *driver, cJSON *docs) {
        _cleanup_free_ char *user = NULL, *same_driver = NULL, *other_driver = NULL;
        /* A token without the node (a cluster before 1.30, or the gate
         * turned off) yields "", which the first validation refuses. */
        static const char node[] =
                "has(request.userInfo.extra) && " NODE_NAME_KEY " in request.userInfo.extra && "
                "size(request.userInfo.extra[" NODE_NAME_KEY "]) > 0 ? "
                "request.userInfo.extra[" NODE_NAME_KEY "][0] : \"\"";

        if (xasprintf(&user, "request.userInfo.username == \"system:serviceaccount:%s:cdiplug\"",
                      ns) < 0 ||
            xasprintf(&same_driver, "variables.slice.spec.driver == \"%s\"", driver) < 0 ||
            xasprintf(&other_driver,
                      "cdiplug's service account may write only ResourceSlices of driver %s",
                      driver) < 0)
                return -ENOMEM;
        const struct placeholder ph[] = {
                { "@NS@", ns },
                { "@CEL_USER@", user },
                { "@CEL_NODE@", node },
                /* On DELETE the request has no object: the slice being
                 * deleted is the old one. */
                { "@CEL_SLICE@", "request.operation == \"DELETE\" ? oldObject : object" },
                { "@CEL_HAS_NODE@", "variables.nodeName != \"\"" },
                { "@CEL_SAME_NODE@", "has(variables.slice.spec.nodeName) && "
                                     "variables.slice.spec.nodeName == variables.nodeName" },
                { "@CEL_DRIVER@", same_driver },
                { "@MSG_NO_NODE@",
                  "the service account token names no node "
                  "(authentication.kubernetes.io/node-name), so no ResourceSlice write is "
                  "allowed: Kubernetes 1.30 and later put the node into pod-bound tokens "
                  "(ServiceAccountTokenPodNodeInfo); a token issued before the upgrade is "
                  "replaced within the hour" },
                { "@MSG_OTHER_NODE@", "\"cdiplug on node \" + variables.nodeName + "
                                      "\" may write only ResourceSlices whose spec.nodeName is "
                                      "that node\"" },
                { "@MSG_OTHER_DRIVER@", other_driver },
        };
        for (size_t i = 0; i < ELEMENTSOF(node_fence_objects); i++) {
                cJSON *obj = NULL;
                int r = from_template(node_fence_objects[i], ph, ELEMENTSOF(ph), &obj);
                if (r < 0)
                        return r;
                cJSON_AddItemToArray(docs, obj);
        }
        return 0;
}

static bool is_dns_label(const char *s, size_t len) {
        if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

/* A DeviceClass's name (a DNS subdomain, <= 253) for resource
 * "domain/name": "<name>.<domain>" with the name part lowercased and '_'
 * made '-' ("example.com/serial" → "serial.example.com"); when that is
 * no DNS subdomain (the name part holds "..", or a label starting or
 * ending in '-') or is too long: "cdiplug-<FNV-1a 32 of the resource name,
 * 8 hex>.<domain>", or without the domain when even that is too long. */
static int device_class_name(const char *resource, char **ret) {
        const char *slash = strchr(resource, '/');
        _cleanup_free_ char *name = NULL;
        bool ok = true;
        size_t len;

        if (!slash)
                return -EINVAL;
        if (xasprintf(&name, "%s.%.*s", slash + 1, (int)(slash - resource), resource) < 0)
                return -ENOMEM;
        len = strlen(name);
        for (size_t i = 0; name[i]; i++) {
                if (name[i] >= 'A' && name[i] <= 'Z')
                        name[i] = (char)(name[i] - 'A' + 'a');
                else if (name[i] == '_')
                        name[i] = '-';
        }
        ok = len <= 253;
        for (size_t start = 0; ok && start < len;) {
                size_t end = start + strcspn(name + start, ".");
                ok = is_dns_label(name + start, end - start);
                start = end + 1;
        }
        if (!ok) {
                uint32_t h = base_fnv1a32(resource);
                free(name);
                name = NULL;
                if (xasprintf(&name, "cdiplug-%08x.%.*s", h, (int)(slash - resource), resource) < 0)
                        return -ENOMEM;
                if (strlen(name) > 253)
                        name[strlen("cdiplug-") + 8] = '\0';
        }
        *ret = TAKE_PTR(name);
        return 0;
}

static int device_class(const char *driver, const char *resource, const char *name, cJSON **ret) {
        _cleanup_free_ char *cel = NULL;
        cJSON *dc = cJSON_CreateObject(), *meta, *spec, *sel, *labels;

        /* The driver (a DNS subdomain) and the resource name (letters,
         * digits, '-', '_', '.', '/') hold no quote or backslash, so they
         * stand in CEL string literals as they are. */
        if (xasprintf(&cel,
                      "device.driver == \"%s\" && device.attributes[\"%s\"].resource == \"%s\"",
                      driver, driver, resource) < 0) {
                cJSON_Delete(dc);
                return -ENOMEM;
        }
        cJSON_AddStringToObject(dc, "apiVersion", "resource.k8s.io/v1");
        cJSON_AddStringToObject(dc, "kind", "DeviceClass");
        meta = cJSON_AddObjectToObject(dc, "metadata");
        cJSON_AddStringToObject(meta, "name", name);
        labels = cJSON_AddObjectToObject(meta, "labels");
        cJSON_AddStringToObject(labels, "app.kubernetes.io/name", "cdiplug");
        spec = cJSON_AddObjectToObject(dc, "spec");
        sel = cJSON_AddArrayToObject(spec, "selectors");
        cJSON *cel_obj = cJSON_CreateObject();
        cJSON_AddItemToArray(sel, cel_obj);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(cel_obj, "cel"), "expression", cel);
        /* Pods that ask for "example.com/serial: 1" get a device of this
         * class (DRAExtendedResource: alpha in 1.34, beta and on in 1.36). */
        cJSON_AddStringToObject(spec, "extendedResourceName", resource);
        /* cJSON's adders leave a field out when memory runs out; the
         * last one present says none did. */
        if (!cJSON_GetObjectItemCaseSensitive(spec, "extendedResourceName") ||
            !cJSON_GetObjectItemCaseSensitive(labels, "app.kubernetes.io/name") ||
            !cJSON_GetObjectItemCaseSensitive(meta, "name") ||
            !cJSON_GetObjectItemCaseSensitive(dc, "kind") || !cJSON_GetArrayItem(sel, 0) ||
            !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cel_obj, "cel"),
                                              "expression")) {
                cJSON_Delete(dc);
                return -ENOMEM;
        }
        *ret = dc;
        return 0;
}

/* One document: "---", then the object as indented JSON. cJSON indents
 * with tabs, which YAML refuses as indentation; a raw tab only ever
 * appears there (and after a key's colon), since cJSON escapes every
 * control character inside strings. */
static int print_doc(FILE *out, const cJSON *obj) {
        _cleanup_free_ char *text = cJSON_Print(obj);

        if (!text)
                return -ENOMEM;
        fputs("---\n", out);
        for (const char *p = text; *p; p++) {
                if (*p != '\t')
                        fputc(*p, out);
                else if (p == text || p[-1] == '\n' || p[-1] == '\t')
                        fputs("  ", out);
                else
                        fputc(' ', out);
        }
        fputc('\n', out);
        return 0;
}

/* One resource per group of nodes ("nodes") under one name is one DRA
 * resource to the cluster: the first one's DeviceClass serves them all. */
static bool dra_named_before(const struct cfg_config *cfg, size_t i) {
        for (size_t j = 0; j < i; j++)
                if (cfg->resources[j].api == CFG_API_DRA &&
                    strcmp(cfg->resources[j].name, cfg->resources[i].name) == 0)
                        return true;
        return false;
}

/* The DeviceClasses, checked for two resources that would share a name:
 * 0, or the exit status, having said why. */
static int device_classes(const char *config_path, const struct cfg_config *cfg, cJSON *docs) {
        _cleanup_strv_ char **names = calloc(cfg->n_resources + 1, sizeof(char *));
        size_t n = 0;

        if (!names)
                return CLI_EXIT_FAILURE;
        for (size_t i = 0; i < cfg->n_resources; i++) {
                const struct cfg_resource *rc = &cfg->resources[i];
                cJSON *dc = NULL;

                if (rc->api != CFG_API_DRA || dra_named_before(cfg, i))
                        continue;
                if (device_class_name(rc->name, &names[n]) < 0 ||
                    device_class(cfg->dra_driver, rc->name, names[n], &dc) < 0)
                        return CLI_EXIT_FAILURE;
                cJSON_AddItemToArray(docs, dc);
                for (size_t j = 0; j < n; j++)
                        if (strcmp(names[j], names[n]) == 0) {
                                fprintf(stderr,
                                        "cdiplug: error: resources[%zu] (\"%s\") would share the "
                                        "DeviceClass name \"%s\" with an earlier DRA resource: "
                                        "rename one of them\n",
                                        i, rc->name, names[n]);
                                return CLI_EXIT_USAGE;
                        }
                n++;
        }
        if (n == 0) {
                fprintf(stderr,
                        "cdiplug: error: %s has no resource with \"api\": \"dra\" (and a \"dra\": "
                        "{\"driver\": ...} section): there is nothing to serve through DRA; "
                        "deploy/base serves device-plugin resources\n",
                        config_path);
                return CLI_EXIT_USAGE;
        }
        return 0;
}

/* Namespace: a DNS label; image: no space or control character (it goes
 * into a container spec as one word). 0 or the exit status. */
static int check_manifest_options(const struct dp_options *o, const char *kubelet_root) {
        if (!is_dns_label(o->namespace_name, strlen(o->namespace_name))) {
                fprintf(stderr,
                        "cdiplug: error: --namespace \"%s\": must be a DNS label (at most 63 "
                        "lowercase letters, digits and '-', starting and ending with a letter or "
                        "digit)\n",
                        o->namespace_name);
                return CLI_EXIT_USAGE;
        }
        for (const char *p = o->image; *p; p++)
                if ((unsigned char)*p <= ' ' || *p == 0x7f) {
                        fprintf(stderr,
                                "cdiplug: error: --image \"%s\": holds a space or a "
                                "control character\n",
                                o->image);
                        return CLI_EXIT_USAGE;
                }
        if (!*o->image) {
                fprintf(stderr, "cdiplug: error: --image must not be empty\n");
                return CLI_EXIT_USAGE;
        }
        if (kubelet_root[0] != '/') {
                fprintf(stderr,
                        "cdiplug: error: --kubelet-root \"%s\": must be an absolute path (the "
                        "host's, as hostPath volumes and the kubelet see it)\n",
                        kubelet_root);
                return CLI_EXIT_USAGE;
        }
        return 0;
}

/* Resources selected by node label: serve follows its Node's labels with
 * a watch (fieldSelector metadata.name), which needs list and watch on
 * nodes beside the get DRA's owner references need. Only then: the role
 * stays what the config needs. */
static int nodes_rbac(const struct cfg_config *cfg, cJSON *docs) {
        const cJSON *doc, *rule;

        if (!cfg->node_labels)
                return 0;
        cJSON_ArrayForEach(doc, docs) {
                const cJSON *kind = cJSON_GetObjectItemCaseSensitive(doc, "kind");
                if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "ClusterRole") != 0)
                        continue;
                cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(doc, "rules")) {
                        const cJSON *res = cJSON_GetArrayItem(
                                cJSON_GetObjectItemCaseSensitive(rule, "resources"), 0);
                        cJSON *verbs = cJSON_GetObjectItemCaseSensitive(rule, "verbs");
                        if (!cJSON_IsString(res) || strcmp(res->valuestring, "nodes") != 0)
                                continue;
                        if (!cJSON_AddItemToArray(verbs, cJSON_CreateString("list")) ||
                            !cJSON_AddItemToArray(verbs, cJSON_CreateString("watch")))
                                return CLI_EXIT_FAILURE;
                        return 0;
                }
        }
        return CLI_EXIT_FAILURE;
}

#define NFD_FEATURES_DIR "/etc/kubernetes/node-feature-discovery/features.d"

/* --nfd: NFD's local feature dir from the host, at its host path, and serve
 * told to keep its feature file there (nfd-worker reads the dir). */
static int nfd_mount(const struct dp_options *o, cJSON *ds) {
        cJSON *spec, *c, *v, *m;

        if (!o->nfd)
                return 0;
        spec = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ds, "spec"),
                                                 "template"),
                "spec");
        c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
        v = cJSON_CreateObject();
        m = cJSON_CreateObject();
        if (!v || !m || !cJSON_AddStringToObject(v, "name", "nfd-features") ||
            !cJSON_AddStringToObject(m, "name", "nfd-features") ||
            !cJSON_AddStringToObject(m, "mountPath", NFD_FEATURES_DIR)) {
                cJSON_Delete(v);
                cJSON_Delete(m);
                return CLI_EXIT_FAILURE;
        }
        cJSON *hp = cJSON_AddObjectToObject(v, "hostPath");
        if (!hp || !cJSON_AddStringToObject(hp, "path", NFD_FEATURES_DIR) ||
            !cJSON_AddStringToObject(hp, "type", "DirectoryOrCreate") ||
            !cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(spec, "volumes"), v)) {
                cJSON_Delete(v);
                cJSON_Delete(m);
                return CLI_EXIT_FAILURE;
        }
        if (!cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(c, "volumeMounts"), m)) {
                cJSON_Delete(m);
                return CLI_EXIT_FAILURE;
        }
        return cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(c, "args"),
                                    cJSON_CreateString("--nfd-features-dir=" NFD_FEATURES_DIR))
                       ? 0
                       : CLI_EXIT_FAILURE;
}

static int build(const struct dp_options *o, const struct cfg_config *cfg, const char *config_text,
                 cJSON *docs) {
        /* "/var/lib/kubelet/" and "/var/lib/kubelet" alike: the prefix
         * of the paths without a trailing '/', the option as given. */
        _cleanup_free_ char *prefix = strdup(o->kubelet_root);
        int r;

        if (!prefix)
                return CLI_EXIT_FAILURE;
        for (size_t len = strlen(prefix); len > 0 && prefix[len - 1] == '/'; len--)
                prefix[len - 1] = '\0';
        const struct placeholder ph[] = {
                { "@NS@", o->namespace_name },
                { "@IMAGE@", o->image },
                { "@KUBELET_ROOT@", *prefix ? prefix : "/" },
                { "@KUBELET@", prefix },
                { "@DP_DIR@", o->kubelet_dir },
                { "@CONFIG@", config_text },
        };
        for (size_t i = 0; i < ELEMENTSOF(fixed_objects); i++) {
                cJSON *obj = NULL;
                if (from_template(fixed_objects[i], ph, ELEMENTSOF(ph), &obj) < 0)
                        return CLI_EXIT_FAILURE;
                cJSON_AddItemToArray(docs, obj);
        }
        r = nodes_rbac(cfg, docs);
        if (r != 0)
                return r;
        r = device_classes(o->config_path, cfg, docs);
        if (r != 0)
                return r;
        if (node_fence(o->namespace_name, cfg->dra_driver, docs) < 0)
                return CLI_EXIT_FAILURE;
        cJSON *ds = NULL;
        if (from_template(daemonset, ph, ELEMENTSOF(ph), &ds) < 0)
                return CLI_EXIT_FAILURE;
        cJSON_AddItemToArray(docs, ds);
        return nfd_mount(o, ds);
}

int cli_manifests(const struct dp_options *o) {
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        cJSON *docs;
        int r;

        r = check_manifest_options(o, o->kubelet_root);
        if (r != 0)
                return r;
        /* Refused as check refuses it (exit 2, the field named). */
        r = cli_load_prepared(o, false, &cfg);
        if (r != 0)
                return r;
        cfg_free(cfg);
        cfg = NULL;
        /* The ConfigMap holds the text as written, its key order and
         * layout and all; the objects come from that same text, parsed again, so
         * the two cannot differ should the file change in between. */
        r = base_read_file_at(AT_FDCWD, o->config_path, 0, CFG_MAX_BYTES, &text, &len);
        if (r >= 0)
                r = cfg_parse(text, len, &cfg, &err);
        base_field_error_clear(&err);
        if (r < 0) {
                fprintf(stderr, "cdiplug: error: %s changed while it was read; run again\n",
                        o->config_path);
                return CLI_EXIT_FAILURE;
        }
        docs = cJSON_CreateArray();
        r = docs ? build(o, cfg, text, docs) : CLI_EXIT_FAILURE;
        cfg_free(cfg);
        if (r == 0) {
                /* Nothing is printed unless everything could be built. */
                const cJSON *doc;
                cJSON_ArrayForEach(doc, docs) {
                        if (print_doc(stdout, doc) < 0) {
                                r = CLI_EXIT_FAILURE;
                                break;
                        }
                }
                if (fflush(stdout) != 0 || ferror(stdout)) {
                        fprintf(stderr, "cdiplug: error: cannot write to stdout: %s\n",
                                strerror(errno));
                        r = CLI_EXIT_FAILURE;
                }
        } else if (r == CLI_EXIT_FAILURE)
                fprintf(stderr, "cdiplug: error: cannot build the manifests (out of memory)\n");
        cJSON_Delete(docs);
        return r;
}
