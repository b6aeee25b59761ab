/* SPDX-License-Identifier: Apache-2.0 */
/* Client of the kubelet's PodResources API (podresources/v1), on a worker
 * thread of its own, asked only when /metrics is scraped: no background
 * polling, so a daemon nobody scrapes never wakes for it.
 *
 * A List waits on another process: a hung kubelet holds it for its whole
 * deadline. So it never runs on the endpoint's thread, which answers the
 * kubelet's liveness probes, nor under d->lock. The endpoint asks
 * (dp_podres_get), goes on serving, and is told through an eventfd when
 * the answer is there; scrapes that come meanwhile share it. An answer
 * or a failure stands for DP_PODRES_CACHE_S, so a crowd of scrapers
 * against a hung kubelet costs one List a second, not one each.
 *
 * Only our resources' IDs are kept, read in place off the answer's bytes
 * (podres_wire.c): 4 MiB of another resource's IDs cost a transient copy
 * of the bytes and nothing after, and ours are capped (DP_PODRES_MAX_IDS,
 * DP_PODRES_MAX_TEXT).
 *
 * The kubelet deletes and re-creates its pod-resources socket when it
 * restarts. A channel dialled to the old socket would keep failing with
 * grpc's reconnect backoff, so the socket file's identity (device and
 * inode, and change time: a new file may get the old one's inode number
 * at once) is checked before every List and a new channel dialled when
 * it changed. */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loop.h"
#include "metrics.h"
#include "podresources.pb-c.h"
#include "rpc.h"
#include "log.h"

/* A socket file's identity: device and inode, and change time (a new
 * file may get the old one's inode number at once); all 0: no socket. */
struct sock_id {
        uint64_t dev, ino, ctime_ns;
};

static struct sock_id sock_id_of(const char *path) {
        struct stat st;

        if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
                return (struct sock_id){ 0 };
        return (struct sock_id){
                .dev = (uint64_t)st.st_dev,
                .ino = (uint64_t)st.st_ino,
                .ctime_ns =
                        (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec,
        };
}

static bool sock_id_eq(struct sock_id a, struct sock_id b) {
        return a.dev == b.dev && a.ino == b.ino && a.ctime_ns == b.ctime_ns;
}

struct dp_podres {
        char *path;
        int notify_fd;
        pthread_t thread;
        bool started;

        pthread_mutex_t lock; /* guards what follows */
        pthread_cond_t cond;  /* wanted or quit */
        bool wanted, busy, quit;
        char **names; /* our resources, for the next List */
        size_t n_names;
        struct dp_podres_answer *answer; /* the latest, or NULL */
        double answered_at;              /* monotonic seconds */
        struct sock_id answered_by;      /* the socket file it came from */
        uint64_t errors;

