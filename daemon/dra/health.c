/* SPDX-License-Identifier: Apache-2.0 */
/* Device health for the kubelet's health services (KEP-4680): the devices
 * the resource's slices publish while healthy, with their state now and,
 * when not healthy, what an operator can do about it. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "model-internal.h"

/* Why listed ID i is not Healthy, for DeviceHealth.message: the node the
 * selectors no longer find, or the spec that could not be rewritten. */
static int why(const struct dp_plugin *p, size_t i, char **ret) {
        size_t dev = dp_plugin_id_dev(p, i);
        const struct dp_device *d = &p->devs[dev];
        const char *node = d->n_nodes > 0 ? dp_str_next(dp_device_id(p, dev)) : "";

        if (!d->healthy)
                return xasprintf(
                        ret,
                        "device node %.200s is no longer found by the selectors of "
                        "resource \"%.100s\": it was unplugged or removed, or an attribute "
                        "it was matched on changed (cdiplug doctor explains each "
                        "selector)",
                        *node ? node : dp_device_id(p, dev), p->cfg->name);
        return xasprintf(ret,
                         "device node %.200s changed, and the CDI spec of resource \"%.100s\" on "
                         "disk still has the old one: it could not be rewritten (see the log)",
                         *node ? node : dp_device_id(p, dev), p->cfg->name);
}

void dra_health_list_free(struct dra_health *h, size_t n) {
        for (size_t i = 0; h && i < n; i++)
                free(h[i].message);
        free(h);
}

int dra_health(const struct dp_plugin *p, struct dra_health **ret, size_t *ret_n) {
        struct dra_names names;
        struct dra_health *h;
        size_t n = 0;
        int r = dra_names_build(p, &names);

        if (r < 0)
                return r;
        h = calloc(p->n_ids + 1, sizeof(*h));
        if (!h) {
                dra_names_clear(&names);
                return -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < p->n_ids; i++) {
                enum dra_listing l = dra_listing(p, i);
                /* Only what the slices publish when healthy: not a device
                 * the config no longer names, nor one the spec on disk
                 * lacks, nor an ID whose name is another's. */
                if (names.dropped[i] || l == DRA_UNLISTED)
                        continue;
                h[n].id = i;
                snprintf(h[n].name, sizeof(h[n].name), "%s", dra_names_get(&names, i));
                h[n].healthy = l == DRA_HEALTHY;
                if (!h[n].healthy)
                        r = why(p, i, &h[n].message);
                n++;
        }
        dra_names_clear(&names);
        if (r < 0) {
                dra_health_list_free(h, n);
                return -ENOMEM;
        }
        *ret = h;
        *ret_n = n;
        return 0;
}
