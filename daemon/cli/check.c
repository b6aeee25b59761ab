/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug check: the config and the devices it finds, validated. */
#include <stdio.h>

#include "config.h"
#include "log.h"
#include "plugin.h"

#include "cli-internal.h"

/* For a given node (--node-name, --node-labels): each resource with
 * "nodes", served or not, and why. Printed after the config is known to
 * be valid, so that an error stays the last word. */
struct verdicts {
        const struct dp_options *o;
        struct base_strvec lines;
        bool oom;
};

static void collect(void *ctx, const struct cfg_resource *res, size_t idx, enum cfg_node_verdict v,
                    const char *why) {
        struct verdicts *vs = ctx;
        const char *node = vs->o->node_name ? vs->o->node_name : "(no --node-name)";
        char *line = NULL;

        if (xasprintf(&line, "node \"%s\": %s \"%s\" (resources[%zu]): %s%s", node,
                      v == CFG_NODE_SERVES  ? "serves"
                      : v == CFG_NODE_SKIPS ? "does not serve"
                                            : "cannot tell whether it serves",
                      res->name, idx, why,
                      v == CFG_NODE_UNDECIDED && res->nodes->labels && !vs->o->node_labels
                              ? " (give them with --node-labels)"
                              : "") < 0 ||
            base_strvec_push(&vs->lines, line) < 0)
                vs->oom = true;
}

int cli_check(const struct dp_options *o) {
        struct verdicts vs = { .o = o };
        struct cfg_config *cfg = NULL;
        int r = cli_load_selected(o, true, collect, &vs, &cfg);

        if (r == 0)
                r = cli_resolve_user(o, cfg);
        if (r != 0) {
                base_strvec_clear(&vs.lines);
                cfg_free(cfg);
                return r;
        }
        cli_check_warnings(cfg);
        dp_check_devices(o->host_root, cfg);
        for (size_t i = 0; i < vs.lines.n; i++)
                printf("%s\n", vs.lines.v[i]);
        if (vs.oom)
                fprintf(stderr,
                        "cdiplug: warning: out of memory: some node verdicts are missing\n");
        printf("%s: valid, %zu resources%s%s%s\n", o->config_path, cfg->n_resources,
               o->node_name ? " on node \"" : "", o->node_name ? o->node_name : "",
               o->node_name ? "\"" : "");
        base_strvec_clear(&vs.lines);
        cfg_free(cfg);
        return 0;
}
