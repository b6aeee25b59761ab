/* SPDX-License-Identifier: Apache-2.0 */
/* Keeping this node's ResourceSlices exactly as wanted, on cdiplug-kube.
 *
 * The thread GETs the Node once (its uid, for the owner reference), lists
 * the slices of this node and driver, then watches them from the list's
 * resourceVersion. What it has seen is kept per slice name; every step
 * compares it with what the pools want and makes one write (create,
 * update, delete), the next step the next one, until nothing differs. So
 * a wipe by the kubelet (DELETED events), a change by another writer, a
 * 409 (relist, then compare again) or a lost answer all end the same way:
 * with exactly the wanted slices.
 *
 * spec.pool.generation goes up whenever a pool's devices change (the
 * scheduler uses the highest generation it sees and ignores older
 * slices); all slices of a pool carry the same one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"
#include "log.h"
#include "loop.h"

#define SLICES_PATH "/apis/resource.k8s.io/v1/resourceslices"

struct op {
        enum kube_wop kind;
        char *name;
        cJSON *body; /* create, update */
};

static size_t watch_write(struct kube_xfer *x, const char *p, size_t n);

static uint64_t now_ns(void) {
        return (uint64_t)(dp_mono_seconds() * 1e9);
}

/* ---- pools ---- */

static void op_clear(struct op *op) {
        free(op->name);
        cJSON_Delete(op->body);
        memset(op, 0, sizeof(*op));
}

static struct kube_pool *pool_find(struct kube *k, const char *name) {
        for (struct kube_pool *p = k->pools; p; p = p->next)
                if (strcmp(p->name, name) == 0)
                        return p;
        return NULL;
}

static void pool_free(struct kube_pool *p) {
        free(p->name);
        cJSON_Delete(p->want);
        free(p);
}

void kube_pools_free(struct kube *k) {
        while (k->pools) {
                struct kube_pool *p = k->pools;
                k->pools = p->next;
                pool_free(p);
        }
}

static int pool_op(struct kube *k, struct kube_pool *p, struct op *op);
static void published(struct kube *k, struct kube_pool *p);

void kube_pool_apply(struct kube *k, struct kube_inbox *in) {
        struct kube_pool *p;
        struct op op = { 0 };

        if (!in->pool) {
                k->hold_leftovers = false;
                free(in);
                return;
        }
        p = pool_find(k, in->pool);

        /* A change written just before this one arrived counts as
         * published before the new one starts. */
        if (p && p->since_ns && !p->changed && k->state == KS_SYNCED && pool_op(k, p, &op) == 0)
                published(k, p);
        op_clear(&op);

        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p) {
                        log_with(LOG_ERR, &(struct log_fields){ .err = ENOMEM },
                                 "kube: pool \"%s\": out of memory; its slices stay as they are",
                                 in->pool);
                        goto out;
                }
                p->name = TAKE_PTR(in->pool);
                p->next = k->pools;
                k->pools = p;
                p->changed = true;
        } else if (!(p->want == NULL && in->devices == NULL) &&
                   !(p->want && in->devices && cJSON_Compare(p->want, in->devices, true)))
                p->changed = true;
        if (p->changed && !p->since_ns)
                p->since_ns = in->at_ns;
        cJSON_Delete(p->want);
        p->want = TAKE_PTR(in->devices);
out:
        cJSON_Delete(in->devices);
        free(in->pool);
        free(in);
}

static uint64_t max_seen_gen(struct kube *k, const char *pool) {
        const cJSON *s;
        uint64_t m = 0;

        cJSON_ArrayForEach(s, k->seen) {
                const char *sp = kube_slice_pool(s);
                if (sp && strcmp(sp, pool) == 0 && kube_slice_gen(s) > m)
                        m = kube_slice_gen(s);
        }
        return m;
}

static int op_write(struct op *op, enum kube_wop kind, const char *name, cJSON *body) {
        op->kind = kind;
        op->body = body;
        op->name = strdup(name);
        return op->name ? 1 : -ENOMEM;
}

