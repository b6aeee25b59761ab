/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA driver with the API server (the fake one, over HTTPS with a CA
 * made at test time), in the real, sandboxed daemon: its ResourceSlices
 * follow hotplug and the config, Prepare answers the CDI IDs of the spec
 * files the daemon wrote, each claim's problem is its error, and
 * Unprepare works after a SIGKILL and a restart. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "dra.h"
#include "env.h"
#include "fakeapi.h"
#include "faketree.h"
#include "kubelet.h"
#include "logwait.h"

#define DRIVER "cdiplug.example.com"
#define NODE "node1"
#define POOL NODE "/example.com/serial"
#define WAIT_MS 10000

static struct env e;
static struct tk_dra *kd;
static struct fakeapi *api;
static char *kroot, *kubeconfig;

static void stop(void) {
        tk_dra_stop(kd);
        env_cleanup(&e);
        fakeapi_free(api);
        free(kroot);
        free(kubeconfig);
}

TestSuite(dra_api, .fini = stop, .timeout = 90);

#define CONFIG(serial) "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": [" serial " ] }"
#define SERIAL                                                                                     \
        " { \"name\": \"example.com/serial\", \"api\": \"dra\","                                   \
        " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] }"

static void spawn(void) {
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  NULL);
}

static void start(const char *config) {
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
        spawn();
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "never registered");
}

/* The devices of pool in the slices, their names sorted and joined. */
struct want {
        const char *pool;
        const char *names;
};

static int by_name(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool pool_is(const cJSON *slices, void *ctx) {
        const struct want *w = ctx;
        char *names[64];
        size_t n = 0;
        char joined[1024] = "";
        const cJSON *s;

        cJSON_ArrayForEach(s, slices) {
                const cJSON *spec = cJSON_GetObjectItem(s, "spec");
                const cJSON *pool = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "pool"), "name");
                const cJSON *d;
                if (!cJSON_IsString(pool) || strcmp(pool->valuestring, w->pool) != 0)
                        continue;
                cJSON_ArrayForEach(d, cJSON_GetObjectItem(spec, "devices")) {
                        const cJSON *name = cJSON_GetObjectItem(d, "name");
                        if (n < 64 && cJSON_IsString(name))
                                names[n++] = name->valuestring;
                }
        }
        qsort(names, n, sizeof(*names), by_name);
        for (size_t i = 0; i < n; i++) {
                if (i)
                        strncat(joined, ",", sizeof(joined) - strlen(joined) - 1);
                strncat(joined, names[i], sizeof(joined) - strlen(joined) - 1);
        }
        return strcmp(joined, w->names) == 0;
}

static char *dev(const char *id) {
        char *n = NULL;
        cr_assert_eq(dra_device_name(id, &n), 0);
        return n;
}

static void add_claim(const char *name, const char *uid, const char *status) {
        char *text = NULL;

        cr_assert_eq(
                asprintf(&text,
                         "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                         "\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"uid\":\"%s\"}%s%s}",
                         name, uid, status ? ",\"status\":" : "", status ? status : "") > 0,
                true);
        fakeapi_add_claim(api, cJSON_Parse(text));
        free(text);
}

/* status.allocation with one device of ours in pool. */
static char *allocated(const char *pool, const char *device) {
        char *s = NULL;
        cr_assert_eq(asprintf(&s,
                              "{\"allocation\":{\"devices\":{\"results\":["
                              "{\"request\":\"r\",\"driver\":\"" DRIVER "\",\"pool\":\"%s\","
                              "\"device\":\"%s\"}]}}}",
                              pool, device) > 0,
                     true);
        return s;
}

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepClaim;

static const PrepClaim *claim_of(const PrepResp *r, const char *uid) {
        for (size_t i = 0; i < r->n_claims; i++)
                if (strcmp(r->claims[i]->key, uid) == 0)
                        return r->claims[i]->value;
        cr_assert_fail("no answer for claim %s", uid);
        return NULL;
}

Test(dra_api, slices_follow_hotplug_and_the_config) {
        _cleanup_free_ char *d0 = dev("ttyS0"), *d1 = dev("ttyS1"), *d2 = dev("ttyS2");
        char two[256], three[256];

        start(CONFIG(SERIAL));
        snprintf(two, sizeof(two), "%s,%s", d0, d1);
        snprintf(three, sizeof(three), "%s,%s,%s", d0, d1, d2);
        struct want w = { POOL, two };
        cr_assert(fakeapi_wait(api, pool_is, &w, WAIT_MS), "the pool never had %s", two);
        env_touch(&e, "dev/ttyS2");
        w.names = three;
        cr_assert(fakeapi_wait(api, pool_is, &w, WAIT_MS), "hotplug never reached the slices");
        /* The resource leaves DRA: its slices go. */
        env_write(&e, "config.json", CONFIG(""));
        w.names = "";
        cr_assert(fakeapi_wait(api, pool_is, &w, WAIT_MS), "the pool's slices stayed");
}

