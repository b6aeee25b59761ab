/* SPDX-License-Identifier: Apache-2.0 */
#include "plugin.h"

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "resources.h"
#include "log.h"

#define MAX_OVERLAP_LINES 10

struct owner {
        const char *node;
        const char *id;
        size_t plugin;
};

static int owner_cmp(const void *a, const void *b) {
        const struct owner *x = a, *y = b;
        int c = strcmp(x->node, y->node);

        if (c)
                return c;
        return x->plugin < y->plugin ? -1 : x->plugin > y->plugin;
}

size_t dp_warn_overlaps(struct dp_plugin *const *plugins, size_t n) {
        _cleanup_free_ struct owner *o = NULL;
        size_t total = 0, k = 0, shared = 0;

        for (size_t i = 0; i < n; i++)
                total += plugins[i]->n_devs;
        if (total < 2)
                return 0;
        o = calloc(total, sizeof(*o));
        if (!o) {
                log_warn("cannot look for devices that two resources share: out of memory");
                return 0;
        }
        /* A device is its first node: two selectors that reach one node by
         * different paths (a glob and a PCI address) still find it. */
        for (size_t i = 0; i < n; i++)
                for (size_t d = 0; d < plugins[i]->n_devs; d++) {
                        /* Gone devices (plugin.h) are offered by nobody. */
                        if (plugins[i]->devs[d].n_nodes == 0 || plugins[i]->devs[d].gone)
                                continue;
                        o[k].id = dp_device_id(plugins[i], d);
                        o[k].node = dp_str_next(o[k].id);
                        o[k++].plugin = i;
                }
        qsort(o, k, sizeof(*o), owner_cmp);
        for (size_t a = 0; a < k;) {
                size_t b = a + 1;
                while (b < k && strcmp(o[b].node, o[a].node) == 0)
                        b++;
                if (o[b - 1].plugin != o[a].plugin) {
                        if (shared < MAX_OVERLAP_LINES)
                                log_with(
                                        LOG_WARN, &(struct log_fields){ .path = o[a].node },
                                        "resources \"%s\" and \"%s\" both offer device %s (IDs \"%s\" and "
                                        "\"%s\"): a pod of each can get it at once; if it is not shared on "
                                        "purpose, narrow one resource's \"match\"",
                                        plugins[o[a].plugin]->cfg->name,
                                        plugins[o[b - 1].plugin]->cfg->name, o[a].node, o[a].id,
                                        o[b - 1].id);
                        shared++;
                }
                a = b;
        }
        if (shared > MAX_OVERLAP_LINES)
                log_warn("... and %zu more devices offered by more than one resource",
                         shared - MAX_OVERLAP_LINES);
        return shared;
}

int dp_warn_list_size(const struct dp_plugin *p) {
        size_t len = 0, per_dev, room;

        if (dp_plugin_list(p, NULL, &len) < 0 || len * 2 < (size_t)DP_MAX_MESSAGE)
                return 0;
        if (len > (size_t)DP_MAX_MESSAGE) {
                log_with(
                        LOG_WARN, &(struct log_fields){ .resource = p->cfg->name },
                        "resource \"%s\": its device list of %zu IDs (%zu devices x %u shares) is %zu bytes, "
                        "over the kubelet's message limit of %zu bytes (4 MiB): serve will refuse to send it; "
                        "lower \"shares\" or narrow \"match\"",
                        p->cfg->name, p->n_ids, p->n_devs, p->cfg->shares, len,
                        (size_t)DP_MAX_MESSAGE);
                return 1;
        }
        per_dev = p->n_devs ? len / p->n_devs : len;
        room = per_dev ? ((size_t)DP_MAX_MESSAGE - len) / per_dev : 0;
        log_with(
                LOG_WARN, &(struct log_fields){ .resource = p->cfg->name },
                "resource \"%s\": its device list of %zu IDs (%zu devices x %u shares) is %zu bytes, over half "
                "the kubelet's message limit of %zu bytes (4 MiB): about %zu more devices would pass it and "
                "serve would then refuse to send the list",
                p->cfg->name, p->n_ids, p->n_devs, p->cfg->shares, len, (size_t)DP_MAX_MESSAGE,
                room);
        return 1;
}

int dp_check_devices(const char *host_root, const struct cfg_config *cfg) {
        struct dp_plugin **plugins = calloc(cfg->n_resources + 1, sizeof(*plugins));
        size_t n = 0;
        int r = 0;

        if (!plugins)
                return -ENOMEM;
        for (; n < cfg->n_resources; n++) {
                const struct cfg_resource *rc = &cfg->resources[n];
                struct res_devlist found = { 0 };
                bool changed;

                r = dp_plugin_new(rc, &plugins[n]);
                if (r < 0)
                        break;
                r = res_discover(host_root, rc->selectors, rc->n_selectors, &found);
                if (r >= 0)
                        r = dp_plugin_update(plugins[n], &found, &changed);
                res_devlist_free(&found);
                if (r < 0) {
                        log_with(
                                LOG_WARN,
                                &(struct log_fields){
                                        .resource = rc->name, .path = host_root, .err = r },
                                "resource \"%s\": cannot discover its devices under %s: %s; devices not "
                                "checked",
                                rc->name, host_root, strerror(-r));
                        n++;
                        break;
                }
                dp_warn_list_size(plugins[n]);
        }
        if (r >= 0)
                dp_warn_overlaps(plugins, n);
        for (size_t i = 0; i < n; i++)
                dp_plugin_free(plugins[i]);
        free(plugins);
        return r;
}