        /* The worker's own. */
        grpc_channel *ch;
        struct sock_id dialled; /* the socket file the channel was dialled to */
        bool was_up;
};

static void free_names(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

static void answer_free(struct dp_podres_answer *a) {
        if (!a)
                return;
        free(a->v);
        dp_mbuf_free(&a->text);
        free(a);
}

int dp_podres_new(const char *path, int notify_fd, struct dp_podres **ret) {
        struct dp_podres *pr = calloc(1, sizeof(*pr));

        if (!pr)
                return -ENOMEM;
        pr->notify_fd = notify_fd;
        if (path && !(pr->path = strdup(path))) {
                free(pr);
                return -ENOMEM;
        }
        pthread_mutex_init(&pr->lock, NULL);
        pthread_cond_init(&pr->cond, NULL);
        *ret = pr;
        return 0;
}

const char *dp_podres_path(const struct dp_podres *pr) {
        return pr ? pr->path : NULL;
}

uint64_t dp_podres_errors(struct dp_podres *pr) {
        uint64_t n;

        pthread_mutex_lock(&pr->lock);
        n = pr->errors;
        pthread_mutex_unlock(&pr->lock);
        return n;
}

void dp_podres_unref(struct dp_podres *pr, struct dp_podres_answer *a) {
        bool last;

        if (!a)
                return;
        pthread_mutex_lock(&pr->lock);
        last = --a->refs == 0;
        pthread_mutex_unlock(&pr->lock);
        if (last)
                answer_free(a);
}

struct dp_podres_answer *dp_podres_get(struct dp_podres *pr, char *const *names, size_t n) {
        struct dp_podres_answer *a = NULL;
        char **copy = calloc(n ? n : 1, sizeof(*copy));

        for (size_t i = 0; copy && i < n; i++)
                if (!(copy[i] = strdup(names[i]))) {
                        free_names(copy, i);
                        copy = NULL;
                }
        /* A kubelet restart (its socket re-created, or gone) makes the
         * cached answer, or failure, stale at once. */
        struct sock_id now = sock_id_of(pr->path);

        pthread_mutex_lock(&pr->lock);
        if (pr->answer && dp_mono_seconds() - pr->answered_at < DP_PODRES_CACHE_S &&
            sock_id_eq(now, pr->answered_by)) {
                a = pr->answer;
                a->refs++;
        } else if (copy && !pr->wanted && !pr->busy) {
                /* One List at a time; scrapes meanwhile share its answer. */
                free_names(pr->names, pr->n_names);
                pr->names = copy;
                pr->n_names = n;
                copy = NULL;
                pr->wanted = true;
                pthread_cond_signal(&pr->cond);
        }
        pthread_mutex_unlock(&pr->lock);
        if (copy)
                free_names(copy, n);
        return a;
}

static void drop_channel(struct dp_podres *pr) {
        if (pr->ch)
                grpc_channel_destroy(pr->ch);
        pr->ch = NULL;
}

/* A channel to the socket as it is now (id), or NULL (no socket there). */
static grpc_channel *channel(struct dp_podres *pr, struct sock_id id, const char **err_why) {
        if (!id.ino) {
                *err_why = "no socket";
                drop_channel(pr);
                return NULL;
        }
        if (pr->ch && !sock_id_eq(id, pr->dialled)) {
                log_with(LOG_DEBUG, &(struct log_fields){ .path = pr->path },
                         "PodResources socket %s was re-created, dialling it again", pr->path);
                drop_channel(pr);
        }
        /* A failed connect leaves the channel waiting out grpc's backoff,
         * failing every call meanwhile: dial afresh instead. */
        if (pr->ch &&
            grpc_channel_check_connectivity_state(pr->ch, 0) == GRPC_CHANNEL_TRANSIENT_FAILURE)
                drop_channel(pr);
        if (!pr->ch) {
                pr->ch = dp_channel_unix(pr->path);
                pr->dialled = id;
        }
        if (!pr->ch)
                *err_why = "cannot create a channel";
        return pr->ch;
}

struct collect {
        struct dp_podres_answer *a;
        char *const *names;
        size_t n_names, cap;
        /* Offsets into a->text until it stops moving. */
        struct off {
                size_t resource, id, namespace_, pod, container;
                bool dynamic;
        } * offs;
};

static size_t put_str(struct dp_mbuf *t, struct dp_podres_str s) {
        size_t at = t->len;
        dp_mbuf_utf8(t, s.s, s.len);
        dp_mbuf_put(t, "", 1); /* the NUL stays in: strings follow each other */
        return at;
}

/* One allocation of ours into a: 1, 0 when the answer's room is full, or
 * -ENOMEM. */
static int keep_alloc(struct collect *c, const struct dp_podres_devices *dv, const char *name,
                      struct dp_podres_str id) {
        struct dp_podres_answer *a = c->a;

        if (a->n >= DP_PODRES_MAX_IDS || a->text.len >= DP_PODRES_MAX_TEXT) {
                a->truncated = true;
                return 0;
        }
        if (a->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 64;
                struct off *o = realloc(c->offs, cap * sizeof(*o));
                if (!o)
                        return -ENOMEM;
                c->offs = o;
                c->cap = cap;
        }
        struct off *o = &c->offs[a->n++];
        o->resource = put_str(&a->text, (struct dp_podres_str){ name, strlen(name) });
        o->id = put_str(&a->text, id);
        o->namespace_ = put_str(&a->text, dv->namespace_);
        o->pod = put_str(&a->text, dv->pod);
        o->container = put_str(&a->text, dv->container);
        o->dynamic = dv->dynamic;
        return a->text.err ? a->text.err : 1;
}

/* Whether name is "<driver>:<pool>" of dv's claim device. */
static bool is_pool(const struct dp_podres_devices *dv, const char *name) {
        size_t n = strlen(name), d = dv->driver.len;

        return n == d + 1 + dv->pool.len && memcmp(name, dv->driver.s, d) == 0 && name[d] == ':' &&
               memcmp(name + d + 1, dv->pool.s, dv->pool.len) == 0;
}

/* names holds our resources and our DRA pools: a device set of one of
 * the first, or a claim's device in one of the second, is ours. */
static int collect_one(void *arg, const struct dp_podres_devices *dv) {
        struct collect *c = arg;
        const char *name = NULL;
        struct dp_podres_str id;
        size_t pos = 0;
        int r;

        for (size_t i = 0; i < c->n_names && !name; i++)
                if (dv->dynamic ? is_pool(dv, c->names[i])
                                : dp_podres_str_eq(dv->resource, c->names[i]))
                        name = c->names[i];
        if (!name)
                return 0;
        if (dv->dynamic)
                return (r = keep_alloc(c, dv, name, dv->device)) < 0 ? r : 0;
        while ((r = dp_podres_next_id(dv, &pos, &id)) > 0)
                if ((r = keep_alloc(c, dv, name, id)) <= 0)
                        return r;
        return r;
}

/* Our resources' IDs in the answer's bytes, into a. */
static int collect(struct dp_podres_answer *a, const void *wire, size_t len, char *const *names,
                   size_t n_names) {
        struct collect c = { .a = a, .names = names, .n_names = n_names };
        int r = dp_podres_walk_all(wire, len, collect_one, &c);

        if (r >= 0 && a->n && !(a->v = calloc(a->n, sizeof(*a->v))))
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < a->n; i++)
                a->v[i] = (struct dp_podres_alloc){
                        .resource = a->text.s + c.offs[i].resource,
                        .id = a->text.s + c.offs[i].id,
                        .namespace_ = a->text.s + c.offs[i].namespace_,
                        .pod = a->text.s + c.offs[i].pod,
                        .container = a->text.s + c.offs[i].container,
                        .dynamic = c.offs[i].dynamic,
                };
        free(c.offs);
        return r;
}

/* One List, read into a; the call's outcome in *err_why when it failed. */
static int list(struct dp_podres *pr, struct sock_id id, char *const *names, size_t n_names,
                struct dp_podres_answer *a, char **ret_details, const char **err_why) {
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        grpc_byte_buffer *recv = NULL;
        grpc_byte_buffer_reader reader;
        grpc_channel *ch = channel(pr, id, err_why);
        grpc_status_code st;
        int r;