/* A write pool_op found: with n NULL it is the one to make (1, in *op);
 * else it is only counted, and counting stops (1) at two. */
static int note(struct op *op, unsigned *n, enum kube_wop kind, const char *name, cJSON *body) {
        if (!n)
                return op_write(op, kind, name, body);
        cJSON_Delete(body);
        return ++*n >= 2;
}

/* The first write pool p needs, 1 (in *op), or 0 when its slices are
 * exactly as wanted; with n, how many writes it needs (up to 2) in *n. */
static int pool_writes(struct kube *k, struct kube_pool *p, struct op *op, unsigned *n) {
        size_t nd = p->want ? (size_t)cJSON_GetArraySize(p->want) : 0;
        size_t count = (nd + KUBE_SLICE_DEVICES - 1) / KUBE_SLICE_DEVICES;
        char **names = calloc(count + 1, sizeof(char *));
        const cJSON *s;
        int r = 0;

        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i < count && r == 0; i++)
                r = kube_slice_name(k->node, k->driver, p->name, i, &names[i]);
        for (size_t i = 0; i < count && r == 0; i++) {
                const cJSON *have = cJSON_GetObjectItemCaseSensitive(k->seen, names[i]);
                struct kube_slice_args a = { .name = names[i],
                                             .node = k->node,
                                             .node_uid = k->node_uid,
                                             .driver = k->driver,
                                             .pool = p->name,
                                             .generation = p->gen,
                                             .index = i,
                                             .count = count,
                                             .devices = p->want };
                cJSON *want;

                r = kube_slice_json(&a, &want);
                if (r < 0)
                        break;
                if (!have)
                        r = note(op, n, KW_CREATE, names[i], want);
                else if (!kube_json_subset(kube_member(want, "spec", NULL),
                                           kube_member(have, "spec", NULL))) {
                        const char *rv = kube_str_member(have, "metadata", "resourceVersion");
                        cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(want, "metadata"),
                                                "resourceVersion", rv ? rv : "");
                        r = note(op, n, KW_UPDATE, names[i], want);
                } else
                        cJSON_Delete(want);
        }
        if (r == 0)
                cJSON_ArrayForEach(s, k->seen) {
                        const char *sp = kube_slice_pool(s);
                        bool keep = false;

                        if (!sp || strcmp(sp, p->name) != 0)
                                continue;
                        for (size_t i = 0; i < count && !keep; i++)
                                keep = strcmp(s->string, names[i]) == 0;
                        if (!keep && (r = note(op, n, KW_DELETE, s->string, NULL)) != 0)
                                break;
                }
        for (size_t i = 0; i < count; i++)
                free(names[i]);
        free(names);
        return n && r > 0 ? 0 : r;
}

static int pool_op(struct kube *k, struct kube_pool *p, struct op *op) {
        return pool_writes(k, p, op, NULL);
}

/* A changed pool's generation: the scheduler ignores slices of an older
 * generation than the highest it sees, so a new one is needed when the
 * change takes more than one write (the slices in between would mix old
 * and new). One write (one slice's devices, in place) goes from one
 * consistent pool to the next under the same generation. */
static void choose_gen(struct kube *k, struct kube_pool *p) {
        uint64_t m = max_seen_gen(k, p->name);
        unsigned n = 0;

        if (m > p->gen)
                p->gen = m;
        if (p->gen > 0 && pool_writes(k, p, NULL, &n) == 0 && n <= 1)
                return;
        p->gen++;
}

static void published(struct kube *k, struct kube_pool *p) {
        double s;

        if (!p->since_ns)
                return;
        s = (double)(now_ns() - p->since_ns) / 1e9;
        p->since_ns = 0;
        pthread_mutex_lock(&k->mu);
        k->stats.publishes++;
        k->stats.publish_count++;
        k->stats.publish_seconds_sum += s;
        if (s > k->stats.publish_seconds_max)
                k->stats.publish_seconds_max = s;
        pthread_mutex_unlock(&k->mu);
        log_with(LOG_DEBUG, &(struct log_fields){ 0 },
                 "kube: pool \"%s\" published (generation %llu) in %.3f s", p->name,
                 (unsigned long long)p->gen, s);
}

