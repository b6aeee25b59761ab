/* SPDX-License-Identifier: Apache-2.0 */
/* Prepare's answer for one claim: its allocated devices to CDI IDs. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "model-internal.h"

void dra_device_clear(struct dra_device *d) {
        if (!d)
                return;
        free(d->request);
        free(d->pool);
        free(d->device);
        base_strv_free(d->cdi_ids);
        *d = (struct dra_device){ 0 };
}

void dra_claim_clear(struct dra_claim *c) {
        if (!c)
                return;
        free(c->uid);
        free(c->ns);
        free(c->name);
        for (size_t i = 0; i < c->n_devices; i++)
                dra_device_clear(&c->devices[i]);
        free(c->devices);
        *c = (struct dra_claim){ 0 };
}

void dra_claims_free(struct dra_claim *claims, size_t n) {
        if (!claims)
                return;
        for (size_t i = 0; i < n; i++)
                dra_claim_clear(&claims[i]);
        free(claims);
}

static int refuse(char **ret_msg, const struct dra_result *res, const char *fmt, ...)
        _printf_(3, 4);

/* The claim's error: which device of which request, then why. */
static int refuse(char **ret_msg, const struct dra_result *res, const char *fmt, ...) {
        _cleanup_free_ char *why = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&why, fmt, ap) < 0)
                why = NULL;
        va_end(ap);
        if (!why ||
            xasprintf(ret_msg,
                      "request " DRA_STR_FMT ": device " DRA_STR_FMT " in pool " DRA_STR_FMT ": %s",
                      res->request, res->device, res->pool, why) < 0)
                return -ENOMEM;
        return -EINVAL;
}

static struct dra_pool *pool_of(struct dra_pool *pools, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(pools[i].name, name) == 0)
                        return &pools[i];
        return NULL;
}

static int prepare_one(struct dra_pool *pools, size_t n_pools, const struct dra_result *res,
                       struct dra_device *ret, char **ret_msg) {
        struct dra_pool *pool;
        struct dra_device d = { 0 };
        char *cdi = NULL;
        size_t id, dev;
        int r;

        if (!res->request || !res->pool || !res->device)
                return xasprintf(ret_msg, "an allocation result lacks its request, pool or "
                                          "device") < 0
                               ? -ENOMEM
                               : -EINVAL;
        pool = pool_of(pools, n_pools, res->pool);
        if (!pool)
                return refuse(ret_msg, res, "the pool is not one of this node's DRA resources");
        r = dra_index_find(&pool->index, pool->p, res->device, &id);
        if (r == -ENOENT)
                return refuse(ret_msg, res, "resource \"%s\" has no such device",
                              pool->p->cfg->name);
        if (r < 0)
                return r;
        dev = dp_plugin_id_dev(pool->p, id);
        /* The same refusals as Allocate's: a device the config no longer
         * names is not ours to hand out, and one the spec on disk lacks
         * would not resolve in the runtime. */
        if (pool->p->devs[dev].gone)
                return refuse(ret_msg, res,
                              "no longer offered by resource \"%s\": the config does not name it",
                              pool->p->cfg->name);
        if (pool->p->held && !pool->p->devs[dev].in_spec)
                return refuse(ret_msg, res,
                              "not offered by resource \"%s\": its CDI spec could not be "
                              "written yet",
                              pool->p->cfg->name);
        r = dp_plugin_qualified(pool->p, dev, &cdi);
        if (r < 0)
                return r;
        d.cdi_ids = calloc(2, sizeof(*d.cdi_ids));
        /* With prioritized lists the scheduler records "<request>/<subrequest>";
         * the kubelet matches request_names against the container's claim
         * request, which names the base request only. */
        d.request = strndup(res->request, strcspn(res->request, "/"));
        d.pool = strdup(res->pool);
        d.device = strdup(res->device);
        if (!d.cdi_ids || !d.request || !d.pool || !d.device) {
                free(cdi);
                dra_device_clear(&d);
                return -ENOMEM;
        }
        d.cdi_ids[0] = cdi;
        *ret = d;
        return 0;
}

int dra_prepare_devices(struct dra_pool *pools, size_t n_pools, const struct dra_result *results,
                        size_t n_results, struct dra_device **ret, size_t *ret_n, char **ret_msg) {
        struct dra_device *devs;
        int r = 0;

        if (n_results > DRA_MAX_RESULTS)
                return xasprintf(ret_msg, "%zu devices allocated, more than the %d allowed",
                                 n_results, DRA_MAX_RESULTS) < 0
                               ? -ENOMEM
                               : -EINVAL;
        devs = calloc(n_results + 1, sizeof(*devs));
        if (!devs)
                return -ENOMEM;
        for (size_t i = 0; r >= 0 && i < n_results; i++)
                r = prepare_one(pools, n_pools, &results[i], &devs[i], ret_msg);
        if (r < 0) {
                for (size_t i = 0; i < n_results; i++)
                        dra_device_clear(&devs[i]);
                free(devs);
                return r;
        }
        *ret = devs;
        *ret_n = n_results;
        return 0;
}
