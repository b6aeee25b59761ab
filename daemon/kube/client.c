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
        pthread_mutex_init(&k->net_mu, NULL);
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
        if (s->driver)
                k->claims_multi = sym_curl_multi_init();
        if (!k->multi || (s->driver && !k->claims_multi)) {
                kube_free(k);
                return -ENOMEM;
        }
        *ret = k;
        return 0;
}

int kube_new(const struct kube_settings *s, struct kube **ret) {
        return kube_new_at(s, NULL, ret);
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

static void on_done(struct kube *k, CURL *h, CURLcode rc) {
        struct kube_xfer *x = NULL;

        sym_curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&x);
        if (!x)
                return;
        if (x == k->labels_x)
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

        while (!kube_stopping(k)) {
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
        r = kube_claims_start(k);
        if (r < 0)
                return r;
        pthread_mutex_lock(&k->mu);
        k->stats.watch_on[KUBE_WATCH_SLICES] = k->driver != NULL;
        k->stats.watch_on[KUBE_WATCH_NODE] = k->labels_fn != NULL;
        pthread_mutex_unlock(&k->mu);
        return 0;
}

static void cancel_all(struct kube *k) {
        kube_xfer_free(k->ctl);
        kube_xfer_free(k->watch);
        kube_xfer_free(k->labels_x);
        k->ctl = k->watch = k->labels_x = NULL;
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
        kube_claims_stop(k);
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
        if (k->claims_multi)
                sym_curl_multi_cleanup(k->claims_multi);
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
        pthread_mutex_destroy(&k->net_mu);
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
