/* SPDX-License-Identifier: Apache-2.0 */
/* What prepared DRA claims hold, for retained.c: a retained spec, or a
 * device a reload no longer names, stays while a prepared claim names one
 * of its CDI devices. */
#include <string.h>

#include "cdi.h"
#include "config.h"
#include "dra.h"
#include "dra_node.h"
#include "log.h"
#include "plugin.h"
#include "serve-internal.h"

/* The prepared DRA claim that holds a CDI device of spec file file
 * (cdi_id NULL) or the device cdi_id itself, and which device; NULL when
 * none. The kubelet starts a claim's containers again with the CDI IDs
 * Prepare answered until it unprepares the claim, so those must resolve
 * whatever PodResources says (it lists running containers only). */
const struct dra_claim *dp_claim_holding(const struct dp_daemon *d, const char *file,
                                         const char *cdi_id, const char **ret_dev) {
        size_t n;
        const struct dra_claim *c = dra_node_prepared_claims(d->dra.node, &n);

        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < c[i].n_devices; k++)
                        for (char **id = c[i].devices[k].cdi_ids; *id; id++) {
                                _cleanup_free_ char *kind = NULL, *f = NULL;
                                bool hit;
                                if (cdi_id)
                                        hit = strcmp(*id, cdi_id) == 0;
                                else
                                        hit = file && (kind = strndup(*id, strcspn(*id, "="))) &&
                                              cdi_spec_file_name(kind, &f) >= 0 &&
                                              strcmp(f, file) == 0;
                                if (hit) {
                                        *ret_dev = *id;
                                        return &c[i];
                                }
                        }
        return NULL;
}

/* Whether a prepared DRA claim holds device dev of res (its CDI ID, as
 * Prepare answered it); said once per device. */
bool dp_gone_prepared(struct dp_resource *res, size_t dev) {
        _cleanup_free_ char *cdi = NULL;
        const struct dra_claim *c;
        const char *id = NULL;

        if (dp_plugin_qualified(res->plugin, dev, &cdi) < 0)
                return true; /* cannot tell: keep it */
        c = dp_claim_holding(res->d, NULL, cdi, &id);
        if (c)
                log_with(LOG_DEBUG,
                         &(struct log_fields){ .resource = res->cfg->name,
                                               .device = dp_device_id(res->plugin, dev) },
                         "resource \"%s\": device \"%s\", no longer named by the config, stays "
                         "in its CDI spec: DRA claim %s/%s is prepared with %s",
                         res->cfg->name, dp_device_id(res->plugin, dev), c->ns, c->name, id);
        return c != NULL;
}