/* Whether device name of pool carries string attribute key = value. */
struct want_attr {
        const char *name, *key, *value;
};

static bool attr_is(const cJSON *slices, void *ctx) {
        const struct want_attr *w = ctx;
        const cJSON *s, *d;

        cJSON_ArrayForEach(s, slices) {
                const cJSON *spec = cJSON_GetObjectItem(s, "spec");
                const cJSON *pool = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "pool"), "name");
                if (!cJSON_IsString(pool) || strcmp(pool->valuestring, POOL) != 0)
                        continue;
                cJSON_ArrayForEach(d, cJSON_GetObjectItem(spec, "devices")) {
                        const cJSON *name = cJSON_GetObjectItem(d, "name");
                        const cJSON *a =
                                cJSON_GetObjectItem(cJSON_GetObjectItem(d, "attributes"), w->key);
                        const cJSON *v = cJSON_GetObjectItem(a, "string");
                        if (cJSON_IsString(name) && strcmp(name->valuestring, w->name) == 0)
                                return cJSON_IsString(v) && strcmp(v->valuestring, w->value) == 0;
                }
        }
        return false;
}

static void host_file(const char *rel, const char *content) {
        cr_assert_eq(ft_file(e.host, rel, content), 0, "%s", rel);
}

/* A USB serial adapter plugged in while the daemon runs: sysfs first (as
 * the kernel does), then its node, whose /sys/dev/char link leads there. */
static void plug_usb_tty(void) {
        const char *usb = "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1";
        const char *tty =
                "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0";
        char *p = NULL, *link = NULL, *target = NULL;
        unsigned maj, min;

        host_file("sys/devices/pci0000:00/0000:00:14.0/uevent", "");
        host_file("sys/devices/pci0000:00/0000:00:14.0/vendor", "0x8086\n");
        host_file("sys/devices/pci0000:00/0000:00:14.0/device", "0xa36d\n");
        cr_assert_eq(asprintf(&p, "%s/uevent", usb) > 0, true);
        host_file(p, "");
        free(p);
        cr_assert_eq(asprintf(&p, "%s/idVendor", usb) > 0, true);
        host_file(p, "0403\n");
        free(p);
        cr_assert_eq(asprintf(&p, "%s/idProduct", usb) > 0, true);
        host_file(p, "6001\n");
        free(p);
        cr_assert_eq(asprintf(&p, "%s/serial", usb) > 0, true);
        host_file(p, "FT1XYZ\n");
        free(p);
        cr_assert_eq(asprintf(&p, "%s/uevent", tty) > 0, true);
        host_file(p, "");
        free(p);
        ft_next_devnum(&maj, &min);
        cr_assert_eq(asprintf(&link, "sys/dev/char/%u:%u", maj, min) > 0, true);
        cr_assert_eq(asprintf(&target, "../../%s", tty + strlen("sys/")) > 0, true);
        cr_assert_eq(ft_symlink(e.host, link, target), 0);
        cr_assert_eq(ft_chrdev(e.host, "dev/ttyUSB0", maj, min), 0);
        free(link);
        free(target);
}

Test(dra_api, a_usb_device_carries_its_identity) {
        _cleanup_free_ char *d = dev("ttyUSB0");
        struct want_attr w = { d, "usbVendorID", "0x0403" };

        start(CONFIG(" { \"name\": \"example.com/serial\", \"api\": \"dra\","
                     " \"match\": [ { \"path\": \"/dev/ttyUSB*\", \"optional\": true } ] }"));
        plug_usb_tty();
        cr_assert(fakeapi_wait(api, attr_is, &w, WAIT_MS), "no usbVendorID 0x0403 on %s", d);
        w = (struct want_attr){ d, "usbProductID", "0x6001" };
        cr_assert(fakeapi_wait(api, attr_is, &w, WAIT_MS), "no usbProductID 0x6001 on %s", d);
        w = (struct want_attr){ d, "usbSerial", "FT1XYZ" };
        cr_assert(fakeapi_wait(api, attr_is, &w, WAIT_MS), "no usbSerial on %s", d);
}

