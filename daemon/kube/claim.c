/* SPDX-License-Identifier: Apache-2.0 */
/* ResourceClaims for Prepare. Looked up on a thread of their own,
 * cdiplug-claims, with a multi handle of its own: at most
 * KUBE_CLAIMS_RUNNING at once, the rest queued, so no work of
 * cdiplug-kube (a list's pages, a storm of label changes, the labels'
 * callback) ever holds a Prepare up; the two share only the token and the
 * pinned addresses (net_mu) and the counters (mu). The answer is reduced
 * to what Prepare needs: the uid check (a claim deleted and re-created
 * under the same name is another claim) and the allocation results of our
 * driver only.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"
#include "log.h"
#include "loop.h"

void kube_claim_clear(struct kube_claim *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n_results; i++) {
                free(c->results[i].request);
                free(c->results[i].pool);
                free(c->results[i].device);
        }
        free(c->results);
        free(c->msg);
        memset(c, 0, sizeof(*c));
}

static const char *str_at(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int fail(struct kube_claim *c, int err, const char *msg) {
        c->err = err;
        c->msg = strdup(msg);
        return err;
}

/* An opaque configuration addressed to our driver (from the claim or its
 * DeviceClass, status.allocation.devices.config[]) asks for something
 * cdiplug has no parameter for: preparing the devices without it would
 * hand the pod something else than it asked for, so the claim fails,
 * naming the entry. */
static int refuse_opaque(const cJSON *alloc, const char *driver, struct kube_claim *ret) {
        const cJSON *config = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(alloc, "devices"), "config");
        const cJSON *e;
        size_t i = 0;

        if (!cJSON_IsArray(config))
                return 0;
        cJSON_ArrayForEach(e, config) {
                const char *d = str_at(cJSON_GetObjectItemCaseSensitive(e, "opaque"), "driver");
                const char *src = str_at(e, "source");
                char msg[256];

                if (d && strcmp(d, driver) == 0) {
                        snprintf(msg, sizeof(msg),
                                 "status.allocation.devices.config[%zu]: an opaque configuration "
                                 "for driver %s (%s): cdiplug takes no parameters; remove it "
                                 "there",
                                 i, driver,
                                 src && strcmp(src, "FromClass") == 0 ? "from the DeviceClass"
                                                                      : "from the claim");
                        return fail(ret, -EINVAL, msg);
                }
                i++;
        }
        return 0;
}

/* cJSON turns "\u0000" into a NUL that ends the C string: "simdev0\u0000x"
 * would read as "simdev0". No name of the API may hold one, so an answer
 * with one is refused whole. */
static bool holds_nul(const char *body) {
        for (const char *p = body; (p = strstr(p, "\\u")); p += 2)
                if (strncmp(p + 2, "0000", 4) == 0)
                        return true;
        return false;
}

int kube_claim_parse(const char *body, const char *driver, const char *uid,
                     struct kube_claim *ret) {
        _cleanup_(kube_cjson_deletep) cJSON *o = NULL;
        const cJSON *alloc, *results, *r;
        struct kube_claim c = { 0 };
        const char *have_uid;
        size_t n = 0;
        int e;

        memset(ret, 0, sizeof(*ret));
        e = kube_parse(body, strlen(body), &o);
        if (e == -E2BIG)
                return fail(ret, -EBADMSG, "the API server's answer has too many values to parse");
        if (e < 0 || !cJSON_IsObject(o))
                return fail(ret, -EBADMSG, "the API server's answer is not a JSON object");
        if (holds_nul(body))
                return fail(ret, -EBADMSG, "the API server's answer holds a NUL character");
        have_uid = str_at(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "uid");
        if (uid && (!have_uid || strcmp(have_uid, uid) != 0)) {
                char msg[600], have[260], want[260];
                base_quote(have_uid ? have_uid : "(none)", 64, have, sizeof(have));
                base_quote(uid, 64, want, sizeof(want));
                snprintf(msg, sizeof(msg), "claim uid is %s, not %s: it was deleted and re-created",
                         have, want);
                return fail(ret, -ESTALE, msg);
        }
        alloc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "status"),
                                                 "allocation");
        if (!cJSON_IsObject(alloc))
                return fail(ret, -ENODATA, "claim is not allocated (no status.allocation)");
        results = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(alloc, "devices"), "results");
        if (results && !cJSON_IsArray(results))
                return fail(ret, -EBADMSG, "status.allocation.devices.results is not a list");
        if (refuse_opaque(alloc, driver, ret) < 0)
                return ret->err;
        cJSON_ArrayForEach(r, results) {
                const char *d = str_at(r, "driver");
                if (d && strcmp(d, driver) == 0)
                        n++;
        }
        if (n > 0) {
                c.results = calloc(n, sizeof(*c.results));
                if (!c.results)
                        return fail(ret, -ENOMEM, "out of memory");
        }
        cJSON_ArrayForEach(r, results) {
                const char *d = str_at(r, "driver"), *req = str_at(r, "request"),
                           *pool = str_at(r, "pool"), *dev = str_at(r, "device");
                struct kube_result *kr;

                if (!d || strcmp(d, driver) != 0 || c.n_results >= n || !c.results)
                        continue;
                if (!req || !pool || !dev) {
                        kube_claim_clear(&c);
                        return fail(
                                ret, -EBADMSG,
                                "an allocation result of our driver lacks request, pool or device");
                }
                kr = &c.results[c.n_results++];
                kr->request = strdup(req);
                kr->pool = strdup(pool);
                kr->device = strdup(dev);
                if (!kr->request || !kr->pool || !kr->device) {
                        kube_claim_clear(&c);
                        return fail(ret, -ENOMEM, "out of memory");
                }
        }
        *ret = c;
        return 0;
}

