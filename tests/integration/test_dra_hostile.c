/* SPDX-License-Identifier: Apache-2.0 */
/* The real, sandboxed daemon against an API server that misbehaves on
 * purpose (fakeapi's hook answers in its place): answers that parse into
 * huge trees, watches that flood, end at once or answer 410, writes that
 * always fail, claims built to break Prepare, a checkpoint of zeros. Each
 * test asserts what an operator notices: the memory the daemon peaks at
 * (VmHWM, against the 64 MiB it is shipped with), what /readyz and
 * /metrics say, what the kubelet gets back, how soon SIGTERM ends it. */
#include <criterion/criterion.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "dra.h"
#include "env.h"
#include "fakeapi.h"
#include "http.h"
#include "kubelet.h"
#include "logwait.h"
#include "proc_status.h"

#define DRIVER "cdiplug.example.com"
#define NODE "node1"
#define POOL NODE "/example.com/serial"
#define SLICES "/apis/resource.k8s.io/v1/resourceslices"
#define WAIT_MS 15000
/* Well under the 64 MiB limit the DaemonSet ships with. */
#define BUDGET_KB (48 * 1024)

static struct env e;
static struct tk_dra *kd;
static struct fakeapi *api;
static char *kroot, *kubeconfig;
static int port;

static atomic_bool hang_stop;

static void stop(void) {
        atomic_store(&hang_stop, true);
        tk_dra_stop(kd);
        env_cleanup(&e);
        fakeapi_free(api);
        free(kroot);
        free(kubeconfig);
}

TestSuite(dra_hostile, .fini = stop, .timeout = 120);

