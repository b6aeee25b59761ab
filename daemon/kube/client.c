/* SPDX-License-Identifier: Apache-2.0 */
/* The cdiplug-kube thread and the thread-safe entry points. Other threads
 * only put work in the inbox or the claim queue under k->mu and wake the
 * thread with curl_multi_wakeup(); everything that touches the network or
 * the thread's own state runs on cdiplug-kube, which is otherwise blocked
 * in curl_multi_poll() until a socket, libcurl's timer, a back-off or a
 * wake-up is due.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#include "kube-internal.h"
#include "log.h"
#include "loop.h"

/* Our writes' field manager: the start time tells a newer instance from
 * an older one (a rolling update), the instance two on one node apart. */
static int make_manager(struct kube *k, const char *instance) {
        struct timespec ts;
        char pid[24];

        clock_gettime(CLOCK_REALTIME, &ts);
        k->start_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
        snprintf(pid, sizeof(pid), "p%ld", (long)getpid());
        if (xasprintf(&k->manager, KUBE_MANAGER_PREFIX "%llu-%.64s",
                      (unsigned long long)k->start_ms, instance ? instance : pid) < 0)
                return -ENOMEM;
        return 0;
}

int kube_new_at(const struct kube_settings *s, const char *root, struct kube **ret) {
        struct kube_error e = { { 0 } };
        struct kube *k;
        int r;

        if (!s || !s->node_name || !*s->node_name || (s->driver && !*s->driver))
                return -EINVAL;
        /* Loaded here, not linked: a daemon without an API client never maps
         * libcurl and the libraries it pulls (curl-dl.h). */
        r = kube_curl_load();
        if (r < 0)
                return r;
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        pthread_mutex_init(&k->mu, NULL);
        k->queue_tail = &k->queue;
        /* Per process: the jitter of a fleet's instances differs. */
        k->rng = dp_random_seed();
        k->node = strdup(s->node_name);
        k->driver = s->driver ? strdup(s->driver) : NULL;
        k->seen = cJSON_CreateObject();
        k->hold_leftovers = s->hold_leftovers;
        k->gone = cJSON_CreateObject();
        k->mine = cJSON_CreateObject();
        if (!k->node || (s->driver && !k->driver) || !k->seen || !k->gone || !k->mine ||
            make_manager(k, s->instance) < 0) {
                kube_free(k);
                return -ENOMEM;
        }
        r = s->kubeconfig ? kube_creds_kubeconfig(s->kubeconfig, &k->creds, &e)
                          : kube_creds_in_cluster(root, &k->creds, &e);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = s->kubeconfig, .err = -r }, "%s",
                         e.msg);
                kube_free(k);
                /* Refused credentials are the configuration's mistake. */
                return r == -ENOMEM ? r : -EKEYREJECTED;
        }
        /* Not fatal: the name is looked up again before each attempt. */
        r = kube_resolve(k);
        if (r == -ENOMEM) {
                kube_free(k);
                return r;
        }
        /* Made now, before the lock-down: the multi handle's wake-up pair
         * is a socketpair(), which the filter does not allow. */
        k->multi = sym_curl_multi_init();
        if (!k->multi) {
                kube_free(k);
                return -ENOMEM;
        }
        *ret = k;
        return 0;
}

int kube_new(const struct kube_settings *s, struct kube **ret) {
        return kube_new_at(s, NULL, ret);
}

static bool stopping(struct kube *k) {
        bool stop;

        pthread_mutex_lock(&k->mu);
        stop = k->stop;
        pthread_mutex_unlock(&k->mu);
        return stop;
}

static void drain_inbox(struct kube *k) {
        struct kube_inbox *in;

        pthread_mutex_lock(&k->mu);
        in = k->inbox;
        k->inbox = NULL;
        pthread_mutex_unlock(&k->mu);
        /* Oldest first: the inbox is a stack. */
        {
                struct kube_inbox *rev = NULL;
                while (in) {
                        struct kube_inbox *next = in->next;
                        in->next = rev;
                        rev = in;
                        in = next;
                }
                in = rev;
        }
        while (in) {
                struct kube_inbox *next = in->next;
                kube_pool_apply(k, in);
                in = next;
        }
}

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
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++) {
                struct kube_xfer *x = k->claim_x[i];

                if (!ended[i] || !x)
                        continue;
                slot_clear(k, i);
                claim_fail(k, x->claim, -ECANCELED, "the Prepare that asked gave up waiting");
                x->claim = NULL;
                kube_xfer_free(x);
        }
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
                sym_curl_multi_wakeup(k->multi);
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
                k->token_stale = true;
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