/* The next write for all pools, 1 (in *op) or 0 when all is as wanted. */
static int next_op(struct kube *k, struct op *op) {
        struct kube_pool **pp = &k->pools;
        const cJSON *s;
        int r;

        while (*pp) {
                struct kube_pool *p = *pp;

                if (p->changed && p->want)
                        choose_gen(k, p);
                p->changed = false;
                r = pool_op(k, p, op);
                p->done = r == 0;
                if (r != 0)
                        return r;
                published(k, p);
                if (!p->want) {
                        /* Gone, and its slices with it. */
                        *pp = p->next;
                        pool_free(p);
                        continue;
                }
                pp = &p->next;
        }
        /* Slices of pools nobody wants (resources removed while we were
         * down, or renamed nodes' leftovers under our node name). */
        if (k->hold_leftovers)
                return 0;
        cJSON_ArrayForEach(s, k->seen) {
                const char *sp = kube_slice_pool(s);
                if (!sp || !pool_find(k, sp))
                        return op_write(op, KW_DELETE, s->string, NULL);
        }
        return 0;
}

/* ---- transfers ---- */

static bool log_now(unsigned failures) {
        return failures == 1 || failures % 16 == 0;
}

/* The longest wait after a failure of class cls (no answer: a server
 * restarting, see KUBE_BACKOFF_CONNECT_MAX_MS). */
static uint64_t cap_of(int cls) {
        return cls == KUBE_ERR_CONNECT ? KUBE_BACKOFF_CONNECT_MAX_MS : KUBE_BACKOFF_MAX_MS;
}

static void backoff(struct kube *k, const struct kube_xfer *x, unsigned *failures, uint64_t *due,
                    uint64_t now, int cls) {
        *due = now + kube_backoff_next(k, failures, cap_of(cls), x);
}

static void list_reset(struct kube *k) {
        cJSON_Delete(k->list_seen);
        k->list_seen = NULL;
        k->list_pages = 0;
        free(k->list_continue);
        k->list_continue = NULL;
}

static void relist(struct kube *k) {
        list_reset(k);
        k->state = k->node_uid ? KS_LIST : KS_NODE;
        kube_xfer_free(k->watch);
        k->watch = NULL;
}

static char *selector_query(struct kube *k) {
        _cleanup_free_ char *sel = NULL;
        char *esc, *q = NULL;

        if (xasprintf(&sel, "spec.nodeName=%s,spec.driver=%s", k->node, k->driver) < 0)
                return NULL;
        esc = sym_curl_easy_escape(NULL, sel, 0);
        if (!esc)
                return NULL;
        if (xasprintf(&q, "fieldSelector=%s", esc) < 0)
                q = NULL;
        sym_curl_free(esc);
        return q;
}

static void start_ctl(struct kube *k, uint64_t now) {
        _cleanup_free_ char *path = NULL, *q = NULL, *esc = NULL;
        int r = -ENOMEM;

        if (k->state == KS_NODE) {
                esc = sym_curl_easy_escape(NULL, k->node, 0);
                if (esc && xasprintf(&path, "/api/v1/nodes/%s", esc) == 0)
                        r = kube_xfer_new(k, KX_NODE, "GET", path, NULL, KUBE_OBJECT_MAX, &k->ctl);
        } else {
                /* In pages: each page's tree stays small whatever the
                 * whole list holds. */
                q = selector_query(k);
                esc = k->list_continue ? sym_curl_easy_escape(NULL, k->list_continue, 0) : NULL;
                if (q && (!k->list_continue || esc) &&
                    xasprintf(&path, SLICES_PATH "?%s&limit=%d%s%s", q, KUBE_LIST_PAGE,
                              esc ? "&continue=" : "", esc ? esc : "") == 0)
                        r = kube_xfer_new(k, KX_LIST, "GET", path, NULL, KUBE_PAGE_MAX, &k->ctl);
        }
        if (r < 0) {
                k->ctl = NULL;
                backoff(k, NULL, &k->ctl_failures, &k->ctl_due_ms, now, KUBE_ERR_CLIENT);
        }
}