#define CONFIG                                                                                     \
        "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": ["                              \
        " { \"name\": \"example.com/serial\", \"api\": \"dra\","                                   \
        " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }"

/* The API server by name (NULL: its URL as the fake gives it). */
static const char *server_name;

static void write_kubeconfig(void) {
        char *text = NULL, url[128];

        if (server_name)
                snprintf(url, sizeof(url), "https://%s:%s", server_name,
                         strrchr(fakeapi_url(api), ':') + 1);
        else
                snprintf(url, sizeof(url), "%s", fakeapi_url(api));
        cr_assert_eq(asprintf(&kubeconfig, "%s/kubeconfig", e.root) > 0, true);
        cr_assert_eq(asprintf(&text,
                              "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                              "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                              "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                              "    certificate-authority: %s\n"
                              "users:\n- name: u\n  user: {}\n",
                              url, fakeapi_ca_file(api)) > 0,
                     true);
        env_write(&e, "kubeconfig", text);
        free(text);
}

/* Everything but the daemon. */
static void prepare_env(void) {
        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_touch(&e, "dev/ttyS1");
        api = fakeapi_new(true);
        fakeapi_add_node(api, NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        write_kubeconfig();
        cr_assert_eq(asprintf(&kroot, "%s/kubelet-root", e.root) > 0, true);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        env_write(&e, "config.json", CONFIG);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        port = http_free_port();
}

static void spawn(void) {
        char addr[32];

        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  "--metrics-address", addr, NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "never registered");
}

static long peak_kb(void) {
        _cleanup_free_ char *v = NULL;

        cr_assert_eq(proc_status_field(e.pid, 0, "VmHWM", &v), 0);
        return strtol(v, NULL, 10);
}

static void assert_within_budget(const char *what) {
        long kb = peak_kb();
#ifndef __SANITIZE_ADDRESS__ /* ASan's shadow and quarantine are not ours */
        cr_assert_leq(kb, BUDGET_KB, "%s: the daemon peaked at %ld kB", what, kb);
#else
        (void)kb;
        (void)what;
#endif
}

static void sleep_ms(long ms) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

static double metric(const char *name) {
        return http_metric(port, name);
}

/* ---- bounded parsing ---- */

/* A slice of ours in a pool the daemon does not have (a leftover it must
 * delete), 128 devices of ~150 bytes: ~19 kB of text. */
static cJSON *big_slice(size_t i) {
        char name[64], dev[32];
        cJSON *s = cJSON_CreateObject(), *md, *spec, *pool, *devs;

        snprintf(name, sizeof(name), NODE "-old-%zu", i);
        md = cJSON_AddObjectToObject(s, "metadata");
        cJSON_AddStringToObject(md, "name", name);
        spec = cJSON_AddObjectToObject(s, "spec");
        cJSON_AddStringToObject(spec, "driver", DRIVER);
        cJSON_AddStringToObject(spec, "nodeName", NODE);
        pool = cJSON_AddObjectToObject(spec, "pool");
        cJSON_AddStringToObject(pool, "name", NODE "/example.com/old");
        cJSON_AddNumberToObject(pool, "generation", 1);
        cJSON_AddNumberToObject(pool, "resourceSliceCount", 800);
        devs = cJSON_AddArrayToObject(spec, "devices");
        for (size_t d = 0; d < 128; d++) {
                cJSON *o = cJSON_CreateObject(), *attrs = cJSON_AddObjectToObject(o, "attributes");
                snprintf(dev, sizeof(dev), "dev-%zu-%zu", i, d);
                cJSON_AddStringToObject(o, "name", dev);
                for (int a = 0; a < 4; a++) {
                        char key[8];
                        snprintf(key, sizeof(key), "attr%d", a);
                        cJSON_AddStringToObject(cJSON_AddObjectToObject(attrs, key), "string",
                                                "0123456789abcdef");
                }
                cJSON_AddItemToArray(devs, o);
        }
        return s;
}

static bool no_old_slice(const cJSON *slices, void *ctx) {
        const cJSON *s;

        (void)ctx;
        cJSON_ArrayForEach(s, slices) {
                const char *n = cJSON_GetStringValue(
                        cJSON_GetObjectItem(cJSON_GetObjectItem(s, "metadata"), "name"));
                if (n && strncmp(n, NODE "-old-", strlen(NODE "-old-")) == 0)
                        return false;
        }
        return true;
}

/* 800 valid slices (15 MB as one list, a 143 MB tree): read page by page,
 * and all 800 leftovers deleted, within the budget. */
Test(dra_hostile, eight_hundred_slices_are_read_in_pages_within_the_budget) {
        prepare_env();
        for (size_t i = 0; i < 800; i++)
                fakeapi_put_slice(api, big_slice(i));
        spawn();
        cr_assert(fakeapi_wait(api, no_old_slice, NULL, 60000), "the 800 leftovers stayed");
        cr_assert_geq(fakeapi_lists_paged(api), 16, "%u pages", fakeapi_lists_paged(api));
        assert_within_budget("800 slices");
}

/* The list answered with ~4 MiB of "[0,0,...]" (a 160 MB tree). */
static bool zeros_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                       const char *query, bool watch, bool *keep) {
        static const char head[] = "{\"kind\":\"ResourceSliceList\",\"apiVersion\":"
                                   "\"resource.k8s.io/v1\",\"metadata\":{\"resourceVersion\":"
                                   "\"1\"},\"items\":[";
        size_t n = 4 * 1024 * 1024 - 256, at = sizeof(head) - 1;
        char *body;

        (void)ctx;
        (void)query;
        if (watch || strcmp(method, "GET") != 0 || strcmp(path, SLICES) != 0)
                return false;
        body = malloc(n + 8);
        cr_assert_not_null(body);
        memcpy(body, head, at);
        while (at + 2 < n) {
                body[at++] = '0';
                body[at++] = ',';
        }
        memcpy(body + at, "0]}", 4);
        *keep = fakeapi_peer_answer(peer, 200, body);
        free(body);
        return true;
}

Test(dra_hostile, a_list_of_zeros_is_refused_before_it_is_parsed) {
        prepare_env();
        fakeapi_set_hook(api, zeros_hook, NULL);
        spawn();
        cr_assert_eq(log_wait(e.log, "too many JSON values", WAIT_MS), 0);
        /* The node, and the list asked at least twice (with back-off). */
        for (int waited = 0; fakeapi_count(api, "GET") < 3 && waited < WAIT_MS; waited += 50)
                sleep_ms(50);
        cr_assert_geq(fakeapi_count(api, "GET"), 3);
        _cleanup_free_ char *log = env_read(e.log);
        /* Said as what it is, not as an HTTP error. */
        cr_assert_null(strstr(log, "HTTP 200:"), "%s", log);
        assert_within_budget("a list of zeros");
}

/* ---- watches ---- */

static const char chunked[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n";

/* Every watch: an ERROR event with a 410 Status at once (or, with ctx
 * set, a stream that ends at once). */
static bool short_watch_hook(void *ctx, struct fakeapi_peer *peer, const char *method,
                             const char *path, const char *query, bool watch, bool *keep) {
        static const char gone[] = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
                                   "\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":410,"
                                   "\"reason\":\"Expired\"}}\n";

        (void)method;
        (void)query;
        if (!watch || strcmp(path, SLICES) != 0)
                return false;
        *keep = fakeapi_peer_send(peer, chunked, sizeof(chunked) - 1) &&
                (ctx || fakeapi_peer_chunk(peer, gone, sizeof(gone) - 1)) &&
                fakeapi_peer_chunk(peer, "", 0);
        return true;
}

static void short_watches(bool end_only) {
        unsigned lists, watches;

        prepare_env();
        fakeapi_set_hook(api, short_watch_hook, end_only ? (void *)1 : NULL);
        spawn();
        cr_assert_eq(log_wait(e.log, end_only ? "ended at once" : "410 Gone", WAIT_MS), 0);
        lists = fakeapi_count(api, "GET");
        watches = fakeapi_count(api, "WATCH");
        sleep_ms(3000);
        lists = fakeapi_count(api, "GET") - lists;
        watches = fakeapi_count(api, "WATCH") - watches;
        /* Back-off from 250 ms doubling: a handful in 3 s, not 11 a second. */
        cr_assert_leq(watches, 6, "%u watches in 3 s", watches);
        cr_assert_leq(lists, 6, "%u lists in 3 s", lists);
        /* Debug lines aside: the daemon's test log holds them too. */
        int lines = file_count(e.log, end_only ? "warning: kube: the ResourceSlice watch ended"
                                               : "info: kube: the watch's resourceVersion expired");
        _cleanup_free_ char *log = env_read(e.log);
        cr_assert_leq(lines, 2, "a log line each time: %s", log);
}

Test(dra_hostile, a_watch_answered_410_at_once_backs_off) {
        short_watches(false);
}

Test(dra_hostile, a_watch_that_ends_at_once_backs_off) {
        short_watches(true);
}

/* A watch streaming ADDED and DELETED events of our node and driver under
 * ever new names, until the test ends it. */
static atomic_bool flood_stop;
/* Events before the test looks: many times the 1,024 slices kept in view
 * (ASan's daemon reads them several times slower). */
#ifndef __SANITIZE_ADDRESS__
#define FLOOD 20000
#else
#define FLOOD 5000
#endif
static atomic_uint flood_events;

static bool flood_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                       const char *query, bool watch, bool *keep) {
        char line[512], batch[64 * 512];
        bool ok;

        (void)ctx;
        (void)method;
        (void)query;
        if (!watch || strcmp(path, SLICES) != 0)
                return false;
        ok = fakeapi_peer_send(peer, chunked, sizeof(chunked) - 1);
        while (ok && !atomic_load(&flood_stop)) {
                size_t len = 0;
                for (int i = 0; i < 64; i++) {
                        unsigned n = atomic_fetch_add(&flood_events, 1);
                        int w = snprintf(
                                line, sizeof(line),
                                "{\"type\":\"%s\",\"object\":{\"metadata\":{\"name\":\"flood-%u\","
                                "\"resourceVersion\":\"%u\"},\"spec\":{\"driver\":\"" DRIVER
                                "\",\"nodeName\":\"" NODE "\",\"pool\":{\"name\":\"" NODE
                                "/example.com/flood\",\"generation\":1,\"resourceSliceCount\":1},"
                                "\"devices\":[{\"name\":\"d\"}]}}}\n",
                                n % 3 ? "ADDED" : "DELETED", n, 1000000u + n);
                        memcpy(batch + len, line, (size_t)w);
                        len += (size_t)w;
                }
                ok = fakeapi_peer_chunk(peer, batch, len);
        }
        *keep = false;
        return true;
}

Test(dra_hostile, a_watch_flood_of_new_names_stays_bounded) {
        _cleanup_free_ char *d0 = NULL, *text = NULL;
        struct tk_dra_claim c[] = { { "ns", "ok", "uid-ok" } };
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
        struct timespec t0, t1;

        prepare_env();
        cr_assert_eq(dra_device_name("ttyS0", &d0), 0);
        cr_assert_eq(asprintf(&text,
                              "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"ok\",\"uid\":"
                              "\"uid-ok\"},\"status\":{\"allocation\":{\"devices\":{\"results\":["
                              "{\"request\":\"r\",\"driver\":\"" DRIVER "\",\"pool\":\"" POOL
                              "\",\"device\":\"%s\"}]}}}}",
                              d0) > 0,
                     true);
        fakeapi_add_claim(api, cJSON_Parse(text));
        atomic_store(&flood_stop, false);
        atomic_store(&flood_events, 0);
        fakeapi_set_hook(api, flood_hook, NULL);
        spawn();
        for (int waited = 0; atomic_load(&flood_events) < FLOOD && waited < 60000; waited += 50)
                sleep_ms(50);
        cr_assert_geq(atomic_load(&flood_events), FLOOD, "the flood did not get going: %u events",
                      atomic_load(&flood_events));
        /* A claim lookup is answered promptly through it. */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        grpc_status_code st = tk_dra_prepare(kd, DRIVER, "v1", c, 1, &r);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        _cleanup_free_ char *log = st != GRPC_STATUS_OK ? env_read(e.log) : NULL;
        cr_assert_eq(st, GRPC_STATUS_OK, "status %d: %s", st, log ? log : "");
        cr_assert_str_eq(r->claims[0]->value->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "Prepare took %ld s", (long)(t1.tv_sec - t0.tv_sec));
        double slices = metric("cdiplug_dra_resource_slices");
        /* The 1,024 kept in view besides our own pool's one slice. */
        cr_assert(slices >= 0 && slices <= 1024 + 1, "cdiplug_dra_resource_slices %g", slices);
        assert_within_budget("a watch flood");
        /* SIGTERM ends it promptly, flood or not. */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cr_assert_geq(env_stop(&e, SIGTERM, 5000), 0, "SIGTERM took more than 5 s");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        atomic_store(&flood_stop, true);
        cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "SIGTERM took %ld s", (long)(t1.tv_sec - t0.tv_sec));
}

