/* SPDX-License-Identifier: Apache-2.0 */
/* A resource's lifetime, in one place: made from its config entry
 * (dp_resource_new), its devices found again (dp_resource_refresh), its
 * settings kept past the config they came from (dp_resource_own_cfg),
 * retired by a reload (dp_resource_retire) and freed once nothing points
 * at it any more (dp_resource_maybe_free, dp_resource_free). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "config.h"
#include "log.h"
#include "plugin.h"
#include "resources.h"
#include "serve-internal.h"

int dp_resource_new(struct dp_daemon *d, const struct cfg_resource *cfg, struct dp_resource **ret) {
        struct dp_resource *res = calloc(1, sizeof(*res));
        struct sockaddr_un sa;
        int r;

        if (!res)
                return -ENOMEM;
        res->d = d;
        res->cfg = cfg;
        res->srv.listen_fd = -1;
        r = xasprintf(&res->socket_path, "%s/%s", d->opts->kubelet_dir, cfg->socket_name);
        if (r < 0)
                goto fail;
        if (strlen(res->socket_path) >= sizeof(sa.sun_path)) {
                log_with(LOG_ERR,
                         &(struct log_fields){ .resource = cfg->name, .path = res->socket_path },
                         "socket path %s is longer than a unix socket allows (%zu bytes)",
                         res->socket_path, sizeof(sa.sun_path) - 1);
                r = -ENAMETOOLONG;
                goto fail;
        }
        r = dp_plugin_new(cfg, &res->plugin);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = cfg->name, .err = r },
                         "resource \"%s\": %s", cfg->name, strerror(-r));
                goto fail;
        }
        r = res_watch_dirs(d->opts->host_root, cfg->selectors, cfg->n_selectors, &res->watch_dirs);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = cfg->name, .err = r },
                         "resource \"%s\": cannot list device dirs: %s", cfg->name, strerror(-r));
                goto fail;
        }
        *ret = res;
        return 0;
fail:
        dp_resource_free(res);
        return r;
}

void dp_resource_free(struct dp_resource *res) {
        if (!res)
                return;
        dp_plugin_free(res->plugin);
        free(res->socket_path);
        base_strv_free(res->watch_dirs);
        base_strv_free(res->logged_notes);
        dp_dra_idents_clear(&res->idents);
        free(res->dra_pool);
        cfg_resource_clear(res->life.owned_cfg);
        free(res->life.owned_cfg);
        free(res);
}

/* Settings a resource kept from an earlier config, once it follows the new one. */
void dp_resource_drop_owned(struct dp_resource *res) {
        cfg_resource_clear(res->life.owned_cfg);
        free(res->life.owned_cfg);
        res->life.owned_cfg = NULL;
}

/* Move a running resource's settings out of the config about to be freed. */
void dp_resource_own_cfg(struct dp_resource *res, struct cfg_resource *room) {
        struct cfg_resource *src = (struct cfg_resource *)res->cfg;

        *room = *src;
        *src = (struct cfg_resource){ 0 };
        dp_resource_drop_owned(res); /* emptied just now when it was src */
        res->life.owned_cfg = room;
        res->cfg = room;
        res->plugin->cfg = room;
}

/* On d->retired until its server, calls and Register are done with it:
 * its Register cancelled and its server stopping first, its settings
 * owned (dp_resource_own_cfg) as the config they are in is about to go. */
void dp_resource_retire(struct dp_resource *res) {
        struct dp_daemon *d = res->d;

        res->life.retired = true;
        res->life.next_retired = d->retired;
        d->retired = res;
}

void dp_resource_maybe_free(struct dp_resource *res) {
        struct dp_daemon *d = res->d;

        if (!res->life.retired || res->srv.state != SRV_DOWN || res->registration.call ||
            res->life.calls)
                return;
        for (struct dp_resource **pp = &d->retired; *pp; pp = &(*pp)->life.next_retired)
                if (*pp == res) {
                        *pp = res->life.next_retired;
                        break;
                }
        dp_resource_free(res);
}

void dp_retired_free_all(struct dp_daemon *d) {
        while (d->retired) {
                struct dp_resource *res = d->retired;
                d->retired = res->life.next_retired;
                dp_resource_free(res);
        }
}