static void start_write(struct kube *k, struct op *op, uint64_t now) {
        _cleanup_free_ char *path = NULL;
        char *esc = sym_curl_easy_escape(NULL, op->name, 0);
        char *body = NULL;
        const char *method = op->kind == KW_CREATE   ? "POST"
                             : op->kind == KW_UPDATE ? "PUT"
                                                     : "DELETE";
        char *mgr = sym_curl_easy_escape(NULL, k->manager, 0);
        int r = -ENOMEM;

        /* Our field manager: what tells our writes from others' in
         * managedFields (a DELETE takes none). */
        if (esc && mgr &&
            (op->kind == KW_CREATE   ? xasprintf(&path, SLICES_PATH "?fieldManager=%s", mgr)
             : op->kind == KW_UPDATE ? xasprintf(&path, SLICES_PATH "/%s?fieldManager=%s", esc, mgr)
                                     : xasprintf(&path, SLICES_PATH "/%s", esc)) == 0 &&
            (!op->body || (body = cJSON_PrintUnformatted(op->body))))
                r = kube_xfer_new(k, KX_WRITE, method, path, body, KUBE_OBJECT_MAX, &k->ctl);
        sym_curl_free(esc);
        sym_curl_free(mgr);
        if (r == 0) {
                k->ctl->op = op->kind;
                k->ctl->slice = TAKE_PTR(op->name);
                return;
        }
        k->ctl = NULL;
        backoff(k, NULL, &k->ctl_failures, &k->ctl_due_ms, now, KUBE_ERR_CLIENT);
}

static void start_watch(struct kube *k) {
        _cleanup_free_ char *q = selector_query(k), *path = NULL, *esc = NULL;
        int r = -ENOMEM;

        esc = k->rv ? sym_curl_easy_escape(NULL, k->rv, 0) : NULL;
        if (q && esc &&
            xasprintf(
                    &path,
                    SLICES_PATH
                    "?watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d&%s",
                    esc,
                    KUBE_WATCH_SECONDS_MIN +
                            (int)kube_jitter_ms(k, KUBE_WATCH_SECONDS_MAX - KUBE_WATCH_SECONDS_MIN),
                    q) == 0)
                r = kube_xfer_new(k, KX_WATCH, "GET", path, NULL, KUBE_EVENT_MAX, &k->watch);
        if (r >= 0) {
                /* Before any data: it comes only from curl_multi_perform,
                 * on this same thread, after this returns. */
                k->watch->stream = watch_write;
                k->watch->from_list = k->rv_from_list;
        }
        if (r < 0) {
                k->watch = NULL;
                backoff(k, NULL, &k->watch_failures, &k->watch_due_ms, dp_now_ms(),
                        KUBE_ERR_CLIENT);
        }
}

static void count_slices(struct kube *k) {
        uint64_t unpublished = 0;

        /* Yielded: a newer instance publishes the node's devices. */
        for (const struct kube_pool *p = k->pools; p && !k->yielded_to; p = p->next)
                unpublished += p->want && !p->done;
        pthread_mutex_lock(&k->mu);
        k->stats.slices = (uint64_t)cJSON_GetArraySize(k->seen);
        k->stats.pools_unpublished = unpublished;
        pthread_mutex_unlock(&k->mu);
}

/* More of our slices than we keep in view were offered: those in view
 * are as wanted now (the leftovers among them deleted), so a new list
 * sees the rest; with back-off, and said, since a server that keeps
 * offering more is not one we can catch up with. */
