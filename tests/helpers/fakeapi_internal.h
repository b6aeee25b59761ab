/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi internals: the server's state, shared by fakeapi.c (connections,
 * admission, routing, counters), fakeapi_slices.c (the ResourceSlice store,
 * its list and watch, and the claims) and fakeapi_nodes.c (nodes and their
 * labels). Every field of struct fakeapi is guarded by mu. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <openssl/ssl.h>

#include "fakeapi.h"
#include "fakeapi_http.h"

#define MAX_CONNS 64
#define MAX_FAULTS 16
#define MAX_HISTORY 4096
#define LOG_RING 512
#define SLICES "/apis/resource.k8s.io/v1/resourceslices"
#define CLAIMS_NS "/apis/resource.k8s.io/v1/namespaces/"
#define NODES "/api/v1/nodes/"

enum { C_GET, C_POST, C_PUT, C_DELETE, C_WATCH, C_OTHER, C_N };

struct fault {
        char *method, *prefix;
        unsigned n;
        int status, retry_after;
};

struct event {
        uint64_t rv;
        const char *type;
        cJSON *obj;
};

struct conn {
        struct fakeapi *f;
        pthread_t th;
        int fd;
        bool used, done;
};

struct logent {
        char method[16];
        char path[160];
        uint64_t ns;
};

struct fakeapi {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        int lfd, stop_pipe[2];
        pthread_t acceptor;
        bool accepting, stopping;
        SSL_CTX *ssl;
        char dir[64], ca[128], url[64];

        char *token;
        cJSON *slices, *claims, *nodes;
        cJSON *node_labels;  /* node name → its labels object */
        uint64_t node_gen;   /* bumped on every label change */
        uint64_t node_drops; /* bumped to end every node watch */
        uint64_t rv, min_rv;
        bool expire_http;
        struct event hist[MAX_HISTORY];
        size_t n_hist;
        struct fault faults[MAX_FAULTS];
        size_t n_faults;
        unsigned counts[C_N];
        struct logent log[LOG_RING];
        size_t n_log;
        uint64_t uid_seq;
        unsigned lists_paged;
        fakeapi_hook_fn *hook;
        void *hook_ctx;
        struct conn conns[MAX_CONNS];
};

static inline uint64_t fa_now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ts: timeout_ms from now on CLOCK_MONOTONIC (the clock of f->cond). */
static inline void fa_deadline(struct timespec *ts, int timeout_ms) {
        clock_gettime(CLOCK_MONOTONIC, ts);
        ts->tv_sec += timeout_ms / 1000;
        ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (ts->tv_nsec >= 1000000000) {
                ts->tv_sec++;
                ts->tv_nsec -= 1000000000;
        }
}

/* fakeapi_slices.c: the handlers of ResourceSlices and claims, called
 * without f->mu; false: drop the connection. */
bool fa_handle_list(struct fakeapi *f, SSL *s, const struct request *r);
bool fa_handle_watch(struct fakeapi *f, SSL *s, int fd, const struct request *r);
bool fa_handle_create(struct fakeapi *f, SSL *s, const struct request *r);
bool fa_handle_update(struct fakeapi *f, SSL *s, const struct request *r, const char *name);
bool fa_handle_delete(struct fakeapi *f, SSL *s, const char *name);
bool fa_handle_get_slice(struct fakeapi *f, SSL *s, const char *name);
bool fa_handle_claim(struct fakeapi *f, SSL *s, const char *rest);
/* One watch event as a chunk. */
bool fa_send_event(SSL *s, const char *type, const cJSON *obj);
/* Has the client closed its end of fd? */
bool fa_peer_gone(int fd);

/* fakeapi_nodes.c: a node's GET and the watch of its labels. */
bool fa_handle_node_watch(struct fakeapi *f, SSL *s, int fd, const struct request *r);
bool fa_handle_node(struct fakeapi *f, SSL *s, const char *name);
