/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi: see fakeapi.h. The wire formats follow the upstream sources
 * (k8s.io/apimachinery): a list is {"kind": "ResourceSliceList",
 * "apiVersion": "resource.k8s.io/v1", "metadata": {"resourceVersion"},
 * "items"}, a watch is a chunked stream of {"type", "object"} lines, an
 * error is a Status object {"kind": "Status", "status": "Failure",
 * "reason", "message", "code"}, and an expired resourceVersion on a watch
 * is an ERROR event holding a Status with code 410 ("Expired").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "fakeapi.h"
#include "fakeapi_http.h"
#include "fakeapi_tls.h"

#define MAX_CONNS 64
#define MAX_FAULTS 16
#define MAX_HISTORY 4096
#define LOG_RING 512
#define SLICES "/apis/resource.k8s.io/v1/resourceslices"
#define CLAIMS_NS "/apis/resource.k8s.io/v1/namespaces/"
#define NODES "/api/v1/nodes/"

enum { C_GET, C_POST, C_PUT, C_DELETE, C_WATCH, C_OTHER, C_N };
static const char *const count_names[C_N] = { "GET", "POST", "PUT", "DELETE", "WATCH", "OTHER" };

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

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- state (f->mu held) ---- */

static cJSON *find_slice(struct fakeapi *f, const char *name, int *ret_idx) {
        int i = 0;
        cJSON *s;

        cJSON_ArrayForEach(s, f->slices) {
                const char *n = fa_jstr(s, "metadata", "name");
                if (n && strcmp(n, name) == 0) {
                        if (ret_idx)
                                *ret_idx = i;
                        return s;
                }
                i++;
        }
        return NULL;
}

static void set_rv(cJSON *obj, uint64_t rv) {
        cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        char buf[32];

        snprintf(buf, sizeof(buf), "%" PRIu64, rv);
        cJSON_DeleteItemFromObjectCaseSensitive(md, "resourceVersion");
        cJSON_AddStringToObject(md, "resourceVersion", buf);
}

static void record(struct fakeapi *f, const char *type, const cJSON *obj) {
        if (f->n_hist == MAX_HISTORY) {
                /* Compaction: the oldest event goes, and with it every
                 * resourceVersion up to it. */
                f->min_rv = f->hist[0].rv;
                cJSON_Delete(f->hist[0].obj);
                memmove(f->hist, f->hist + 1, sizeof(f->hist[0]) * (MAX_HISTORY - 1));
                f->n_hist--;
        }
        f->hist[f->n_hist++] =
                (struct event){ .rv = f->rv, .type = type, .obj = cJSON_Duplicate(obj, true) };
        pthread_cond_broadcast(&f->cond);
}

/* ---- handlers (called without f->mu) ---- */

/* limit/continue as the API server pages: the continue token here is
 * just the index of the next match. */
static bool handle_list(struct fakeapi *f, SSL *s, const struct request *r) {
        char *sel = fa_query_get(r->query, "fieldSelector");
        char *lim = fa_query_get(r->query, "limit"), *cont = fa_query_get(r->query, "continue");
        unsigned long limit = lim ? strtoul(lim, NULL, 10) : 0, from = 0, match = 0;
        cJSON *list = cJSON_CreateObject(), *items, *md, *it;
        char rvbuf[32];
        bool ok = true, bad = false;

        if (cont)
                from = strtoul(cont, NULL, 10);
        free(lim);
        free(cont);

        cJSON_AddStringToObject(list, "kind", "ResourceSliceList");
        cJSON_AddStringToObject(list, "apiVersion", "resource.k8s.io/v1");
        md = cJSON_AddObjectToObject(list, "metadata");
        items = cJSON_AddArrayToObject(list, "items");
        pthread_mutex_lock(&f->mu);
        snprintf(rvbuf, sizeof(rvbuf), "%" PRIu64, f->rv);
        cJSON_AddStringToObject(md, "resourceVersion", rvbuf);
        cJSON_ArrayForEach(it, f->slices) {
                int m = fa_selector_match(sel, it);
                if (m < 0)
                        bad = true;
                if (m <= 0 || match++ < from)
                        continue;
                if (limit && match > from + limit) {
                        snprintf(rvbuf, sizeof(rvbuf), "%lu", from + limit);
                        cJSON_AddStringToObject(md, "continue", rvbuf);
                        break;
                }
                cJSON_AddItemToArray(items, cJSON_Duplicate(it, true));
        }
        f->lists_paged += limit != 0;
        pthread_mutex_unlock(&f->mu);
        if (bad)
                ok = fa_send_status(s, 400, "BadRequest", "field label not supported", 0);
        else
                ok = fa_send_json(s, 200, list);
        cJSON_Delete(list);
        free(sel);
        return ok;
}