/* ---- readiness ---- */

static atomic_bool refuse_writes;

static bool refuse_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                        const char *query, bool watch, bool *keep) {
        (void)ctx;
        (void)path;
        (void)query;
        (void)watch;
        if (!atomic_load(&refuse_writes) || strcmp(method, "POST") != 0)
                return false;
        *keep = fakeapi_peer_answer(peer, 403,
                                    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                                    "\"Failure\",\"message\":\"forbidden\",\"code\":403}");
        return true;
}

static int readyz(char **body) {
        free(*body);
        *body = NULL;
        return http_get(port, "/readyz", body);
}

Test(dra_hostile, readyz_is_not_ready_while_no_slice_is_published) {
        _cleanup_free_ char *body = NULL;
        int code = 0;

        prepare_env();
        atomic_store(&refuse_writes, true);
        fakeapi_set_hook(api, refuse_hook, NULL);
        spawn();
        cr_assert_eq(log_wait(e.log, "cannot create ResourceSlice", WAIT_MS), 0);
        cr_assert_neq(readyz(&body), 200, "%s", body);
        cr_assert(strstr(body, "example.com/serial: not ready") && strstr(body, "ResourceSlices"),
                  "%s", body);
        atomic_store(&refuse_writes, false);
        for (int waited = 0; waited < 40000 && code != 200; waited += 100) {
                code = readyz(&body);
                if (code != 200)
                        sleep_ms(100);
        }
        cr_assert_eq(code, 200, "%s", body);
}

