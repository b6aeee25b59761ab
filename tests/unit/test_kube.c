/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/kube publishing ResourceSlices, over real HTTPS against the fake
 * API server (tests/helpers/fakeapi.c): exactly the wanted slices, chunks
 * of 128, generations, the kubelet's wipe, removed pools, and every error
 * the API server can answer. Tests wait on the server's state. */
#include "kubetest.h"
#include "log.h"

#define WAIT_MS 15000

static struct kt t;

static void setup(void) {
        kt_setup(&t, true);
}

static void teardown(void) {
        kt_teardown(&t);
}

TestSuite(kube, .init = setup, .fini = teardown, .timeout = 60);

/* Does the text of the server's slices contain needle? */
static bool slices_contain(const cJSON *slices, void *needle) {
        char *txt = cJSON_PrintUnformatted(slices);
        bool found = txt && strstr(txt, needle);

        free(txt);
        return found;
}

static bool slices_lack(const cJSON *slices, void *needle) {
        return !slices_contain(slices, needle);
}

static void start_with(const char *pool, size_t n, const char *prefix) {
        kt_kube(&t);
        cr_assert_eq(kube_pool_set(t.k, pool, kt_devices(n, prefix)), 0);
        cr_assert_eq(kube_start(t.k), 0);
}

static uint64_t wait_pool(const char *pool, size_t n, const char *prefix) {
        struct kt_pool w = { .pool = pool, .devices = n, .prefix = prefix };

        cr_assert(fakeapi_wait(t.f, kt_pool_ok, &w, WAIT_MS), "pool %s never had %zu devices", pool,
                  n);
        return w.gen;
}

static bool published_n(const struct kube_stats *st, void *ctx) {
        return st->publishes >= *(uint64_t *)ctx;
}

/* The client counts a publish when it sees its write answered, which may
 * be after the server shows it: wait for the count too. */
static void wait_published(uint64_t n) {
        cr_assert(kt_wait_stats(t.k, published_n, &n, WAIT_MS), "never %llu publishes",
                  (unsigned long long)n);
}

Test(kube, chunks_of_128_generations_and_exact_slices) {
        uint64_t g1, g2, g3;
        struct kube_stats st;
        cJSON *all;

        start_with(KT_POOL_A, 300, "dev");
        g1 = wait_pool(KT_POOL_A, 300, "dev");
        wait_published(1);
        all = fakeapi_slices(t.f);
        cr_assert_eq(cJSON_GetArraySize(all), 3, "300 devices are 3 slices");
        cJSON_Delete(all);
        cr_assert_eq(fakeapi_count(t.f, "POST"), 3);
        cr_assert_eq(fakeapi_count(t.f, "PUT"), 0);

        /* Fewer devices: one slice, a higher generation, two deleted. */
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(100, "dev")), 0);
        g2 = wait_pool(KT_POOL_A, 100, "dev");
        wait_published(2);
        cr_assert_gt(g2, g1);
        all = fakeapi_slices(t.f);
        cr_assert_eq(cJSON_GetArraySize(all), 1);
        cJSON_Delete(all);

        /* Same count, other devices: one slice updated in place, which
         * goes from one whole pool to the next: the same generation. */
        unsigned puts = fakeapi_count(t.f, "PUT");
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(100, "other")), 0);
        g3 = wait_pool(KT_POOL_A, 100, "other");
        wait_published(3);
        cr_assert_eq(g3, g2, "one write needs no new generation (%llu, %llu)",
                     (unsigned long long)g3, (unsigned long long)g2);
        cr_assert_eq(fakeapi_count(t.f, "PUT"), puts + 1);

        /* Unchanged devices: no write at all. */
        unsigned writes = fakeapi_count(t.f, "POST") + fakeapi_count(t.f, "PUT") +
                          fakeapi_count(t.f, "DELETE");
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(100, "other")), 0);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_B, kt_devices(1, "g")), 0);
        wait_pool(KT_POOL_B, 1, "g");
        cr_assert_eq(fakeapi_count(t.f, "POST") + fakeapi_count(t.f, "PUT") +
                             fakeapi_count(t.f, "DELETE"),
                     writes + 1, "only pool B's create");
        wait_published(4);
        kube_stats(t.k, &st);
        cr_assert_eq(st.publishes, 4, "publishes: %llu", (unsigned long long)st.publishes);
        cr_assert_eq(st.publish_count, st.publishes);
        cr_assert_gt(st.publish_seconds_sum, 0);
        cr_assert_geq(st.publish_seconds_max * (double)st.publish_count,
                      st.publish_seconds_sum - 1e-9);
}

