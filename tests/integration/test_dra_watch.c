/* SPDX-License-Identifier: Apache-2.0 */
/* The real, sandboxed daemon's watches and lists when the API server goes
 * away and comes back (issue 35): a restarted server's 410 is answered by
 * a relist after the least wait whatever the outage cost, a list whose
 * continue token never ends is given up and said once, the Node watch
 * backs off like the slices' one, each watch asks for a random timeout,
 * and /metrics and the log say whether the watch is up. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base.h"
#include "dra.h"
#include "env.h"
#include "fakeapi.h"
#include "http.h"
#include "kubelet.h"
#include "logwait.h"

#define DRIVER "cdiplug.example.com"
#define NODE "node1"
#define SLICES "/apis/resource.k8s.io/v1/resourceslices"
#define WAIT_MS 15000

static struct env e;
static struct tk_dra *kd;
static struct fakeapi *api;
static char *kroot, *kubeconfig;
static int port;

static void stop(void) {
        tk_dra_stop(kd);
        env_cleanup(&e);
        fakeapi_free(api);
        free(kroot);
        free(kubeconfig);
}

TestSuite(dra_watch, .fini = stop, .timeout = 120);

#define CONFIG(nodes)                                                                              \
        "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": ["                              \
        " { \"name\": \"example.com/serial\", \"api\": \"dra\"" nodes ","                          \
        " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }"

static void start(const char *config, fakeapi_hook_fn *hook) {
        char addr[32];

        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        api = fakeapi_new(true);
        fakeapi_add_node(api, NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_node_labels(api, NODE, cJSON_Parse("{\"example.com/zone\":\"a\"}"));
        kubeconfig = fakeapi_write_kubeconfig(api, e.root, NULL);
        cr_assert_not_null(kubeconfig);
        cr_assert_eq(asprintf(&kroot, "%s/kubelet-root", e.root) > 0, true);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        env_write(&e, "config.json", config);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        port = http_free_port();
        if (hook)
                fakeapi_set_hook(api, hook, NULL);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  "--metrics-address", addr, NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "never registered");
}

static void sleep_ms(long ms) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

static double metric(const char *sample) {
        return http_metric(port, sample);
}

static bool any_slice(const cJSON *slices, void *ctx) {
        (void)ctx;
        return cJSON_GetArraySize(slices) > 0;
}

/* ---- a restart: connections refused, then a 410 for the old version ---- */

static atomic_bool down;

/* While down, every slice request has its connection closed unanswered,
 * as by a server going away. */
static bool down_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                      const char *query, bool watch, bool *keep) {
        (void)ctx;
        (void)peer;
        (void)method;
        (void)query;
        (void)watch;
        if (!atomic_load(&down) || strncmp(path, SLICES, strlen(SLICES)) != 0)
                return false;
        *keep = false;
        return true;
}

#define UP "cdiplug_kube_watch_up{watch=\"resourceslices\"}"
#define LAST_UP "cdiplug_kube_watch_last_up_timestamp_seconds{watch=\"resourceslices\"}"

Test(dra_watch, a_410_after_an_outage_relists_after_the_least_wait) {
        unsigned base;
        const char *line;
        _cleanup_free_ char *log = NULL;

        atomic_store(&down, false);
        start(CONFIG(""), down_hook);
        cr_assert(fakeapi_wait(api, any_slice, NULL, WAIT_MS), "never published");
        cr_assert_eq(log_wait(e.log, "kube: pool", WAIT_MS), 0);
        for (int waited = 0; metric(UP) != 1 && waited < WAIT_MS; waited += 100)
                sleep_ms(100);
        _cleanup_free_ char *page = NULL;
        page = env_read(e.log);
        cr_assert_eq(metric(UP), 1, "the watch never counted as up: %s", page);

        /* A watch that has run a while (one ending within a second of its
         * start is a failure of its own). */
        sleep_ms(1500);
        /* The server goes: the open watch ends, its history with it. */
        base = fakeapi_count(api, "WATCH");
        atomic_store(&down, true);
        fakeapi_expire(api, true);
        for (int waited = 0; fakeapi_count(api, "WATCH") < base + 5 && waited < 30000;
             waited += 100)
                sleep_ms(100);
        cr_assert_geq(fakeapi_count(api, "WATCH"), base + 5, "the watch was not retried");
        cr_assert_eq(metric(UP), 0, "a watch down counts as up");
        cr_assert_gt(metric(LAST_UP), 1.7e9);
        /* Said what happened, not "HTTP 200", and once. */
        log = env_read(e.log);
        cr_assert_eq(log_count(e.log,
                               "warning: kube: the ResourceSlice watch ended: the connection "
                               "was closed"),
                     1, "%s", log);
        free(log);
        log = NULL;

        /* Back, the kubelet's wipe as it becomes ready: a 410 for the old
         * version, then a relist after the least wait, not the outage's. */
        fakeapi_wipe(api, NODE);
        atomic_store(&down, false);
        cr_assert_eq(log_wait(e.log, "(410 Gone); listing again in ", WAIT_MS), 0);
        log = env_read(e.log);
        line = strstr(log, "(410 Gone); listing again in ");
        cr_assert_not_null(line);
        long ms = strtol(line + strlen("(410 Gone); listing again in "), NULL, 10);
        cr_assert_leq(ms, 1000, "relisted %ld ms after the 410", ms);
        cr_assert_eq(log_wait(e.log, "info: kube: the ResourceSlice watch is back after", WAIT_MS),
                     0);
        cr_assert(fakeapi_wait(api, any_slice, NULL, WAIT_MS), "the wipe was not repaired");
        cr_assert_eq(metric(UP), 1);
}

