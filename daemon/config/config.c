/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "resources.h"
#include "log.h"

/* Every refusal names its field (base_field_error). */
#define fail base_field_error_set

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

const char *cfg_resource_name_problem(const char *name) {
        const char *slash = strchr(name, '/');
        size_t dlen, nlen;

        if (!slash)
                return "must be <domain>/<name>, e.g. example.com/serial";
        dlen = (size_t)(slash - name);
        if (!cfg_is_dns_subdomain(name, dlen))
                return "domain must be a lowercase DNS subdomain";
        if ((dlen == 13 && strncmp(name, "kubernetes.io", 13) == 0) ||
            (dlen > 14 && strncmp(slash - 14, ".kubernetes.io", 14) == 0))
                return "the kubernetes.io domain is reserved for native resources";
        if (strncmp(name, "requests.", 9) == 0)
                return "must not start with \"requests.\"";
        nlen = strlen(slash + 1);
        if (nlen == 0 || nlen > 63)
                return "name part must be 1 to 63 characters";
        for (const char *p = slash + 1; *p; p++)
                if (!is_alnum(*p) && *p != '-' && *p != '_' && *p != '.')
                        return "name part may hold only letters, digits, '-', '_' and '.'";
        if (!is_alnum(slash[1]) || !is_alnum(slash[nlen]))
                return "name part must start and end with a letter or digit";
        return NULL;
}