/* The generation of a pool of three slices: one slice's devices changed
 * is one write, from one whole pool to the next: the same generation;
 * two slices changed would show a pool of old and new halves in
 * between: a new one. */
static cJSON *renamed(size_t n, const size_t *at, size_t n_at) {
        cJSON *a = kt_devices(n, "dev");

        for (size_t i = 0; i < n_at; i++) {
                char name[32];
                snprintf(name, sizeof(name), "new%zu", at[i]);
                cJSON_ReplaceItemInObject(cJSON_GetArrayItem(a, (int)at[i]), "name",
                                          cJSON_CreateString(name));
        }
        return a;
}

Test(kube, generation_only_when_more_than_one_write) {
        struct kt_pool w = { .pool = KT_POOL_A, .devices = 300 };
        uint64_t g1, g2;

        start_with(KT_POOL_A, 300, "dev");
        g1 = wait_pool(KT_POOL_A, 300, "dev");
        wait_published(1);
        unsigned puts = fakeapi_count(t.f, "PUT");
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, renamed(300, (size_t[]){ 5 }, 1)), 0);
        cr_assert(fakeapi_wait(t.f, slices_contain, "\"new5\"", WAIT_MS));
        wait_published(2);
        cr_assert(fakeapi_wait(t.f, kt_pool_ok, &w, WAIT_MS));
        cr_assert_eq(w.gen, g1, "one slice written: generation %llu, was %llu",
                     (unsigned long long)w.gen, (unsigned long long)g1);
        cr_assert_eq(fakeapi_count(t.f, "PUT"), puts + 1);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, renamed(300, (size_t[]){ 6, 200 }, 2)), 0);
        cr_assert(fakeapi_wait(t.f, slices_contain, "\"new200\"", WAIT_MS));
        wait_published(3);
        cr_assert(fakeapi_wait(t.f, kt_pool_ok, &w, WAIT_MS));
        g2 = w.gen;
        cr_assert_gt(g2, g1, "two slices written under generation %llu", (unsigned long long)g2);
}

static bool no_leftover(const cJSON *slices, void *ctx) {
        return slices_lack(slices, ctx);
}

/* More of our slices than the client keeps in view: the ones in view go,
 * then a new list brings the rest, until none is left; the count it
 * reports never passes the cap. */
Test(kube, more_slices_than_kept_in_view_are_deleted_in_rounds) {
        struct kube_stats st;

        for (int i = 0; i < KUBE_SLICES_MAX + 100; i++) {
                char text[512];
                snprintf(
                        text, sizeof(text),
                        "{\"metadata\":{\"name\":\"leftover-%d\"},\"spec\":{\"driver\":\"" KT_DRIVER
                        "\",\"nodeName\":\"" KT_NODE "\",\"pool\":{\"name\":\"" KT_NODE
                        "/example.com/gone\",\"generation\":1,\"resourceSliceCount\":1},"
                        "\"devices\":[{\"name\":\"x\"}]}}",
                        i);
                fakeapi_put_slice(t.f, cJSON_Parse(text));
        }
        start_with(KT_POOL_A, 2, "a");
        wait_pool(KT_POOL_A, 2, "a");
        cr_assert(fakeapi_wait(t.f, no_leftover, "leftover-", 60000), "leftovers stayed");
        kube_stats(t.k, &st);
        cr_assert_leq(st.slices, KUBE_SLICES_MAX);
        /* All of one list's pages, and at least one more list. */
        cr_assert_geq(fakeapi_lists_paged(t.f), (KUBE_SLICES_MAX + 100) / KUBE_LIST_PAGE + 2,
                      "%u pages", fakeapi_lists_paged(t.f));
}

