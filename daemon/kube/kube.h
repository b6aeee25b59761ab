/* SPDX-License-Identifier: Apache-2.0 */
/* kube: the daemon's Kubernetes API client, for DRA and for the node
 * labels the resources' "nodes" select on (labels.c). A thread of its own,
 * cdiplug-kube, started after the lock-down, drives its HTTPS transfers
 * through a libcurl multi handle (curl_multi_poll + curl_multi_wakeup:
 * idle means blocked in poll). It publishes this node's ResourceSlices
 * (one pool per DRA resource), keeps them right through a watch (the
 * kubelet's wipe, other writers, API errors with back-off), and follows
 * the labels. ResourceClaims for Prepare are looked up the same way on a
 * second thread, cdiplug-claims, so that none of that work ever delays
 * them. Functions return 0 or a negative errno.
 */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kube;

struct kube_settings {
        const char *kubeconfig; /* NULL: in-cluster env + /var/run/secrets/... */
        const char *node_name;
        const char *driver; /* NULL: no DRA, only the node's labels */
        /* This instance among others on the node (the POD_UID tag), NULL:
         * the pid; part of the field manager our writes carry. */
        const char *instance;
        /* Keep this node's slices of pools not set yet until
         * kube_pools_complete(): until the kubelet has registered this
         * instance, they may be a rolling update's older instance's,
         * which still serves them. */
        bool hold_leftovers;
};

/* Reads the credentials (files stay re-readable for token rotation),
 * resolves the API server's host name (pinned for libcurl; looked up
 * again on cdiplug-dns after a failure to connect, the last address that
 * worked staying pinned meanwhile, and a name that does not resolve now
 * is not an error: it is tried again before each request) and makes the
 * multi handle. -EKEYREJECTED when the kubeconfig
 * or the in-cluster credentials are refused (a configuration error),
 * another -errno otherwise; with a message via log. Before the lock-down:
 * it reads files outside what the filter allows later and starts
 * libcurl's global state. */
int kube_new(const struct kube_settings *s, struct kube **ret);
/* Starts cdiplug-kube, cdiplug-claims with a driver, and cdiplug-dns for a
 * server named by a host name (after the lock-down). Pools set before it
 * are published at once; call kube_pool_set() for every DRA resource before
 * kube_start(): the first list deletes slices of this node and driver
 * whose pool is not known then (resources removed while the daemon was
 * down). */
int kube_start(struct kube *k);
/* With hold_leftovers: every pool this instance wants has been set, so
 * slices of this node and driver in no set pool are leftovers from now on,
 * deleted. */
int kube_pools_complete(struct kube *k);
void kube_free(struct kube *k); /* stops the thread first; NULL ok */

/* Follow this node's labels (labels.c), for the resources' "nodes":
 * fn(ctx, labels) runs on cdiplug-kube with the Node's metadata.labels (a
 * JSON object, borrowed for the call) first when they are read, then each
 * time they change. Call before kube_start(); with s->driver NULL, this is
 * all the client does. */
typedef void kube_labels_fn(void *ctx, const cJSON *labels);
int kube_labels_follow(struct kube *k, kube_labels_fn *fn, void *ctx);

/* Desired devices of one pool: devices is a cJSON array of ResourceSlice
 * `spec.devices[]` entries (taken, also on error). NULL: the pool is
 * gone, its slices are deleted. Thread-safe, never blocks on the network;
 * the thread reconciles (chunks of 128, slice names, generation,
 * resourceSliceCount, nodeName, ownerReference to the Node) and keeps
 * reconciling after wipes (watch) and API errors (back-off).
 * -EINVAL: not an array, or pool not a valid pool name. */
int kube_pool_set(struct kube *k, const char *pool, cJSON *devices);

/* One allocated device of a claim, for our driver. */
struct kube_result {
        char *request;
        char *pool;
        char *device;
};
struct kube_claim {
        int err;                     /* 0, or -ENOENT (no such claim), -ESTALE (uid differs),
                                      * -ENODATA (not allocated), -EINVAL (an opaque
                                      * configuration for our driver: we take none),
                                      * other -errno (API down) */
        char *msg;                   /* what went wrong, for the claim's error string */
        struct kube_result *results; /* only our driver's entries */
        size_t n_results;
};
void kube_claim_clear(struct kube_claim *c);
/* GET the ResourceClaim; fn(ctx, claim) is called once, on cdiplug-claims,
 * with the outcome (the callee owns *claim: kube_claim_clear). uid NULL:
 * not checked. At most KUBE_CLAIMS_QUEUED lookups wait (-ENOBUFS beyond);
 * a few run at once. After kube_free() began, fn is called with -ECANCELED
 * for every lookup still waiting. -EINVAL for a client without a driver. */