const char *cfg_driver_name_problem(const char *name) {
        char lower[CFG_MAX_DRIVER + 1];
        size_t len = strlen(name);

        if (len == 0)
                return "must not be empty";
        if (len > CFG_MAX_DRIVER)
                return "must be at most 63 characters";
        /* The API lowercases before it checks: "Example.com" is a valid
         * driver name there, so it is here. */
        for (size_t i = 0; i <= len; i++)
                lower[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
        if (!cfg_is_dns_subdomain(lower, len))
                return "must be a DNS subdomain: labels of letters, digits and '-', separated by "
                       "'.', each starting and ending with a letter or digit, e.g. "
                       "cdiplug.example.com";
        return NULL;
}

const char *cfg_node_name_problem(const char *name) {
        if (!cfg_is_dns_subdomain(name, strlen(name)))
                return "must be a DNS subdomain (lowercase letters, digits, '-' and '.', "
                       "at most 253 characters)";
        return NULL;
}

const char *cfg_api_name(enum cfg_api api) {
        return api == CFG_API_DRA ? "dra" : "device-plugin";
}

static int parse_modes(const cJSON *arr, const char *field, unsigned *ret,
                       struct base_field_error *err) {
        static const struct {
                const char *name;
                unsigned bit;
        } modes[] = {
                { "cdi-cri", CFG_ALLOC_CDI_CRI },
                { "cdi-annotations", CFG_ALLOC_CDI_ANNOTATIONS },
                { "device-specs", CFG_ALLOC_DEVICE_SPECS },
        };
        unsigned bits = 0;
        size_t i = 0;
        const cJSON *m;

        if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
                return fail(
                        err, field,
                        "must be a non-empty array of \"cdi-cri\", \"cdi-annotations\", \"device-specs\"");
        cJSON_ArrayForEach(m, arr) {
                size_t k;
                for (k = 0; k < ELEMENTSOF(modes); k++)
                        if (cJSON_IsString(m) && strcmp(m->valuestring, modes[k].name) == 0)
                                break;
                if (k == ELEMENTSOF(modes)) {
                        _cleanup_free_ char *f = NULL;
                        if (xasprintf(&f, "%s[%zu]", field, i) < 0)
                                return -ENOMEM;
                        return fail(
                                err, f,
                                "unknown allocate mode (expected \"cdi-cri\", \"cdi-annotations\" or \"device-specs\")");
                }
                bits |= modes[k].bit;
                i++;
        }
        *ret = bits;
        return 0;
}

static int parse_match(const cJSON *match, const char *field, struct cfg_resource *res,
                       struct base_field_error *err) {
        const cJSON *entry;
        size_t i = 0;

        if (!cJSON_IsArray(match) || cJSON_GetArraySize(match) == 0)
                return fail(err, field, "must be a non-empty array of selectors");
        res->selectors = calloc((size_t)cJSON_GetArraySize(match), sizeof(*res->selectors));
        if (!res->selectors)
                return -ENOMEM;
        cJSON_ArrayForEach(entry, match) {
                struct base_field_error sub = { 0 };
                int r = res_selector_parse(entry, &res->selectors[i], &sub);
                if (r == -EINVAL) {
                        _cleanup_free_ char *f = NULL;
                        if (xasprintf(&f, "%s[%zu]%s%s", field, i,
                                      sub.field && *sub.field ? "." : "",
                                      sub.field ? sub.field : "") < 0)
                                r = -ENOMEM;
                        else
                                r = fail(err, f, "%s", sub.msg ? sub.msg : "invalid selector");
                        base_field_error_clear(&sub);
                        return r;
                }
                if (r < 0)
                        return r;
                res->n_selectors = ++i;
        }
        return 0;
}

enum cfg_log_format cfg_log_format_parse(const char *s) {
        return strcmp(s, "text") == 0   ? CFG_LOG_TEXT
               : strcmp(s, "json") == 0 ? CFG_LOG_JSON
                                        : CFG_LOG_UNSET;
}

/* Printed in document order: a reordered resource counts as changed,
 * which costs a re-discovery, never a wrong answer. "api" is a device
 * setting (the other API needs another front end), written the same way
 * whether it was left out or said "device-plugin". */
static int settings_json(const cJSON *obj, enum cfg_api api, char **ret) {
        cJSON *copy = cJSON_Duplicate(obj, true);
        char *s;

        if (!copy)
                return -ENOMEM;
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "allocate");
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "policy");
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "api");
        /* Which nodes serve it decides whether it is served, not its devices. */
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "nodes");
        if (api != CFG_API_DEVICE_PLUGIN &&
            !cJSON_AddStringToObject(copy, "api", cfg_api_name(api))) {
                cJSON_Delete(copy);
                return -ENOMEM;
        }
        s = cJSON_PrintUnformatted(copy);
        cJSON_Delete(copy);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int parse_policy(const cJSON *policy, const char *f, enum cfg_policy *ret,
                        struct base_field_error *err) {
        static const char *const names[] = { [CFG_POLICY_PACKED] = "packed",
                                             [CFG_POLICY_SPREAD] = "spread",
                                             [CFG_POLICY_NONE] = "none" };
        size_t k;
        for (k = 0; k < ELEMENTSOF(names); k++)
                if (cJSON_IsString(policy) && strcmp(policy->valuestring, names[k]) == 0)
                        break;
        if (k == ELEMENTSOF(names))
                return fail(err, f, "must be \"packed\", \"spread\" or \"none\"");
        *ret = (enum cfg_policy)k;
        return 0;
}

/* The keys of each object of the config: key tables, indexed by the
 * slot split_keys puts the member in. */
enum {
        DOC_RESOURCES,
        DOC_ALLOCATE,
        DOC_USER,
        DOC_METRICS,
        DOC_LOG_FORMAT,
        DOC_DRA,
        DOC_NFD,
        DOC_KEYS
};
static const char *const doc_keys[DOC_KEYS] = {
        [DOC_RESOURCES] = "resources",
        [DOC_ALLOCATE] = "allocate",
        [DOC_USER] = "user",
        [DOC_METRICS] = "metrics",
        [DOC_LOG_FORMAT] = "log_format",
        [DOC_DRA] = "dra",
        [DOC_NFD] = "nfd",
};

enum { RES_NAME, RES_MATCH, RES_SHARES, RES_ALLOCATE, RES_POLICY, RES_API, RES_NODES, RES_KEYS };
static const char *const resource_keys[RES_KEYS] = {
        [RES_NAME] = "name",         [RES_MATCH] = "match",   [RES_SHARES] = "shares",
        [RES_ALLOCATE] = "allocate", [RES_POLICY] = "policy", [RES_API] = "api",
        [RES_NODES] = "nodes",
};