/* ---- a list without end ---- */

static atomic_uint pages;

static bool endless_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                         const char *query, bool watch, bool *keep) {
        (void)ctx;
        if (watch || strcmp(method, "GET") != 0 || strcmp(path, SLICES) != 0 || !query ||
            !strstr(query, "limit="))
                return false;
        atomic_fetch_add(&pages, 1);
        *keep = fakeapi_peer_answer(peer, 200,
                                    "{\"kind\":\"ResourceSliceList\",\"apiVersion\":"
                                    "\"resource.k8s.io/v1\",\"metadata\":{\"resourceVersion\":"
                                    "\"5\",\"continue\":\"again\"},\"items\":[]}");
        return true;
}

Test(dra_watch, a_list_that_never_ends_is_given_up_and_said_once) {
        unsigned n;

        atomic_store(&pages, 0);
        start(CONFIG(""), endless_hook);
        cr_assert_eq(log_wait(e.log, "did not end after 64 pages", WAIT_MS), 0,
                     "%u pages and nothing said", atomic_load(&pages));
        n = atomic_load(&pages);
        sleep_ms(3000);
        n = atomic_load(&pages) - n;
        /* A list of 64 pages, then back-off: a few more lists at most. */
        cr_assert_leq(n, 6 * 64, "%u pages in 3 s", n);
        cr_assert_eq(log_count(e.log, "warning: kube: the ResourceSlice list did not end"), 1);
}

/* ---- the Node watch ---- */

static const char chunked[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n";
static atomic_uint node_watches;

/* The Node, then the end of the stream at once. */
static bool short_node_hook(void *ctx, struct fakeapi_peer *peer, const char *method,
                            const char *path, const char *query, bool watch, bool *keep) {
        static const char ev[] = "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":"
                                 "{\"name\":\"" NODE "\",\"labels\":{\"example.com/zone\":"
                                 "\"a\"}}}}\n";
        (void)ctx;
        (void)method;
        (void)query;
        if (!watch || strcmp(path, "/api/v1/nodes") != 0)
                return false;
        atomic_fetch_add(&node_watches, 1);
        *keep = fakeapi_peer_send(peer, chunked, sizeof(chunked) - 1) &&
                fakeapi_peer_chunk(peer, ev, sizeof(ev) - 1) && fakeapi_peer_chunk(peer, "", 0);
        return true;
}

Test(dra_watch, a_node_watch_that_ends_at_once_backs_off) {
        unsigned n;

        atomic_store(&node_watches, 0);
        start(CONFIG(", \"nodes\": { \"labels\": { \"example.com/zone\": \"a\" } }"),
              short_node_hook);
        cr_assert_eq(
                log_wait(e.log, "node's label watch ended: the server ended it at once", WAIT_MS),
                0);
        n = atomic_load(&node_watches);
        sleep_ms(3000);
        n = atomic_load(&node_watches) - n;
        /* Jittered back-off doubling: a handful in 3 s, not 20 a second. */
        cr_assert_leq(n, 6, "%u node watches in 3 s", n);
        cr_assert_eq(log_count(e.log, "warning: kube: the node's label watch ended"), 1);
}

/* ---- the watch's timeout ---- */

#define TIMEOUTS 4
static atomic_uint n_timeouts;
static atomic_uint timeouts[TIMEOUTS];

/* Each slice watch's timeoutSeconds, then the end of it at once. */
static bool timeout_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                         const char *query, bool watch, bool *keep) {
        const char *t = query ? strstr(query, "timeoutSeconds=") : NULL;
        unsigned i;

        (void)ctx;
        (void)method;
        if (!watch || strcmp(path, SLICES) != 0 || !t)
                return false;
        i = atomic_fetch_add(&n_timeouts, 1);
        if (i < TIMEOUTS)
                atomic_store(&timeouts[i], (unsigned)strtoul(t + 15, NULL, 10));
        *keep = fakeapi_peer_send(peer, chunked, sizeof(chunked) - 1) &&
                fakeapi_peer_chunk(peer, "", 0);
        return true;
}