/* ---- the lookups, on cdiplug-claims ---- */

static void claim_answer(struct kube *k, struct kube_claim_req *q, struct kube_claim *c) {
        pthread_mutex_lock(&k->mu);
        k->stats.claim_lookups++;
        pthread_mutex_unlock(&k->mu);
        q->fn(q->ctx, c);
        free(q->ns);
        free(q->name);
        free(q->uid);
        free(q);
}

static void claim_fail(struct kube *k, struct kube_claim_req *q, int err, const char *fmt, ...)
        _printf_(4, 5);
static void claim_fail(struct kube *k, struct kube_claim_req *q, int err, const char *fmt, ...) {
        struct kube_claim c = { .err = err };
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&c.msg, fmt, ap) < 0)
                c.msg = NULL;
        va_end(ap);
        claim_answer(k, q, &c);
}

static void claim_start(struct kube *k, struct kube_claim_req *q) {
        _cleanup_free_ char *ns = sym_curl_easy_escape(NULL, q->ns, 0);
        _cleanup_free_ char *name = sym_curl_easy_escape(NULL, q->name, 0);
        _cleanup_free_ char *path = NULL;
        struct kube_xfer *x;
        int r = -ENOMEM;

        if (ns && name &&
            xasprintf(&path, "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", ns,
                      name) == 0)
                r = kube_xfer_new(k, KX_CLAIM, "GET", path, NULL, KUBE_CLAIM_MAX, &x);
        if (r < 0) {
                claim_fail(k, q, r, "cannot start the lookup: %s", strerror(-r));
                return;
        }
        x->claim = q;
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++)
                if (!k->claim_x[i]) {
                        k->claim_x[i] = x;
                        pthread_mutex_lock(&k->mu);
                        k->running[i] = q;
                        pthread_mutex_unlock(&k->mu);
                        return;
                }
}

static void slot_clear(struct kube *k, size_t i) {
        k->claim_x[i] = NULL;
        pthread_mutex_lock(&k->mu);
        k->running[i] = NULL;
        pthread_mutex_unlock(&k->mu);
}

/* Slot i's transfer is ended and its claim answered -ECANCELED (why). */
static void slot_cancel(struct kube *k, size_t i, const char *why) {
        struct kube_xfer *x = k->claim_x[i];

        if (!x)
                return;
        slot_clear(k, i);
        claim_fail(k, x->claim, -ECANCELED, "%s", why);
        x->claim = NULL;
        kube_xfer_free(x);
}

/* Lookups whose asker gave up: out of the queue, or their transfer
 * ended, and answered -ECANCELED. */
static void drop_cancelled(struct kube *k) {
        struct kube_claim_req *gone = NULL, **pp;
        bool ended[KUBE_CLAIMS_RUNNING] = { false };

        pthread_mutex_lock(&k->mu);
        for (pp = &k->queue; *pp;) {
                struct kube_claim_req *q = *pp;
                if (!q->cancelled) {
                        pp = &q->next;
                        continue;
                }
                *pp = q->next;
                k->queued--;
                q->next = gone;
                gone = q;
        }
        k->queue_tail = &k->queue;
        while (*k->queue_tail)
                k->queue_tail = &(*k->queue_tail)->next;
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++)
                ended[i] = k->running[i] && k->running[i]->cancelled;
        pthread_mutex_unlock(&k->mu);
        while (gone) {
                struct kube_claim_req *q = gone;
                gone = q->next;
                claim_fail(k, q, -ECANCELED, "the Prepare that asked gave up waiting");
        }
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++)
                if (ended[i])
                        slot_cancel(k, i, "the Prepare that asked gave up waiting");
}

void kube_claim_cancel(struct kube *k, void *ctx) {
        bool any = false;

        if (!k)
                return;
        pthread_mutex_lock(&k->mu);
        for (struct kube_claim_req *q = k->queue; q; q = q->next)
                if (q->ctx == ctx)
                        any = q->cancelled = true;
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++)
                if (k->running[i] && k->running[i]->ctx == ctx)
                        any = k->running[i]->cancelled = true;
        pthread_mutex_unlock(&k->mu);
        if (any)
                sym_curl_multi_wakeup(k->claims_multi);
}

static size_t claims_running(const struct kube *k) {
        size_t n = 0;

        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++)
                n += k->claim_x[i] != NULL;
        return n;
}

