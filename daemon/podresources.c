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
 * changed; an answer cached from the old kubelet is dropped with it.
 *
 * What is kept between scrapes is the answer as it came off the wire, a
 * few bytes per allocated ID. Decoded, the same answer is thousands of
 * small objects, five to ten times its wire size: it is decoded for each
 * scrape into mapped chunks that are given back whole when the scrape is
 * done, so the decoded form neither stays resident until the next scrape
 * (Prometheus asks every 15 to 60 seconds, the cache lasts one) nor leaves
 * its holes in the heap. */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrics.h"
#include "rpc.h"
#include "util.h"

/* The first chunk holds an answer of about 1,000 IDs; each next one is
 * twice the last, so a big answer takes a few mappings, not hundreds. */
#define CHUNK_MIN (64 * 1024)

struct dp_podres_chunk {
        struct dp_podres_chunk *next;
        size_t size, used;
        max_align_t data[];
};

static void *chunk_alloc(void *data, size_t n) {
        struct dp_podres *pr = data;
        struct dp_podres_chunk *c = pr->chunks;
        size_t align = _Alignof(max_align_t), page = (size_t)sysconf(_SC_PAGESIZE);

        n = (n + align - 1) & ~(align - 1);
        if (!c || c->size - c->used < n) {
                size_t size = c ? c->size * 2 : CHUNK_MIN;
                if (n > SIZE_MAX / 2 - sizeof(*c))
                        return NULL;
                while (size - sizeof(*c) < n)
                        size *= 2;
                size = (size + page - 1) & ~(page - 1);
                /* Populated at once: a decode touches every page, and one
                 * call costs less than a fault per page. */
                void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
                if (m == MAP_FAILED)
                        return NULL;
                c = m;
                c->next = pr->chunks;
                c->size = size - sizeof(*c);
                c->used = 0;
                pr->chunks = c;
        }
        void *p = (char *)c->data + c->used;
        c->used += n;
        return p;
}

/* Everything goes at once, in dp_podres_release(). */
static void chunk_free(void *data, void *p) {
        (void)data, (void)p;
}

void dp_podres_init(struct dp_podres *pr, const char *path) {
        memset(pr, 0, sizeof(*pr));
        pr->path = path ? strdup(path) : NULL;
}

void dp_podres_release(struct dp_podres *pr) {
        while (pr->chunks) {
                struct dp_podres_chunk *c = pr->chunks;
                pr->chunks = c->next;
                munmap(c, c->size + sizeof(*c));
        }
        pr->decoded = NULL;
}

static void drop_answer(struct dp_podres *pr) {
        dp_podres_release(pr);
        free(pr->wire);
        pr->wire = NULL;
        pr->wire_len = 0;
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
        uint64_t ctime_ns =
                (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
        if (pr->ch && ((uint64_t)st.st_dev != pr->dev || (uint64_t)st.st_ino != pr->ino ||
                       ctime_ns != pr->ctime_ns)) {
                log_debug("PodResources socket %s was re-created, dialling it again", pr->path);
                drop_answer(pr);
                drop_channel(pr);
        }
        /* A failed connect leaves the channel waiting out grpc's backoff,
         * failing every call meanwhile: dial afresh instead. */
        if (pr->ch &&
            grpc_channel_check_connectivity_state(pr->ch, 0) == GRPC_CHANNEL_TRANSIENT_FAILURE)
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

/* The answer, decoded for this scrape; NULL when it does not decode. */
static const V1__ListPodResourcesResponse *decode(struct dp_podres *pr) {
        ProtobufCAllocator alloc = { .alloc = chunk_alloc,
                                     .free = chunk_free,
                                     .allocator_data = pr };

        dp_podres_release(pr);
        pr->decoded = v1__list_pod_resources_response__unpack(&alloc, pr->wire_len, pr->wire);
        if (!pr->decoded)
                dp_podres_release(pr);
        return pr->decoded;
}

/* List, keeping the answer's bytes in pr->wire; the call's gRPC status,
 * with its message in *ret_details. */
static grpc_status_code call_list(struct dp_podres *pr, grpc_channel *ch, char **ret_details) {
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        grpc_byte_buffer *recv = NULL;
        grpc_byte_buffer_reader reader;
        grpc_status_code st = dp_call_unary_raw(ch, DP_METHOD_PODRES_LIST, &req.base,
                                                DP_PODRES_DEADLINE_MS, &recv, ret_details);

        if (st != GRPC_STATUS_OK || !recv)
                return st;
        if (grpc_byte_buffer_length(recv) > DP_MAX_MESSAGE)
                st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        else if (!grpc_byte_buffer_reader_init(&reader, recv))
                st = GRPC_STATUS_INTERNAL;
        else {
                grpc_slice flat = grpc_byte_buffer_reader_readall(&reader);
                grpc_byte_buffer_reader_destroy(&reader);
                pr->wire_len = GRPC_SLICE_LENGTH(flat);
                pr->wire = malloc(pr->wire_len ? pr->wire_len : 1);
                if (pr->wire)
                        memcpy(pr->wire, GRPC_SLICE_START_PTR(flat), pr->wire_len);
                else
                        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
                grpc_slice_unref(flat);
        }
        grpc_byte_buffer_destroy(recv);
        return st;
}

const V1__ListPodResourcesResponse *dp_podres_list(struct dp_podres *pr) {
        _cleanup_free_ char *details = NULL;
        const char *why = NULL;
        grpc_channel *ch;
        bool was_up = pr->wire != NULL;
        double now = dp_mono_seconds();

        if (!pr->path)
                return NULL;
        ch = channel(pr, &why);
        if (ch && pr->wire && now - pr->fetched_at < DP_PODRES_CACHE_S)
                return decode(pr);
        drop_answer(pr);
        if (!ch)
                goto fail;
        if (call_list(pr, ch, &details) != GRPC_STATUS_OK) {
                drop_answer(pr);
                why = details && *details ? details : "no answer";
                goto fail;
        }
        if (!decode(pr)) {
                drop_answer(pr);
                why = "an answer that does not decode";
                goto fail;
        }
        pr->fetched_at = now;
        if (!was_up)
                log_debug("PodResources List on %s answered: %zu pods", pr->path,
                          pr->decoded->n_pod_resources);
        return pr->decoded;
fail:
        pr->errors++;
        /* Debug only: every scrape during a kubelet outage would log. */
        log_debug("PodResources List on %s failed: %s; allocation metrics left out", pr->path, why);
        return NULL;
}
