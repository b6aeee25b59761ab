/* SPDX-License-Identifier: Apache-2.0 */
/* Devices a reload no longer names (plugin.c's "gone"): out of the list at
 * once, so node capacity drops, but kept in the resource's CDI spec while
 * a pod may hold one, since the kubelet starts a crashed container again
 * with the CDI names it allocated. The same PodResources List that
 * decides retained specs (retained.c) decides them, device by device:
 * one that no pod holds leaves the spec with its next write. */
#include <string.h>

#include "config.h"
#include "serve-internal.h"
#include "metrics.h"
#include "plugin.h"
#include "log.h"

bool dp_gone_any(const struct dp_daemon *d) {
        for (size_t i = 0; i < d->n_res; i++)
                if (dp_plugin_has_gone(d->res[i]->plugin))
                        return true;
        return false;
}

struct held {
        const struct dp_plugin *p;
        bool *held; /* per device */
};

/* Marks every device of ours some pod holds an ID of. */
static int mark_held(void *arg, const struct dp_podres_devices *dv) {
        struct held *h = arg;
        struct dp_podres_str id;
        size_t pos = 0, dev;
        char buf[256];
        int r;

        if (!dp_podres_str_eq(dv->resource, h->p->cfg->name))
                return 0;
        while ((r = dp_podres_next_id(dv, &pos, &id)) > 0) {
                /* Longer than any ID of ours: someone else's. */
                if (id.len >= sizeof(buf))
                        continue;
                memcpy(buf, id.s, id.len);
                buf[id.len] = '\0';
                if (dp_plugin_find_id(h->p, buf, &dev) == 0)
                        h->held[dp_plugin_id_dev(h->p, dev)] = true;
        }
        return r;
}

/* One resource: its gone devices no pod holds leave its spec. Whether
 * one is still held (ask again later). */
static bool judge_resource(struct dp_resource *res, const void *wire, size_t len) {
        struct dp_plugin *p = res->plugin;
        _cleanup_free_ bool *held = calloc(p->n_devs + 1, sizeof(bool));
        _cleanup_free_ bool *forget = calloc(p->n_devs + 1, sizeof(bool));
        bool again = false, any = false;

        if (!held || !forget) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": out of memory; its gone devices stay in its CDI spec",
                         res->cfg->name);
                return true;
        }
        if (dp_podres_walk(wire, len, mark_held, &(struct held){ p, held }) < 0)
                return true; /* cannot tell: ask again */
        for (size_t i = 0; i < p->n_devs; i++) {
                if (!p->devs[i].gone)
                        continue;
                again |= held[i];
                forget[i] = !held[i];
                any |= forget[i];
        }
        if (!any)
                return again;
        _cleanup_strvec_ struct base_strvec ids = { 0 };
        for (size_t i = 0; i < p->n_devs; i++)
                if (forget[i] && base_strvec_push_dup(&ids, dp_device_id(p, i)) < 0)
                        break;
        if (ids.n != 0 && dp_plugin_forget(p, forget) < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": out of memory; its gone devices stay in its CDI spec",
                         res->cfg->name);
                return true;
        }
        /* A failed write is logged and retried on the timer (publish.c);
         * the list itself does not change. */
        bool written = dp_spec_publish(res) >= 0;
        for (size_t i = 0; i < ids.n; i++)
                log_with(LOG_INFO,
                         &(struct log_fields){ .resource = res->cfg->name,
                                               .device = ids.v[i],
                                               .path = res->d->opts->cdi_dir },
                         "resource \"%s\": device \"%s\", no longer named by the config, %s its "
                         "CDI spec in %s: no pod holds it",
                         res->cfg->name, ids.v[i], written ? "left" : "leaves",
                         res->d->opts->cdi_dir);
        return again;
}

bool dp_gone_judge(struct dp_daemon *d, const void *wire, size_t len) {
        bool again = false;

        for (size_t i = 0; i < d->n_res; i++)
                if (dp_plugin_has_gone(d->res[i]->plugin))
                        again |= judge_resource(d->res[i], wire, len);
        return again;
}