static void too_many(struct kube *k, uint64_t now) {
        backoff(k, NULL, &k->over_failures, &k->ctl_due_ms, now, KUBE_ERR_CLIENT);
        log_with(log_now(k->over_failures) ? LOG_WARN : LOG_DEBUG, &(struct log_fields){ 0 },
                 "kube: the API server holds more than %d ResourceSlices of node \"%s\" and "
                 "driver \"%s\"; those in view are as wanted, listing again in %llu ms "
                 "(time %u)",
                 KUBE_SLICES_MAX, k->node, k->driver, (unsigned long long)(k->ctl_due_ms - now),
                 k->over_failures);
        k->slices_over = false;
        relist(k);
}

void kube_reconcile_step(struct kube *k, uint64_t now) {
        struct op op = { 0 };
        int r;

        if (k->state == KS_SYNCED && !k->watch && now >= k->watch_due_ms)
                start_watch(k);
        /* Its answer's head came: the stream is open. */
        if (k->watch && !k->wlog[KUBE_WATCH_SLICES].up && kube_xfer_code(k->watch) == 200)
                kube_watch_up(k, KUBE_WATCH_SLICES, now);
        if (k->ctl || now < k->ctl_due_ms) {
                count_slices(k);
                return;
        }
        if (k->state != KS_SYNCED) {
                count_slices(k);
                start_ctl(k, now);
                return;
        }
        if (k->yielded_to) {
                count_slices(k);
                return;
        }
        r = next_op(k, &op);
        count_slices(k);
        if (r == 0 && k->slices_over)
                too_many(k, now);
        else if (r > 0 && !kube_repair_allowed(k, op.kind, op.name, now))
                ; /* another writer's change: repaired at repair_due_ms */
        else if (r > 0)
                start_write(k, &op, now);
        else if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = -r },
                         "kube: cannot build the slices: %s", strerror(-r));
                backoff(k, NULL, &k->ctl_failures, &k->ctl_due_ms, now, KUBE_ERR_CLIENT);
        }
        op_clear(&op);
}

static void ctl_failed(struct kube *k, struct kube_xfer *x, CURLcode rc, int cls, uint64_t now,
                       const char *what) {
        char why[320];

        kube_count_error(k, cls, x);
        if (cls == KUBE_ERR_UNAUTHORIZED && kube_xfer_code(x) == 401)
                kube_token_stale(k);
        backoff(k, x, &k->ctl_failures, &k->ctl_due_ms, now, cls);
        kube_xfer_describe(x, rc, why, sizeof(why));
        /* The first failure, one long wait, then every 16th: no line per
         * retry. */
        int level = log_now(k->ctl_failures) ? LOG_WARN : LOG_DEBUG;
        if (level == LOG_DEBUG && !k->ctl_wait_said && k->ctl_due_ms - now >= KUBE_LOG_WAIT_MS) {
                level = LOG_INFO;
                k->ctl_wait_said = true;
        }
        log_with(level, &(struct log_fields){ 0 }, "kube: %s: %s; retrying in %llu ms (failure %u)",
                 what, why, (unsigned long long)(k->ctl_due_ms - now), k->ctl_failures);
}

static void ctl_ok(struct kube *k) {
        k->ctl_wait_said = false;
        if (k->ctl_failures)
                log_with(LOG_INFO, &(struct log_fields){ 0 }, "kube: the API server answers again");
        k->ctl_failures = 0;
        k->ctl_due_ms = 0;
}

static void node_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now) {
        int cls = kube_xfer_class(x, rc);
        _cleanup_(kube_cjson_deletep) cJSON *o = NULL;
        const char *uid;
        char what[320];

        if (cls < 0 && kube_parse(x->buf, x->len, &o) < 0)
                x->bad = "the answer is not JSON, or too large to parse";
        uid = kube_str_member(o, "metadata", "uid");
        if (cls < 0 && !uid && !x->bad)
                x->bad = "the answer has no metadata.uid";
        if (cls < 0 && uid && (k->node_uid = strdup(uid))) {
                ctl_ok(k);
                k->state = KS_LIST;
                return;
        }
        snprintf(what, sizeof(what), "cannot get node \"%s\"", k->node);
        ctl_failed(k, x, rc, cls < 0 ? KUBE_ERR_CLIENT : cls, now, what);
}

