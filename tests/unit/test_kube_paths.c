/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/kube's paths that must not wait on each other or fail for the
 * wrong reason, over real HTTPS against the fake API server: a claim
 * lookup answered while the slice list is held unanswered, and a page
 * whose continue token is longer than the client sends back, refused
 * with a message naming the bound. */
#include <pthread.h>

#include "fakeapi_hooks.h"
#include "kubetest.h"
#include "log.h"
#include "logwait.h"

#define WAIT_MS 15000
#define SLICES "/apis/resource.k8s.io/v1/resourceslices"

static struct kt t;
static struct fakeapi_hold hold;

static void setup(void) {
        kt_setup(&t, true);
}

static void teardown(void) {
        atomic_store(&hold.release, true);
        kt_teardown(&t);
}

TestSuite(kube_paths, .init = setup, .fini = teardown, .timeout = 60);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool answered;
static struct kube_claim got;

static void on_claim(void *ctx, struct kube_claim *c) {
        (void)ctx;
        pthread_mutex_lock(&mu);
        got = *c;
        answered = true;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&mu);
}

static bool wait_claim(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_MS / 1000;
        pthread_mutex_lock(&mu);
        while (!answered && pthread_cond_timedwait(&cond, &mu, &ts) == 0)
                ;
        bool ok = answered;
        pthread_mutex_unlock(&mu);
        return ok;
}

static bool list_held(const struct kube_stats *st, void *ctx) {
        (void)st;
        (void)ctx;
        return atomic_load(&hold.held) > 0;
}

/* The list of this node's slices hangs: the Prepare's lookup is answered
 * meanwhile, and the list is still held when it is. */
Test(kube_paths, a_claim_is_answered_while_the_list_hangs) {
        fakeapi_add_claim(t.f,
                          cJSON_Parse("{\"metadata\":{\"namespace\":\"default\",\"name\":\"c\","
                                      "\"uid\":\"u\"},\"status\":{\"allocation\":{\"devices\":"
                                      "{\"results\":[{\"request\":\"r\",\"driver\":\"" KT_DRIVER
                                      "\",\"pool\":\"" KT_POOL_A "\",\"device\":\"d1\"}]}}}}"));
        hold = (struct fakeapi_hold){ .prefix = SLICES, .query_has = "limit=" };
        fakeapi_set_hook(t.f, fakeapi_hold_hook, &hold);
        kt_kube(&t);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(1, "d")), 0);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert(kt_wait_stats(t.k, list_held, NULL, WAIT_MS), "the list never came");
        cr_assert_eq(kube_claim_get(t.k, "default", "c", "u", on_claim, NULL), 0);
        cr_assert(wait_claim(), "the lookup waited behind the list");
        cr_assert_eq(got.err, 0, "%s", got.msg ? got.msg : "");
        cr_assert_eq(got.n_results, 1);
        cr_assert_gt(atomic_load(&hold.held), 0, "the list was answered first");
        kube_claim_clear(&got);
        atomic_store(&hold.release, true);
        struct kt_pool w = { .pool = KT_POOL_A, .devices = 1, .prefix = "d" };
        cr_assert(fakeapi_wait(t.f, kt_pool_ok, &w, WAIT_MS), "never published after the list");
}

/* A page whose continue token is 1 MiB: refused as what it is (it would
 * go back in the next page's URL, past libcurl's bound for a request,
 * which fails as "Out of memory"). */
static char *long_token_page;

static bool long_token_hook(void *ctx, struct fakeapi_peer *peer, const char *method,
                            const char *path, const char *query, bool watch, bool *keep) {
        (void)ctx;
        (void)method;
        if (watch || strcmp(path, SLICES) != 0 || !query || !strstr(query, "limit="))
                return false;
        *keep = fakeapi_peer_answer(peer, 200, long_token_page);
        return true;
}

Test(kube_paths, an_over_long_continue_token_is_named_as_such) {
        size_t n = 1024 * 1024;
        char *tok = malloc(n + 1), *logfile = NULL;

        cr_assert_not_null(tok);
        memset(tok, 'a', n);
        tok[n] = '\0';
        cr_assert_geq(asprintf(&long_token_page,
                               "{\"kind\":\"ResourceSliceList\",\"apiVersion\":"
                               "\"resource.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"7\","
                               "\"continue\":\"%s\"},\"items\":[]}",
                               tok),
                      0);
        free(tok);
        cr_assert_geq(asprintf(&logfile, "%s/log", t.dir), 0);
        cr_assert_not_null(freopen(logfile, "w", stderr));
        setvbuf(stderr, NULL, _IONBF, 0);
        fakeapi_set_hook(t.f, long_token_hook, NULL);
        kt_kube(&t);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(1, "d")), 0);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert_eq(log_wait(logfile,
                              "its metadata.continue token is longer than the 16384 bytes a page "
                              "token may have",
                              WAIT_MS),
                     0, "no message naming the bound");
        kube_free(t.k);
        t.k = NULL;
        cr_assert_eq(log_count(logfile, "Out of memory"), 0);
        free(long_token_page);
        free(logfile);
}
