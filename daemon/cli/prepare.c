/* SPDX-License-Identifier: Apache-2.0 */
/* The config as the commands load it: parsed, its names worked out, the
 * serving identity resolved; what fails is printed here. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "dra.h"
#include "log.h"
#include "resources.h"
#include "sandbox.h"

#include "cli-internal.h"

static void cJSON_Delete_p(cJSON **p) {
        cJSON_Delete(*p);
}

static int load_config(const struct dp_options *o, struct cfg_config **ret) {
        struct base_field_error err = { 0 };
        int r = cfg_load(o->config_path, ret, &err);

        if (r < 0 && err.msg) {
                if (err.field && *err.field)
                        fprintf(stderr, "cdiplug: error: %s: %s: %s\n", o->config_path, err.field,
                                err.msg);
                else
                        fprintf(stderr, "cdiplug: error: %s: %s\n", o->config_path, err.msg);
        } else if (r < 0)
                fprintf(stderr, "cdiplug: error: %s: %s\n", o->config_path, strerror(-r));
        base_field_error_clear(&err);
        return r;
}

/* Valid, but probably not what the operator meant: said, not refused. */
void cli_check_warnings(const struct cfg_config *cfg) {
        for (size_t i = 0; i < cfg->n_resources; i++)
                for (size_t j = 0; j < cfg->resources[i].n_selectors; j++) {
                        const char *field = NULL;
                        const char *w =
                                res_selector_warning(cfg->resources[i].selectors[j], &field);
                        if (w)
                                fprintf(stderr,
                                        "cdiplug: warning: resources[%zu].match[%zu].%s: %s\n",
                                        cfg->resources[i].index, j, field, w);
                }
}

int cli_node_labels(const struct dp_options *o, cJSON **ret) {
        _cleanup_free_ char *copy = NULL;
        cJSON *obj;
        char *save = NULL;

        *ret = NULL;
        if (!o->node_labels)
                return 0;
        copy = strdup(o->node_labels);
        obj = cJSON_CreateObject();
        if (!copy || !obj) {
                cJSON_Delete(obj);
                fprintf(stderr, "cdiplug: error: out of memory\n");
                return CLI_EXIT_FAILURE;
        }
        for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(kv, '=');
                const char *problem;
                if (eq)
                        *eq = '\0';
                problem = !eq ? "must be KEY=VALUE" : cfg_label_key_problem(kv);
                if (!problem)
                        problem = cfg_label_value_problem(eq + 1);
                if (!problem && cJSON_GetObjectItemCaseSensitive(obj, kv))
                        problem = "the key is given twice";
                if (problem) {
                        fprintf(stderr, "cdiplug: error: --node-labels: \"%s\": %s\n", kv, problem);
                        cJSON_Delete(obj);
                        return CLI_EXIT_USAGE;
                }
                if (!cJSON_AddStringToObject(obj, kv, eq + 1)) {
                        cJSON_Delete(obj);
                        fprintf(stderr, "cdiplug: error: out of memory\n");
                        return CLI_EXIT_FAILURE;
                }
        }
        *ret = obj;
        return 0;
}

static void say_verdict(void *ctx, const struct cfg_resource *res, size_t idx,
                        enum cfg_node_verdict v, const char *why) {
        const struct dp_options *o = ctx;
        const char *node = o->node_name ? o->node_name : "(no name)";

        if (v == CFG_NODE_SERVES)
                log_with(LOG_INFO, &(struct log_fields){ .resource = res->name },
                         "node \"%s\" serves resource \"%s\" (resources[%zu]): %s", node, res->name,
                         idx, why);
        else
                log_with(v == CFG_NODE_SKIPS ? LOG_INFO : LOG_WARN,
                         &(struct log_fields){ .resource = res->name },
                         "node \"%s\" does not serve resource \"%s\" (resources[%zu]): %s%s", node,
                         res->name, idx, why,
                         v == CFG_NODE_UNDECIDED && o->node_labels == NULL && res->nodes->labels
                                 ? " (give them with --node-labels; serve reads them from the "
                                   "API server)"
                                 : "");
}

int cli_select(const struct dp_options *o, struct cfg_config *cfg, const cJSON *labels,
               cfg_select_fn *fn, void *ctx) {
        struct base_field_error err = { 0 };
        int r = cfg_nodes_select(cfg, o->node_name, labels, fn ? fn : say_verdict,
                                 fn ? ctx : (void *)o, &err);

        if (r == -EINVAL)
                fprintf(stderr, "cdiplug: error: %s: %s: %s\n", o->config_path,
                        err.field ? err.field : "", err.msg ? err.msg : "invalid");
        else if (r < 0)
                fprintf(stderr, "cdiplug: error: %s: %s\n", o->config_path, strerror(-r));
        base_field_error_clear(&err);
        return r == -EINVAL ? CLI_EXIT_USAGE : r < 0 ? CLI_EXIT_FAILURE : 0;
}