/* ---- claims built to break Prepare ---- */

static void add_claim(const char *name, const char *uid, const char *request, const char *device) {
        char *text = NULL;

        cr_assert_eq(asprintf(&text,
                              "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"uid\":\"%s\"},"
                              "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":"
                              "\"%s\",\"driver\":\"" DRIVER "\",\"pool\":\"" POOL "\",\"device\":"
                              "\"%s\"}]}}}}",
                              name, uid, request, device) > 0,
                     true);
        cJSON *o = cJSON_Parse(text);
        cr_assert_not_null(o, "%s", text);
        fakeapi_add_claim(api, o);
        free(text);
}

static char *prepare_one(const char *name, const char *uid) {
        struct tk_dra_claim c[] = { { "ns", name, uid } };
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
        char *err;

        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1", c, 1, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 1);
        err = strdup(r->claims[0]->value->error);
        if (!*err)
                cr_assert_eq(r->claims[0]->value->n_devices, 1);
        else
                cr_assert_eq(r->claims[0]->value->n_devices, 0);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        return err;
}

/* The claim "nul" as raw text: the fake's own cJSON would cut its
 * "\u0000" as the daemon's did. */
static char *nul_claim;

static bool nul_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                     const char *query, bool watch, bool *keep) {
        (void)ctx;
        (void)method;
        (void)query;
        (void)watch;
        if (strcmp(path, "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/nul") != 0)
                return false;
        *keep = fakeapi_peer_answer(peer, 200, nul_claim);
        return true;
}