Test(kube, removed_pool_and_unknown_slices_are_deleted) {
        struct kt_pool a = { .pool = KT_POOL_A, .devices = 2, .prefix = "a" };
        cJSON *stale = cJSON_Parse(
                "{\"metadata\":{\"name\":\"leftover\"},\"spec\":{\"driver\":\"" KT_DRIVER
                "\",\"nodeName\":\"" KT_NODE "\",\"pool\":{\"name\":\"" KT_NODE
                "/example.com/gone\",\"generation\":3,\"resourceSliceCount\":1},"
                "\"devices\":[{\"name\":\"x\"}]}}");
        cJSON *other = cJSON_Parse(
                "{\"metadata\":{\"name\":\"not-ours\"},\"spec\":{\"driver\":\"other.example.com\","
                "\"nodeName\":\"" KT_NODE "\",\"pool\":{\"name\":\"p\",\"generation\":1,"
                "\"resourceSliceCount\":1},\"devices\":[]}}");
        cJSON *all;

        fakeapi_put_slice(t.f, stale);
        fakeapi_put_slice(t.f, other);
        kt_kube(&t);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(2, "a")), 0);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_B, kt_devices(3, "b")), 0);
        cr_assert_eq(kube_start(t.k), 0);
        wait_pool(KT_POOL_A, 2, "a");
        wait_pool(KT_POOL_B, 3, "b");
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_B, NULL), 0);
        wait_pool(KT_POOL_B, 0, NULL);
        cr_assert(fakeapi_wait(t.f, kt_pool_ok, &a, WAIT_MS));
        cr_assert(fakeapi_wait(t.f, slices_lack, "leftover", WAIT_MS));
        all = fakeapi_slices(t.f);
        /* Pool A's slice and the other driver's, untouched; "leftover" gone. */
        cr_assert_eq(cJSON_GetArraySize(all), 2);
        cr_assert(slices_contain(all, "not-ours"));
        cJSON_Delete(all);
}

Test(kube, kubelet_wipe_is_repaired) {
        uint64_t g1, g2;
        unsigned posts;

        start_with(KT_POOL_A, 200, "d");
        g1 = wait_pool(KT_POOL_A, 200, "d");
        posts = fakeapi_count(t.f, "POST");
        fakeapi_wipe(t.f, KT_NODE);
        g2 = wait_pool(KT_POOL_A, 200, "d");
        cr_assert_eq(fakeapi_count(t.f, "POST"), posts + 2, "both slices created again");
        cr_assert_geq(g2, g1);
        /* A second wipe, to show the watch goes on. */
        fakeapi_wipe(t.f, KT_NODE);
        wait_pool(KT_POOL_A, 200, "d");
        cr_assert_eq(fakeapi_count(t.f, "WATCH"), 1, "one watch carried it all");
}

Test(kube, another_writers_change_is_reverted) {
        cJSON *all, *s;

        start_with(KT_POOL_A, 5, "d");
        wait_pool(KT_POOL_A, 5, "d");
        all = fakeapi_slices(t.f);
        s = cJSON_DetachItemFromArray(all, 0);
        cJSON_DeleteItemFromArray(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "spec"), "devices"),
                                  0);
        fakeapi_put_slice(t.f, s);
        cJSON_Delete(all);
        /* The fake's copy lacks d0 now; the client puts it back. */
        wait_pool(KT_POOL_A, 5, "d");
        cr_assert_geq(fakeapi_count(t.f, "PUT"), 1);
}

Test(kube, conflict_409_relists_and_retries) {
        unsigned lists;

        kt_kube(&t);
        fakeapi_fault(t.f, "POST", NULL, 1, 409, 0);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(3, "d")), 0);
        cr_assert_eq(kube_start(t.k), 0);
        wait_pool(KT_POOL_A, 3, "d");
        lists = fakeapi_count(t.f, "GET");
        /* node + first list + the relist after the 409 */
        cr_assert_eq(lists, 3, "GETs: %u", lists);
        cr_assert_eq(fakeapi_count(t.f, "POST"), 2);

        fakeapi_fault(t.f, "PUT", NULL, 1, 409, 0);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(3, "e")), 0);
        wait_pool(KT_POOL_A, 3, "e");
        cr_assert_eq(fakeapi_count(t.f, "GET"), 4);
        struct kube_stats st;
        kube_stats(t.k, &st);
        cr_assert_eq(st.api_errors[KUBE_ERR_CONFLICT], 2);
}