/* The CDI ID the spec file the daemon wrote defines for it. */
static void assert_in_spec(const char *cdi_id) {
        const char *name = strchr(cdi_id, '=');
        _cleanup_free_ char *path = NULL, *spec = NULL, *quoted = NULL;

        cr_assert(name, "%s is no CDI ID", cdi_id);
        cr_assert_eq(asprintf(&path, "%s/cdiplug-example.com-serial.json", e.cdi_dir) > 0, true);
        spec = env_read(path);
        if (!spec) { /* the file name follows the kind */
                free(path);
                cr_assert_eq(asprintf(&path, "%s/example.com-serial.json", e.cdi_dir) > 0, true);
                spec = env_read(path);
        }
        cr_assert(spec, "no spec file %s", path);
        cr_assert_eq(asprintf(&quoted, "\"name\":\"%s\"", name + 1) > 0, true);
        cr_assert(strstr(spec, quoted) || strstr(spec, name + 1), "%s not in %s", name + 1, path);
        cr_assert(strncmp(cdi_id, "example.com/serial=", 19) == 0, "%s", cdi_id);
}

Test(dra_api, prepare_answers_cdi_ids_of_the_spec_and_each_claims_error) {
        _cleanup_free_ char *d0 = dev("ttyS0"), *ok = allocated(POOL, d0),
                            *foreign = allocated(NODE "/example.com/other", d0),
                            *gone = allocated(POOL, "ttys7");
        struct tk_dra_claim c[] = {
                { "ns", "ok", "uid-ok" },           { "ns", "missing", "uid-missing" },
                { "ns", "pending", "uid-pending" }, { "ns", "ok", "uid-replaced" },
                { "ns", "foreign", "uid-foreign" }, { "ns", "gone", "uid-gone" },
        };
        PrepResp *r = NULL;

        start(CONFIG(SERIAL));
        add_claim("ok", "uid-ok", ok);
        add_claim("pending", "uid-pending", "{}");
        add_claim("foreign", "uid-foreign", foreign);
        add_claim("gone", "uid-gone", gone);
        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1", c, 6, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 6);
        const PrepClaim *a = claim_of(r, "uid-ok");
        cr_assert_str_eq(a->error, "");
        cr_assert_eq(a->n_devices, 1);
        cr_assert_str_eq(a->devices[0]->pool_name, POOL);
        cr_assert_str_eq(a->devices[0]->device_name, d0);
        cr_assert_eq(a->devices[0]->n_cdi_device_ids, 1);
        assert_in_spec(a->devices[0]->cdi_device_ids[0]);
        const char *errs[] = { "uid-missing", "uid-pending", "uid-replaced", "uid-foreign",
                               "uid-gone" };
        for (size_t i = 0; i < ELEMENTSOF(errs); i++) {
                const PrepClaim *x = claim_of(r, errs[i]);
                cr_assert_neq(strlen(x->error), 0, "claim %s has no error", errs[i]);
                cr_assert_eq(x->n_devices, 0);
        }
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
}

/* A claim allocated from a prioritized list (DRAPrioritizedList): its
 * result's request is "<request>/<subrequest>"; the kubelet hands the
 * container the devices whose request_names hold the container's claim
 * request, the base one, in both API versions. */
Test(dra_api, a_subrequest_is_answered_as_its_base_request) {
        _cleanup_free_ char *d0 = dev("ttyS0"), *st = NULL;
        struct tk_dra_claim c = { "ns", "sub", "uid-sub" };
        const char *versions[] = { "v1", "v1beta1" };

        cr_assert_eq(asprintf(&st,
                              "{\"allocation\":{\"devices\":{\"results\":["
                              "{\"request\":\"port/any\",\"driver\":\"" DRIVER "\","
                              "\"pool\":\"" POOL "\",\"device\":\"%s\"}]}}}",
                              d0) > 0,
                     true);
        start(CONFIG(SERIAL));
        add_claim("sub", "uid-sub", st);
        for (size_t v = 0; v < ELEMENTSOF(versions); v++) {
                PrepResp *r = NULL;
                cr_assert_eq(tk_dra_prepare(kd, DRIVER, versions[v], &c, 1, &r), GRPC_STATUS_OK);
                const PrepClaim *a = claim_of(r, "uid-sub");
                cr_assert_str_eq(a->error, "", "%s: %s", versions[v], a->error);
                cr_assert_eq(a->n_devices, 1);
                cr_assert_eq(a->devices[0]->n_request_names, 1);
                cr_assert_str_eq(a->devices[0]->request_names[0], "port", "%s", versions[v]);
                k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(
                        r, NULL);
        }
}

