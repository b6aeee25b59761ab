/* SPDX-License-Identifier: Apache-2.0 */
/* Device health for the kubelet's health services (KEP-4680): every
 * device a slice may have offered, with its state now. */
#include <stdio.h>
#include <string.h>

#include "model-internal.h"

/* Why an ID is not Healthy, for DeviceHealth.message. */
static const char *why(const struct dp_plugin *p, size_t i) {
        const struct dp_device *d = &p->devs[dp_plugin_id_dev(p, i)];

        if (d->gone)
                return "no longer offered: the config does not name it";
        if (p->held && !d->in_spec)
                return "not offered: its CDI spec could not be written";
        if (!d->healthy)
                return "not found: its device nodes are gone";
        return "the CDI spec on disk has other nodes for it: it could not be rewritten";
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
        for (size_t i = 0; i < p->n_ids; i++) {
                /* A dropped ID's name is another ID's: never published. */
                if (names.dropped[i])
                        continue;
                h[n].id = i;
                snprintf(h[n].name, sizeof(h[n].name), "%s", dra_names_get(&names, i));
                h[n].healthy = dra_listing(p, i) == DRA_HEALTHY;
                h[n].message = h[n].healthy ? NULL : why(p, i);
                n++;
        }
        dra_names_clear(&names);
        *ret = h;
        *ret_n = n;
        return 0;
}