Test(dra_watch, each_watch_asks_for_a_random_timeout_of_five_to_ten_minutes) {
        bool differ = false;

        atomic_store(&n_timeouts, 0);
        start(CONFIG(""), timeout_hook);
        for (int waited = 0; atomic_load(&n_timeouts) < TIMEOUTS && waited < 30000; waited += 100)
                sleep_ms(100);
        cr_assert_geq(atomic_load(&n_timeouts), TIMEOUTS);
        for (int i = 0; i < TIMEOUTS; i++) {
                unsigned t = atomic_load(&timeouts[i]);
                cr_assert(t >= 300 && t <= 600, "timeoutSeconds=%u", t);
                differ |= t != atomic_load(&timeouts[0]);
        }
        /* Four alike by chance: once in 27 million runs. */
        cr_assert(differ, "every watch asked for %u s", atomic_load(&timeouts[0]));
}

/* ---- another writer (issue 34 item 3) ---- */

#define RIVALS 30

/* Our one slice as another writer would change it: its first device
 * renamed, manager the writer's latest entry in managedFields. */
static void rival_write(const char *manager) {
        cJSON *all = fakeapi_slices(api), *s = cJSON_DetachItemFromArray(all, 0);
        cJSON *md, *mf, *entry, *dev;

        cr_assert_not_null(s, "no slice to change");
        md = cJSON_GetObjectItem(s, "metadata");
        mf = cJSON_GetObjectItem(md, "managedFields");
        if (!mf)
                mf = cJSON_AddArrayToObject(md, "managedFields");
        entry = cJSON_CreateObject();
        cJSON_AddStringToObject(entry, "manager", manager);
        cJSON_AddStringToObject(entry, "operation", "Update");
        cJSON_AddStringToObject(entry, "time", "2099-01-01T00:00:00Z");
        cJSON_AddItemToArray(mf, entry);
        dev = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "spec"), "devices"), 0);
        cr_assert_not_null(dev);
        cJSON_ReplaceItemInObject(dev, "name", cJSON_CreateString("rival"));
        fakeapi_put_slice(api, s);
        cJSON_Delete(all);
}

static bool repaired(const cJSON *slices, void *ctx) {
        const cJSON *s = cJSON_GetArrayItem(slices, 0);
        const cJSON *dev = cJSON_GetArrayItem(
                cJSON_GetObjectItem(cJSON_GetObjectItem(s, "spec"), "devices"), 0);
        const cJSON *name = cJSON_GetObjectItem(dev, "name");

        (void)ctx;
        return cJSON_IsString(name) && strcmp(name->valuestring, "rival") != 0;
}

static void settled(void) {
        start(CONFIG(""), NULL);
        cr_assert(fakeapi_wait(api, any_slice, NULL, WAIT_MS), "never published");
        cr_assert_eq(log_wait(e.log, "kube: pool", WAIT_MS), 0);
}

Test(dra_watch, another_writer_is_repaired_once_then_with_back_off_and_named) {
        unsigned puts;

        settled();
        puts = fakeapi_count(api, "PUT");
        for (int i = 0; i < RIVALS; i++) {
                rival_write("rival-writer");
                sleep_ms(50);
        }
        cr_assert(fakeapi_wait(api, repaired, NULL, 30000), "the last change was never repaired");
        puts = fakeapi_count(api, "PUT") - puts;
        /* At once, then after 0.5-1 s, 1-2 s, ...: a handful, not one each. */
        cr_assert_geq(puts, 1);
        cr_assert_leq(puts, 8, "%u writes against %d changes", puts, RIVALS);
        /* One warning, naming the writer. */
        cr_assert_eq(log_count(e.log, "warning: kube: ResourceSlice"), 1);
        cr_assert_geq(
                log_count(e.log, "changed by another writer (field manager \"rival-writer\")"), 1);
        /* Our own writes carry our manager, with the instance in it. */
        cJSON *all = fakeapi_slices(api);
        char *text = cJSON_PrintUnformatted(all);
        cr_assert(strstr(text, "\"manager\":\"cdiplug-"), "%s", text);
        free(text);
        cJSON_Delete(all);
}

Test(dra_watch, an_older_instance_stops_writing_once_a_newer_one_wrote) {
        unsigned puts, posts;

        settled();
        /* A start time far ahead: the newer instance of a rolling update. */
        rival_write("cdiplug-99999999999999-newer");
        cr_assert_eq(log_wait(e.log,
                              "a newer cdiplug instance (field manager "
                              "\"cdiplug-99999999999999-newer\")",
                              WAIT_MS),
                     0);
        puts = fakeapi_count(api, "PUT");
        posts = fakeapi_count(api, "POST");
        for (int i = 0; i < 5; i++) {
                rival_write("cdiplug-99999999999999-newer");
                sleep_ms(100);
        }
        sleep_ms(1000);
        cr_assert_eq(fakeapi_count(api, "PUT"), puts, "the older one still writes");
        cr_assert_eq(fakeapi_count(api, "POST"), posts);
        cr_assert_eq(log_count(e.log, "a newer cdiplug instance"), 1);
}