static void gone(bool as_http) {
        unsigned lists, watches;
        struct kube_stats st;

        start_with(KT_POOL_A, 3, "d");
        wait_pool(KT_POOL_A, 3, "d");
        lists = fakeapi_count(t.f, "GET");
        watches = fakeapi_count(t.f, "WATCH");
        fakeapi_expire(t.f, as_http);
        /* An open watch gets the ERROR event; the client lists again and
         * watches from the new version: a wipe is seen through it. */
        unsigned want[2] = { KUBE_ERR_GONE, 1 };
        cr_assert(kt_wait_stats(t.k, kt_errors_at_least, want, WAIT_MS));
        fakeapi_wipe(t.f, KT_NODE);
        wait_pool(KT_POOL_A, 3, "d");
        cr_assert_eq(fakeapi_count(t.f, "GET"), lists + 1);
        cr_assert_geq(fakeapi_count(t.f, "WATCH"), watches + 1);
        kube_stats(t.k, &st);
        cr_assert_eq(st.api_errors[KUBE_ERR_GONE], 1);
}

Test(kube, gone_410_event_relists) {
        gone(false);
}

Test(kube, gone_410_answer_relists) {
        /* The server ends the open watch; the client resumes from its
         * version, which the server no longer has: a 410 answer. */
        gone(true);
}

Test(kube, throttled_429_honours_retry_after) {
        uint64_t t429, tnext;
        unsigned want[2] = { KUBE_ERR_THROTTLED, 1 };

        kt_kube(&t);
        fakeapi_fault(t.f, "POST", NULL, 1, 429, 2);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(1, "d")), 0);
        cr_assert_eq(kube_start(t.k), 0);
        cr_assert(kt_wait_stats(t.k, kt_errors_at_least, want, WAIT_MS));
        t429 = fakeapi_last_request_ns(t.f, "POST", NULL);
        wait_pool(KT_POOL_A, 1, "d");
        tnext = fakeapi_last_request_ns(t.f, "POST", NULL);
        cr_assert_eq(fakeapi_count(t.f, "POST"), 2);
        /* The back-off alone would be 250 ms: Retry-After: 2 is obeyed. */
        cr_assert_geq(tnext - t429, 2000000000u, "retried after %llu ms",
                      (unsigned long long)((tnext - t429) / 1000000));
}

Test(kube, server_errors_and_resets_are_retried) {
        struct kube_stats st;

        kt_kube(&t);
        fakeapi_fault(t.f, "GET", "/apis/", 2, 500, 0);
        fakeapi_fault(t.f, "POST", NULL, 1, 503, 0);
        fakeapi_fault(t.f, "POST", NULL, 1, 0, 0);
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(2, "d")), 0);
        cr_assert_eq(kube_start(t.k), 0);
        wait_pool(KT_POOL_A, 2, "d");
        kube_stats(t.k, &st);
        cr_assert_eq(st.api_errors[KUBE_ERR_SERVER], 3);
        /* By code: two 500s and one 503, none under "5xx". */
        cr_assert_eq(st.api_codes[kube_code_slot(500)], 2);
        cr_assert_eq(st.api_codes[kube_code_slot(503)], 1);
        cr_assert_eq(st.api_codes[kube_code_slot(599)], 0);
        /* libcurl itself retries a request whose reused connection closed
         * without an answer; either way the create went through. */
        cr_assert_eq(fakeapi_count(t.f, "POST"), 3);
}

Test(kube, unauthorized_401_rereads_the_rotated_token) {
        unsigned want[2] = { KUBE_ERR_UNAUTHORIZED, 1 };
        struct kube_stats st;

        start_with(KT_POOL_A, 1, "d");
        wait_pool(KT_POOL_A, 1, "d");
        kt_write(t.token_file, "token-two\n");
        fakeapi_set_token(t.f, "token-two");
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(2, "d")), 0);
        cr_assert(kt_wait_stats(t.k, kt_errors_at_least, want, WAIT_MS));
        /* Well before the minute's re-read: the 401 made it read now. */
        wait_pool(KT_POOL_A, 2, "d");
        kube_stats(t.k, &st);
        cr_assert_leq(st.api_errors[KUBE_ERR_UNAUTHORIZED], 2);
}

static bool connect_errors(const struct kube_stats *st, void *ctx) {
        (void)ctx;
        return st->api_errors[KUBE_ERR_CONNECT] >= 2;
}

/* Tests that set the fake server up their own way. */
TestSuite(kube_own, .timeout = 60);

Test(kube_own, connection_refused_until_the_server_is_up) {
        kt_setup(&t, false);
        start_with(KT_POOL_A, 4, "d");
        cr_assert(kt_wait_stats(t.k, connect_errors, NULL, WAIT_MS));
        cr_assert_eq(fakeapi_count(t.f, "GET"), 0);
        fakeapi_listen(t.f);
        wait_pool(KT_POOL_A, 4, "d");
        kt_teardown(&t);
}

