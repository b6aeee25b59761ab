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

/* 30,000 labels (as a node with many NFD features may carry), compared in
 * any order; the cost per event is in cdiplug-bench ("labels"). */
static cJSON *many_labels(size_t n, size_t first, const char *changed_key,
                          const char *changed_value) {
        cJSON *o = cJSON_CreateObject();
        char key[64], value[64];

        for (size_t i = 0; i < n; i++) {
                size_t j = (first + i * 7919) % n; /* another order each time */
                snprintf(key, sizeof(key), "feature.node.kubernetes.io/f%zu", j);
                snprintf(value, sizeof(value), "v%zu", j);
                if (changed_key && strcmp(key, changed_key) == 0)
                        cJSON_AddStringToObject(o, key, changed_value);
                else
                        cJSON_AddStringToObject(o, key, value);
        }
        return o;
}

Test(kube_labels, thirty_thousand_labels_compare_in_any_order) {
        cJSON *a = many_labels(30000, 0, NULL, NULL), *b = many_labels(30000, 12345, NULL, NULL);
        cJSON *c = many_labels(30000, 3, "feature.node.kubernetes.io/f29999", "other");
        cJSON *d = many_labels(29999, 0, NULL, NULL);

        cr_assert(kube_labels_equal(a, b), "the same labels in another order");
        cr_assert(!kube_labels_equal(a, c), "one value differs");
        cr_assert(!kube_labels_equal(a, d), "one label fewer");
        cJSON_AddStringToObject(d, "feature.node.kubernetes.io/x", "v29999");
        cr_assert(!kube_labels_equal(a, d), "one key differs");
        cJSON *e1 = cJSON_CreateObject(), *e2 = cJSON_CreateObject();
        cr_assert(kube_labels_equal(e1, e2), "no labels on both");
        cJSON_Delete(e1);
        cJSON_Delete(e2);
        cJSON_Delete(a);
        cJSON_Delete(b);
        cJSON_Delete(c);
        cJSON_Delete(d);
}