#define KUBE_CLAIMS_QUEUED 4096
typedef void kube_claim_fn(void *ctx, struct kube_claim *claim);
int kube_claim_get(struct kube *k, const char *ns, const char *name, const char *uid,
                   kube_claim_fn *fn, void *ctx);
/* The asker of the lookups with ctx gave up (its Prepare timed out):
 * they leave the queue, or their transfer is ended, and fn is called
 * with -ECANCELED soon, on cdiplug-claims as always, so a server that
 * hangs cannot keep the lookup slots from the claims that come next.
 * Thread-safe; never calls fn itself. */
void kube_claim_cancel(struct kube *k, void *ctx);

/* API errors by class, for /metrics (label values in kube_error_class). */
enum kube_error_class {
        KUBE_ERR_CONNECT, /* no answer: refused, timeout, TLS, reset */
        KUBE_ERR_UNAUTHORIZED /* 401, 403 */,
        KUBE_ERR_NOT_FOUND, /* 404 where a thing was expected */
        KUBE_ERR_CONFLICT,  /* 409 */
        KUBE_ERR_GONE,      /* 410, on a watch (as an answer or an ERROR event) */
        KUBE_ERR_THROTTLED, /* 429 */
        KUBE_ERR_CLIENT,    /* other 4xx, and answers we could not use */
        KUBE_ERR_SERVER,    /* 5xx */
        KUBE_ERR_N,
};
/* "connect", "unauthorized", ...: a Prometheus label value. */
const char *kube_error_class_name(enum kube_error_class c);

/* The same errors by HTTP status code, for /metrics: the codes the API
 * server answers our requests with each have a slot, any other code goes
 * to its class's "4xx" or "5xx", no answer at all to "connect", and an
 * answer we could not use (too big, a watch's ERROR event) to "other". A
 * fixed set, so the label stays bounded whatever a server sends. */
#define KUBE_CODE_N 16
/* The slot of code (0: no answer; -1: an unusable answer), always one of
 * the KUBE_CODE_N. */
int kube_code_slot(long code);
/* "connect", "400", ..., "5xx", "other": a Prometheus label value. */
const char *kube_code_name(int slot);

/* The watches the client keeps, for /metrics. */
enum kube_watch_id {
        KUBE_WATCH_SLICES, /* this node's ResourceSlices of the driver */
        KUBE_WATCH_NODE,   /* the Node, for its labels */
        KUBE_WATCH_N,
};
/* "resourceslices", "node": a Prometheus label value. */
const char *kube_watch_name(enum kube_watch_id w);

/* For /metrics: counters under the kube's own lock. */
struct kube_stats {
        uint64_t api_errors[KUBE_ERR_N];    /* by enum kube_error_class */
        uint64_t api_codes[KUBE_CODE_N];    /* the same, by kube_code_slot */
        uint64_t publishes;                 /* pool changes published */
        double publish_seconds_sum;         /* kube_pool_set → slices written */
        uint64_t publish_count;             /* the summary's count (== publishes) */
        double publish_seconds_max;         /* the slowest so far */
        uint64_t claim_lookups;             /* kube_claim_get answered, any outcome */
        uint64_t slices;                    /* our slices the API server holds now */
        uint64_t pools_unpublished;         /* pools whose slices are not (yet) as wanted */
        bool watch_on[KUBE_WATCH_N];        /* the client keeps this watch */
        bool watch_up[KUBE_WATCH_N];        /* its stream is open now */
        double watch_last_up[KUBE_WATCH_N]; /* wall-clock time it last was up, 0: never */
};
void kube_stats(struct kube *k, struct kube_stats *ret);

/* For doctor: read the kubeconfig as serve would (current-context,
 * cluster, user; every file it names), without a request. 0 with
 * *ret_server the API server's URL (malloc'd), or a negative errno with
 * *err_msg (malloc'd) naming the file and the key. No token is returned
 * or put in a message. */
int kube_kubeconfig_check(const char *kubeconfig, char **ret_server, char **err_msg);
