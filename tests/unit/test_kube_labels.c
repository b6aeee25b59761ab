/* SPDX-License-Identifier: Apache-2.0 */
/* The API client following its node's labels (labels.c), against the fake
 * API server: the first read, a change, no call for an unchanged object,
 * a deleted label, and the watch restarted after the server fails it,
 * with a client that has no DRA driver (labels only). */
#include <pthread.h>

#include "kubetest.h"

struct heard {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        unsigned calls;
        char last[512];
};

static struct heard h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "" };
static struct kt t;

static void heard_fn(void *ctx, const cJSON *labels) {
        struct heard *x = ctx;
        char *s = cJSON_PrintUnformatted(labels);

        pthread_mutex_lock(&x->mu);
        x->calls++;
        snprintf(x->last, sizeof(x->last), "%s", s ? s : "");
        pthread_cond_broadcast(&x->cond);
        pthread_mutex_unlock(&x->mu);
        free(s);
}

/* Wait until the callback has run n times with last == want. */
static bool wait_for(unsigned n, const char *want) {
        struct timespec ts;
        bool ok;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        pthread_mutex_lock(&h.mu);
        while (!(h.calls >= n && strcmp(h.last, want) == 0) &&
               pthread_cond_timedwait(&h.cond, &h.mu, &ts) == 0)
                ;
        ok = h.calls == n && strcmp(h.last, want) == 0;
        pthread_mutex_unlock(&h.mu);
        return ok;
}

static void labels(const char *json) {
        fakeapi_set_node_labels(t.f, KT_NODE, json ? cJSON_Parse(json) : NULL);
}

static void stop(void) {
        kt_teardown(&t);
}

TestSuite(kube_labels, .fini = stop, .timeout = 60);

Test(kube_labels, follows_the_node_labels_without_a_driver) {
        struct kube_settings s = { .kubeconfig = NULL, .node_name = KT_NODE, .driver = NULL };

        kt_setup(&t, true);
        s.kubeconfig = t.kubeconfig;
        labels("{\"zone\":\"a\"}");
        cr_assert_eq(kube_new(&s, &t.k), 0);
        cr_assert_eq(kube_labels_follow(t.k, heard_fn, &h), 0);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert_eq(kube_labels_follow(t.k, heard_fn, &h), -EINVAL, "after start");
        cr_assert(wait_for(1, "{\"zone\":\"a\"}"), "first read: %u %s", h.calls, h.last);

        labels("{\"zone\":\"b\",\"gpu\":\"yes\"}");
        cr_assert(wait_for(2, "{\"zone\":\"b\",\"gpu\":\"yes\"}"), "%u %s", h.calls, h.last);

        /* The same labels again (another field changed): no call. */
        labels("{\"zone\":\"b\",\"gpu\":\"yes\"}");
        labels(NULL);
        cr_assert(wait_for(3, "{}"), "labels removed: %u %s", h.calls, h.last);

        /* The server drops the watch and fails the next two: the client
         * watches again (with back-off) and hears the change made meanwhile. */
        unsigned watches = fakeapi_count(t.f, "WATCH");
        fakeapi_fault(t.f, "GET", "/api/v1/nodes", 2, 500, 0);
        fakeapi_end_node_watches(t.f);
        labels("{\"zone\":\"c\"}");
        cr_assert(wait_for(4, "{\"zone\":\"c\"}"), "after failures: %u %s", h.calls, h.last);
        cr_assert_geq(fakeapi_count(t.f, "WATCH"), watches + 3, "two failed, one answered");
        cr_assert_eq(fakeapi_count(t.f, "POST"), 0, "no slices without a driver");
}

Test(kube_labels, refuses_a_missing_node_name) {
        struct kube_settings s = { .node_name = NULL };
        struct kube *k = NULL;

        kt_setup(&t, true);
        s.kubeconfig = t.kubeconfig;
        cr_assert_eq(kube_new(&s, &k), -EINVAL);
        cr_assert_eq(kube_labels_follow(NULL, heard_fn, &h), -EINVAL);
}
