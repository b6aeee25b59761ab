/* SPDX-License-Identifier: Apache-2.0 */
/* dra_node: the kubelet-facing side of the DRA driver. One grpc server on
 * the daemon's completion queue listens on two sockets we make ourselves:
 * the plugin registry socket <kubelet-root>/plugins_registry/<driver>-reg.sock
 * (pluginregistration.Registration) and the DRA socket
 * <kubelet-root>/plugins/<driver>/dra.sock (DRAPlugin v1 and v1beta1, the
 * health streams v1alpha1 and v1). The caller serialises every call and every completion of this
 * module's tags (the daemon's lock). */
#pragma once

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc.h" /* struct dp_tag */

#define DRA_METHOD_GET_INFO "/pluginregistration.Registration/GetInfo"
#define DRA_METHOD_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"
#define DRA_METHOD_PREPARE_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
#define DRA_METHOD_UNPREPARE_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
#define DRA_METHOD_PREPARE_V1BETA1                                                                 \
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources"
#define DRA_METHOD_UNPREPARE_V1BETA1                                                               \
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources"
#define DRA_METHOD_HEALTH_V1ALPHA1 "/v1alpha1.DRAResourceHealth/NodeWatchResources"
#define DRA_METHOD_HEALTH_V1 "/v1.DRAResourceHealth/NodeWatchResources"

struct dra_node;
struct dra_lookup;
struct dra_result;
struct dp_plugin;

/* Start looking up the ResourceClaim ns/name (uid: the one the kubelet
 * means): 0, and then dra_node_claim_done(l, ...) exactly once, from
 * another thread (the API client's), never from inside this call; or a
 * negative errno, and no call. */
typedef int dra_lookup_fn(void *ctx, const char *ns, const char *name, const char *uid,
                          struct dra_lookup *l);

struct dra_node_settings {
        const char *kubelet_root; /* used verbatim in the socket paths */
        const char *driver;       /* a DNS subdomain (checked by the config) */
        /* The instance tag (cfg_instance_tag) both socket names carry, so
         * a rolling update's old and new pod register side by side (the
         * kubelet refuses a second plugin on an endpoint already
         * registered, and keeps several per driver since 1.33); NULL: the
         * single-instance names. */
        const char *instance;
        /* Prepare's claim lookups; NULL: Prepare is not served. */
        dra_lookup_fn *lookup;
        void *lookup_ctx;
        /* The lookup l was given up (its Prepare timed out): whoever runs
         * it may end it early, still calling dra_node_claim_done() once.
         * Called under the lock, with lookup_ctx; NULL: nothing to do. */
        void (*cancel)(void *ctx, struct dra_lookup *l);
        /* The lock every other call holds (the daemon's): claim_done takes
         * it, as it runs on the API client's thread. */
        pthread_mutex_t *lock;
        /* A lookup not done by then fails its claim (0: 40 s, inside the
         * kubelet's 45 s wait for the whole answer). */
        unsigned lookup_timeout_ms;
        /* Called (under the lock) when a Prepare starts waiting or the
         * health list is due to be sent again: the owner's timer must run
         * dra_node_expire() by due_ms at the latest (CLOCK_MONOTONIC ms,
         * dp_now_ms()). */
        void (*deadline_set)(void *ctx, uint64_t due_ms);
        void *deadline_ctx;
        /* Called (under the lock) when the kubelet accepts or refuses the
         * driver (NotifyRegistrationStatus); ctx is deadline_ctx. */
        void (*registered)(void *ctx, bool accepted);
};

/* One DRA resource as Prepare maps devices: its pool name and plugin,
 * valid until the next dra_node_pools_set (the caller's lock). */
struct dra_node_pool {
        const char *name;
        const struct dp_plugin *plugin;
};

/* A lookup's outcome: err 0 with our driver's results of the claim, or
 * -ENOENT (no such claim), -ESTALE (another uid), -ENODATA (not
 * allocated), another -errno (API down); msg (may be NULL) says what, for
 * the claim's error string. Copied: the caller keeps what it passed. */
void dra_node_claim_done(struct dra_lookup *l, int err, const char *msg,
                         const struct dra_result *results, size_t n_results);
/* The pools Prepare maps to, again after any change of the DRA resources
 * (count 0 never fails). */
int dra_node_pools_set(struct dra_node *n, const struct dra_node_pool *pools, size_t count);
/* Fail the claims whose lookup passed the timeout and send the health
 * list again when due; *ret_next_ms: when the next of either is
 * (CLOCK_MONOTONIC ms, 0: none). */
