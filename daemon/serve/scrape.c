/* SPDX-License-Identifier: Apache-2.0 */
/* What the metrics endpoint reads of the runtime: the source it renders
 * /metrics and /readyz from (metrics.h), so that metrics/ needs nothing of
 * struct dp_daemon. Every read happens on the endpoint's thread under
 * d->lock, which the runtime's loops hold while they work. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "dra.h"
#include "dra_node.h"
#include "kube.h"
#include "metrics.h"
#include "serve-internal.h"

static int scrape_lock(void *ctx, const struct timespec *until) {
        struct dp_daemon *d = ctx;
        if (!until)
                return -pthread_mutex_lock(&d->lock);
        return -pthread_mutex_timedlock(&d->lock, until);
}

static void scrape_unlock(void *ctx) {
        struct dp_daemon *d = ctx;
        pthread_mutex_unlock(&d->lock);
}

static bool scrape_stopping(void *ctx) {
        const struct dp_daemon *d = ctx;
        return d->stopping;
}

static uint64_t scrape_kubelet_restarts(void *ctx) {
        const struct dp_daemon *d = ctx;
        return d->kubelet.restarts;
}

static size_t scrape_n_res(void *ctx) {
        const struct dp_daemon *d = ctx;
        return d->n_res;
}

/* A DRA resource is of use only once the scheduler can see its devices:
 * until its ResourceSlices are as wanted (the API client is the judge),
 * it is not ready, whatever the kubelet says. */
static const char *dra_unpublished(const struct dp_daemon *d, const struct dp_resource *res) {
        struct kube_stats ks;

        if (res->cfg->api != CFG_API_DRA)
                return NULL;
        if (!d->dra.kube)
                return d->dra.node ? "its ResourceSlices are not published: the API client is not "
                                     "running (see the log)"
                                   : NULL;
        kube_stats(d->dra.kube, &ks);
        return ks.pools_unpublished ? "its ResourceSlices are not (yet) as wanted on the API server"
                                    : NULL;
}

static void scrape_res(void *ctx, size_t i, struct dp_metrics_res *ret) {
        const struct dp_daemon *d = ctx;
        const struct dp_resource *res = d->res[i];
        *ret = (struct dp_metrics_res){
                .name = res->cfg->name,
                .pool = res->dra_pool,
                .dra_find = dra_device_find,
                .plugin = res->plugin,
                .stats = &res->stats,
                .streams = dp_server_streams(res),
                .registering = res->registration.call != NULL,
                .unpublished = dra_unpublished(d, res),
        };
}

_Static_assert(DP_DRA_METHODS == DRA_CALL_METHODS && DP_DRA_VERSIONS == DRA_CALL_VERSIONS &&
                       DP_DRA_OUTCOMES == DRA_CALL_OUTCOMES,
               "metrics.h and dra_node.h count the DRA calls alike");
_Static_assert(DP_DRA_API_CLASSES == KUBE_ERR_N, "metrics.h has room for every kube error class");
_Static_assert(DP_DRA_API_CODES == KUBE_CODE_N, "metrics.h has room for every kube error code");
_Static_assert(DP_KUBE_WATCHES == KUBE_WATCH_N, "metrics.h has room for every kube watch");

static void scrape_dra(void *ctx, struct dp_metrics_dra *ret) {
        const struct dp_daemon *d = ctx;
        struct dra_node_stats ns;

        *ret = (struct dp_metrics_dra){ 0 };
        if (!d->dra.node)
                return;
        ret->on = true;
        ret->accepted = dra_node_accepted(d->dra.node);
        ret->prepared = dra_node_prepared(d->dra.node);
        dra_node_stats(d->dra.node, &ns);
        memcpy(ret->calls, ns.calls, sizeof(ret->calls));
        if (!d->dra.kube)
                return;
        /* The API client's own lock, taken under d->lock: it is only ever
         * held for a copy, never across the network. */
        struct kube_stats ks;
        kube_stats(d->dra.kube, &ks);
        ret->api = true;
        for (int c = 0; c < KUBE_ERR_N; c++) {
                ret->api_errors[c] = ks.api_errors[c];
                ret->api_error_class[c] = kube_error_class_name((enum kube_error_class)c);
        }
        for (int c = 0; c < KUBE_CODE_N; c++) {
                ret->api_codes[c] = ks.api_codes[c];
                ret->api_code[c] = kube_code_name(c);
        }
        ret->publishes = ks.publishes;
        ret->publish_seconds_sum = ks.publish_seconds_sum;
        ret->publish_count = ks.publish_count;
        ret->claim_lookups = ks.claim_lookups;
        ret->slices = ks.slices;
        for (int w = 0; w < KUBE_WATCH_N; w++) {
                ret->watch_name[w] = ks.watch_on[w] ? kube_watch_name((enum kube_watch_id)w) : NULL;
                ret->watch_up[w] = ks.watch_up[w];
                ret->watch_last_up[w] = ks.watch_last_up[w];
        }
}

void dp_scrape_source(struct dp_daemon *d, struct dp_metrics_source *ret) {
        *ret = (struct dp_metrics_source){
                .ctx = d,
                .lock = scrape_lock,
                .unlock = scrape_unlock,
                .stopping = scrape_stopping,
                .kubelet_restarts = scrape_kubelet_restarts,
                .n_res = scrape_n_res,
                .res = scrape_res,
                .dra = scrape_dra,
        };
}