static bool send_event(SSL *s, const char *type, const cJSON *obj) {
        cJSON *ev = cJSON_CreateObject();
        char *txt;
        bool ok;

        cJSON_AddStringToObject(ev, "type", type);
        cJSON_AddItemToObject(ev, "object", cJSON_Duplicate(obj, true));
        txt = cJSON_PrintUnformatted(ev);
        MUST(txt);
        {
                char *line = NULL;
                int n = asprintf(&line, "%s\n", txt);
                MUST(n > 0);
                ok = fa_send_chunk(s, line, (size_t)n);
                free(line);
        }
        free(txt);
        cJSON_Delete(ev);
        return ok;
}

static bool send_expired(SSL *s) {
        cJSON *st = fa_status_obj(410, "Expired", "too old resource version");
        bool ok = send_event(s, "ERROR", st);

        cJSON_Delete(st);
        return ok;
}

static bool peer_gone(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };

        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static bool handle_watch(struct fakeapi *f, SSL *s, int fd, const struct request *r) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
        char *sel = fa_query_get(r->query, "fieldSelector");
        char *rvs = fa_query_get(r->query, "resourceVersion");
        char *tos = fa_query_get(r->query, "timeoutSeconds");
        uint64_t pos = rvs ? strtoull(rvs, NULL, 10) : 0;
        uint64_t deadline =
                now_ns() + (uint64_t)(tos ? strtoul(tos, NULL, 10) : 1800) * 1000000000u;
        bool ok = true;

        free(rvs);
        free(tos);
        pthread_mutex_lock(&f->mu);
        if (pos != 0 && pos < f->min_rv && f->expire_http) {
                pthread_mutex_unlock(&f->mu);
                free(sel);
                return fa_send_status(s, 410, "Expired", "too old resource version", 0);
        }
        pthread_mutex_unlock(&f->mu);
        if (!fa_send_all(s, head, sizeof(head) - 1)) {
                free(sel);
                return false;
        }
        pthread_mutex_lock(&f->mu);
        if (pos == 0) {
                /* "Any": the current state as ADDED events, then changes. */
                cJSON *it, *copy = cJSON_CreateArray();
                cJSON_ArrayForEach(it, f->slices) {
                        if (fa_selector_match(sel, it) > 0)
                                cJSON_AddItemToArray(copy, cJSON_Duplicate(it, true));
                }
                pos = f->rv;
                pthread_mutex_unlock(&f->mu);
                cJSON_ArrayForEach(it, copy) {
                        if (!(ok = send_event(s, "ADDED", it)))
                                break;
                }
                cJSON_Delete(copy);
                pthread_mutex_lock(&f->mu);
        }
        while (ok) {
                struct timespec ts;
                uint64_t wake;

                if (pos < f->min_rv) {
                        /* as_http: the stream just ends; the resumed
                         * watch then gets the 410 answer. */
                        if (!f->expire_http) {
                                pthread_mutex_unlock(&f->mu);
                                ok = send_expired(s);
                                pthread_mutex_lock(&f->mu);
                        }
                        break;
                }
                for (size_t i = 0; i < f->n_hist && ok; i++) {
                        struct event *e = &f->hist[i];
                        cJSON *obj;
                        const char *type;

                        if (e->rv <= pos)
                                continue;
                        pos = e->rv;
                        if (fa_selector_match(sel, e->obj) <= 0)
                                continue;
                        obj = cJSON_Duplicate(e->obj, true);
                        type = e->type;
                        pthread_mutex_unlock(&f->mu);
                        ok = send_event(s, type, obj);
                        cJSON_Delete(obj);
                        pthread_mutex_lock(&f->mu);
                        i = (size_t)-1; /* the history may have moved */
                }
                if (!ok || f->stopping || now_ns() >= deadline)
                        break;
                /* Wake at least every 100 ms to notice a client that went
                 * away (it restarted its watch), so threads do not pile up. */
                wake = now_ns() + 100000000u;
                if (wake > deadline)
                        wake = deadline;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                {
                        uint64_t delta = wake - now_ns();
                        ts.tv_sec += (time_t)(delta / 1000000000u);
                        ts.tv_nsec += (long)(delta % 1000000000u);
                        if (ts.tv_nsec >= 1000000000) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000;
                        }
                }
                pthread_cond_timedwait(&f->cond, &f->mu, &ts);
                if (f->n_hist == 0 || f->hist[f->n_hist - 1].rv <= pos) {
                        pthread_mutex_unlock(&f->mu);
                        if (peer_gone(fd))
                                ok = false;
                        pthread_mutex_lock(&f->mu);
                }
        }
        pthread_mutex_unlock(&f->mu);
        free(sel);
        return ok && fa_send_all(s, "0\r\n\r\n", 5);
}

