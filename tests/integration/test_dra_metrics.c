/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA figures on /metrics, scraped over HTTP from the real, sandboxed
 * daemon serving DRA (the fake kubelet's DRA client, the fake API server
 * over HTTPS): the registration, a Prepare and an Unprepare, an API error
 * injected in the fake, the slices published and their latency move the
 * series cdiplug(8) documents. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "dra.h"
#include "env.h"
#include "fakeapi.h"
#include "http.h"
#include "kubelet.h"
#include "logwait.h"

#define DRIVER "cdiplug.example.com"
#define NODE "node1"
#define POOL NODE "/example.com/serial"
#define WAIT_MS 10000
#define CLAIMS "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/"

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

TestSuite(dra_metrics, .fini = stop, .timeout = 90);

static const char config[] = "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": ["
                             " { \"name\": \"example.com/serial\", \"api\": \"dra\","
                             " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }";

static void start(void) {
        char addr[32];

        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_touch(&e, "dev/ttyS1");
        api = fakeapi_new(true);
        fakeapi_add_node(api, NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(api, "token-one");
        kubeconfig = fakeapi_write_kubeconfig(api, e.root, "token-one");
        cr_assert_not_null(kubeconfig);
        cr_assert_eq(asprintf(&kroot, "%s/kubelet-root", e.root) > 0, true);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        env_write(&e, "config.json", config);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        port = http_free_port();
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  "--metrics-address", addr, NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "never registered");
        cr_assert_eq(log_wait(e.log, "metrics: serving", WAIT_MS), 0);
}

static char *scrape(void) {
        char *body = NULL;
        cr_assert_eq(http_get(port, "/metrics", &body), 200, "%s", body ? body : "");
        return body;
}

/* The value of the sample written exactly as series ("name{labels}"), or
 * -1 when the page has none. */
static double sample(const char *page, const char *series) {
        size_t n = strlen(series);

        for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, series, n) == 0 && p[n] == ' ')
                        return strtod(p + n + 1, NULL);
        return -1;
}

/* Scrape until series has value want (the kubelet's Notify and the API
 * client's writes land on other threads than the test's). */
static double wait_sample(const char *series, double want) {
        double v = -1;
        for (int i = 0; i < WAIT_MS / 20; i++) {
                _cleanup_free_ char *page = scrape();
                v = sample(page, series);
                if (v == want)
                        return v;
                /* Not a decision: the next scrape, 20 ms later. */
                usleep(20 * 1000);
        }
        return v;
}

static bool has_devices(const cJSON *slices, void *ctx) {
        (void)ctx;
        const cJSON *s;
        cJSON_ArrayForEach(s, slices) {
                const cJSON *spec = cJSON_GetObjectItem(s, "spec");
                if (cJSON_GetArraySize(cJSON_GetObjectItem(spec, "devices")) == 2)
                        return true;
        }
        return false;
}

static void add_claim(const char *name, const char *uid, const char *device) {
        char *text = NULL;

        cr_assert_eq(asprintf(&text,
                              "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                              "\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"uid\":\"%s\"},"
                              "\"status\":{\"allocation\":{\"devices\":{\"results\":["
                              "{\"request\":\"r\",\"driver\":\"" DRIVER "\",\"pool\":\"" POOL "\","
                              "\"device\":\"%s\"}]}}}}",
                              name, uid, device) > 0,
                     true);
        fakeapi_add_claim(api, cJSON_Parse(text));
        free(text);
}

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepResp;