enum { METRICS_ADDRESS, METRICS_POD_RESOURCES_SOCKET, METRICS_KEYS };
static const char *const metrics_keys[METRICS_KEYS] = {
        [METRICS_ADDRESS] = "address",
        [METRICS_POD_RESOURCES_SOCKET] = "pod_resources_socket",
};

enum { DRA_DRIVER, DRA_KEYS };
static const char *const dra_keys[DRA_KEYS] = { [DRA_DRIVER] = "driver" };

#define MAX_KEYS 8
_Static_assert(DOC_KEYS <= MAX_KEYS && RES_KEYS <= MAX_KEYS && METRICS_KEYS <= MAX_KEYS &&
                       DRA_KEYS <= MAX_KEYS,
               "split_keys has room for every table");

/* The field base.KEY, or KEY at the top (base ""). */
static int key_error(struct base_field_error *err, const char *base, const char *key,
                     const char *msg) {
        _cleanup_free_ char *f = NULL;

        if (xasprintf(&f, "%s%s%s", base, *base ? "." : "", key) < 0)
                return -ENOMEM;
        return fail(err, f, "%s", msg);
}

/* obj's members by key: ret_slots[i] is the member named keys[i], or
 * NULL. An unknown or duplicate key is an error on base.KEY. */
static int split_keys(const cJSON *obj, const char *base, const char *const *keys, size_t n,
                      const cJSON **ret_slots, struct base_field_error *err) {
        /* n <= MAX_KEYS: the tables above, checked when compiled. */
        const cJSON *slots[MAX_KEYS] = { 0 }, *it;

        if ((it = res_json_duplicate_key(obj)))
                return key_error(err, base, it->string, "duplicate key");
        cJSON_ArrayForEach(it, obj) {
                size_t i = 0;
                while (i < n && strcmp(it->string, keys[i]) != 0)
                        i++;
                if (i == n)
                        return key_error(err, base, it->string, "unknown key");
                slots[i] = it;
        }
        memcpy(ret_slots, slots, n * sizeof(*slots));
        return 0;
}

/* "resources[i]": at most 31 characters; with ".KEY" (".allocate" the
 * longest), at most 40. */
#define RES_BASE_MAX 32
#define RES_FIELD_MAX 64

/* f, and BASE.KEY written into it: the field a message about resource key
 * KEY names. */
static const char *res_field(char f[static RES_FIELD_MAX], const char *base, size_t key) {
        snprintf(f, RES_FIELD_MAX, "%s.%s", base, resource_keys[key]);
        return f;
}

/* "name": the kubelet's extended resource name, and the socket named after it. */
static int parse_resource_name(const cJSON *name, const char *f, struct cfg_resource *res,
                               struct base_field_error *err) {
        const char *problem;

        if (!name)
                return fail(err, f, "is required");
        if (!cJSON_IsString(name))
                return fail(err, f, "must be a string");
        problem = cfg_resource_name_problem(name->valuestring);
        if (problem)
                return fail(err, f, "\"%s\": %s", name->valuestring, problem);
        res->name = strdup(name->valuestring);
        if (!res->name)
                return -ENOMEM;
        return cfg_socket_name_full(res->name, &res->socket_name);
}

/* "shares": allocatable IDs per device. */
static int parse_shares(const cJSON *shares, const char *f, unsigned *ret,
                        struct base_field_error *err) {
        /* Range first: converting a double outside int's range (1e300,
         * inf) to int is undefined behaviour. The negated test also
         * refuses NaN. */
        if (!cJSON_IsNumber(shares) ||
            !(shares->valuedouble >= 1 && shares->valuedouble <= CFG_MAX_SHARES) ||
            shares->valuedouble != (double)(int)shares->valuedouble)
                return fail(err, f, "must be a whole number from 1 to %d", CFG_MAX_SHARES);
        *ret = (unsigned)shares->valuedouble;
        return 0;
}