static void on_done(struct kube *k, CURL *h, CURLcode rc) {
        struct kube_xfer *x = NULL;

        sym_curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&x);
        if (!x)
                return;
        if (x->kind == KX_CLAIM)
                claim_done(k, x, rc);
        else if (x == k->labels_x)
                kube_labels_done(k, x, rc, dp_now_ms());
        else
                kube_reconcile_done(k, x, rc, dp_now_ms());
        kube_xfer_free(x);
}

/* How long poll may sleep: libcurl's own timer, or a back-off ending. */
static int poll_timeout(struct kube *k, uint64_t now) {
        long curl_ms = -1;
        uint64_t due = 0;

        sym_curl_multi_timeout(k->multi, &curl_ms);
        if (!k->ctl && k->ctl_due_ms > now)
                due = k->ctl_due_ms;
        if (!k->watch && k->state == KS_SYNCED && k->watch_due_ms > now)
                due = dp_due_min(due, k->watch_due_ms);
        if (!k->ctl && k->repair_due_ms > now)
                due = dp_due_min(due, k->repair_due_ms);
        due = dp_due_min(due, kube_labels_due(k, now));
        due = dp_due_min(due, kube_resolve_due(k, now));
        if (due) {
                uint64_t ms = due - now;
                if (curl_ms < 0 || (uint64_t)curl_ms > ms)
                        curl_ms = (long)(ms > INT_MAX ? INT_MAX : ms);
        }
        /* Nothing due at all: sleep until woken. */
        return curl_ms < 0 ? INT_MAX : curl_ms > INT_MAX ? INT_MAX : (int)curl_ms;
}

static void *kube_main(void *arg) {
        struct kube *k = arg;

        while (!stopping(k)) {
                struct CURLMsg *m;
                int running, left;

                /* Transfers first (watch events change what we have seen),
                 * then the decisions on what they brought; a transfer
                 * started here makes libcurl's timeout 0, so poll returns
                 * at once to drive it. */
                sym_curl_multi_perform(k->multi, &running);
                while ((m = sym_curl_multi_info_read(k->multi, &left)))
                        if (m->msg == CURLMSG_DONE)
                                on_done(k, m->easy_handle, m->data.result);
                kube_resolve_step(k, dp_now_ms());
                drain_inbox(k);
                drop_cancelled(k);
                start_claims(k);
                kube_labels_step(k, dp_now_ms());
                /* Without a driver the client only follows the labels. */
                if (k->driver)
                        kube_reconcile_step(k, dp_now_ms());
                /* Again: a step that found no address asks for one now. */
                kube_resolve_step(k, dp_now_ms());
                sym_curl_multi_poll(k->multi, NULL, 0, poll_timeout(k, dp_now_ms()), NULL);
        }
        return NULL;
}

int kube_start(struct kube *k) {
        int r;

        if (!k || k->started)
                return -EINVAL;
        r = kube_resolve_start(k);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = -r },
                         "kube: cannot start the cdiplug-dns thread: %s", strerror(-r));
                return r;
        }
        r = -pthread_create(&k->thread, NULL, kube_main, k);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = -r },
                         "kube: cannot start the cdiplug-kube thread: %s", strerror(-r));
                return r;
        }
        pthread_setname_np(k->thread, "cdiplug-kube");
        k->started = true;
        pthread_mutex_lock(&k->mu);
        k->stats.watch_on[KUBE_WATCH_SLICES] = k->driver != NULL;
        k->stats.watch_on[KUBE_WATCH_NODE] = k->labels_fn != NULL;
        pthread_mutex_unlock(&k->mu);
        return 0;
}

