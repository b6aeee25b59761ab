/* SPDX-License-Identifier: Apache-2.0 */
/* Keeping the resources a node serves (cfg_nodes_select): the verdict of
 * nodes.c on each resource, and the config's own resources cleared
 * (config.c) for those it does not serve. Apart from both, so that the
 * parser calls down into nodes.c and nothing calls back up. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

#define fail base_field_error_set

/* Two resources of one name may both carry "nodes" (one per node group);
 * a node may serve only one of them. */
static int check_duplicates(const struct cfg_config *cfg, const size_t *orig, const char *node,
                            struct base_field_error *err) {
        for (size_t i = 0; i < cfg->n_resources; i++)
                for (size_t j = 0; j < i; j++) {
                        if (strcmp(cfg->resources[i].name, cfg->resources[j].name) != 0)
                                continue;
                        char f[64];
                        snprintf(f, sizeof(f), "resources[%zu].nodes", orig[i]);
                        return fail(err, f,
                                    "node \"%s\" would serve \"%s\" twice (resources[%zu] "
                                    "selects it too): make the two \"nodes\" exclusive",
                                    node ? node : "", cfg->resources[i].name, orig[j]);
                }
        return 0;
}

int cfg_nodes_select(struct cfg_config *cfg, const char *node, const cJSON *labels,
                     cfg_select_fn *fn, void *ctx, struct base_field_error *err) {
        _cleanup_free_ size_t *orig = calloc(cfg->n_resources + 1, sizeof(*orig));
        size_t kept = 0;

        if (!orig)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_resources; i++) {
                struct cfg_resource *res = &cfg->resources[i];
                _cleanup_free_ char *why = NULL;
                int v = CFG_NODE_SERVES;

                if (res->nodes) {
                        v = cfg_nodes_match(res->nodes, node, labels, &why);
                        if (v < 0)
                                return v;
                        if (fn)
                                fn(ctx, res, i, (enum cfg_node_verdict)v, why);
                }
                if (v != CFG_NODE_SERVES) {
                        cfg_resource_clear(res);
                        continue;
                }
                orig[kept] = i;
                if (kept != i) {
                        cfg->resources[kept] = *res;
                        *res = (struct cfg_resource){ 0 };
                }
                kept++;
        }
        cfg->n_resources = kept;
        return check_duplicates(cfg, orig, node, err);
}