Test(dra_hostile, a_bad_claim_fails_alone) {
        _cleanup_free_ char *d0 = NULL, *d1 = NULL, *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL,
                            *e5 = NULL;
        char long_uid[200];

        prepare_env();
        cr_assert_eq(dra_device_name("ttyS0", &d0), 0);
        cr_assert_eq(dra_device_name("ttyS1", &d1), 0);
        memset(long_uid, 'u', sizeof(long_uid) - 1);
        long_uid[sizeof(long_uid) - 1] = '\0';
        add_claim("badreq", "uid-badreq", "Not_A_Label", d0);
        add_claim("longuid", long_uid, "r", d0);
        cr_assert_eq(asprintf(&nul_claim,
                              "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"nul\",\"uid\":"
                              "\"uid-nul\"},\"status\":{\"allocation\":{\"devices\":{\"results\""
                              ":[{\"request\":\"r\",\"driver\":\"" DRIVER "\",\"pool\":\"" POOL
                              "\",\"device\":\"%s\\u0000evil\"}]}}}}",
                              d1) > 0,
                     true);
        fakeapi_set_hook(api, nul_hook, NULL);
        add_claim("ctl", "uid\\u0007\\u001b[31mred", "r", d0);
        add_claim("ok", "uid-ok", "r", d1);
        spawn();
        e1 = prepare_one("badreq", "uid-badreq");
        cr_assert_neq(strlen(e1), 0, "an invalid request name was prepared");
        e2 = prepare_one("longuid", long_uid);
        cr_assert_neq(strlen(e2), 0, "a 199-byte uid was prepared");
        e3 = prepare_one("nul", "uid-nul");
        cr_assert_neq(strlen(e3), 0, "a device name with a NUL was prepared as its prefix");
        e4 = prepare_one("ctl", "uid-ctl");
        cr_assert_neq(strlen(e4), 0);
        for (const char *p = e4; *p; p++)
                cr_assert((unsigned char)*p >= 0x20 && *p != 0x7f,
                          "a control character reached the kubelet: \"%s\"", e4);
        cr_assert(strstr(e4, "\\x07"), "%s", e4);
        /* None of them poisoned the checkpoint for the next claim. */
        e5 = prepare_one("ok", "uid-ok");
        cr_assert_str_eq(e5, "");
        free(nul_claim);
}