/* The config, loaded and its names worked out as serve would: 0, or the
 * exit status (2: the config is wrong, 1: something else failed). */

static void drop_same_names(struct cfg_config *cfg);

/* The DRA driver's socket paths, worked out as serve binds them (its
 * kubelet root, its instance): what does not fit is a config error here
 * rather than a failure once serving. */
static int check_dra_sockets(const struct dp_options *o, const struct cfg_config *cfg) {
        struct dra_socket_paths p;
        _cleanup_free_ char *msg = NULL;
        int r;

        if (!cfg->dra_driver)
                return 0;
        r = dra_socket_paths(o->kubelet_root, cfg->dra_driver, o->instance, &p, &msg);
        if (r == -ENAMETOOLONG) {
                fprintf(stderr, "cdiplug: error: %s: dra.driver \"%s\": %s\n", o->config_path,
                        cfg->dra_driver, msg ? msg : strerror(-r));
                return CLI_EXIT_USAGE;
        }
        if (r < 0) {
                fprintf(stderr, "cdiplug: error: %s\n", strerror(-r));
                return CLI_EXIT_FAILURE;
        }
        dra_socket_paths_clear(&p);
        return 0;
}

static int load_prepared(const struct dp_options *o, bool sockets, bool select, cfg_select_fn *fn,
                         void *ctx, struct cfg_config **ret) {
        _cleanup_(cJSON_Delete_p) cJSON *labels = NULL;
        struct cfg_config *cfg = NULL;
        int r;

        r = select ? cli_node_labels(o, &labels) : 0;
        if (r != 0)
                return r;
        if (load_config(o, &cfg) < 0)
                return CLI_EXIT_USAGE;
        if (o->log_format == CFG_LOG_UNSET)
                log_set_json(cfg->log_format == CFG_LOG_JSON);
        if (select)
                r = cli_select(o, cfg, labels, fn, ctx);
        else
                drop_same_names(cfg);
        if (r != 0) {
                cfg_free(cfg);
                return r;
        }
        r = dp_names_prepare_instance(cfg, o->kubelet_dir, o->instance, sockets);
        if (r < 0) {
                if (r != -EINVAL)
                        log_with(LOG_ERR, &(struct log_fields){ .path = o->config_path, .err = r },
                                 "%s: %s", o->config_path, strerror(-r));
                cfg_free(cfg);
                return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
        }
        r = sockets ? check_dra_sockets(o, cfg) : 0;
        if (r != 0) {
                cfg_free(cfg);
                return r;
        }
        *ret = cfg;
        return 0;
}

/* The identity serve switches to (--user over the config's "user"),
 * resolved now with the resolver the lock-down uses: check finds what
 * serve would stumble on, and serve stops before it opens anything. */
int cli_resolve_user(const struct dp_options *o, const struct cfg_config *cfg) {
        const char *user = o->user ? o->user : cfg->user, *problem = NULL;
        struct sbx_options ids;
        int r;

        if (!user)
                return 0;
        r = sbx_resolve_user(user, &ids, &problem);
        if (r >= 0)
                return 0;
        if (o->user)
                fprintf(stderr, "cdiplug: error: --user \"%s\": %s\n", user,
                        problem ? problem : strerror(-r));
        else
                fprintf(stderr, "cdiplug: error: %s: user: \"%s\": %s\n", o->config_path, user,
                        problem ? problem : strerror(-r));
        /* A failed lookup (NSS unreachable) is no mistake in the config. */
        return problem ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
}
int cli_load_prepared(const struct dp_options *o, bool sockets, struct cfg_config **ret) {
        return load_prepared(o, sockets, false, NULL, NULL, ret);
}

int cli_load_selected(const struct dp_options *o, bool sockets, cfg_select_fn *fn, void *ctx,
                      struct cfg_config **ret) {
        return load_prepared(o, sockets, true, fn, ctx, ret);
}

/* The cluster's view (manifests): a name that one resource per node group
 * carries is one resource; the first stands for it. */
static void drop_same_names(struct cfg_config *cfg) {
        size_t kept = 0;

        for (size_t i = 0; i < cfg->n_resources; i++) {
                struct cfg_resource *res = &cfg->resources[i];
                bool seen = false;
                for (size_t j = 0; j < kept && !seen; j++)
                        seen = strcmp(cfg->resources[j].name, res->name) == 0;
                if (seen) {
                        cfg_resource_clear(res);
                        continue;
                }
                if (kept != i) {
                        cfg->resources[kept] = *res;
                        *res = (struct cfg_resource){ 0 };
                }
                kept++;
        }
        cfg->n_resources = kept;
}