static const char *prepare(const char *version, const char *name, const char *uid) {
        static char error[256];
        struct tk_dra_claim c[] = { { "ns", name, uid } };
        PrepResp *r = NULL;

        cr_assert_eq(tk_dra_prepare(kd, DRIVER, version, c, 1, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 1);
        snprintf(error, sizeof(error), "%s", r->claims[0]->value->error);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        return error;
}

#define REQ(m, v, o)                                                                               \
        "cdiplug_dra_requests_total{method=\"" m "\",version=\"" v "\",outcome=\"" o "\"}"

Test(dra_metrics, figures_move_with_registration_prepare_errors_and_slices) {
        _cleanup_free_ char *d0 = NULL;
        char *page;
        struct tk_dra_claim ok[] = { { "ns", "ok", "uid-ok" } };
        UnprepResp *u = NULL;

        start();
        cr_assert_eq(dra_device_name("ttyS0", &d0), 0);
        cr_assert(fakeapi_wait(api, has_devices, NULL, WAIT_MS), "the pool was never published");

        cr_assert_eq(wait_sample("cdiplug_dra_registered", 1), 1, "the driver never counted");
        cr_assert_eq(wait_sample("cdiplug_dra_resource_slices", 1), 1);
        page = scrape();
        cr_assert_geq(sample(page, "cdiplug_dra_pool_publishes_total"), 1, "%s", page);
        cr_assert_geq(sample(page, "cdiplug_dra_publish_duration_seconds_count"), 1, "%s", page);
        cr_assert_gt(sample(page, "cdiplug_dra_publish_duration_seconds_sum"), 0, "%s", page);
        cr_assert_eq(sample(page, "cdiplug_dra_prepared_claims"), 0, "%s", page);
        cr_assert_eq(sample(page, REQ("prepare", "v1", "ok")), 0, "%s", page);
        cr_assert_eq(sample(page, "cdiplug_dra_api_errors_total{class=\"server\"}"), 0, "%s", page);
        cr_assert_eq(sample(page, "cdiplug_dra_api_error_codes_total{code=\"503\"}"), 0, "%s",
                     page);
        double lookups = sample(page, "cdiplug_dra_claim_lookups_total");
        free(page);

        /* A Prepare: one claim prepared, one v1 call answered ok. */
        add_claim("ok", "uid-ok", d0);
        cr_assert_str_eq(prepare("v1", "ok", "uid-ok"), "");
        page = scrape();
        cr_assert_eq(sample(page, "cdiplug_dra_prepared_claims"), 1, "%s", page);
        cr_assert_eq(sample(page, REQ("prepare", "v1", "ok")), 1, "%s", page);
        cr_assert_eq(sample(page, "cdiplug_dra_claim_lookups_total"), lookups + 1, "%s", page);
        free(page);

        /* An API error: the claim's GET answered 503 by the fake; the call
         * succeeds, its claim carries the error. */
        add_claim("other", "uid-other", d0);
        fakeapi_fault(api, "GET", CLAIMS "other", 1, 503, 0);
        cr_assert_neq(strlen(prepare("v1beta1", "other", "uid-other")), 0);
        page = scrape();
        cr_assert_eq(sample(page, "cdiplug_dra_api_errors_total{class=\"server\"}"), 1, "%s", page);
        /* ... and by its code, the other 5xx codes untouched. */
        cr_assert_eq(sample(page, "cdiplug_dra_api_error_codes_total{code=\"503\"}"), 1, "%s",
                     page);
        cr_assert_eq(sample(page, "cdiplug_dra_api_error_codes_total{code=\"500\"}"), 0, "%s",
                     page);
        cr_assert_eq(sample(page, "cdiplug_dra_api_error_codes_total{code=\"5xx\"}"), 0, "%s",
                     page);
        cr_assert_eq(sample(page, REQ("prepare", "v1beta1", "claim_error")), 1, "%s", page);
        cr_assert_eq(sample(page, "cdiplug_dra_prepared_claims"), 1, "%s", page);
        free(page);

        /* Unprepare: nothing prepared any more. */
        cr_assert_eq(tk_dra_unprepare(kd, DRIVER, "v1", ok, 1, &u), GRPC_STATUS_OK);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                u, NULL);
        page = scrape();
        cr_assert_eq(sample(page, "cdiplug_dra_prepared_claims"), 0, "%s", page);
        cr_assert_eq(sample(page, REQ("unprepare", "v1", "ok")), 1, "%s", page);
        free(page);

        /* Every DRA family on the page is in cdiplug(8)'s MONITORING list. */
        page = scrape();
        _cleanup_free_ char *man = env_read(CDIPLUG_SRC_DIR "/packaging/cdiplug.8.in");
        cr_assert_not_null(man);
        for (const char *p = page; (p = strstr(p, "# TYPE cdiplug_dra_"));) {
                char name[128], want[160];
                p += strlen("# TYPE ");
                size_t n = strcspn(p, " ");
                cr_assert_lt(n, sizeof(name));
                memcpy(name, p, n);
                name[n] = '\0';
                /* Underscores are written plain in the man page's .B lines. */
                snprintf(want, sizeof(want), ".B %s", name);
                cr_assert_not_null(strstr(man, want), "%s is not in cdiplug(8)", name);
        }
        free(page);

        /* The kubelet refuses the driver: the gauge follows. */
        tk_dra_refuse(kd, "no");
        cr_assert_eq(tk_dra_restart(kd), 0);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0);
        cr_assert_eq(wait_sample("cdiplug_dra_registered", 0), 0);
}

/* Without a "dra" section the page has no DRA series at all. */
Test(dra_metrics, no_dra_series_without_dra) {
        char addr[32];
        _cleanup_free_ char *page = NULL;

        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"example.com/serial\","
                  " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }");
        port = http_free_port();
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--metrics-address", addr, NULL);
        cr_assert_eq(log_wait(e.log, "metrics: serving", WAIT_MS), 0);
        page = scrape();
        cr_assert_null(strstr(page, "cdiplug_dra_"), "%s", page);
}