/* The list is complete: what it holds is the truth. */
static void list_complete(struct kube *k, const char *rv) {
        cJSON_Delete(k->seen);
        k->seen = TAKE_PTR(k->list_seen);
        if (!k->slices_over)
                k->over_failures = 0;
        list_reset(k);
        /* The list is newer than every tombstone. */
        kube_gone_clear(k);
        kube_set_rv(k, rv);
        k->rv_from_list = true;
        k->list_endless_said = false;
        ctl_ok(k);
        k->state = KS_SYNCED;
        kube_xfer_free(k->watch);
        k->watch = NULL;
        k->watch_due_ms = 0;
        /* A pool needs a new generation exactly when its slices differ
         * from what it wants. */
        for (struct kube_pool *p = k->pools; p; p = p->next) {
                struct op op = { 0 };
                uint64_t m = max_seen_gen(k, p->name);

                if (m > p->gen)
                        p->gen = m;
                p->changed = pool_op(k, p, &op) != 0;
                p->done = !p->changed;
                op_clear(&op);
        }
}

/* A continue token after KUBE_LIST_PAGES_MAX pages: no real list is that
 * long, so the server (or a proxy) is broken. Given up, from the start
 * after a back-off, and said once until a list ends. */
static void endless(struct kube *k, uint64_t now) {
        list_reset(k);
        backoff(k, NULL, &k->ctl_failures, &k->ctl_due_ms, now, KUBE_ERR_CLIENT);
        log_with(k->list_endless_said ? LOG_DEBUG : LOG_WARN, &(struct log_fields){ 0 },
                 "kube: the ResourceSlice list did not end after %d pages (the API server keeps "
                 "sending a continue token); listing again from the start in %llu ms",
                 KUBE_LIST_PAGES_MAX, (unsigned long long)(k->ctl_due_ms - now));
        k->list_endless_said = true;
}

static void list_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now) {
        int cls = kube_xfer_class(x, rc), r = 0;
        _cleanup_(kube_cjson_deletep) cJSON *o = NULL;
        cJSON *items, *it;
        const char *rv, *cont;

        if (cls < 0 && (r = kube_parse(x->buf, x->len, &o)) < 0)
                x->bad = r == -E2BIG ? "the page has too many JSON values to parse"
                                     : "the answer is not JSON";
        items = cJSON_GetObjectItemCaseSensitive(o, "items");
        rv = kube_str_member(o, "metadata", "resourceVersion");
        cont = kube_str_member(o, "metadata", "continue");
        if (cls < 0 && !x->bad && (!cJSON_IsArray(items) || !rv))
                x->bad = "the answer is not a ResourceSliceList";
        /* Sent back in the next page's URL: past libcurl's 1 MiB request
         * bound that would fail as "Out of memory", which it is not. */
        if (cls < 0 && !x->bad && cont && strlen(cont) > KUBE_CONTINUE_MAX)
                x->bad = "its metadata.continue token is longer than the " KUBE_CONTINUE_MAX_TEXT
                         " bytes a page token may have";
        if (cls < 0 && x->bad)
                cls = KUBE_ERR_CLIENT;
        if (cls >= 0) {
                /* An expired continue token (410) too: from the start. */
                list_reset(k);
                ctl_failed(k, x, rc, cls, now, "cannot list ResourceSlices");
                return;
        }
        if (!k->list_seen && !(k->list_seen = cJSON_CreateObject())) {
                backoff(k, NULL, &k->ctl_failures, &k->ctl_due_ms, now, KUBE_ERR_CLIENT);
                return;
        }
        if (!k->list_continue)
                k->slices_over = false;
        while ((it = cJSON_DetachItemFromArray(items, 0)))
                if (kube_ours(k, it))
                        (void)kube_seen_put(k, k->list_seen, it);
                else
                        cJSON_Delete(it);
        if (cont && *cont && ++k->list_pages >= KUBE_LIST_PAGES_MAX) {
                endless(k, now);
                return;
        }
        if (cont && *cont) {
                char *c = strdup(cont);
                if (!c) {
                        list_reset(k);
                        backoff(k, NULL, &k->ctl_failures, &k->ctl_due_ms, now, KUBE_ERR_CLIENT);
                        return;
                }
                free(k->list_continue);
                k->list_continue = c;
                return; /* the next page at the next step */
        }
        list_complete(k, rv);
}