/* "api": which kubelet API serves the resource. */
static int parse_api(const cJSON *api, const char *f, enum cfg_api *ret,
                     struct base_field_error *err) {
        if (cJSON_IsString(api) && strcmp(api->valuestring, "dra") == 0)
                *ret = CFG_API_DRA;
        else if (!cJSON_IsString(api) || strcmp(api->valuestring, "device-plugin") != 0)
                return fail(err, f, "must be \"device-plugin\" or \"dra\"");
        return 0;
}

/* The keys a resource may leave out, each to its default: how it is
 * shared, allocated and served, and by which nodes. */
static int parse_resource_options(const cJSON *const k[static RES_KEYS], const char *base,
                                  unsigned default_modes, struct cfg_resource *res,
                                  struct base_field_error *err) {
        char f[RES_FIELD_MAX];
        int r;

        res->shares = 1;
        if (k[RES_SHARES]) {
                r = parse_shares(k[RES_SHARES], res_field(f, base, RES_SHARES), &res->shares, err);
                if (r < 0)
                        return r;
        }
        if (k[RES_POLICY]) {
                r = parse_policy(k[RES_POLICY], res_field(f, base, RES_POLICY), &res->policy, err);
                if (r < 0)
                        return r;
        }
        if (k[RES_API]) {
                r = parse_api(k[RES_API], res_field(f, base, RES_API), &res->api, err);
                if (r < 0)
                        return r;
        }
        if (k[RES_NODES]) {
                r = cfg_nodes_parse(k[RES_NODES], res_field(f, base, RES_NODES), &res->nodes, err);
                if (r < 0)
                        return r;
        }
        res->alloc_modes = default_modes;
        if (k[RES_ALLOCATE])
                return parse_modes(k[RES_ALLOCATE], res_field(f, base, RES_ALLOCATE),
                                   &res->alloc_modes, err);
        return 0;
}

/* "resources[idx]": its name and devices, which it must have, then the
 * rest. */
static int parse_resource(const cJSON *obj, size_t idx, unsigned default_modes,
                          struct cfg_resource *res, struct base_field_error *err) {
        char base[RES_BASE_MAX], f[RES_FIELD_MAX];
        const cJSON *k[RES_KEYS] = { 0 };
        int r;

        snprintf(base, sizeof(base), "resources[%zu]", idx);
        if (!cJSON_IsObject(obj))
                return fail(err, base, "must be an object");
        r = split_keys(obj, base, resource_keys, RES_KEYS, k, err);
        if (r < 0)
                return r;
        r = parse_resource_name(k[RES_NAME], res_field(f, base, RES_NAME), res, err);
        if (r < 0)
                return r;
        res_field(f, base, RES_MATCH);
        if (!k[RES_MATCH])
                return fail(err, f, "is required");
        r = parse_match(k[RES_MATCH], f, res, err);
        if (r < 0)
                return r;
        r = parse_resource_options(k, base, default_modes, res, err);
        if (r < 0)
                return r;
        return settings_json(obj, res->api, &res->settings_json);
}

/* "metrics": {"address": "HOST:PORT", "pod_resources_socket": "PATH"}. */
static int parse_metrics(const cJSON *obj, struct cfg_config *cfg, struct base_field_error *err) {
        const cJSON *k[METRICS_KEYS] = { 0 }, *it;
        int r;

        if (!cJSON_IsObject(obj))
                return fail(err, "metrics", "must be an object");
        r = split_keys(obj, "metrics", metrics_keys, METRICS_KEYS, k, err);
        if (r < 0)
                return r;
        if ((it = k[METRICS_ADDRESS])) {
                struct sockaddr_storage ss;
                unsigned len;
                const char *msg = NULL;
                if (!cJSON_IsString(it))
                        return fail(err, "metrics.address",
                                    "must be a string, HOST:PORT or \"\" (off)");
                if (*it->valuestring && dp_http_parse_address(it->valuestring, &ss, &len, &msg) < 0)
                        return fail(err, "metrics.address", "\"%s\": %s", it->valuestring,
                                    msg ? msg : "invalid");
                cfg->metrics_address = strdup(it->valuestring);
                if (!cfg->metrics_address)
                        return -ENOMEM;
        }
        if ((it = k[METRICS_POD_RESOURCES_SOCKET])) {
                if (!cJSON_IsString(it) || (*it->valuestring && *it->valuestring != '/'))
                        return fail(err, "metrics.pod_resources_socket",
                                    "must be an absolute path or \"\" (no pod labels)");
                cfg->pod_resources_socket = strdup(it->valuestring);
                if (!cfg->pod_resources_socket)
                        return -ENOMEM;
        }
        return 0;
}

