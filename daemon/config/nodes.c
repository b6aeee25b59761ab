/* SPDX-License-Identifier: Apache-2.0 */
/* A resource's "nodes": which nodes of a cluster serve it, so that one
 * config (one ConfigMap) fits every node. A node serves the resource when
 * its name matches one of the globs of "names" (fnmatch) and it carries
 * every "labels" key with that value; a part left out holds for any
 * node. Names are known from the command line; labels only from the API
 * server, so a label selector may be undecided: such a resource is not
 * served until they are known, and the caller says why. */
#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "resources.h"

#define fail base_field_error_set

/* A node name is at most 253 characters; a glob for it need be no longer. */
#define GLOB_MAX 253
#define NAMES_MAX 64
#define LABELS_MAX 64

static bool label_char(char c, bool inner) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (inner && (c == '-' || c == '_' || c == '.'));
}

/* The label name (and value) grammar: up to 63 of [A-Za-z0-9-_.],
 * alphanumeric at both ends. */
static bool label_name_ok(const char *s, size_t len) {
        if (len == 0 || len > 63)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!label_char(s[i], i > 0 && i < len - 1))
                        return false;
        return true;
}

const char *cfg_label_key_problem(const char *key) {
        const char *slash = strchr(key, '/');
        const char *name = slash ? slash + 1 : key;

        if (slash && !cfg_is_dns_subdomain(key, (size_t)(slash - key)))
                return "the prefix before '/' must be a lowercase DNS subdomain of at most 253 "
                       "characters";
        if (!label_name_ok(name, strlen(name)))
                return "the name must be 1 to 63 letters, digits, '-', '_' or '.', starting and "
                       "ending with a letter or digit (optionally after a DNS prefix and '/')";
        return NULL;
}

const char *cfg_label_value_problem(const char *value) {
        if (*value && !label_name_ok(value, strlen(value)))
                return "must be empty or 1 to 63 letters, digits, '-', '_' or '.', starting and "
                       "ending with a letter or digit";
        return NULL;
}

void cfg_nodes_free(struct cfg_nodes *n) {
        if (!n)
                return;
        base_strv_free(n->names);
        base_strv_free(n->labels);
        free(n);
}

static int parse_names(const cJSON *arr, const char *field, struct cfg_nodes *n,
                       struct base_field_error *err) {
        _cleanup_strvec_ struct base_strvec v = { 0 };
        const cJSON *it;
        size_t i = 0;

        if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0 ||
            cJSON_GetArraySize(arr) > NAMES_MAX)
                return fail(err, field, "must be an array of 1 to %d node name globs", NAMES_MAX);
        cJSON_ArrayForEach(it, arr) {
                if (!cJSON_IsString(it) || !*it->valuestring || strlen(it->valuestring) > GLOB_MAX)
                        return fail(err, field,
                                    "[%zu]: must be a node name or a glob of 1 to %d "
                                    "characters (\"gpu-*\", \"edge-[0-9]*\")",
                                    i, GLOB_MAX);
                if (base_strvec_push_dup(&v, it->valuestring) < 0)
                        return -ENOMEM;
                i++;
        }
        n->names = base_strvec_take(&v);
        return n->names ? 0 : -ENOMEM;
}

static int parse_labels(const cJSON *obj, const char *field, struct cfg_nodes *n,
                        struct base_field_error *err) {
        _cleanup_strvec_ struct base_strvec v = { 0 };
        const cJSON *it;
        const char *problem;

        if (!cJSON_IsObject(obj) || !obj->child || cJSON_GetArraySize(obj) > LABELS_MAX)
                return fail(err, field, "must be an object of 1 to %d labels, {\"KEY\": \"VALUE\"}",
                            LABELS_MAX);
        if ((it = res_json_duplicate_key(obj)))
                return fail(err, field, "\"%s\": duplicate key", it->string);
        cJSON_ArrayForEach(it, obj) {
                if ((problem = cfg_label_key_problem(it->string)))
                        return fail(err, field, "key \"%s\": %s", it->string, problem);
                if (!cJSON_IsString(it))
                        return fail(err, field, "\"%s\": the value must be a string", it->string);
                if ((problem = cfg_label_value_problem(it->valuestring)))
                        return fail(err, field, "\"%s\": value \"%s\": %s", it->string,
                                    it->valuestring, problem);
                if (base_strvec_push_dup(&v, it->string) < 0 ||
                    base_strvec_push_dup(&v, it->valuestring) < 0)
                        return -ENOMEM;
        }
        n->labels = base_strvec_take(&v);
        return n->labels ? 0 : -ENOMEM;
}

