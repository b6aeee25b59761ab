/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/kube ResourceClaim lookups over real HTTPS against the fake API
 * server: allocated (other drivers' results filtered out), missing,
 * replaced (uid), unallocated, too large, API down, token rotated; many at
 * once; never held up by work on cdiplug-kube. */
#include <pthread.h>
#include <stdatomic.h>

#include "kubetest.h"

#define WAIT_MS 15000
#define NS "default"

static struct kt t;

static void setup(void) {
        kt_setup(&t, true);
}

static void teardown(void) {
        kt_teardown(&t);
}

TestSuite(kube_claims, .init = setup, .fini = teardown, .timeout = 60);

struct answers {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        size_t n, want;
        struct kube_claim got[512];
        pthread_t thread[512];
};

static struct answers ans = { .mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void on_claim(void *ctx, struct kube_claim *c) {
        size_t i = (size_t)(uintptr_t)ctx;

        pthread_mutex_lock(&ans.mu);
        ans.got[i] = *c;
        ans.thread[i] = pthread_self();
        ans.n++;
        pthread_cond_broadcast(&ans.cond);
        pthread_mutex_unlock(&ans.mu);
}

static void wait_answers(size_t n) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_MS / 1000;
        pthread_mutex_lock(&ans.mu);
        while (ans.n < n)
                if (pthread_cond_timedwait(&ans.cond, &ans.mu, &ts) != 0)
                        break;
        cr_assert_geq(ans.n, n, "%zu of %zu answers", ans.n, n);
        pthread_mutex_unlock(&ans.mu);
}

static void clear_answers(void) {
        for (size_t i = 0; i < ans.n; i++)
                kube_claim_clear(&ans.got[i]);
        ans.n = 0;
}

static void add_claim(const char *name, const char *uid, const char *status) {
        char *text = NULL;

        cr_assert_geq(asprintf(&text,
                               "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                               "\"metadata\":{\"namespace\":\"" NS
                               "\",\"name\":\"%s\",\"uid\":\"%s\"}%s%s}",
                               name, uid, status ? ",\"status\":" : "", status ? status : ""),
                      0);
        fakeapi_add_claim(t.f, cJSON_Parse(text));
        free(text);
}

#define ALLOCATED                                                                                  \
        "{\"allocation\":{\"devices\":{\"results\":["                                              \
        "{\"request\":\"r1\",\"driver\":\"" KT_DRIVER "\",\"pool\":\"" KT_POOL_A                   \
        "\",\"device\":\"dev0\"},"                                                                 \
        "{\"request\":\"r2\",\"driver\":\"gpu.example.com\",\"pool\":\"x\",\"device\":\"gpu0\"},"  \
        "{\"request\":\"r3\",\"driver\":\"" KT_DRIVER "\",\"pool\":\"" KT_POOL_A                   \
        "\",\"device\":\"dev7\"}"                                                                  \
        "]}}}"

Test(kube_claims, outcomes) {
        pthread_t self = pthread_self();

        add_claim("ok", "uid-1", ALLOCATED);
        add_claim("pending", "uid-2", "{}");
        kt_kube(&t);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "ok", "uid-1", on_claim, (void *)0), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "ok", "uid-old", on_claim, (void *)1), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "missing", "uid-3", on_claim, (void *)2), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "pending", "uid-2", on_claim, (void *)3), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "ok", NULL, on_claim, (void *)4), 0);
        wait_answers(5);

        cr_assert_eq(ans.got[0].err, 0, "%s", ans.got[0].msg);
        cr_assert_eq(ans.got[0].n_results, 2, "the GPU driver's result is not ours");
        cr_assert_str_eq(ans.got[0].results[0].request, "r1");
        cr_assert_str_eq(ans.got[0].results[0].pool, KT_POOL_A);
        cr_assert_str_eq(ans.got[0].results[0].device, "dev0");
        cr_assert_str_eq(ans.got[0].results[1].device, "dev7");
        cr_assert_eq(ans.got[1].err, -ESTALE);
        cr_assert(strstr(ans.got[1].msg, "uid-1"), "%s", ans.got[1].msg);
        cr_assert_eq(ans.got[2].err, -ENOENT);
        cr_assert(strstr(ans.got[2].msg, NS "/missing"), "%s", ans.got[2].msg);
        cr_assert_eq(ans.got[3].err, -ENODATA);
        cr_assert_eq(ans.got[4].err, 0);
        for (size_t i = 0; i < 5; i++)
                cr_assert(!pthread_equal(ans.thread[i], self), "answered on cdiplug-claims");
        clear_answers();
        cr_assert_eq(kube_claim_get(t.k, "Bad/NS", "ok", NULL, on_claim, NULL), -EINVAL);
        cr_assert_eq(kube_claim_get(t.k, NS, "", NULL, on_claim, NULL), -EINVAL);
}

