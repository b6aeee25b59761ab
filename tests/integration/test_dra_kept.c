/* SPDX-License-Identifier: Apache-2.0 */
/* Prepared DRA claims, kept: every CDI ID a Prepare answered resolves
 * until its Unprepare, whatever a reload does to the resource (a selector
 * narrowed, the resource removed), although PodResources lists no pod
 * holding it (it lists running containers, and the kubelet starts a
 * claim's containers again with those IDs); and /metrics labels a DRA
 * device a pod holds (PodResources' dynamic_resources) with its pod, as
 * it does device-plugin devices. The real, sandboxed daemon, the fake
 * kubelet (DRA client and PodResources) and the fake API server. */
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

static struct env e;
static struct tk_dra *kd;
static struct tk_pr *pr;
static struct fakeapi *api;
static char *kroot, *kubeconfig, *spec;
static int port;

static void stop(void) {
        tk_dra_stop(kd);
        tk_pr_stop(pr);
        env_cleanup(&e);
        fakeapi_free(api);
        free(kroot);
        free(kubeconfig);
        free(spec);
}

TestSuite(dra_kept, .fini = stop, .timeout = 90);

#define CONFIG(resources)                                                                          \
        "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": [" resources "] }"
#define SERIAL(glob)                                                                               \
        " { \"name\": \"example.com/serial\", \"api\": \"dra\","                                   \
        " \"match\": [ { \"path\": \"" glob "\" } ] }"

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
        /* A settled kubelet listing no pod. */
        cr_assert_eq(tk_pr_start(e.podres, &pr), 0);
        cr_assert_eq(tk_pr_age(pr, 3600), 0);
        tk_pr_hold(pr, NULL, NULL, NULL, NULL);
        env_write(&e, "config.json", CONFIG(SERIAL("/dev/ttyS*")));
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        port = http_free_port();
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  "--metrics-address", addr, NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "never registered");
        cr_assert_eq(asprintf(&spec, "%s/example.com-serial.json", e.cdi_dir) > 0, true);
}

static char *dev(const char *id) {
        char *n = NULL;
        cr_assert_eq(dra_device_name(id, &n), 0);
        return n;
}

/* A claim ns/name (uid) with one device of ours, prepared: its CDI ID. */
static char *prepare(const char *name, const char *uid, const char *device) {
        _cleanup_free_ char *text = NULL;
        struct tk_dra_claim c = { "ns", name, uid };
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
        char *cdi;

        cr_assert_eq(asprintf(&text,
                              "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                              "\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"uid\":\"%s\"},"
                              "\"status\":{\"allocation\":{\"devices\":{\"results\":["
                              "{\"request\":\"r\",\"driver\":\"" DRIVER "\",\"pool\":\"" POOL "\","
                              "\"device\":\"%s\"}]}}}}",
                              name, uid, device) > 0,
                     true);
        fakeapi_add_claim(api, cJSON_Parse(text));
        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1", &c, 1, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 1);
        cr_assert_str_eq(r->claims[0]->value->error, "");
        cr_assert_eq(r->claims[0]->value->n_devices, 1);
        cdi = strdup(r->claims[0]->value->devices[0]->cdi_device_ids[0]);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        return cdi;
}

static void unprepare(const char *name, const char *uid) {
        struct tk_dra_claim c = { "ns", name, uid };
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse *r = NULL;

        cr_assert_eq(tk_dra_unprepare(kd, DRIVER, "v1", &c, 1, &r), GRPC_STATUS_OK);
        cr_assert_str_eq(r->claims[0]->value->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                r, NULL);
}

/* Whether the spec on disk defines CDI device name (the part after '=';
 * cJSON's printer puts a tab after the key's colon). */
static bool spec_defines(const char *cdi) {
        _cleanup_free_ char *text = env_read(spec), *quoted = NULL;

        cr_assert_eq(asprintf(&quoted, "\"name\":\t\"%s\"", strchr(cdi, '=') + 1) > 0, true);
        return text && strstr(text, quoted);
}