static bool handle_create(struct fakeapi *f, SSL *s, const struct request *r) {
        cJSON *obj = cJSON_Parse(r->body), *copy;
        const char *bad, *name;
        char uid[64];
        bool ok;

        if (!obj || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(obj, "metadata"))) {
                cJSON_Delete(obj);
                return fa_send_status(s, 400, "BadRequest", "bad JSON", 0);
        }
        if ((bad = fa_slice_invalid(obj))) {
                cJSON_Delete(obj);
                return fa_send_status(s, 422, "Invalid", bad, 0);
        }
        if ((bad = fa_managed_fields(obj, NULL, r->query, r->user_agent))) {
                cJSON_Delete(obj);
                return fa_send_status(s, 422, "Invalid", bad, 0);
        }
        name = fa_jstr(obj, "metadata", "name");
        pthread_mutex_lock(&f->mu);
        if (find_slice(f, name, NULL)) {
                pthread_mutex_unlock(&f->mu);
                cJSON_Delete(obj);
                return fa_send_status(s, 409, "AlreadyExists", "resourceslices already exists", 0);
        }
        f->rv++;
        snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-%012" PRIu64, ++f->uid_seq);
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                                "uid");
        cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "uid", uid);
        set_rv(obj, f->rv);
        cJSON_AddItemToArray(f->slices, cJSON_Duplicate(obj, true));
        record(f, "ADDED", obj);
        copy = obj;
        pthread_mutex_unlock(&f->mu);
        ok = fa_send_json(s, 201, copy);
        cJSON_Delete(copy);
        return ok;
}

static bool handle_update(struct fakeapi *f, SSL *s, const struct request *r, const char *name) {
        cJSON *obj = cJSON_Parse(r->body), *cur;
        const char *bad, *want_rv, *cur_rv;
        int idx;
        bool ok;

        if (!obj)
                return fa_send_status(s, 400, "BadRequest", "bad JSON", 0);
        if ((bad = fa_slice_invalid(obj)) || strcmp(fa_jstr(obj, "metadata", "name"), name) != 0) {
                cJSON_Delete(obj);
                return fa_send_status(s, 422, "Invalid", bad ? bad : "metadata.name: differs", 0);
        }
        want_rv = fa_jstr(obj, "metadata", "resourceVersion");
        if (!want_rv) {
                cJSON_Delete(obj);
                return fa_send_status(
                        s, 422, "Invalid",
                        "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                        0);
        }
        pthread_mutex_lock(&f->mu);
        cur = find_slice(f, name, &idx);
        if (!cur) {
                pthread_mutex_unlock(&f->mu);
                cJSON_Delete(obj);
                return fa_send_status(s, 404, "NotFound", "resourceslices not found", 0);
        }
        cur_rv = fa_jstr(cur, "metadata", "resourceVersion");
        if (strcmp(cur_rv, want_rv) != 0) {
                pthread_mutex_unlock(&f->mu);
                cJSON_Delete(obj);
                return fa_send_status(
                        s, 409, "Conflict",
                        "the object has been modified; please apply your changes to the latest version and try again",
                        0);
        }
        if ((bad = fa_managed_fields(obj, cur, r->query, r->user_agent))) {
                pthread_mutex_unlock(&f->mu);
                cJSON_Delete(obj);
                return fa_send_status(s, 422, "Invalid", bad, 0);
        }
        f->rv++;
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                                "uid");
        cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "uid",
                                fa_jstr(cur, "metadata", "uid"));
        set_rv(obj, f->rv);
        cJSON_ReplaceItemInArray(f->slices, idx, cJSON_Duplicate(obj, true));
        record(f, "MODIFIED", obj);
        pthread_mutex_unlock(&f->mu);
        ok = fa_send_json(s, 200, obj);
        cJSON_Delete(obj);
        return ok;
}

/* f->mu held. */
static void delete_at(struct fakeapi *f, int idx) {
        cJSON *gone = cJSON_DetachItemFromArray(f->slices, idx);

        f->rv++;
        set_rv(gone, f->rv);
        record(f, "DELETED", gone);
        cJSON_Delete(gone);
}