Test(kube_claims, many_at_once_all_answered) {
        kt_kube(&t);
        cr_assert_eq(kube_start(t.k), 0);
        add_claim("c", "u", ALLOCATED);
        for (size_t i = 0; i < 500; i++)
                cr_assert_eq(kube_claim_get(t.k, NS, "c", "u", on_claim, (void *)(uintptr_t)i), 0);
        wait_answers(500);
        for (size_t i = 0; i < 500; i++)
                cr_assert_eq(ans.got[i].err, 0, "%zu: %s", i, ans.got[i].msg);
        struct kube_stats st;
        kube_stats(t.k, &st);
        cr_assert_eq(st.claim_lookups, 500);
        clear_answers();
}

Test(kube_claims, answer_over_1mib_is_refused) {
        char *big = malloc(KUBE_CLAIM_MAX + 2);
        char *status = NULL;

        memset(big, 'a', KUBE_CLAIM_MAX + 1);
        big[KUBE_CLAIM_MAX + 1] = '\0';
        cr_assert_geq(asprintf(&status, "{\"junk\":\"%s\"}", big), 0);
        add_claim("big", "u", status);
        free(status);
        free(big);
        kt_kube(&t);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "big", "u", on_claim, (void *)0), 0);
        wait_answers(1);
        cr_assert_eq(ans.got[0].err, -EIO);
        cr_assert(strstr(ans.got[0].msg, "larger than"), "%s", ans.got[0].msg);
        clear_answers();
}

Test(kube_claims, rotated_token_is_reread_after_401) {
        add_claim("c", "u", ALLOCATED);
        kt_kube(&t);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "c", "u", on_claim, (void *)0), 0);
        wait_answers(1);
        cr_assert_eq(ans.got[0].err, 0);
        kt_write(t.token_file, "token-two\n");
        fakeapi_set_token(t.f, "token-two");
        cr_assert_eq(kube_claim_get(t.k, NS, "c", "u", on_claim, (void *)1), 0);
        wait_answers(2);
        cr_assert_eq(ans.got[1].err, 0, "%s", ans.got[1].msg);
        struct kube_stats st;
        kube_stats(t.k, &st);
        /* The claim's own 401, and maybe the list's if it was still
         * running: without the re-read the lookup fails with -EACCES. */
        cr_assert_geq(st.api_errors[KUBE_ERR_UNAUTHORIZED], 1);
        clear_answers();
}

TestSuite(kube_claims_down, .timeout = 60);

Test(kube_claims_down, api_down_and_stopping) {
        kt_setup(&t, false);
        kt_kube(&t);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert_eq(kube_claim_get(t.k, NS, "c", "u", on_claim, (void *)0), 0);
        wait_answers(1);
        cr_assert_eq(ans.got[0].err, -ECONNREFUSED);
        cr_assert(strstr(ans.got[0].msg, "cannot get claim " NS "/c"), "%s", ans.got[0].msg);
        clear_answers();
        kt_teardown(&t);
}

Test(kube_claims_down, waiting_lookups_are_cancelled_by_free) {
        kt_setup(&t, true);
        kt_kube(&t);
        /* Never started: every lookup still waits when the kube goes. */
        for (size_t i = 0; i < 3; i++)
                cr_assert_eq(kube_claim_get(t.k, NS, "c", "u", on_claim, (void *)(uintptr_t)i), 0);
        kube_free(t.k);
        t.k = NULL;
        cr_assert_eq(ans.n, 3);
        for (size_t i = 0; i < 3; i++)
                cr_assert_eq(ans.got[i].err, -ECANCELED);
        clear_answers();
        kt_teardown(&t);
}

/* A server that never answers "slow" (until the test ends it). */
static atomic_bool hang_stop;