int cfg_nodes_parse(const cJSON *obj, const char *field, struct cfg_nodes **ret,
                    struct base_field_error *err) {
        _cleanup_free_ char *f_names = NULL, *f_labels = NULL;
        struct cfg_nodes *n;
        const cJSON *it;
        int r = 0;

        if (!cJSON_IsObject(obj))
                return fail(err, field,
                            "must be an object, {\"names\": [GLOB...], \"labels\": {KEY: VALUE}}");
        if ((it = res_json_duplicate_key(obj)))
                return fail(err, field, "\"%s\": duplicate key", it->string);
        cJSON_ArrayForEach(
                it, obj) if (strcmp(it->string, "names") != 0 &&
                             strcmp(it->string, "labels") !=
                                     0) return fail(err, field,
                                                    "\"%s\": unknown key (\"names\" or \"labels\")",
                                                    it->string);
        if (!obj->child)
                return fail(err, field, "must give \"names\", \"labels\" or both");
        if (xasprintf(&f_names, "%s.names", field) < 0 ||
            xasprintf(&f_labels, "%s.labels", field) < 0)
                return -ENOMEM;
        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        if ((it = cJSON_GetObjectItemCaseSensitive(obj, "names")))
                r = parse_names(it, f_names, n, err);
        if (r >= 0 && (it = cJSON_GetObjectItemCaseSensitive(obj, "labels")))
                r = parse_labels(it, f_labels, n, err);
        if (r < 0) {
                cfg_nodes_free(n);
                return r;
        }
        *ret = n;
        return 0;
}

/* Why a node fails the names: the globs, quoted, for the message. */
static int names_miss(const struct cfg_nodes *n, const char *node, char **ret) {
        _cleanup_free_ char *list = NULL;

        for (char **g = n->names; *g; g++) {
                char *more = NULL;
                if (xasprintf(&more, "%s%s\"%s\"", list ? list : "", list ? ", " : "", *g) < 0)
                        return -ENOMEM;
                free(list);
                list = more;
        }
        return xasprintf(ret, "node \"%s\" matches none of nodes.names (%s)", node, list);
}

static int labels_verdict(const struct cfg_nodes *n, const cJSON *labels, char **ret_why) {
        for (char **kv = n->labels; kv && *kv; kv += 2) {
                const cJSON *have = cJSON_GetObjectItemCaseSensitive(labels, kv[0]);
                if (!cJSON_IsString(have)) {
                        if (xasprintf(ret_why,
                                      "the node has no label \"%s\" (nodes.labels wants "
                                      "\"%s\")",
                                      kv[0], kv[1]) < 0)
                                return -ENOMEM;
                        return CFG_NODE_SKIPS;
                }
                if (strcmp(have->valuestring, kv[1]) != 0) {
                        if (xasprintf(ret_why,
                                      "the node's label \"%s\" is \"%s\", not \"%s\" as "
                                      "nodes.labels wants",
                                      kv[0], have->valuestring, kv[1]) < 0)
                                return -ENOMEM;
                        return CFG_NODE_SKIPS;
                }
        }
        return CFG_NODE_SERVES;
}

int cfg_nodes_match(const struct cfg_nodes *n, const char *node, const cJSON *labels,
                    char **ret_why) {
        bool named = false;
        int r;

        if (!n)
                return xasprintf(ret_why, "no \"nodes\": every node") < 0 ? -ENOMEM
                                                                          : CFG_NODE_SERVES;
        if (n->names && !node)
                return xasprintf(ret_why, "nodes.names needs the node's name (--node-name, "
                                          "NODE_NAME), which is not given") < 0
                               ? -ENOMEM
                               : CFG_NODE_UNDECIDED;
        for (char **g = n->names; g && *g && !named; g++)
                named = fnmatch(*g, node, 0) == 0;
        if (n->names && !named)
                return names_miss(n, node, ret_why) < 0 ? -ENOMEM : CFG_NODE_SKIPS;
        if (n->labels && !labels)
                return xasprintf(ret_why, "nodes.labels needs the node's labels, which are not "
                                          "known") < 0
                               ? -ENOMEM
                               : CFG_NODE_UNDECIDED;
        r = labels_verdict(n, labels, ret_why);
        if (r != CFG_NODE_SERVES)
                return r;
        return xasprintf(ret_why, "node \"%s\" matches nodes%s%s", node ? node : "",
                         n->names ? ".names" : "",
                         n->labels ? (n->names ? " and nodes.labels" : ".labels") : "") < 0
                       ? -ENOMEM
                       : CFG_NODE_SERVES;
}

int cfg_nfd_parse(const cJSON *obj, char **ret_dir, struct base_field_error *err) {
        const cJSON *it;

        if (!cJSON_IsObject(obj))
                return fail(err, "nfd", "must be an object, {\"features_dir\": \"DIR\"}");
        cJSON_ArrayForEach(it, obj) if (strcmp(it->string, "features_dir") != 0) return fail(
                err, "nfd", "\"%s\": unknown key (\"features_dir\")", it->string);
        if ((it = res_json_duplicate_key(obj)))
                return fail(err, "nfd", "\"%s\": duplicate key", it->string);
        it = cJSON_GetObjectItemCaseSensitive(obj, "features_dir");
        if (!it)
                return fail(err, "nfd.features_dir", "is required");
        if (!cJSON_IsString(it) || it->valuestring[0] != '/')
                return fail(err, "nfd.features_dir",
                            "must be an absolute path, e.g. "
                            "\"/etc/kubernetes/node-feature-discovery/features.d\"");
        *ret_dir = strdup(it->valuestring);
        return *ret_dir ? 0 : -ENOMEM;
}