static bool handle_delete(struct fakeapi *f, SSL *s, const char *name) {
        cJSON *cur, *copy;
        int idx;
        bool ok;

        pthread_mutex_lock(&f->mu);
        cur = find_slice(f, name, &idx);
        if (!cur) {
                pthread_mutex_unlock(&f->mu);
                return fa_send_status(s, 404, "NotFound", "resourceslices not found", 0);
        }
        copy = cJSON_Duplicate(cur, true);
        delete_at(f, idx);
        pthread_mutex_unlock(&f->mu);
        ok = fa_send_json(s, 200, copy);
        cJSON_Delete(copy);
        return ok;
}

static bool handle_get_slice(struct fakeapi *f, SSL *s, const char *name) {
        cJSON *cur, *copy = NULL;
        bool ok;

        pthread_mutex_lock(&f->mu);
        cur = find_slice(f, name, NULL);
        if (cur)
                copy = cJSON_Duplicate(cur, true);
        pthread_mutex_unlock(&f->mu);
        if (!copy)
                return fa_send_status(s, 404, "NotFound", "resourceslices not found", 0);
        ok = fa_send_json(s, 200, copy);
        cJSON_Delete(copy);
        return ok;
}

static bool handle_claim(struct fakeapi *f, SSL *s, const char *rest) {
        const char *slash = strchr(rest, '/');
        cJSON *c, *copy = NULL;
        bool ok;

        if (!slash || strncmp(slash, "/resourceclaims/", 16) != 0)
                return fa_send_status(s, 404, "NotFound", "no such path", 0);
        pthread_mutex_lock(&f->mu);
        cJSON_ArrayForEach(c, f->claims) {
                const char *ns = fa_jstr(c, "metadata", "namespace");
                const char *name = fa_jstr(c, "metadata", "name");
                if (ns && name && strlen(ns) == (size_t)(slash - rest) &&
                    strncmp(ns, rest, (size_t)(slash - rest)) == 0 &&
                    strcmp(name, slash + 16) == 0) {
                        copy = cJSON_Duplicate(c, true);
                        break;
                }
        }
        pthread_mutex_unlock(&f->mu);
        if (!copy)
                return fa_send_status(s, 404, "NotFound", "resourceclaims not found", 0);
        ok = fa_send_json(s, 200, copy);
        cJSON_Delete(copy);
        return ok;
}

/* ---- nodes' labels: GET and a watch on one node (metadata.name) ---- */

static void node_add_labels(struct fakeapi *f, cJSON *md, const char *name) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(f->node_labels, name);

        if (l)
                cJSON_AddItemToObject(md, "labels", cJSON_Duplicate(l, true));
}

/* The Node object as a watch sends it (f->mu held); NULL when unknown. */
static cJSON *node_object(struct fakeapi *f, const char *name) {
        const char *uid = fa_jstr(f->nodes, name, NULL);
        cJSON *node, *md;

        if (!uid)
                return NULL;
        node = cJSON_CreateObject();
        cJSON_AddStringToObject(node, "kind", "Node");
        cJSON_AddStringToObject(node, "apiVersion", "v1");
        md = cJSON_AddObjectToObject(node, "metadata");
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "uid", uid);
        node_add_labels(f, md, name);
        return node;
}

/* watch=true&fieldSelector=metadata.name=NAME, no resourceVersion: the
 * node as it is (ADDED), then a MODIFIED per label change. */
static bool handle_node_watch(struct fakeapi *f, SSL *s, int fd, const struct request *r) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
        char *sel = fa_query_get(r->query, "fieldSelector");
        char *tos = fa_query_get(r->query, "timeoutSeconds");
        uint64_t deadline =
                now_ns() + (uint64_t)(tos ? strtoul(tos, NULL, 10) : 1800) * 1000000000u;
        const char *name = sel && strncmp(sel, "metadata.name=", 14) == 0 ? sel + 14 : NULL;
        const char *type = "ADDED";
        uint64_t gen, drops;
        bool ok;

        free(tos);
        if (!name) {
                free(sel);
                return fa_send_status(s, 400, "BadRequest", "only metadata.name is supported", 0);
        }
        ok = fa_send_all(s, head, sizeof(head) - 1);
        pthread_mutex_lock(&f->mu);
        gen = f->node_gen;
        drops = f->node_drops;
        while (ok && drops == f->node_drops) {
                cJSON *node = node_object(f, name);
                if (node) {
                        pthread_mutex_unlock(&f->mu);
                        ok = send_event(s, type, node);
                        cJSON_Delete(node);
                        pthread_mutex_lock(&f->mu);
                }
                type = "MODIFIED";
                while (ok && f->node_gen == gen && drops == f->node_drops && !f->stopping &&
                       now_ns() < deadline && !peer_gone(fd)) {
                        struct timespec ts;
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        ts.tv_nsec += 100000000;
                        if (ts.tv_nsec >= 1000000000) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000;
                        }
                        pthread_cond_timedwait(&f->cond, &f->mu, &ts);
                }
                if (f->node_gen == gen)
                        break;
                gen = f->node_gen;
        }
        pthread_mutex_unlock(&f->mu);
        free(sel);
        return ok && fa_send_all(s, "0\r\n\r\n", 5);
}