/* ---- the checkpoint ---- */

Test(dra_hostile, a_checkpoint_of_zeros_is_moved_aside_within_the_budget) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        size_t n = 30 * 1024 * 1024;
        char *text = malloc(n + 1);
        FILE *f;

        prepare_env();
        cr_assert_eq(asprintf(&dir, "%s/plugins", kroot) > 0, true);
        cr_assert_eq(mkdir(dir, 0755), 0);
        free(dir);
        cr_assert_eq(asprintf(&dir, "%s/plugins/%s", kroot, DRIVER) > 0, true);
        cr_assert_eq(mkdir(dir, 0750), 0);
        cr_assert_eq(asprintf(&path, "%s/checkpoint.json", dir) > 0, true);
        text[0] = '[';
        for (size_t i = 1; i + 2 < n; i += 2) {
                text[i] = '0';
                text[i + 1] = ',';
        }
        text[n - 2] = '0';
        text[n - 1] = ']';
        f = fopen(path, "w");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(text, 1, n, f), n);
        cr_assert_eq(fclose(f), 0);
        free(text);
        spawn();
        cr_assert_eq(log_wait(e.log, "is unusable", WAIT_MS), 0);
        assert_within_budget("a 30 MiB checkpoint");
}

/* ---- the API server's name ---- */

/* Replace path's content in place: a bind mount follows the inode. */
static void rewrite(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);

        cr_assert_geq(fd, 0, "%s", path);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        cr_assert_eq(close(fd), 0);
}

#define USB_CONFIG                                                                                 \
        "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": ["                              \
        " { \"name\": \"example.com/serial\", \"api\": \"dra\","                                   \
        " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] },"                                          \
        " { \"name\": \"example.com/usb\", \"match\": [ { \"path\": \"/dev/bus/usb/*/*\" } ] }"    \
        " ] }"

static bool pool_has_two(const cJSON *slices, void *ctx) {
        const cJSON *s;
        int n = 0;

        (void)ctx;
        cJSON_ArrayForEach(s, slices) {
                const cJSON *spec = cJSON_GetObjectItem(s, "spec");
                const char *pool = cJSON_GetStringValue(
                        cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "pool"), "name"));
                if (pool && strcmp(pool, POOL) == 0)
                        n += cJSON_GetArraySize(cJSON_GetObjectItem(spec, "devices"));
        }
        return n == 2;
}

/* /etc/hosts and /etc/resolv.conf of the test's own (bind mounts in its
 * private mount namespace, which the daemon inherits): the hosts file's
 * path, to rewrite in place. */
static char *bind_resolver(const char *hosts_text, const char *resolv_text) {
        _cleanup_free_ char *resolv = NULL;
        char *hosts = NULL;

        cr_assert_eq(asprintf(&hosts, "%s/hosts", e.root) > 0, true);
        cr_assert_eq(asprintf(&resolv, "%s/resolv.conf", e.root) > 0, true);
        env_write(&e, "hosts", hosts_text);
        env_write(&e, "resolv.conf", resolv_text);
        cr_assert_eq(mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL), 0, "%s", strerror(errno));
        cr_assert_eq(mount(resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL), 0, "%s",
                     strerror(errno));
        return hosts;
}