static void cancel_all(struct kube *k) {
        struct kube_claim_req *q;

        /* Transfers still in flight; their claims are answered. */
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING; i++) {
                struct kube_xfer *x = k->claim_x[i];

                if (!x)
                        continue;
                slot_clear(k, i);
                claim_fail(k, x->claim, -ECANCELED, "the API client is stopping");
                x->claim = NULL;
                kube_xfer_free(x);
        }
        kube_xfer_free(k->ctl);
        kube_xfer_free(k->watch);
        kube_xfer_free(k->labels_x);
        k->ctl = k->watch = k->labels_x = NULL;
        while ((q = k->queue)) {
                k->queue = q->next;
                claim_fail(k, q, -ECANCELED, "the API client is stopping");
        }
        k->queue_tail = &k->queue;
        k->queued = 0;
}

void kube_free(struct kube *k) {
        if (!k)
                return;
        if (k->started) {
                pthread_mutex_lock(&k->mu);
                k->stop = true;
                pthread_mutex_unlock(&k->mu);
                sym_curl_multi_wakeup(k->multi);
                pthread_join(k->thread, NULL);
        }
        cancel_all(k);
        kube_resolve_stop(k);
        while (k->inbox) {
                struct kube_inbox *in = k->inbox;
                k->inbox = in->next;
                cJSON_Delete(in->devices);
                free(in->pool);
                free(in);
        }
        kube_pools_free(k);
        if (k->multi)
                sym_curl_multi_cleanup(k->multi);
        sym_curl_slist_free_all(k->resolve);
        kube_creds_clear(&k->creds);
        cJSON_Delete(k->seen);
        cJSON_Delete(k->gone);
        cJSON_Delete(k->mine);
        free(k->manager);
        free(k->yielded_to);
        cJSON_Delete(k->labels);
        cJSON_Delete(k->list_seen);
        free(k->list_continue);
        free(k->rv);
        free(k->node_uid);
        free(k->node);
        free(k->driver);
        pthread_mutex_destroy(&k->mu);
        free(k);
}

/* A pool name as the design makes them: <node>/<resource>, slash-separated
 * DNS subdomains, at most 253 (the API server's limit). */
static bool pool_name_ok(const char *p) {
        size_t n = strlen(p);

        if (n == 0 || n > 253 || p[0] == '/' || p[n - 1] == '/')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-' ||
                      p[i] == '.' || p[i] == '/'))
                        return false;
        return true;
}

static void inbox_push(struct kube *k, struct kube_inbox *in) {
        in->at_ns = (uint64_t)(dp_mono_seconds() * 1e9);
        pthread_mutex_lock(&k->mu);
        in->next = k->inbox;
        k->inbox = in;
        pthread_mutex_unlock(&k->mu);
        if (k->multi)
                sym_curl_multi_wakeup(k->multi);
}

int kube_pools_complete(struct kube *k) {
        struct kube_inbox *in;

        if (!k)
                return -EINVAL;
        in = calloc(1, sizeof(*in));
        if (!in)
                return -ENOMEM;
        inbox_push(k, in);
        return 0;
}

int kube_pool_set(struct kube *k, const char *pool, cJSON *devices) {
        struct kube_inbox *in;

        if (!k || !pool || !pool_name_ok(pool) || (devices && !cJSON_IsArray(devices))) {
                cJSON_Delete(devices);
                return -EINVAL;
        }
        in = calloc(1, sizeof(*in));
        if (!in || !(in->pool = strdup(pool))) {
                free(in);
                cJSON_Delete(devices);
                return -ENOMEM;
        }
        in->devices = devices;
        inbox_push(k, in);
        return 0;
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

        if (!k || !fn || !object_name_ok(ns) || !object_name_ok(name))
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
        sym_curl_multi_wakeup(k->multi);
        return 0;
}

void kube_stats(struct kube *k, struct kube_stats *ret) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        pthread_mutex_lock(&k->mu);
        *ret = k->stats;
        pthread_mutex_unlock(&k->mu);
        /* Up now: it last was up now. */
        for (int w = 0; w < KUBE_WATCH_N; w++)
                if (ret->watch_up[w])
                        ret->watch_last_up[w] = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