void fakeapi_end_node_watches(struct fakeapi *f) {
        pthread_mutex_lock(&f->mu);
        f->node_drops++;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_set_node_labels(struct fakeapi *f, const char *name, cJSON *labels) {
        pthread_mutex_lock(&f->mu);
        cJSON_DeleteItemFromObjectCaseSensitive(f->node_labels, name);
        if (labels)
                cJSON_AddItemToObject(f->node_labels, name, labels);
        f->node_gen++;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
}

static bool handle_node(struct fakeapi *f, SSL *s, const char *name) {
        cJSON *node = NULL, *md;
        const char *uid;
        bool ok;

        pthread_mutex_lock(&f->mu);
        uid = fa_jstr(f->nodes, name, NULL);
        if (uid) {
                node = cJSON_CreateObject();
                cJSON_AddStringToObject(node, "kind", "Node");
                cJSON_AddStringToObject(node, "apiVersion", "v1");
                md = cJSON_AddObjectToObject(node, "metadata");
                cJSON_AddStringToObject(md, "name", name);
                cJSON_AddStringToObject(md, "uid", uid);
                node_add_labels(f, md, name);
        }
        pthread_mutex_unlock(&f->mu);
        if (!node)
                return fa_send_status(s, 404, "NotFound", "nodes not found", 0);
        ok = fa_send_json(s, 200, node);
        cJSON_Delete(node);
        return ok;
}

/* Counters, the log ring, faults and auth; false: stop handling (*ok
 * says whether the connection survives). */
static bool admit(struct fakeapi *f, SSL *s, const struct request *r, bool watch, bool *ok) {
        int c = C_OTHER, status = -1, retry_after = 0;
        struct logent *le;
        bool authorized;

        for (int i = 0; i < C_N; i++)
                if (strcmp(r->method, count_names[i]) == 0)
                        c = i;
        if (c == C_GET && watch)
                c = C_WATCH;
        pthread_mutex_lock(&f->mu);
        f->counts[c]++;
        le = &f->log[f->n_log++ % LOG_RING];
        snprintf(le->method, sizeof(le->method), "%s", r->method);
        snprintf(le->path, sizeof(le->path), "%s", r->path);
        le->ns = now_ns();
        for (size_t i = 0; i < f->n_faults; i++) {
                struct fault *ft = &f->faults[i];
                if (ft->n == 0 || (ft->method && strcmp(ft->method, r->method) != 0) ||
                    (ft->prefix && strncmp(r->path, ft->prefix, strlen(ft->prefix)) != 0))
                        continue;
                ft->n--;
                status = ft->status;
                retry_after = ft->retry_after;
                break;
        }
        authorized = !f->token || (r->auth && strncmp(r->auth, "Bearer ", 7) == 0 &&
                                   strcmp(r->auth + 7, f->token) == 0);
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);

        if (status == 0) {
                *ok = false;
                return false;
        }
        if (status > 0) {
                *ok = fa_send_status(s, status, status == 429 ? "TooManyRequests" : "InternalError",
                                     "injected fault", retry_after);
                return false;
        }
        if (!authorized) {
                *ok = fa_send_status(s, 401, "Unauthorized", "Unauthorized", 0);
                return false;
        }
        return true;
}