/* A kubeconfig naming a DNS host: a name that does not resolve at start
 * leaves the device plugins serving and DRA waiting; once it resolves,
 * to an address where nothing answers, the failure makes the daemon look
 * it up again, and the next address is the one it connects to. The name
 * lives in a private /etc/hosts (a mount namespace of this test's own,
 * which the daemon inherits), resolv.conf points at a port that refuses. */
Test(dra_hostile, the_api_servers_name_is_resolved_again_after_a_failure) {
        struct tk *tk = NULL;
        _cleanup_free_ char *hosts = NULL, *body = NULL;

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                cr_skip_test("no private mount namespace here (%s)", strerror(errno));
        server_name = "fakeapi.test";
        prepare_env();
        env_touch(&e, "dev/bus/usb/001/001");
        env_write(&e, "config.json", USB_CONFIG);
        hosts = bind_resolver("127.0.0.1 localhost\n",
                              "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n");
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        spawn();
        cr_assert_eq(log_wait(e.log, "cannot resolve the API server \"fakeapi.test\"", WAIT_MS), 0);
        /* The device plugin serves all along; DRA is not ready. */
        cr_assert_eq(tk_wait_registered(tk, "example.com/usb", 1, WAIT_MS), 0);
        cr_assert_neq(readyz(&body), 200, "%s", body);
        cr_assert(strstr(body, "example.com/usb: ready"), "%s", body);
        /* Resolves, to an address where nothing listens. */
        rewrite(hosts, "127.0.0.1 localhost\n127.0.0.2 fakeapi.test\n");
        cr_assert_eq(log_wait(e.log, "pinned to 127.0.0.2", WAIT_MS), 0);
        rewrite(hosts, "127.0.0.1 localhost fakeapi.test\n");
        cr_assert(fakeapi_wait(api, pool_has_two, NULL, 30000), "never published");
        cr_assert_eq(
                log_wait(e.log, "pinned to 127.0.0.1 (resolved again after a failure)", WAIT_MS),
                0);
        tk_stop(tk);
        server_name = NULL;
}

/* A DNS outage while the API server answers: one dropped connection
 * makes the daemon look the name up again, the lookup hangs (a resolver
 * that never answers, else one that refuses) and then fails, and every
 * Prepare meanwhile and after is answered through the last address that
 * worked. */
Test(dra_hostile, a_dns_outage_fails_no_prepare_while_the_server_answers) {
        struct sockaddr_in dns = { .sin_family = AF_INET, .sin_port = htons(53) };
        _cleanup_free_ char *hosts = NULL, *d0 = NULL, *e1 = NULL, *e2 = NULL, *e3 = NULL;
        int quiet;

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                cr_skip_test("no private mount namespace here (%s)", strerror(errno));
        server_name = "fakeapi.test";
        prepare_env();
        cr_assert_eq(dra_device_name("ttyS0", &d0), 0);
        add_claim("ok", "uid-ok", "r", d0);
        add_claim("dropped", "uid-dropped", "r", d0);
        hosts = bind_resolver("127.0.0.1 localhost fakeapi.test\n",
                              "nameserver 127.0.0.1\noptions timeout:4 attempts:2\n");
        /* A resolver that takes the queries and never answers. */
        dns.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        quiet = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (quiet >= 0 && bind(quiet, (struct sockaddr *)&dns, sizeof(dns)) < 0) {
                close(quiet);
                quiet = -1;
        }
        spawn();
        cr_assert_eq(log_wait(e.log, "pinned to 127.0.0.1 (resolved at start)", WAIT_MS), 0);
        cr_assert(fakeapi_wait(api, pool_has_two, NULL, 30000), "never published");
        /* The name is gone from DNS; the server still answers. */
        rewrite(hosts, "127.0.0.1 localhost\n");
        /* Two: libcurl tries a reused connection that dies once more. */
        fakeapi_fault(api, "GET", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/dropped",
                      2, 0, 0);
        e1 = prepare_one("dropped", "uid-dropped");
        e2 = prepare_one("ok", "uid-ok");
        cr_assert_str_eq(e2, "", "a Prepare failed for the DNS outage alone");
        (void)e1; /* dropped: it may fail */
        cr_assert_eq(log_wait(e.log, "the last address that worked stays in use", 30000), 0,
                     "the lookup never failed (quiet resolver: %d)", quiet >= 0);
        e3 = prepare_one("ok", "uid-ok");
        cr_assert_str_eq(e3, "", "a Prepare failed after the failed lookup");
        if (quiet >= 0)
                close(quiet);
        server_name = NULL;
}