/* Reload with config and wait until its PodResources check has run. */
static void reload(const char *config, const char *done) {
        unsigned n = log_count(e.log, done);

        env_write(&e, "config.json", config);
        cr_assert_geq(log_wait_count(e.log, done, n + 1, WAIT_MS), 0, "%s", env_read(e.log));
}

Test(dra_kept, a_prepared_device_resolves_until_its_unprepare) {
        _cleanup_free_ char *d1 = NULL, *cdi = NULL;

        start();
        d1 = dev("ttyS1");
        cdi = prepare("c1", "uid-c1", d1);
        cr_assert(spec_defines(cdi), "%s: %s", cdi, env_read(spec));

        /* The selector narrowed: ttyS1 leaves the slice, not the spec. */
        reload(CONFIG(SERIAL("/dev/ttyS0")),
               "no longer named by the config, stays in its CDI spec");
        cr_assert(spec_defines(cdi), "a narrowed selector dropped %s while it is prepared", cdi);
        /* The resource removed: its spec stays, saying for whom. */
        reload(CONFIG(""), "DRA claim ns/c1 (uid uid-c1) is prepared with its device");
        cr_assert(access(spec, F_OK) == 0, "a removed resource's spec went while prepared");
        cr_assert(spec_defines(cdi));

        /* Unprepared: nothing holds it, the spec goes at once. */
        unprepare("c1", "uid-c1");
        cr_assert_eq(log_wait(e.log, "removed CDI spec", WAIT_MS), 0, "%s", env_read(e.log));
        cr_assert_neq(access(spec, F_OK), 0, "the spec stayed after the Unprepare");
}

Test(dra_kept, a_narrowed_selector_drops_the_device_once_unprepared) {
        _cleanup_free_ char *d1 = NULL, *cdi = NULL;

        start();
        d1 = dev("ttyS1");
        cdi = prepare("c1", "uid-c1", d1);
        reload(CONFIG(SERIAL("/dev/ttyS0")),
               "no longer named by the config, stays in its CDI spec");
        cr_assert(spec_defines(cdi));
        unprepare("c1", "uid-c1");
        cr_assert_eq(log_wait(e.log, "\"ttyS1\", no longer named by the config, left its CDI spec",
                              WAIT_MS),
                     0, "%s", env_read(e.log));
        cr_assert_not(spec_defines(cdi), "%s stayed after the Unprepare", cdi);
}

/* A pod PodResources lists with the device in its dynamic_resources holds
 * it too (our checkpoint may have been lost, a claim unprepared while its
 * pod still runs): the device leaves the spec once no pod lists it. */
Test(dra_kept, a_pod_listing_the_device_in_dynamic_resources_holds_it) {
        _cleanup_free_ char *d1 = NULL, *cdi = NULL;

        start();
        d1 = dev("ttyS1");
        cdi = prepare("c1", "uid-c1", d1);
        tk_pr_hold_claim(pr, "shop", "web-0", DRIVER, POOL, d1, cdi);
        unsigned asked = tk_pr_calls(pr);
        reload(CONFIG(SERIAL("/dev/ttyS0")), "reload: 0 added, 1 changed");
        for (int i = 0; i < WAIT_MS / 50 && tk_pr_calls(pr) < asked + 1; i++)
                usleep(50 * 1000); /* Not a decision: polls the fake's counter. */
        cr_assert(spec_defines(cdi));
        asked = tk_pr_calls(pr);
        unprepare("c1", "uid-c1");
        /* The Unprepare's own check, and one more. */
        for (int i = 0; i < WAIT_MS / 50 && tk_pr_calls(pr) < asked + 2; i++)
                usleep(50 * 1000); /* Not a decision: polls the fake's counter. */
        cr_assert_geq(tk_pr_calls(pr), asked + 2);
        cr_assert(spec_defines(cdi), "%s left the spec while pod shop/web-0 runs with it", cdi);
        tk_pr_hold(pr, NULL, NULL, NULL, NULL);
        cr_assert_eq(log_wait(e.log, "\"ttyS1\", no longer named by the config, left its CDI spec",
                              WAIT_MS),
                     0, "%s", env_read(e.log));
        cr_assert_not(spec_defines(cdi));
}