/* A claim whose one result is device %s, with an opaque configuration
 * for driver %s. */
#define OPAQUE_FMT                                                                                 \
        "{\"allocation\":{\"devices\":{\"results\":["                                              \
        "{\"request\":\"r\",\"driver\":\"" DRIVER "\",\"pool\":\"" POOL "\",\"device\":\"%s\"}],"  \
        "\"config\":[{\"source\":\"FromClaim\",\"requests\":[\"r\"],"                              \
        "\"opaque\":{\"driver\":\"%s\",\"parameters\":{\"mode\":\"raw\"}}}]}}}"

/* cdiplug takes no parameters: an opaque configuration for its driver,
 * from the claim or from the class, fails the claim by name instead of
 * being ignored; one for another driver is none of its business. */
Test(dra_api, an_opaque_config_for_the_driver_is_the_claims_error) {
        _cleanup_free_ char *d0 = dev("ttyS0"), *mine = NULL, *other = NULL;
        struct tk_dra_claim c[] = { { "ns", "mine", "uid-mine" }, { "ns", "other", "uid-other" } };
        PrepResp *r = NULL;

        cr_assert_eq(asprintf(&mine, OPAQUE_FMT, d0, DRIVER) > 0, true);
        cr_assert_eq(asprintf(&other, OPAQUE_FMT, d0, "gpu.example.com") > 0, true);
        start(CONFIG(SERIAL));
        add_claim("mine", "uid-mine", mine);
        add_claim("other", "uid-other", other);
        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1", c, 2, &r), GRPC_STATUS_OK);
        const PrepClaim *a = claim_of(r, "uid-mine");
        cr_assert_eq(a->n_devices, 0);
        cr_assert_not_null(strstr(a->error, "status.allocation.devices.config[0]"), "%s", a->error);
        cr_assert_not_null(strstr(a->error, "takes no parameters"), "%s", a->error);
        const PrepClaim *b = claim_of(r, "uid-other");
        cr_assert_str_eq(b->error, "");
        cr_assert_eq(b->n_devices, 1);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
}

Test(dra_api, unprepare_works_after_sigkill_and_restart) {
        _cleanup_free_ char *d1 = dev("ttyS1"), *ok = allocated(POOL, d1), *cp_path = NULL,
                            *cp = NULL;
        struct tk_dra_claim c[] = { { "ns", "ok", "uid-ok" } };
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse *u = NULL;
        PrepResp *r = NULL;

        start(CONFIG(SERIAL));
        add_claim("ok", "uid-ok", ok);
        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1beta1", c, 1, &r), GRPC_STATUS_OK);
        cr_assert_str_eq(claim_of(r, "uid-ok")->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        cr_assert_eq(env_stop(&e, SIGKILL, WAIT_MS) >= 0, true);
        spawn();
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0);
        cr_assert_eq(log_wait(e.log, "1 prepared claims from", WAIT_MS), 0);
#define CLAIMS_PATH "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
        uint64_t claim_get = fakeapi_last_request_ns(api, "GET", CLAIMS_PATH);
        cr_assert_eq(tk_dra_unprepare(kd, DRIVER, "v1", c, 1, &u), GRPC_STATUS_OK);
        cr_assert_eq(u->n_claims, 1);
        cr_assert_str_eq(u->claims[0]->value->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                u, NULL);
        cr_assert_eq(asprintf(&cp_path, "%s/plugins/%s/checkpoint.json", kroot, DRIVER) > 0, true);
        cp = env_read(cp_path);
        cr_assert(cp && !strstr(cp, "uid-ok"), "%s", cp ? cp : "(none)");
        /* Unprepare asked the API server for no claim. */
        cr_assert_eq(fakeapi_last_request_ns(api, "GET", CLAIMS_PATH), claim_get);
}

Test(dra_api, a_thousand_claims_are_answered) {
        _cleanup_free_ char *d0 = dev("ttyS0"), *ok = allocated(POOL, d0);
        struct tk_dra_claim *c = calloc(1000, sizeof(*c));
        char(*uids)[16] = calloc(1000, 16);
        PrepResp *r = NULL;

        start(CONFIG(SERIAL));
        add_claim("ok", "uid-0", ok);
        for (size_t i = 0; i < 1000; i++) {
                snprintf(uids[i], 16, "uid-%zu", i);
                c[i] = (struct tk_dra_claim){ "ns", "ok", uids[i] };
        }
        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1", c, 1000, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 1000);
        cr_assert_str_eq(claim_of(r, "uid-0")->error, "");
        for (size_t i = 1; i < 1000; i++)
                cr_assert_neq(strlen(claim_of(r, uids[i])->error), 0);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        free(c);
        free(uids);
}