static void start_claims(struct kube *k) {
        while (claims_running(k) < KUBE_CLAIMS_RUNNING) {
                struct kube_claim_req *q;

                pthread_mutex_lock(&k->mu);
                q = k->queue;
                if (q) {
                        k->queue = q->next;
                        if (!k->queue)
                                k->queue_tail = &k->queue;
                        k->queued--;
                }
                pthread_mutex_unlock(&k->mu);
                if (!q)
                        return;
                q->next = NULL;
                claim_start(k, q);
        }
}

static void claim_done(struct kube *k, struct kube_xfer *x, CURLcode rc) {
        struct kube_claim_req *q = x->claim;
        int cls = kube_xfer_class(x, rc);
        long code = kube_xfer_code(x);
        struct kube_claim c;
        char why[320];

        x->claim = NULL;
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++)
                if (k->claim_x[i] == x)
                        slot_clear(k, i);
        if (cls < 0) {
                kube_claim_parse(x->buf ? x->buf : "", k->driver, q->uid, &c);
                claim_answer(k, q, &c);
                return;
        }
        kube_count_error(k, cls, x);
        if (cls == KUBE_ERR_UNAUTHORIZED && code == 401 && !q->retried) {
                /* The token rotated under us: re-read it and ask again. */
                kube_token_stale(k);
                q->retried = true;
                claim_start(k, q);
                return;
        }
        if (code == 404) {
                claim_fail(k, q, -ENOENT, "claim %s/%s not found", q->ns, q->name);
                return;
        }
        kube_xfer_describe(x, rc, why, sizeof(why));
        claim_fail(k, q,
                   code == 0                    ? -ECONNREFUSED
                   : code == 401 || code == 403 ? -EACCES
                                                : -EIO,
                   "cannot get claim %s/%s from the API server: %s", q->ns, q->name, why);
}

/* A namespace or object name as the API allows (DNS subdomain). */
static bool object_name_ok(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
                      s[i] == '.'))
                        return false;
        return true;
}

int kube_claim_get(struct kube *k, const char *ns, const char *name, const char *uid,
                   kube_claim_fn *fn, void *ctx) {
        struct kube_claim_req *q;
        int r = 0;

        if (!k || !k->driver || !fn || !object_name_ok(ns) || !object_name_ok(name))
                return -EINVAL;
        q = calloc(1, sizeof(*q));
        if (!q || !(q->ns = strdup(ns)) || !(q->name = strdup(name)) ||
            (uid && !(q->uid = strdup(uid)))) {
                if (q) {
                        free(q->ns);
                        free(q->name);
                }
                free(q);
                return -ENOMEM;
        }
        q->fn = fn;
        q->ctx = ctx;
        pthread_mutex_lock(&k->mu);
        if (k->stop)
                r = -ECANCELED;
        else if (k->queued >= KUBE_CLAIMS_QUEUED)
                r = -ENOBUFS;
        else {
                *k->queue_tail = q;
                k->queue_tail = &q->next;
                k->queued++;
        }
        pthread_mutex_unlock(&k->mu);
        if (r < 0) {
                free(q->ns);
                free(q->name);
                free(q->uid);
                free(q);
                return r;
        }
        sym_curl_multi_wakeup(k->claims_multi);
        return 0;
}

static void *claims_main(void *arg) {
        struct kube *k = arg;

        while (!kube_stopping(k)) {
                struct CURLMsg *m;
                long curl_ms = -1;
                int running, left;

                sym_curl_multi_perform(k->claims_multi, &running);
                while ((m = sym_curl_multi_info_read(k->claims_multi, &left))) {
                        struct kube_xfer *x = NULL;

                        if (m->msg != CURLMSG_DONE)
                                continue;
                        sym_curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                        if (!x)
                                continue;
                        claim_done(k, x, m->data.result);
                        kube_xfer_free(x);
                }
                drop_cancelled(k);
                start_claims(k);
                /* libcurl's timer, or asleep until a lookup comes or a
                 * cancel wakes it. */
                sym_curl_multi_timeout(k->claims_multi, &curl_ms);
                sym_curl_multi_poll(k->claims_multi, NULL, 0,
                                    curl_ms < 0 || curl_ms > INT_MAX ? INT_MAX : (int)curl_ms,
                                    NULL);
        }
        return NULL;
}

int kube_claims_start(struct kube *k) {
        int r;

        if (!k->driver)
                return 0;
        r = -pthread_create(&k->claims_thread, NULL, claims_main, k);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = -r },
                         "kube: cannot start the cdiplug-claims thread: %s", strerror(-r));
                return r;
        }
        pthread_setname_np(k->claims_thread, "cdiplug-claims");
        k->claims_started = true;
        return 0;
}

void kube_claims_stop(struct kube *k) {
        struct kube_claim_req *q;

        if (k->claims_started) {
                sym_curl_multi_wakeup(k->claims_multi);
                pthread_join(k->claims_thread, NULL);
                k->claims_started = false;
        }
        /* Transfers still in flight, then the queue: each is answered. */
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++)
                slot_cancel(k, i, "the API client is stopping");
        while ((q = k->queue)) {
                k->queue = q->next;
                claim_fail(k, q, -ECANCELED, "the API client is stopping");
        }
        k->queue_tail = &k->queue;
        k->queued = 0;
}