void dra_node_expire(struct dra_node *n, uint64_t now_ms, uint64_t *ret_next_ms);
/* Whether the kubelet's last word was to accept the driver. */
bool dra_node_accepted(const struct dra_node *n);
/* Claims prepared now (for /metrics). */
size_t dra_node_prepared(const struct dra_node *n);
/* The prepared claims themselves (the checkpoint's), valid until the next
 * call into n (the caller's lock): every CDI ID they were answered must
 * keep resolving until their Unprepare. NULL n: none. */
struct dra_claim;
const struct dra_claim *dra_node_prepared_claims(const struct dra_node *n, size_t *ret_n);
/* fn(ctx) is called (under the lock) whenever prepared claims leave the
 * set (an Unprepare here, or a read of the checkpoint another instance
 * changed), for whoever keeps things for them. NULL n: nothing. */
void dra_node_on_unprepared(struct dra_node *n, void (*fn)(void *ctx), void *ctx);
/* The checkpoint read again (another instance may have changed it: call
 * it when the file is replaced): 0, or -EBADMSG when it cannot be read
 * (the claims known stay). NULL n: nothing. */
int dra_node_refresh(struct dra_node *n);
/* The plugin dir, which holds the checkpoint (DRA_CHECKPOINT_FILE), for
 * the watcher. */
const char *dra_node_plugin_dir(const struct dra_node *n);

/* DRAPlugin calls answered, for /metrics: by method, by the API version
 * the kubelet called, and by outcome (ok: every claim answered without an
 * error; claim_error: the call succeeded but at least one claim carries
 * an error; failed: the call itself ended with a gRPC error). */
enum dra_call_method { DRA_CALL_PREPARE, DRA_CALL_UNPREPARE, DRA_CALL_METHODS };
enum dra_call_version { DRA_CALL_V1, DRA_CALL_V1BETA1, DRA_CALL_VERSIONS };
enum dra_call_outcome { DRA_CALL_OK, DRA_CALL_CLAIM_ERROR, DRA_CALL_FAILED, DRA_CALL_OUTCOMES };
struct dra_node_stats {
        uint64_t calls[DRA_CALL_METHODS][DRA_CALL_VERSIONS][DRA_CALL_OUTCOMES];
};
void dra_node_stats(const struct dra_node *n, struct dra_node_stats *ret);

/* One device as the health streams report it. */
struct dra_health_device {
        const char *pool;
        const char *device;
        bool healthy;
        const char *message; /* NULL when healthy */
};

/* The paths, the two directories made if missing, and the checkpoint of
 * prepared claims read (a bad one is logged and left as it is: every
 * Prepare and Unprepare then fails its claims until it reads again); no
 * socket yet. -errno, logged, naming the path. */
int dra_node_new(const struct dra_node_settings *s, struct dra_node **ret);
/* The server on cq, then the DRA socket, then the registry socket last:
 * the kubelet dials as soon as it sees that one. */
int dra_node_start(struct dra_node *n, grpc_completion_queue *cq);
/* The registry socket made again when it is gone (an operator or a
 * node's cleanup deleted it; the kubelet leaves it): 0 when it is
 * there. */
int dra_node_relisten(struct dra_node *n);
/* Where the registry socket lives, and its name there, for the watcher's
 * inotify watch. */
const char *dra_node_registry_dir(const struct dra_node *n);
const char *dra_node_registry_name(const struct dra_node *n);
const char *dra_node_registry_path(const struct dra_node *n);
const char *dra_node_endpoint(const struct dra_node *n);
/* The listening sockets the watcher polls for connections (-1: none), and
 * the accepting of what is queued on one of them. */
void dra_node_poll_fds(const struct dra_node *n, int ret[2]);
void dra_node_accept(struct dra_node *n, int fd);
/* The full device list the health streams send (copied): the caller
 * gives it at start and after every change; each open stream gets it at
 * once (or, with a send in flight, right after that send), and again
 * every DRA_HEALTH_RESEND_S with each device's timeout
 * (DRA_HEALTH_TIMEOUT_S) and, when not healthy, its message. */
int dra_node_health_set(struct dra_node *n, const struct dra_health_device *devs, size_t count);
/* The list sent again on every open stream delay_ms from now, whatever
 * the resend period says: another instance of the driver went (a rolling
 * update's old pod), and a 1.37 kubelet then clears the health of all the
 * driver's devices until the next list. NULL n: nothing. */
void dra_node_health_resend(struct dra_node *n, unsigned delay_ms);
/* Streams end with a status, the sockets are removed, the server shuts
 * down; dra_node_done() once every tag came back. */
void dra_node_stop(struct dra_node *n);
bool dra_node_done(const struct dra_node *n);
/* Only once done (or never started). NULL ok. */
void dra_node_free(struct dra_node *n);