/* "dra": {"driver": NAME}: what the kubelet and the API server know this
 * daemon's DRA resources by. */
static int parse_dra(const cJSON *obj, struct cfg_config *cfg, struct base_field_error *err) {
        const cJSON *k[DRA_KEYS] = { 0 }, *driver;
        const char *problem;
        int r;

        if (!cJSON_IsObject(obj))
                return fail(err, "dra", "must be an object, {\"driver\": \"NAME\"}");
        r = split_keys(obj, "dra", dra_keys, DRA_KEYS, k, err);
        if (r < 0)
                return r;
        driver = k[DRA_DRIVER];
        if (!driver)
                return fail(err, "dra.driver", "is required");
        if (!cJSON_IsString(driver))
                return fail(err, "dra.driver", "must be a string");
        problem = cfg_driver_name_problem(driver->valuestring);
        if (problem)
                return fail(err, "dra.driver", "\"%s\": %s", driver->valuestring, problem);
        cfg->dra_driver = strdup(driver->valuestring);
        return cfg->dra_driver ? 0 : -ENOMEM;
}

/* "resources": each entry, then the checks between entries. */
static int parse_resources(const cJSON *resources, unsigned default_modes, struct cfg_config *cfg,
                           struct base_field_error *err) {
        const cJSON *it;
        size_t i = 0;
        int r;

        if (!resources)
                return fail(err, "resources", "is required");
        /* An empty list is valid: the packaged default serves nothing
         * until the operator adds resources (the daemon says so). */
        if (!cJSON_IsArray(resources))
                return fail(err, "resources", "must be an array");
        if (cJSON_GetArraySize(resources) > CFG_MAX_RESOURCES)
                return fail(err, "resources", "at most %d resources", CFG_MAX_RESOURCES);
        cfg->resources = calloc((size_t)cJSON_GetArraySize(resources) + 1, sizeof(*cfg->resources));
        if (!cfg->resources)
                return -ENOMEM;
        cJSON_ArrayForEach(it, resources) {
                struct cfg_resource *res = &cfg->resources[i];
                cfg->n_resources = i + 1;
                res->index = i;
                r = parse_resource(it, i, default_modes, res, err);
                if (r < 0)
                        return r;
                if (res->api == CFG_API_DRA && !cfg->dra_driver)
                        return fail(err, "dra.driver",
                                    "is required: resources[%zu] (\"%s\") has \"api\": \"dra\"", i,
                                    res->name);
                if (res->nodes && res->nodes->labels)
                        cfg->node_labels = true;
                for (size_t j = 0; j < i; j++) {
                        const char *other = cfg->resources[j].name;
                        /* parse_resource() refuses a resource without one. */
                        if (!other || !res->name)
                                continue;
                        /* One per node group: cfg_nodes_select refuses a
                         * node that would serve both. */
                        if (res->nodes && cfg->resources[j].nodes)
                                continue;
                        if (strcmp(other, res->name) == 0 ||
                            strcmp(cfg->resources[j].socket_name, res->socket_name) == 0) {
                                char f[64];
                                snprintf(f, sizeof(f), "resources[%zu].name", i);
                                return fail(err, f, "\"%s\" duplicates resources[%zu] (\"%s\")",
                                            res->name, j, other);
                        }
                }
                i++;
        }
        return 0;
}