/* A kubeconfig the daemon refuses is the configuration's mistake: exit
 * status 2, as for any other (cdiplug(8)), naming what is wrong. */
Test(dra_hostile, a_refused_kubeconfig_is_exit_status_2) {
        _cleanup_free_ char *out = NULL, *text = NULL;

        prepare_env();
        cr_assert_eq(asprintf(&text,
                              "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                              "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                              "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                              "    insecure-skip-tls-verify: true\n"
                              "users:\n- name: u\n  user: {}\n",
                              fakeapi_url(api)) > 0,
                     true);
        env_write(&e, "kubeconfig", text);
        cr_assert_eq(env_run(&e, &out, "serve", "--config", e.config, "--kubelet-root", kroot,
                             "--kubelet-dir", e.kubelet_dir, "--cdi-dir", e.cdi_dir, "--host-root",
                             e.host, "--node-name", NODE, "--kubeconfig", kubeconfig, NULL),
                     2, "%s", out);
        cr_assert(strstr(out, "insecure-skip-tls-verify"), "%s", out);
}

/* ---- lookups that outlive their Prepare ---- */

/* Claims named "hang-*" are never answered (until the test ends). */
static bool hang_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                      const char *query, bool watch, bool *keep) {
        (void)ctx;
        (void)peer;
        (void)method;
        (void)query;
        (void)watch;
        if (!strstr(path, "/resourceclaims/hang-"))
                return false;
        for (int i = 0; i < 1800 && !atomic_load(&hang_stop); i++)
                sleep_ms(50);
        *keep = false;
        return true;
}

/* A Prepare whose lookups hang gives up after 40 s: its lookups give
 * their slots up with it, so the next Prepare is answered at once, not
 * after the transfers' own 60 s. */
Test(dra_hostile, lookups_given_up_by_their_prepare_free_their_slots, .timeout = 150) {
        struct tk_dra_claim hung[10];
        char names[10][16];
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
        _cleanup_free_ char *d0 = NULL, *err = NULL;
        struct timespec t0, t1;

        prepare_env();
        cr_assert_eq(dra_device_name("ttyS0", &d0), 0);
        add_claim("ok", "uid-ok", "r", d0);
        atomic_store(&hang_stop, false);
        fakeapi_set_hook(api, hang_hook, NULL);
        spawn();
        for (int i = 0; i < 10; i++) {
                snprintf(names[i], sizeof(names[i]), "hang-%d", i);
                hung[i] = (struct tk_dra_claim){ "ns", names[i], names[i] };
        }
        /* Four at a time: the first four end at libcurl's 30 s without a
         * byte, the next four are still running at the Prepare's 40 s. */
        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1", hung, 10, &r), GRPC_STATUS_OK);
        for (size_t i = 0; i < r->n_claims; i++)
                cr_assert_neq(strlen(r->claims[i]->value->error), 0);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        err = prepare_one("ok", "uid-ok");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        atomic_store(&hang_stop, true);
        cr_assert_str_eq(err, "");
        cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "the next Prepare waited %ld s",
                     (long)(t1.tv_sec - t0.tv_sec));
}
