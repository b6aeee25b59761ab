/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by node.c (server, sockets, unary calls) and node_health.c (the
 * NodeWatchResources streams). */
#pragma once

#include <grpc/grpc.h>
#include <stdbool.h>
#include <stdint.h>

#include "dra.h"
#include "dra_node.h"

struct dra_call;
struct dra_prep;

struct dra_node {
        char *driver;
        char *registry_dir;  /* <root>/plugins_registry */
        char *registry_name; /* <driver>-reg.sock, <driver>-<instance>-reg.sock */
        char *registry_path;
        char *plugin_dir; /* <root>/plugins/<driver> */
        char *endpoint;   /* <plugin_dir>/dra[-<instance>].sock: what GetInfo answers */

        grpc_completion_queue *cq;
        grpc_server *server;
        bool up;       /* offering call slots */
        bool stopping; /* shutdown asked, its tag not back yet */
        struct dp_tag shutdown_tag;
        int reg_fd; /* listening on registry_path, or -1 */
        int dra_fd; /* listening on endpoint, or -1 */
        /* What reg_fd and dra_fd were bound as: only those are removed. */
        struct base_owned reg_id, dra_id;
        unsigned live; /* call slots and calls, and the server until its shutdown tag */
        bool accepted; /* the kubelet's last NotifyRegistrationStatus */

        /* node_health.c's */
        struct dra_call *streams;
        uint8_t *health_buf; /* the packed list, NodeWatchResourcesResponse */
        size_t health_len;
        uint8_t *health_bare; /* the same without the times, to tell a change */
        size_t health_bare_len;
        uint64_t health_gen;    /* bumped when the list changes or is stamped again */
        uint64_t health_due_ms; /* the next resend (dp_now_ms() time), 0: none */

        /* node_prepare.c's */
        dra_lookup_fn *lookup;
        void *lookup_ctx;
        void (*cancel)(void *ctx, struct dra_lookup *l);
        pthread_mutex_t *lock;
        unsigned lookup_timeout_ms;
        void (*deadline_set)(void *ctx, uint64_t due_ms);
        void *deadline_ctx;
        void (*registered)(void *ctx, bool accepted);
        void (*unprepared)(void *ctx);
        void *unprepared_ctx;
        struct dra_pool *pools; /* names owned, index caches kept */
        size_t n_pools;
        struct dra_claim *prepared; /* what the checkpoint holds */
        size_t n_prepared;
        struct dra_prep *preps; /* Prepare requests not answered yet */
        struct dra_node_stats stats;

        /* checkpoint_io.c's */
        int dir_fd;  /* plugin_dir, opened before the lock-down */
        int lock_fd; /* <plugin_dir>/checkpoint.lock, flocked around each change */
        /* Why the file did not read the last time, for each claim's
         * error until it does (NULL: it read). */
        char *ck_error;
};

/* A call from its slot to its end (node.c starts it, call.c ends it). */
enum dra_phase { DRA_NEW, DRA_RECV, DRA_FINISH };
struct dra_call {
        struct dp_tag tag;       /* unary phases and a stream's first read */
        struct dp_tag send_tag;  /* streams: the send in flight */
        struct dp_tag close_tag; /* streams: the peer went away */
        struct dra_node *n;
        enum dra_phase phase;
        struct dp_server_call sc;
        /* streams */
        unsigned refs;
        bool sending, closed, ending, status_in_flight;
        uint64_t sent_gen;
        struct dra_call *next;
        struct dra_prep *prep; /* a Prepare waiting for its lookups */
};

/* call.c */
void dra_call_free(struct dra_call *c);

/* node_prepare.c: the DRAPlugin methods (both versions). Returns false
 * when method is none of them. */
bool dra_prepare_method(struct dra_call *c, const char *method);
void dra_prepare_stop(struct dra_node *n);
void dra_prepare_free(struct dra_node *n);
/* call.c: answer c with its c->send (or the status alone). */
void dra_call_finish(struct dra_call *c, grpc_status_code status, const char *msg);

/* checkpoint_io.c: the prepared claims on disk, the one truth two
 * instances share. open: the lock file (before the lock-down); load: at
 * start; lock/unlock: around every read-modify-write (bounded wait,
 * -ETIMEDOUT); read: the file into n->prepared (-EBADMSG when it cannot
 * be read: n->ck_error says why, n->prepared stays); save: n->prepared
 * written atomically, under the lock. */
int dra_checkpoint_open(struct dra_node *n);
int dra_checkpoint_load(struct dra_node *n);
int dra_checkpoint_lock(struct dra_node *n);
void dra_checkpoint_unlock(struct dra_node *n);
int dra_checkpoint_read(struct dra_node *n);
int dra_checkpoint_save(struct dra_node *n);

/* node_health.c */
void dra_health_open(struct dra_call *c);
void dra_health_end_all(struct dra_node *n);
bool dra_health_ending(const struct dra_node *n);
void dra_health_free(struct dra_node *n);
/* The list sent again when due; *next_ms lowered to the next resend. */
void dra_health_expire(struct dra_node *n, uint64_t now_ms, uint64_t *next_ms);
