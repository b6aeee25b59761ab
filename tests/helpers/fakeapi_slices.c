/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi's ResourceSlice store (list with pages, watch with history and
 * 410, create, update, delete) and its claims, as the API server answers
 * them; see fakeapi.c for the formats. */
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

#include "fakeapi_internal.h"

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
bool fa_handle_list(struct fakeapi *f, SSL *s, const struct request *r) {
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

bool fa_send_event(SSL *s, const char *type, const cJSON *obj) {
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
        bool ok = fa_send_event(s, "ERROR", st);

        cJSON_Delete(st);
        return ok;
}

bool fa_peer_gone(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };

        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

bool fa_handle_watch(struct fakeapi *f, SSL *s, int fd, const struct request *r) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
        char *sel = fa_query_get(r->query, "fieldSelector");
        char *rvs = fa_query_get(r->query, "resourceVersion");
        char *tos = fa_query_get(r->query, "timeoutSeconds");
        uint64_t pos = rvs ? strtoull(rvs, NULL, 10) : 0;
        uint64_t deadline =
                fa_now_ns() + (uint64_t)(tos ? strtoul(tos, NULL, 10) : 1800) * 1000000000u;
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
                        if (!(ok = fa_send_event(s, "ADDED", it)))
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
                        ok = fa_send_event(s, type, obj);
                        cJSON_Delete(obj);
                        pthread_mutex_lock(&f->mu);
                        i = (size_t)-1; /* the history may have moved */
                }
                if (!ok || f->stopping || fa_now_ns() >= deadline)
                        break;
                /* Wake at least every 100 ms to notice a client that went
                 * away (it restarted its watch), so threads do not pile up. */
                wake = fa_now_ns() + 100000000u;
                if (wake > deadline)
                        wake = deadline;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                {
                        uint64_t delta = wake - fa_now_ns();
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
                        if (fa_peer_gone(fd))
                                ok = false;
                        pthread_mutex_lock(&f->mu);
                }
        }
        pthread_mutex_unlock(&f->mu);
        free(sel);
        return ok && fa_send_all(s, "0\r\n\r\n", 5);
}

bool fa_handle_create(struct fakeapi *f, SSL *s, const struct request *r) {
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

bool fa_handle_update(struct fakeapi *f, SSL *s, const struct request *r, const char *name) {
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

bool fa_handle_delete(struct fakeapi *f, SSL *s, const char *name) {
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

bool fa_handle_get_slice(struct fakeapi *f, SSL *s, const char *name) {
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

bool fa_handle_claim(struct fakeapi *f, SSL *s, const char *rest) {
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

void fakeapi_add_claim(struct fakeapi *f, cJSON *claim) {
        MUST(claim);
        pthread_mutex_lock(&f->mu);
        cJSON_AddItemToArray(f->claims, claim);
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

cJSON *fakeapi_slices(struct fakeapi *f) {
        cJSON *copy;

        pthread_mutex_lock(&f->mu);
        copy = cJSON_Duplicate(f->slices, true);
        pthread_mutex_unlock(&f->mu);
        MUST(copy);
        return copy;
}

bool fakeapi_wait(struct fakeapi *f, bool (*pred)(const cJSON *slices, void *ctx), void *ctx,
                  int timeout_ms) {
        struct timespec ts;
        bool held;

        fa_deadline(&ts, timeout_ms);
        pthread_mutex_lock(&f->mu);
        while (!(held = pred(f->slices, ctx)))
                if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) == ETIMEDOUT) {
                        held = pred(f->slices, ctx);
                        break;
                }
        pthread_mutex_unlock(&f->mu);
        return held;
}
