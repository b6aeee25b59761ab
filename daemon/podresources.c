/* SPDX-License-Identifier: Apache-2.0 */
/* Client of the kubelet's PodResources API (podresources/v1), called only
 * when /metrics is scraped: no background polling, so a daemon nobody
 * scrapes never wakes for it. One List per second at most; concurrent
 * scrapes share the answer.
 *
 * The kubelet deletes and re-creates its pod-resources socket when it
 * restarts. A channel dialled to the old socket would keep failing with
 * grpc's reconnect backoff, so the socket file's identity (device and
 * inode, and change time: a new file may get the old one's inode number
 * at once) is checked on every scrape and a new channel dialled when it
 * changed; an answer cached from the old kubelet is dropped with it. */
#include <grpc/grpc.h>
#include <string.h>
#include <sys/stat.h>

#include "metrics.h"
#include "rpc.h"
#include "util.h"

#define DP_METHOD_PODRES_LIST "/v1.PodResourcesLister/List"

void dp_podres_init(struct dp_podres *pr, const char *path) {
        memset(pr, 0, sizeof(*pr));
        pr->path = path ? strdup(path) : NULL;
}

static void drop_answer(struct dp_podres *pr) {
        if (pr->last)
                v1__list_pod_resources_response__free_unpacked(pr->last, NULL);
        pr->last = NULL;
        pr->fetched_at = 0;
}

static void drop_channel(struct dp_podres *pr) {
        if (pr->ch)
                grpc_channel_destroy(pr->ch);
        pr->ch = NULL;
}

void dp_podres_clear(struct dp_podres *pr) {
        drop_answer(pr);
        drop_channel(pr);
        free(pr->path);
        pr->path = NULL;
}

/* A channel to the socket as it is now, or NULL (no socket there). */
static grpc_channel *channel(struct dp_podres *pr, const char **ret_why) {
        struct stat st;

        if (stat(pr->path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                *ret_why = "no socket";
                drop_answer(pr);
                drop_channel(pr);
                return NULL;
        }
        uint64_t ctime_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
        if (pr->ch && ((uint64_t)st.st_dev != pr->dev || (uint64_t)st.st_ino != pr->ino ||
                       ctime_ns != pr->ctime_ns)) {
                log_debug("PodResources socket %s was re-created, dialling it again", pr->path);
                drop_answer(pr);
                drop_channel(pr);
        }
        /* A failed connect leaves the channel waiting out grpc's backoff,
         * failing every call meanwhile: dial afresh instead. */
        if (pr->ch && grpc_channel_check_connectivity_state(pr->ch, 0) == GRPC_CHANNEL_TRANSIENT_FAILURE)
                drop_channel(pr);
        if (!pr->ch) {
                pr->ch = dp_channel_unix(pr->path);
                pr->dev = (uint64_t)st.st_dev;
                pr->ino = (uint64_t)st.st_ino;
                pr->ctime_ns = ctime_ns;
        }
        if (!pr->ch)
                *ret_why = "cannot create a channel";
        return pr->ch;
}

const V1__ListPodResourcesResponse *dp_podres_list(struct dp_podres *pr) {
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        ProtobufCMessage *resp = NULL;
        _cleanup_free_ char *details = NULL;
        const char *why = NULL;
        grpc_channel *ch;
        grpc_status_code st;
        bool was_up = pr->last != NULL;
        double now = dp_mono_seconds();

        if (!pr->path)
                return NULL;
        ch = channel(pr, &why);
        if (ch && pr->last && now - pr->fetched_at < DP_PODRES_CACHE_S)
                return pr->last;
        drop_answer(pr);
        if (!ch)
                goto fail;
        st = dp_call_unary(ch, DP_METHOD_PODRES_LIST, &req.base, &v1__list_pod_resources_response__descriptor,
                           &resp, &details, DP_PODRES_DEADLINE_MS);
        if (st != GRPC_STATUS_OK) {
                why = details && *details ? details : "no answer";
                goto fail;
        }
        pr->last = (V1__ListPodResourcesResponse *)resp;
        pr->fetched_at = now;
        if (!was_up)
                log_debug("PodResources List on %s answered: %zu pods", pr->path, pr->last->n_pod_resources);
        return pr->last;
fail:
        pr->errors++;
        /* Debug only: every scrape during a kubelet outage would log. */
        log_debug("PodResources List on %s failed: %s; allocation metrics left out", pr->path, why);
        return NULL;
}