/* The sockets in plugins_registry deleted (a node's cleanup; the kubelet
 * leaves them) and every slice of the node wiped (the kubelet's start).
 * Both come back. */
Test(dra_api, a_kubelet_restart_is_repaired) {
        _cleanup_free_ char *d0 = dev("ttyS0"), *d1 = dev("ttyS1");
        char two[256];

        start(CONFIG(SERIAL));
        snprintf(two, sizeof(two), "%s,%s", d0, d1);
        struct want w = { POOL, two };
        cr_assert(fakeapi_wait(api, pool_is, &w, WAIT_MS), "the pool never had %s", two);
        cr_assert_eq(tk_dra_restart(kd), 0);
        fakeapi_wipe(api, NODE);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0);
        cr_assert(fakeapi_wait(api, pool_is, &w, 30000), "the wiped slices never came back");
}

/* The scheduler allocates a published device at once, and a kubelet that
 * has not registered the driver fails that claim's Prepare and backs the
 * pod off for a minute: the slices go out only once the kubelet has called
 * NotifyRegistrationStatus(true) on this instance's registry socket. A
 * refused registration publishes nothing; the next, accepted, does. Until
 * then the node's other slices of the driver stay too: in a rolling update
 * they are the older instance's, which still serves them (deleted, they
 * were made again by it at once, a write burst of every pool). */
Test(dra_api, slices_are_published_only_once_the_kubelet_registered_the_driver) {
        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        api = fakeapi_new(true);
        fakeapi_add_node(api, NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(api, "token-one");
        kubeconfig = fakeapi_write_kubeconfig(api, e.root, "token-one");
        cr_assert_not_null(kubeconfig);
        cr_assert_eq(asprintf(&kroot, "%s/kubelet-root", e.root) > 0, true);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        env_write(&e, "config.json", CONFIG(SERIAL));
        fakeapi_put_slice(api, cJSON_Parse("{\"metadata\":{\"name\":\"leftover\"},\"spec\":{"
                                           "\"driver\":\"" DRIVER "\",\"nodeName\":\"" NODE "\","
                                           "\"pool\":{\"name\":\"" NODE "/example.com/gone\","
                                           "\"generation\":1,\"resourceSliceCount\":1},"
                                           "\"devices\":[{\"name\":\"x\"}]}}"));
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        tk_dra_refuse(kd, "the test refuses");
        spawn();
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "never registered");
        cr_assert_eq(log_wait(e.log, "the kubelet refused driver", WAIT_MS), 0);
        /* The API client has listed and watches (the list, then the
         * watch): it would have written by now, were it allowed to. */
        cr_assert(fakeapi_wait_count(api, "GET", 2, WAIT_MS), "never listed and watched");
        cr_assert_eq(fakeapi_count(api, "POST"), 0,
                     "a slice was created before the kubelet registered the driver");
        cr_assert_eq(fakeapi_count(api, "DELETE"), 0,
                     "the node's other slice was deleted before the kubelet registered the "
                     "driver");

        /* Accepted the next time: the registry socket made again. */
        tk_dra_refuse(kd, NULL);
        char *reg;
        cr_assert(asprintf(&reg, "%s/plugins_registry/" DRIVER "-reg.sock", kroot) > 0);
        cr_assert_eq(unlink(reg), 0);
        free(reg);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "never registered again");
        char *id = dev("ttyS0");
        struct want w = { POOL, id };
        cr_assert(fakeapi_wait(api, pool_is, &w, WAIT_MS), "the slice never came");
        free(id);
        uint64_t post =
                fakeapi_last_request_ns(api, "POST", "/apis/resource.k8s.io/v1/resourceslices");
        cr_assert_gt(post, tk_dra_notified_ns(kd, DRIVER),
                     "the slice was created before the kubelet registered the driver");
        cr_assert_eq(fakeapi_count(api, "POST"), 1, "one slice, created once");
        cr_assert(fakeapi_wait_count(api, "DELETE", 1, WAIT_MS),
                  "the leftover stayed once the driver was registered");
}