static int parse_doc(const cJSON *doc, struct cfg_config *cfg, struct base_field_error *err) {
        const cJSON *k[DOC_KEYS] = { 0 }, *modes, *user, *log_format;
        unsigned default_modes = CFG_ALLOC_CDI_CRI;
        int r;

        if (!cJSON_IsObject(doc))
                return fail(err, "", "the configuration must be a JSON object");
        r = split_keys(doc, "", doc_keys, DOC_KEYS, k, err);
        if (r < 0)
                return r;
        modes = k[DOC_ALLOCATE];
        user = k[DOC_USER];
        log_format = k[DOC_LOG_FORMAT];
        if (k[DOC_METRICS]) {
                r = parse_metrics(k[DOC_METRICS], cfg, err);
                if (r < 0)
                        return r;
        }
        if (log_format) {
                cfg->log_format = cJSON_IsString(log_format)
                                          ? cfg_log_format_parse(log_format->valuestring)
                                          : CFG_LOG_UNSET;
                if (cfg->log_format == CFG_LOG_UNSET)
                        return fail(err, "log_format", "must be \"text\" or \"json\"");
        }
        if (modes) {
                r = parse_modes(modes, "allocate", &default_modes, err);
                if (r < 0)
                        return r;
        }
        if (user) {
                if (!cJSON_IsString(user) || !*user->valuestring)
                        return fail(err, "user", "must be a user name or UID[:GID]");
                cfg->user = strdup(user->valuestring);
                if (!cfg->user)
                        return -ENOMEM;
        }
        if (k[DOC_DRA]) {
                r = parse_dra(k[DOC_DRA], cfg, err);
                if (r < 0)
                        return r;
        }
        if (k[DOC_NFD]) {
                r = cfg_nfd_parse(k[DOC_NFD], &cfg->nfd_features_dir, err);
                if (r < 0)
                        return r;
        }
        return parse_resources(k[DOC_RESOURCES], default_modes, cfg, err);
}

/* 1-based line and column of an offset, for JSON syntax errors. */
static void position(const char *text, size_t off, unsigned *line, unsigned *col) {
        *line = 1;
        *col = 1;
        for (size_t i = 0; i < off; i++) {
                if (text[i] == '\n') {
                        (*line)++;
                        *col = 1;
                } else
                        (*col)++;
        }
}

/* cJSON decodes the escape \u0000 into a NUL that ends the C string
 * there: "example.com/a\u0000b" became "example.com/a" and a path lost
 * its "/.." tail without a word. A raw NUL byte is refused before parsing;
 * the escaped one is looked for here, in the raw text of a document cJSON
 * has accepted (so the grammar holds), tracking the JSON path to name the
 * field. Selectors are read from the same tree, so this one check covers
 * them too. */
struct json_frame {
        bool object;
        bool want_key;   /* objects: the next string is a key */
        size_t index;    /* arrays: the current element */
        const char *key; /* objects: the current key, raw, without quotes */
        size_t key_len;
};

/* Where the string starting after the quote at text[start] ends (the
 * closing quote), and whether it holds an escaped NUL. In "\\u0000" the
 * backslash is escaped and "u0000" is text: escapes are skipped whole. */
static size_t json_string_end(const char *text, size_t len, size_t start, bool *ret_nul) {
        size_t j = start;

        *ret_nul = false;
        while (j < len && text[j] != '"') {
                if (text[j] != '\\') {
                        j++;
                        continue;
                }
                if (j + 5 < len && text[j + 1] == 'u') {
                        if (memcmp(text + j + 2, "0000", 4) == 0)
                                *ret_nul = true;
                        j += 6;
                } else
                        j += 2;
        }
        return j;
}

static int json_path(const struct json_frame *frames, size_t depth, char **ret) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return -ENOMEM;
        for (size_t k = 0; k < depth; k++) {
                if (!frames[k].object)
                        fprintf(f, "[%zu]", frames[k].index);
                else if (frames[k].key)
                        fprintf(f, "%s%.*s", k > 0 ? "." : "", (int)frames[k].key_len,
                                frames[k].key);
        }
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}