static void write_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now) {
        int cls = kube_xfer_class(x, rc);
        long code = kube_xfer_code(x);
        char what[400];

        if (cls < 0 || (x->op == KW_DELETE && code == 404)) {
                if (x->op == KW_DELETE) {
                        kube_seen_drop(k, x->slice, NULL, NULL);
                        kube_mine_set(k, x->slice, "");
                } else {
                        cJSON *o = NULL;
                        if (kube_parse(x->buf, x->len, &o) < 0 || !cJSON_IsObject(o) ||
                            !kube_ours(k, o)) {
                                /* Written, but we cannot tell what came back. */
                                cJSON_Delete(o);
                                relist(k);
                        } else {
                                kube_mine_set(k, x->slice,
                                              kube_str_member(o, "metadata", "resourceVersion"));
                                (void)kube_seen_put(k, k->seen, o);
                        }
                }
                ctl_ok(k);
                return;
        }
        snprintf(what, sizeof(what), "cannot %s ResourceSlice \"%s\"",
                 x->op == KW_CREATE   ? "create"
                 : x->op == KW_UPDATE ? "update"
                                      : "delete",
                 x->slice);
        ctl_failed(k, x, rc, cls, now, what);
        /* Our view is wrong (someone else wrote, or a lost answer): look
         * again before the next write. */
        if (code == 409 || code == 404)
                relist(k);
}

/* ---- the watch ---- */

static void watch_event(struct kube_xfer *x, const char *line, size_t len) {
        struct kube *k = x->k;
        _cleanup_(kube_cjson_deletep) cJSON *ev = NULL;
        int r = kube_parse(line, len, &ev);
        const char *type = kube_str_member(ev, "type", NULL);
        cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
        const char *rv = kube_str_member(obj, "metadata", "resourceVersion");
        const char *name = kube_str_member(obj, "metadata", "name");

        if (r == -E2BIG) {
                x->watch_end = -EMSGSIZE;
                return;
        }
        if (!type || !cJSON_IsObject(obj)) {
                x->watch_end = -EBADMSG;
                return;
        }
        if (strcmp(type, "ERROR") == 0) {
                const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
                x->watch_end = cJSON_IsNumber(code) && code->valueint == 410 ? -ESTALE : -EPROTO;
                return;
        }
        /* A healthy stream: the failures before it are forgiven. */
        x->delivered = true;
        k->watch_failures = 0;
        kube_watch_healthy(k, KUBE_WATCH_SLICES);
        k->rv_from_list = false;
        /* First: the object (and rv in it) may be gone after the put. */
        kube_set_rv(k, rv);
        if (strcmp(type, "BOOKMARK") != 0 && name && kube_ours(k, obj)) {
                if (strcmp(type, "DELETED") == 0)
                        kube_seen_drop(k, name, rv, kube_slice_pool(obj));
                else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)
                        (void)kube_seen_put(k, k->seen,
                                            cJSON_DetachItemFromObjectCaseSensitive(ev, "object"));
        }
}

static size_t watch_write(struct kube_xfer *x, const char *p, size_t n) {
        return kube_xfer_lines(x, p, n, watch_event);
}