static bool handle(struct fakeapi *f, SSL *s, int fd, const struct request *r) {
        fakeapi_hook_fn *hook;
        void *hook_ctx;
        char *w = fa_query_get(r->query, "watch");
        bool watch = w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0);
        bool ok = true;
        const char *rest;

        free(w);
        if (!admit(f, s, r, watch, &ok))
                return ok;
        pthread_mutex_lock(&f->mu);
        hook = f->hook;
        hook_ctx = f->hook_ctx;
        pthread_mutex_unlock(&f->mu);
        if (hook &&
            hook(hook_ctx, (struct fakeapi_peer *)s, r->method, r->path, r->query, watch, &ok))
                return ok;
        if (strcmp(r->path, SLICES) == 0) {
                if (strcmp(r->method, "GET") == 0)
                        return watch ? handle_watch(f, s, fd, r) : handle_list(f, s, r);
                if (strcmp(r->method, "POST") == 0)
                        return handle_create(f, s, r);
        } else if (strncmp(r->path, SLICES "/", sizeof(SLICES)) == 0) {
                rest = r->path + sizeof(SLICES);
                if (strcmp(r->method, "GET") == 0)
                        return handle_get_slice(f, s, rest);
                if (strcmp(r->method, "PUT") == 0)
                        return handle_update(f, s, r, rest);
                if (strcmp(r->method, "DELETE") == 0)
                        return handle_delete(f, s, rest);
        } else if (strncmp(r->path, CLAIMS_NS, strlen(CLAIMS_NS)) == 0) {
                if (strcmp(r->method, "GET") == 0)
                        return handle_claim(f, s, r->path + strlen(CLAIMS_NS));
        } else if (strcmp(r->path, "/api/v1/nodes") == 0 && watch) {
                if (strcmp(r->method, "GET") == 0)
                        return handle_node_watch(f, s, fd, r);
        } else if (strncmp(r->path, NODES, strlen(NODES)) == 0) {
                if (strcmp(r->method, "GET") == 0)
                        return handle_node(f, s, r->path + strlen(NODES));
        } else
                return fa_send_status(s, 404, "NotFound",
                                      "the server could not find the requested resource", 0);
        return fa_send_status(s, 405, "MethodNotAllowed", "method not allowed", 0);
}

static void *conn_main(void *arg) {
        struct conn *c = arg;
        struct rbuf *b = calloc(1, sizeof(*b));
        SSL *s = SSL_new(c->f->ssl);
        sigset_t set;

        /* A client that hangs up mid-answer must not kill the test. */
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        MUST(b && s);
        b->ssl = s;
        b->fd = c->fd;
        SSL_set_fd(s, c->fd);
        if (SSL_accept(s) == 1) {
                for (;;) {
                        struct request r;
                        bool ok;

                        if (!fa_read_request(b, &r)) {
                                fa_request_clear(&r);
                                break;
                        }
                        ok = handle(c->f, s, c->fd, &r) && !r.close;
                        fa_request_clear(&r);
                        if (!ok)
                                break;
                }
        }
        ERR_clear_error();
        SSL_free(s);
        free(b);
        shutdown(c->fd, SHUT_RDWR);
        pthread_mutex_lock(&c->f->mu);
        c->done = true;
        pthread_mutex_unlock(&c->f->mu);
        ERR_clear_error();
        return NULL;
}

/* Join finished connection threads, with f->mu held. */
static void reap(struct fakeapi *f, bool all) {
        for (size_t i = 0; i < MAX_CONNS; i++) {
                struct conn *c = &f->conns[i];
                if (!c->used || (!c->done && !all))
                        continue;
                pthread_mutex_unlock(&f->mu);
                pthread_join(c->th, NULL);
                pthread_mutex_lock(&f->mu);
                close(c->fd);
                c->used = false;
        }
}