static char *scrape(void) {
        char *body = NULL;
        cr_assert_eq(http_get(port, "/metrics", &body), 200, "%s", body ? body : "");
        return body;
}

/* Scrape until the page holds needle (hotplug is seen on the daemon's
 * watcher thread, not the test's). */
static void wait_page(const char *needle) {
        _cleanup_free_ char *page = NULL;

        for (int i = 0; i < WAIT_MS / 100; i++) {
                free(page);
                page = scrape();
                if (strstr(page, needle))
                        return;
                /* Not a decision: the next scrape, 100 ms later. */
                usleep(100 * 1000);
        }
        cr_assert_fail("no %s in %s", needle, page);
}

/* The resource moved to the device plugin API, its device unplugged, then
 * no longer named: the claim's CDI ID still resolves. */
#define SERIAL_DP(glob)                                                                            \
        " { \"name\": \"example.com/serial\", \"api\": \"device-plugin\","                         \
        " \"match\": [ { \"path\": \"" glob "\" } ] }"

Test(dra_kept, a_switch_and_a_hotplug_keep_the_prepared_device) {
        _cleanup_free_ char *d1 = NULL, *cdi = NULL;

        start();
        d1 = dev("ttyS1");
        cdi = prepare("c1", "uid-c1", d1);
        reload(CONFIG(SERIAL_DP("/dev/ttyS*")), "now served through device-plugin");
        cr_assert(spec_defines(cdi));
        env_rm(&e, "dev/ttyS1");
        wait_page("device=\"ttyS1\",health=\"Unhealthy\"");
        cr_assert(spec_defines(cdi), "an unplugged device left the spec while prepared");
        /* Unplugged first, ttyS1 stays a vanished device of the resource. */
        reload(CONFIG(SERIAL_DP("/dev/ttyS0")), "reload: 0 added, 1 changed");
        cr_assert(spec_defines(cdi), "a narrowed selector dropped %s while it is prepared", cdi);
}

/* A DRA device a pod's container holds, as PodResources' dynamic_resources
 * lists it: cdiplug_device_allocation_info names it by resource, device and
 * ID, with the pod, as for a device-plugin device. */
Test(dra_kept, a_dra_device_a_pod_holds_is_labelled_with_its_pod) {
        _cleanup_free_ char *d1 = NULL, *cdi = NULL, *page = NULL;
        const char *want = "cdiplug_device_allocation_info{resource=\"example.com/serial\","
                           "device=\"ttyS1\",id=\"ttyS1\",namespace=\"shop\",pod=\"web-0\","
                           "container=\"app\"} 1";

        start();
        d1 = dev("ttyS1");
        cdi = prepare("c1", "uid-c1", d1);
        tk_pr_hold_claim(pr, "shop", "web-0", DRIVER, POOL, d1, cdi);
        for (int i = 0; i < WAIT_MS / 100; i++) {
                free(page);
                page = scrape();
                if (strstr(page, want))
                        break;
                /* PodResources answers are reused for a second. */
                usleep(100 * 1000);
        }
        cr_assert_not_null(strstr(page, want), "%s", page);
        /* Another driver's device in a pool of our pool's name is not ours. */
        tk_pr_hold_claim(pr, "shop", "web-1", "gpu.example.com", POOL, d1, "x/y=z");
        for (int i = 0; i < WAIT_MS / 100 && strstr(page, "web-0"); i++) {
                free(page);
                page = scrape();
                usleep(100 * 1000);
        }
        cr_assert_null(strstr(page, "web-1"), "%s", page);
}