static int refuse_escaped_nul(const char *text, size_t len, struct base_field_error *err) {
        _cleanup_free_ struct json_frame *frames = calloc(CJSON_NESTING_LIMIT + 1, sizeof(*frames));
        size_t depth = 0;

        if (!frames)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                struct json_frame *top = depth > 0 ? &frames[depth - 1] : NULL;
                bool nul;
                size_t end;

                switch (text[i]) {
                case '"':
                        end = json_string_end(text, len, i + 1, &nul);
                        if (top && top->object && top->want_key) {
                                top->key = text + i + 1;
                                top->key_len = end - i - 1;
                                top->want_key = false;
                        }
                        if (nul) {
                                _cleanup_free_ char *field = NULL;
                                if (json_path(frames, depth, &field) < 0)
                                        return -ENOMEM;
                                return fail(err, field,
                                            "holds the escape \\u0000, a NUL character, which "
                                            "cannot be part of a name, path or value");
                        }
                        i = end;
                        break;
                case '{':
                case '[':
                        /* cJSON refused deeper documents already. */
                        if (depth > CJSON_NESTING_LIMIT)
                                return fail(err, "", "nested too deeply");
                        frames[depth++] = (struct json_frame){ .object = text[i] == '{',
                                                               .want_key = text[i] == '{' };
                        break;
                case '}':
                case ']':
                        if (depth > 0)
                                depth--;
                        break;
                case ',':
                        if (top && top->object)
                                top->want_key = true;
                        else if (top)
                                top->index++;
                        break;
                default:
                        break;
                }
        }
        return 0;
}

int cfg_parse(const char *text, size_t len, struct cfg_config **ret, struct base_field_error *err) {
        const char *end = NULL;
        cJSON *doc;
        struct cfg_config *cfg;
        int r;

        if (len > CFG_MAX_BYTES)
                return fail(err, "", "the configuration is larger than %d bytes", CFG_MAX_BYTES);
        if (memchr(text, '\0', len))
                return fail(err, "", "the configuration holds a NUL byte");
        /* cJSON's trailing-garbage check wants the terminating NUL inside
         * the length it is given. */
        _cleanup_free_ char *copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, text, len);
        copy[len] = '\0';
        doc = cJSON_ParseWithLengthOpts(copy, len + 1, &end, true);
        if (!doc) {
                unsigned line, col;
                size_t off = end && end >= copy && end <= copy + len ? (size_t)(end - copy) : len;
                position(text, off, &line, &col);
                return fail(err, "", "invalid JSON at line %u, column %u", line, col);
        }
        r = refuse_escaped_nul(text, len, err);
        if (r < 0) {
                cJSON_Delete(doc);
                return r;
        }
        cfg = calloc(1, sizeof(*cfg));
        if (!cfg) {
                cJSON_Delete(doc);
                return -ENOMEM;
        }
        r = parse_doc(doc, cfg, err);
        cJSON_Delete(doc);
        if (r < 0) {
                cfg_free(cfg);
                return r;
        }
        *ret = cfg;
        return 0;
}

int cfg_load(const char *path, struct cfg_config **ret, struct base_field_error *err) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = base_read_file_at(AT_FDCWD, path, 0, CFG_MAX_BYTES, &buf, &len);

        if (r == -EINVAL)
                return fail(err, "", "%s is not a regular file", path);
        if (r == -EFBIG)
                return fail(err, "", "%s is larger than %d bytes", path, CFG_MAX_BYTES);
        if (r < 0) {
                fail(err, "", "cannot read %s: %s", path, strerror(-r));
                return r;
        }
        return cfg_parse(buf, len, ret, err);
}

void cfg_resource_clear(struct cfg_resource *res) {
        if (!res)
                return;
        free(res->name);
        free(res->kind);
        free(res->spec_file);
        free(res->socket_name);
        for (size_t j = 0; j < res->n_selectors; j++)
                res_selector_free(res->selectors[j]);
        free(res->selectors);
        free(res->settings_json);
        cfg_nodes_free(res->nodes);
        *res = (struct cfg_resource){ 0 };
}

void cfg_free(struct cfg_config *cfg) {
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->n_resources; i++)
                cfg_resource_clear(&cfg->resources[i]);
        free(cfg->resources);
        free(cfg->user);
        free(cfg->metrics_address);
        free(cfg->pod_resources_socket);
        free(cfg->dra_driver);
        free(cfg->nfd_features_dir);
        free(cfg);
}