static void *accept_main(void *arg) {
        struct fakeapi *f = arg;
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        for (;;) {
                struct pollfd p[2] = { { .fd = f->lfd, .events = POLLIN },
                                       { .fd = f->stop_pipe[0], .events = POLLIN } };
                struct conn *slot = NULL;
                int fd;

                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
                if (!(p[0].revents & POLLIN))
                        continue;
                fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                /* As Go's net/http (the real API server) does: an answer
                 * written in pieces (TLS records, a head then a body)
                 * would otherwise wait for the client's delayed ACK,
                 * 40 ms a request, which the benchmark would report as
                 * the daemon's. */
                (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
                pthread_mutex_lock(&f->mu);
                reap(f, false);
                for (size_t i = 0; i < MAX_CONNS && !slot; i++)
                        if (!f->conns[i].used)
                                slot = &f->conns[i];
                if (slot) {
                        *slot = (struct conn){ .f = f, .fd = fd, .used = true };
                        MUST(pthread_create(&slot->th, NULL, conn_main, slot) == 0);
                } else
                        close(fd);
                pthread_mutex_unlock(&f->mu);
        }
        return NULL;
}

struct fakeapi *fakeapi_new(bool listening) {
        struct fakeapi *f = calloc(1, sizeof(*f));
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        pthread_condattr_t ca;

        MUST(f);
        pthread_mutex_init(&f->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&f->cond, &ca);
        pthread_condattr_destroy(&ca);
        snprintf(f->dir, sizeof(f->dir), "/tmp/fakeapi-XXXXXX");
        MUST(mkdtemp(f->dir));
        snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", f->dir);
        f->ssl = fakeapi_tls_make(f->ca);
        f->slices = cJSON_CreateArray();
        f->claims = cJSON_CreateArray();
        f->nodes = cJSON_CreateObject();
        f->node_labels = cJSON_CreateObject();
        f->rv = 1000;
        f->min_rv = 0;

        f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        MUST(f->lfd >= 0);
        MUST(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
        MUST(getsockname(f->lfd, (struct sockaddr *)&sa, &len) == 0);
        snprintf(f->url, sizeof(f->url), "https://127.0.0.1:%u", ntohs(sa.sin_port));
        MUST(pipe2(f->stop_pipe, O_CLOEXEC) == 0);
        if (listening)
                fakeapi_listen(f);
        return f;
}

void fakeapi_listen(struct fakeapi *f) {
        MUST(!f->accepting);
        MUST(listen(f->lfd, 64) == 0);
        f->accepting = true;
        MUST(pthread_create(&f->acceptor, NULL, accept_main, f) == 0);
}

static void rm_dir(const char *dir) {
        char path[192];

        snprintf(path, sizeof(path), "%s/ca.crt", dir);
        unlink(path);
        rmdir(dir);
}

void fakeapi_free(struct fakeapi *f) {
        if (!f)
                return;
        pthread_mutex_lock(&f->mu);
        f->stopping = true;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
        if (f->accepting) {
                MUST(write(f->stop_pipe[1], "x", 1) == 1);
                pthread_join(f->acceptor, NULL);
        }
        pthread_mutex_lock(&f->mu);
        for (size_t i = 0; i < MAX_CONNS; i++)
                if (f->conns[i].used)
                        shutdown(f->conns[i].fd, SHUT_RDWR);
        reap(f, true);
        pthread_mutex_unlock(&f->mu);
        close(f->lfd);
        close(f->stop_pipe[0]);
        close(f->stop_pipe[1]);
        SSL_CTX_free(f->ssl);
        for (size_t i = 0; i < f->n_hist; i++)
                cJSON_Delete(f->hist[i].obj);
        for (size_t i = 0; i < f->n_faults; i++) {
                free(f->faults[i].method);
                free(f->faults[i].prefix);
        }
        cJSON_Delete(f->slices);
        cJSON_Delete(f->claims);
        cJSON_Delete(f->nodes);
        cJSON_Delete(f->node_labels);
        free(f->token);
        rm_dir(f->dir);
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->mu);
        free(f);
}

const char *fakeapi_url(const struct fakeapi *f) {
        return f->url;
}

const char *fakeapi_ca_file(const struct fakeapi *f) {
        return f->ca;
}

const char *fakeapi_dir(const struct fakeapi *f) {
        return f->dir;
}

void fakeapi_set_token(struct fakeapi *f, const char *token) {
        pthread_mutex_lock(&f->mu);
        free(f->token);
        f->token = token ? strdup(token) : NULL;
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_add_node(struct fakeapi *f, const char *name, const char *uid) {
        pthread_mutex_lock(&f->mu);
        cJSON_DeleteItemFromObjectCaseSensitive(f->nodes, name);
        cJSON_AddStringToObject(f->nodes, name, uid);
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_add_claim(struct fakeapi *f, cJSON *claim) {
        MUST(claim);
        pthread_mutex_lock(&f->mu);
        cJSON_AddItemToArray(f->claims, claim);
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_fault(struct fakeapi *f, const char *method, const char *path_prefix, unsigned n,
                   int status, int retry_after) {
        pthread_mutex_lock(&f->mu);
        MUST(f->n_faults < MAX_FAULTS);
        f->faults[f->n_faults++] =
                (struct fault){ .method = method ? strdup(method) : NULL,
                                .prefix = path_prefix ? strdup(path_prefix) : NULL,
                                .n = n,
                                .status = status,
                                .retry_after = retry_after };
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_expire(struct fakeapi *f, bool as_http) {
        pthread_mutex_lock(&f->mu);
        for (size_t i = 0; i < f->n_hist; i++)
                cJSON_Delete(f->hist[i].obj);
        f->n_hist = 0;
        /* As after an etcd compaction: every version so far is gone, a
         * fresh list (at the new version) can be watched from. */
        f->rv++;
        f->min_rv = f->rv;
        f->expire_http = as_http;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_wipe(struct fakeapi *f, const char *node) {
        pthread_mutex_lock(&f->mu);
        for (int i = cJSON_GetArraySize(f->slices) - 1; i >= 0; i--) {
                const char *n = fa_jstr(cJSON_GetArrayItem(f->slices, i), "spec", "nodeName");
                if (n && strcmp(n, node) == 0)
                        delete_at(f, i);
        }
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_put_slice(struct fakeapi *f, cJSON *slice) {
        const char *name = fa_jstr(slice, "metadata", "name");
        int idx;
        bool had;

        MUST(name);
        pthread_mutex_lock(&f->mu);
        had = find_slice(f, name, &idx) != NULL;
        f->rv++;
        set_rv(slice, f->rv);
        if (had)
                cJSON_ReplaceItemInArray(f->slices, idx, cJSON_Duplicate(slice, true));
        else
                cJSON_AddItemToArray(f->slices, cJSON_Duplicate(slice, true));
        record(f, had ? "MODIFIED" : "ADDED", slice);
        pthread_mutex_unlock(&f->mu);
        cJSON_Delete(slice);
}

unsigned fakeapi_count(struct fakeapi *f, const char *method) {
        unsigned n = 0;

        pthread_mutex_lock(&f->mu);
        for (int i = 0; i < C_N; i++)
                if (strcmp(method, count_names[i]) == 0)
                        n = f->counts[i];
        pthread_mutex_unlock(&f->mu);
        return n;
}

uint64_t fakeapi_last_request_ns(struct fakeapi *f, const char *method, const char *path_prefix) {
        uint64_t t = 0;
        size_t n;

        pthread_mutex_lock(&f->mu);
        n = f->n_log < LOG_RING ? f->n_log : LOG_RING;
        for (size_t i = 0; i < n; i++) {
                const struct logent *le = &f->log[i];
                if ((method && strcmp(le->method, method) != 0) ||
                    (path_prefix && strncmp(le->path, path_prefix, strlen(path_prefix)) != 0))
                        continue;
                if (le->ns > t)
                        t = le->ns;
        }
        pthread_mutex_unlock(&f->mu);
        return t;
}

cJSON *fakeapi_slices(struct fakeapi *f) {
        cJSON *copy;

        pthread_mutex_lock(&f->mu);
        copy = cJSON_Duplicate(f->slices, true);
        pthread_mutex_unlock(&f->mu);
        MUST(copy);
        return copy;
}

bool fakeapi_wait_count(struct fakeapi *f, const char *method, unsigned n, int timeout_ms) {
        struct timespec ts;
        int c = -1;

        for (int i = 0; i < C_N; i++)
                if (strcmp(method, count_names[i]) == 0)
                        c = i;
        if (c < 0)
                return false;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&f->mu);
        while (f->counts[c] < n)
                if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) == ETIMEDOUT)
                        break;
        bool held = f->counts[c] >= n;
        pthread_mutex_unlock(&f->mu);
        return held;
}

bool fakeapi_wait(struct fakeapi *f, bool (*pred)(const cJSON *slices, void *ctx), void *ctx,
                  int timeout_ms) {
        struct timespec ts;
        bool held;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&f->mu);
        while (!(held = pred(f->slices, ctx)))
                if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) == ETIMEDOUT) {
                        held = pred(f->slices, ctx);
                        break;
                }
        pthread_mutex_unlock(&f->mu);
        return held;
}

void fakeapi_set_hook(struct fakeapi *f, fakeapi_hook_fn *fn, void *ctx) {
        pthread_mutex_lock(&f->mu);
        f->hook = fn;
        f->hook_ctx = ctx;
        pthread_mutex_unlock(&f->mu);
}

unsigned fakeapi_lists_paged(struct fakeapi *f) {
        unsigned n;

        pthread_mutex_lock(&f->mu);
        n = f->lists_paged;
        pthread_mutex_unlock(&f->mu);
        return n;
}

bool fakeapi_peer_send(struct fakeapi_peer *p, const void *data, size_t n) {
        return fa_send_all((SSL *)p, data, n);
}

bool fakeapi_peer_chunk(struct fakeapi_peer *p, const void *data, size_t n) {
        return fa_send_chunk((SSL *)p, data, n);
}

bool fakeapi_peer_answer(struct fakeapi_peer *p, int code, const char *body) {
        return fa_send_response((SSL *)p, code, body, 0, false);
}