        if (!ch)
                return -ENOTCONN;
        st = dp_call_unary_raw(ch, DP_METHOD_PODRES_LIST, &req.base, DP_PODRES_DEADLINE_MS, &recv,
                               ret_details);
        if (st != GRPC_STATUS_OK) {
                *err_why = *ret_details && **ret_details ? *ret_details : "no answer";
                return -EIO;
        }
        if (!recv)
                return 0; /* an empty message: no pods */
        if (grpc_byte_buffer_length(recv) > DP_MAX_MESSAGE ||
            !grpc_byte_buffer_reader_init(&reader, recv)) {
                grpc_byte_buffer_destroy(recv);
                *err_why = "an answer too big to read";
                return -EMSGSIZE;
        }
        /* One flat copy, for the walk; freed before the next List. */
        grpc_slice flat = grpc_byte_buffer_reader_readall(&reader);
        grpc_byte_buffer_reader_destroy(&reader);
        grpc_byte_buffer_destroy(recv);
        r = collect(a, GRPC_SLICE_START_PTR(flat), GRPC_SLICE_LENGTH(flat), names, n_names);
        grpc_slice_unref(flat);
        if (r == -EBADMSG)
                *err_why = "an answer that does not decode";
        else if (r < 0)
                *err_why = "out of memory";
        return r;
}

static void publish(struct dp_podres *pr, struct dp_podres_answer *a, struct sock_id id) {
        static const uint64_t one = 1;
        struct dp_podres_answer *old;

        pthread_mutex_lock(&pr->lock);
        old = pr->answer;
        pr->answer = a;
        pr->answered_at = dp_mono_seconds();
        pr->answered_by = id;
        pr->errors += !a->up;
        pr->busy = false;
        if (old && --old->refs == 0)
                answer_free(old);
        else
                old = NULL;
        pthread_mutex_unlock(&pr->lock);
        if (write(pr->notify_fd, &one, sizeof(one)) < 0)
                log_with(LOG_DEBUG, &(struct log_fields){ .err = errno },
                         "PodResources: cannot wake the metrics endpoint: %m");
}

static void serve_one(struct dp_podres *pr, char **names, size_t n_names) {
        _cleanup_free_ char *details = NULL;
        const char *why = NULL;
        struct dp_podres_answer *a = calloc(1, sizeof(*a));
        int r;

        if (!a) {
                /* Publish nothing: the waiting scrape is told, and the next
                 * one asks again. */
                pthread_mutex_lock(&pr->lock);
                pr->busy = false;
                pr->errors++;
                pthread_mutex_unlock(&pr->lock);
                (void)!write(pr->notify_fd, &(uint64_t){ 1 }, sizeof(uint64_t));
                return;
        }
        /* Taken before the List: a socket re-created during it makes
         * the answer stale, not the other way round. */
        struct sock_id id = sock_id_of(pr->path);
        a->refs = 1;
        r = list(pr, id, names, n_names, a, &details, &why);
        if (r < 0) {
                /* Debug only: every scrape during a kubelet outage would log. */
                log_with(LOG_DEBUG, &(struct log_fields){ .path = pr->path, .err = why ? 0 : r },
                         "PodResources List on %s failed: %s; allocation metrics left out",
                         pr->path, why ? why : strerror(-r));
                free(a->v);
                dp_mbuf_free(&a->text);
                *a = (struct dp_podres_answer){ .refs = 1 };
        } else {
                a->up = true;
                if (!pr->was_up)
                        log_with(LOG_DEBUG, &(struct log_fields){ .path = pr->path },
                                 "PodResources List on %s answered: %zu IDs of ours", pr->path,
                                 a->n);
                if (a->truncated)
                        log_with(LOG_DEBUG, &(struct log_fields){ .path = pr->path },
                                 "PodResources List on %s: more than %d IDs of ours, the rest "
                                 "left out",
                                 pr->path, DP_PODRES_MAX_IDS);
        }
        pr->was_up = a->up;
        publish(pr, a, id);
        /* The answer's copy and grpc's buffers are freed, but leave free
         * pages amid the heap that would stay resident until the next
         * List: give them back. */
        malloc_trim(0);
}

static void *worker(void *arg) {
        struct dp_podres *pr = arg;

        pthread_setname_np(pthread_self(), "cdiplug-podres");
        pthread_mutex_lock(&pr->lock);
        for (;;) {
                while (!pr->wanted && !pr->quit)
                        pthread_cond_wait(&pr->cond, &pr->lock);
                if (pr->quit)
                        break;
                char **names = pr->names;
                size_t n = pr->n_names;
                pr->names = NULL;
                pr->n_names = 0;
                pr->wanted = false;
                pr->busy = true;
                pthread_mutex_unlock(&pr->lock);
                serve_one(pr, names, n);
                free_names(names, n);
                pthread_mutex_lock(&pr->lock);
        }
        pthread_mutex_unlock(&pr->lock);
        drop_channel(pr);
        return NULL;
}

int dp_podres_start(struct dp_podres *pr) {
        int r = -pthread_create(&pr->thread, NULL, worker, pr);

        if (r == 0)
                pr->started = true;
        return r;
}

void dp_podres_free(struct dp_podres *pr) {
        if (!pr)
                return;
        if (pr->started) {
                pthread_mutex_lock(&pr->lock);
                pr->quit = true;
                pthread_cond_signal(&pr->cond);
                pthread_mutex_unlock(&pr->lock);
                /* At most one List's deadline. */
                pthread_join(pr->thread, NULL);
        }
        drop_channel(pr);
        if (pr->answer && --pr->answer->refs == 0)
                answer_free(pr->answer);
        free_names(pr->names, pr->n_names);
        pthread_cond_destroy(&pr->cond);
        pthread_mutex_destroy(&pr->lock);
        free(pr->path);
        free(pr);
}