Test(kube_own, server_cert_of_another_ca_is_refused) {
        struct fakeapi *other = fakeapi_new(true);

        kt_setup(&t, true);
        /* Same server, but the kubeconfig trusts another CA. */
        free(t.kubeconfig);
        free(t.token_file);
        kt_kubeconfig(&t, fakeapi_ca_file(other), "token-one\n");
        start_with(KT_POOL_A, 1, "d");
        cr_assert(kt_wait_stats(t.k, connect_errors, NULL, WAIT_MS));
        cr_assert_eq(fakeapi_count(t.f, "GET") + fakeapi_count(t.f, "OTHER"), 0,
                     "no request got past TLS");
        fakeapi_free(other);
        kt_teardown(&t);
}

Test(kube, watch_event_over_1mib_is_refused_and_relisted) {
        cJSON *all, *s, *dev;
        char *big = malloc(KUBE_EVENT_MAX + 16);
        unsigned lists;

        start_with(KT_POOL_A, 1, "d");
        wait_pool(KT_POOL_A, 1, "d");
        lists = fakeapi_count(t.f, "GET");
        memset(big, 'x', KUBE_EVENT_MAX + 15);
        big[KUBE_EVENT_MAX + 15] = '\0';
        all = fakeapi_slices(t.f);
        s = cJSON_DetachItemFromArray(all, 0);
        dev = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "spec"), "devices"), 0);
        cJSON_ReplaceItemInObject(dev, "name", cJSON_CreateString(big));
        fakeapi_put_slice(t.f, s);
        cJSON_Delete(all);
        free(big);
        /* The event is refused; the list (16 MiB allowed) shows the slice,
         * and it is put back as wanted. */
        cr_assert(fakeapi_wait(t.f, slices_lack, "xxxxxxxx", WAIT_MS));
        wait_pool(KT_POOL_A, 1, "d");
        cr_assert_eq(fakeapi_count(t.f, "GET"), lists + 1);
}

Test(kube, the_token_is_never_logged) {
        char *logfile = NULL, *text;
        struct kube_blob b;
        unsigned want[2] = { KUBE_ERR_UNAUTHORIZED, 2 };

        /* Everything the client logs, at debug, through 401s and a
         * rotation, goes to a file we then search. */
        cr_assert_geq(asprintf(&logfile, "%s/log", t.dir), 0);
        cr_assert_not_null(freopen(logfile, "w", stderr));
        log_set_level(LOG_DEBUG);
        start_with(KT_POOL_A, 1, "d");
        wait_pool(KT_POOL_A, 1, "d");
        fakeapi_set_token(t.f, "token-two");
        cr_assert_eq(kube_pool_set(t.k, KT_POOL_A, kt_devices(2, "d")), 0);
        /* Still the old token in the file: 401s until it is rotated. */
        cr_assert(kt_wait_stats(t.k, kt_errors_at_least, want, WAIT_MS));
        kt_write(t.token_file, "token-two\n");
        wait_pool(KT_POOL_A, 2, "d");
        kube_free(t.k);
        t.k = NULL;
        fflush(stderr);
        cr_assert_eq(kube_read_file(logfile, 1 << 20, &b), 0);
        text = b.data;
        cr_assert(strstr(text, "HTTP 401"), "the 401s are logged: %s", text);
        cr_assert_null(strstr(text, "token-one"), "%s", text);
        cr_assert_null(strstr(text, "token-two"), "%s", text);
        free(text);
        free(logfile);
}

Test(kube, error_codes_have_fixed_slots) {
        cr_assert_str_eq(kube_code_name(kube_code_slot(0)), "connect");
        cr_assert_str_eq(kube_code_name(kube_code_slot(409)), "409");
        cr_assert_str_eq(kube_code_name(kube_code_slot(418)), "4xx");
        cr_assert_str_eq(kube_code_name(kube_code_slot(599)), "5xx");
        cr_assert_str_eq(kube_code_name(kube_code_slot(-1)), "other");
        cr_assert_str_eq(kube_code_name(kube_code_slot(200)), "other");
        /* Every slot has its own name: a label value never repeats. */
        for (int i = 0; i < KUBE_CODE_N; i++)
                for (int j = i + 1; j < KUBE_CODE_N; j++)
                        cr_assert_str_neq(kube_code_name(i), kube_code_name(j));
}