static bool hang_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                      const char *query, bool watch, bool *keep) {
        (void)ctx;
        (void)peer;
        (void)method;
        (void)query;
        (void)watch;
        if (!strstr(path, "/resourceclaims/slow"))
                return false;
        for (int i = 0; i < 300 && !atomic_load(&hang_stop); i++) {
                struct timespec ts = { 0, 50000000 };
                nanosleep(&ts, NULL);
        }
        *keep = false;
        return true;
}

/* Lookups given up by their Prepare leave their slots at once: the claim
 * after them is answered while the server still hangs on theirs. */
Test(kube_claims, cancelled_lookups_free_their_slots) {
        struct timespec t0, t1;

        atomic_store(&hang_stop, false);
        fakeapi_set_hook(t.f, hang_hook, NULL);
        add_claim("c", "u", ALLOCATED);
        kt_kube(&t);
        cr_assert_eq(kube_start(t.k), 0);
        /* More than the slots, so some wait in the queue too. */
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING + 2; i++)
                cr_assert_eq(kube_claim_get(t.k, NS, "slow", NULL, on_claim, (void *)(uintptr_t)i),
                             0);
        for (int i = 0; i < 20 && fakeapi_count(t.f, "GET") < KUBE_CLAIMS_RUNNING; i++) {
                struct timespec ts = { 0, 50000000 };
                nanosleep(&ts, NULL);
        }
        cr_assert_geq(fakeapi_count(t.f, "GET"), KUBE_CLAIMS_RUNNING);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING + 2; i++)
                kube_claim_cancel(t.k, (void *)(uintptr_t)i);
        cr_assert_eq(kube_claim_get(t.k, NS, "c", "u", on_claim,
                                    (void *)(uintptr_t)(KUBE_CLAIMS_RUNNING + 2)),
                     0);
        wait_answers(KUBE_CLAIMS_RUNNING + 3);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        atomic_store(&hang_stop, true);
        for (size_t i = 0; i < KUBE_CLAIMS_RUNNING + 2; i++)
                cr_assert_eq(ans.got[i].err, -ECANCELED, "%zu: %d", i, ans.got[i].err);
        cr_assert_eq(ans.got[KUBE_CLAIMS_RUNNING + 2].err, 0);
        cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "the next claim waited %ld s",
                     (long)(t1.tv_sec - t0.tv_sec));
        clear_answers();
}

/* cdiplug-kube held (the labels' callback, which in the daemon takes its
 * lock, here blocked until the lookup is answered; a list's pages or a
 * label storm cost the same way): lookups go on, on their own thread. */
struct held {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        bool in, release;
};

static void held_labels(void *ctx, const cJSON *labels) {
        struct held *h = ctx;
        struct timespec until;

        (void)labels;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2 * WAIT_MS / 1000;
        pthread_mutex_lock(&h->mu);
        h->in = true;
        pthread_cond_broadcast(&h->cond);
        while (!h->release)
                if (pthread_cond_timedwait(&h->cond, &h->mu, &until) != 0)
                        break;
        pthread_mutex_unlock(&h->mu);
}

static void held_release(struct held *h) {
        pthread_mutex_lock(&h->mu);
        h->release = true;
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->mu);
}

Test(kube_claims, lookups_never_wait_behind_cdiplug_kube) {
        static struct held h = { .mu = PTHREAD_MUTEX_INITIALIZER,
                                 .cond = PTHREAD_COND_INITIALIZER };
        struct timespec until;

        add_claim("c", "u", ALLOCATED);
        fakeapi_set_node_labels(t.f, KT_NODE, cJSON_Parse("{\"zone\":\"a\"}"));
        kt_kube(&t);
        cr_assert_eq(kube_labels_follow(t.k, held_labels, &h), 0);
        cr_assert_eq(kube_start(t.k), 0);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += WAIT_MS / 1000;
        pthread_mutex_lock(&h.mu);
        while (!h.in)
                if (pthread_cond_timedwait(&h.cond, &h.mu, &until) != 0)
                        break;
        pthread_mutex_unlock(&h.mu);
        cr_assert(h.in, "the labels were never read");
        cr_assert_eq(kube_claim_get(t.k, NS, "c", "u", on_claim, (void *)0), 0);
        wait_answers(1);
        held_release(&h);
        cr_assert_eq(ans.got[0].err, 0, "%s", ans.got[0].msg);
        cr_assert_eq(ans.got[0].n_results, 2);
        clear_answers();
}