/* The watch's resourceVersion is no longer served (410): what a
 * restarted or another API server answers, and what compaction does. A
 * relist after the least wait fixes it, whatever failures came before;
 * only a 410 at once on a fresh list's own version is a server in
 * trouble, which backs off. */
/* The wait is a first retry's, 0-1 s: after an API server restart every
 * watch of a fleet gets its 410 in the same instant (the server answers the
 * connections queued while it started all at once), and the lists that
 * follow are the costly requests; spread over a second, not a burst. */
static void watch_gone(struct kube *k, struct kube_xfer *x, bool quick, uint64_t now) {
        bool trouble = quick && x->from_list;
        uint64_t wait =
                trouble ? kube_backoff_next(k, &k->watch_failures, KUBE_BACKOFF_MAX_MS, NULL)
                        : kube_jitter_ms(k, KUBE_FIRST_RETRY_MS);

        kube_count_error(k, KUBE_ERR_GONE, NULL);
        k->ctl_due_ms = now + wait;
        kube_watch_down(k, KUBE_WATCH_SLICES, NULL, wait, now);
        log_with(!trouble || log_now(k->watch_failures) ? LOG_INFO : LOG_DEBUG,
                 &(struct log_fields){ 0 },
                 "kube: the watch's resourceVersion expired (410 Gone); listing again in %llu ms",
                 (unsigned long long)wait);
        relist(k);
}

static void watch_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now) {
        long code = kube_xfer_code(x);
        int cls = kube_xfer_class(x, rc);
        /* Ended as soon as it began: a server in trouble, not a history
         * that moved on; back off like any failure. */
        bool quick = now - x->started_ms < KUBE_WATCH_MIN_MS;
        char why[320];

        if (!quick && (x->delivered || now - x->started_ms >= KUBE_WATCH_HEALTHY_MS)) {
                k->watch_failures = 0;
                kube_watch_healthy(k, KUBE_WATCH_SLICES);
        }
        if (x->watch_end == -ESTALE || code == 410) {
                watch_gone(k, x, quick, now);
                return;
        }
        if (x->watch_end) {
                kube_count_error(k, KUBE_ERR_CLIENT, NULL);
                backoff(k, NULL, &k->watch_failures, &k->watch_due_ms, now, KUBE_ERR_CLIENT);
                snprintf(why, sizeof(why), "it sent %s; listing again",
                         x->watch_end == -EMSGSIZE ? "an event larger than 1 MiB, or of too "
                                                     "many values to parse"
                         : x->watch_end == -EPROTO ? "an ERROR event"
                                                   : "something that is not an event");
                kube_watch_down(k, KUBE_WATCH_SLICES, why, k->watch_due_ms - now, now);
                k->ctl_due_ms = k->watch_due_ms;
                relist(k);
                return;
        }
        if (code == 200 && rc == CURLE_OK && !quick) {
                /* timeoutSeconds ran out: carry on from where we are. */
                k->watch_due_ms = 0;
                return;
        }
        if (cls < 0 && code == 200 && rc == CURLE_OK) {
                x->bad = "it ended at once";
                cls = KUBE_ERR_CLIENT;
        }
        if (cls < 0)
                cls = KUBE_ERR_CONNECT;
        kube_count_error(k, cls, x);
        if (code == 401)
                kube_token_stale(k);
        backoff(k, x, &k->watch_failures, &k->watch_due_ms, now, cls);
        kube_xfer_describe(x, rc, why, sizeof(why));
        kube_watch_down(k, KUBE_WATCH_SLICES, why, k->watch_due_ms - now, now);
}

void kube_reconcile_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now) {
        if (x == k->watch) {
                k->watch = NULL;
                watch_done(k, x, rc, now);
                return;
        }
        if (x == k->ctl)
                k->ctl = NULL;
        switch (x->kind) {
        case KX_NODE:
                node_done(k, x, rc, now);
                break;
        case KX_LIST:
                list_done(k, x, rc, now);
                break;
        case KX_WRITE:
                write_done(k, x, rc, now);
                break;
        default:
                break;
        }
}
