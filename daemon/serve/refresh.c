/* SPDX-License-Identifier: Apache-2.0 */
/* A running resource's devices and spec brought up to date: discovery
 * again (start-up, hotplug) and the spec's retries, each pushing a changed
 * list to the open ListAndWatch streams. The rest of a resource's life is
 * resource.c. */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "plugin.h"
#include "resources.h"
#include "serve-internal.h"

/* Rediscover the resource's devices; on a change rewrite its CDI spec
 * first, so every ID the kubelet is about to see resolves. */
int dp_resource_refresh(struct dp_resource *res, bool *ret_changed) {
        struct dp_daemon *d = res->d;
        struct res_devlist found = { 0 };
        bool changed = false;
        int r;

        r = res_discover(d->opts->host_root, res->cfg->selectors, res->cfg->n_selectors, &found);
        if (r < 0) {
                log_with(LOG_ERR,
                         &(struct log_fields){
                                 .resource = res->cfg->name, .path = d->opts->host_root, .err = r },
                         "resource \"%s\": device discovery under %s failed: %s", res->cfg->name,
                         d->opts->host_root, strerror(-r));
                return r;
        }
        r = dp_plugin_update(res->plugin, &found, &changed);
        if (r >= 0)
                r = dp_notes_log(&res->logged_notes, res->cfg->name, &found, res->plugin);
        res_devlist_free(&found);
        if (r < 0)
                return r;
        /* The spec first, so every ID the kubelet is about to see
         * resolves; a failed write is retried on the timer (publish.c). */
        if (changed) {
                dp_spec_publish(res);
                size_t healthy = 0;
                for (size_t i = 0; i < res->plugin->n_devs; i++)
                        healthy += res->plugin->devs[i].healthy;
                log_with(LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": %zu devices (%zu healthy), %zu IDs", res->cfg->name,
                         res->plugin->n_devs, healthy, res->plugin->n_ids);
        }
        *ret_changed = changed;
        return 0;
}

void dp_spec_due(void *ctx) {
        struct dp_daemon *d = ctx;
        uint64_t now = dp_now_ms();

        for (size_t i = 0; i < d->n_res; i++) {
                struct dp_resource *res = d->res[i];
                uint64_t gen = res->plugin->generation;
                if (!res->spec_retry.at_ms || res->spec_retry.at_ms > now)
                        continue;
                res->spec_retry.at_ms = 0;
                if (dp_spec_publish(res) >= 0 && res->plugin->generation != gen)
                        dp_server_push(res);
        }
        dp_spec_timer_set(d);
}
