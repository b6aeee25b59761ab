/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug serve: the daemon. */
#include <errno.h>
#include <stdlib.h>

#include "config.h"
#include "log.h"
#include "serve.h"

#include "cli-internal.h"

/* At start the labels are not known yet: the daemon reads them from the
 * API server, when it can, and serves such a resource once they match. */
static void start_verdict(void *ctx, const struct cfg_resource *res, size_t idx,
                          enum cfg_node_verdict v, const char *why) {
        const struct dp_options *o = ctx;
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        bool creds = o->kubeconfig || (host && *host);

        if (v != CFG_NODE_UNDECIDED) {
                log_with(LOG_INFO, &(struct log_fields){ .resource = res->name },
                         "node \"%s\" %s resource \"%s\" (resources[%zu]): %s", o->node_name,
                         v == CFG_NODE_SERVES ? "serves" : "does not serve", res->name, idx, why);
                return;
        }
        log_with(creds && o->node_name ? LOG_INFO : LOG_WARN,
                 &(struct log_fields){ .resource = res->name },
                 "resource \"%s\" (resources[%zu]) is not served%s: %s%s", res->name, idx,
                 creds && o->node_name ? " yet" : "", why,
                 !o->node_name ? ""
                 : creds       ? "; reading them from the API server"
                               : ": there are no API server credentials to read them with "
                                 "(--kubeconfig, or the in-cluster service account)");
}

int cli_serve(const struct dp_options *o) {
        struct cfg_config *cfg = NULL;
        int r = cli_load_selected(o, true, start_verdict, (void *)o, &cfg);

        if (r != 0)
                return r;
        /* DRA pools are named after the node (<node>/<resource>): without
         * its name nothing could be published or prepared. */
        for (size_t i = 0; i < cfg->n_resources && !o->node_name; i++)
                if (cfg->resources[i].api == CFG_API_DRA) {
                        log_with(LOG_ERR,
                                 &(struct log_fields){ .resource = cfg->resources[i].name },
                                 "resource \"%s\" uses \"api\": \"dra\", which needs the node's "
                                 "name: pass --node-name or set NODE_NAME",
                                 cfg->resources[i].name);
                        cfg_free(cfg);
                        return CLI_EXIT_USAGE;
                }
        /* Unconfined, it stays root: the user is not used. */
        r = o->no_sandbox ? 0 : cli_resolve_user(o, cfg);
        if (r != 0) {
                cfg_free(cfg);
                return r;
        }
        log_info("cdiplug %s starting: %zu resources, kubelet dir %s, CDI dir %s", CDIPLUG_VERSION,
                 cfg->n_resources, o->kubelet_dir, o->cdi_dir);
        if (cfg->n_resources == 0)
                log_with(LOG_WARN, &(struct log_fields){ .path = o->config_path },
                         "%s configures no resources: serving nothing; add resources to it "
                         "(see cdiplug(8) and the example config.json in cdiplug's doc dir)",
                         o->config_path);
        r = dp_daemon_run(o, cfg);
        /* A socket path that cannot fit is the config's or the command
         * line's mistake, found only once the sockets are made. */
        if (r == -ENAMETOOLONG)
                return CLI_EXIT_USAGE;
        /* So is a kubeconfig (or in-cluster credentials) refused. */
        if (r == -EKEYREJECTED)
                return CLI_EXIT_USAGE;
        return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
