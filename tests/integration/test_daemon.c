/* SPDX-License-Identifier: Apache-2.0 */
/* The real cdiplug binary, three resources, a test kubelet, real sockets. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "proc_status.h"
#include "rpc.h"

static struct env e;
static struct tk *tk;

static const char config[] =
        "{ \"resources\": [\n"
        "  { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },\n"
        "  { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ], \"shares\": 4 },\n"
        "  { \"name\": \"example.com/kvm\", \"match\": [ { \"path\": \"/dev/kvm\" } ],\n"
        "    \"allocate\": [ \"cdi-cri\", \"cdi-annotations\", \"device-specs\" ] } ] }\n";

static const char *const resources[] = { "example.com/serial", "example.com/fuse",
                                         "example.com/kvm" };

static void start(void) {
        env_init(&e);
        env_write(&e, "config.json", config);
        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/ttyUSB1");
        env_touch(&e, "dev/fuse");
        env_touch(&e, "dev/kvm");
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        for (size_t i = 0; i < 3; i++)
                cr_assert_eq(tk_wait_registered(tk, resources[i], 1, 10000), 0,
                             "%s did not register", resources[i]);
}

static void stop(void) {
        tk_stop(tk);
        env_cleanup(&e);
}

TestSuite(daemon, .init = start, .fini = stop, .timeout = 60);

Test(daemon, registers_every_resource_with_its_socket_and_options) {
        for (size_t i = 0; i < 3; i++) {
                V1beta1__RegisterRequest *req;
                V1beta1__DevicePluginOptions *opts;
                char want[128];

                cr_assert_eq(tk_last_register(tk, resources[i], &req, &opts), 0);
                snprintf(want, sizeof(want), "cdiplug-%s.sock", resources[i]);
                *strchr(want, '/') = '-';
                cr_assert_str_eq(req->version, "v1beta1");
                cr_assert_str_eq(req->endpoint, want, "endpoint must be the bare socket file name");
                cr_assert_str_eq(req->resource_name, resources[i]);
                cr_assert_not_null(req->options);
                /* GetDevicePluginOptions answers what Register said. */
                cr_assert_eq(opts->pre_start_required, req->options->pre_start_required);
                cr_assert_eq(opts->get_preferred_allocation_available,
                             req->options->get_preferred_allocation_available);
                cr_assert_eq(opts->get_preferred_allocation_available, 1);
                protobuf_c_message_free_unpacked(&req->base, NULL);
                protobuf_c_message_free_unpacked(&opts->base, NULL);
        }
}

Test(daemon, lists_devices_and_shares) {
        V1beta1__ListAndWatchResponse *l;

        cr_assert_eq(tk_wait_lists(tk, "example.com/serial", 1, 5000, &l), 0);
        cr_assert_eq(l->n_devices, 2);
        cr_assert_str_eq(l->devices[0]->id, "ttyUSB0");
        cr_assert_str_eq(l->devices[1]->id, "ttyUSB1");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        cr_assert_null(l->devices[0]->topology, "no NUMA affinity must leave topology unset");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        cr_assert_eq(tk_wait_lists(tk, "example.com/fuse", 1, 5000, &l), 0);
        cr_assert_eq(l->n_devices, 4, "shares: 4 must give 4 IDs");
        for (size_t i = 0; i < 4; i++) {
                char want[16];
                snprintf(want, sizeof(want), "fuse-%zu", i);
                cr_assert_str_eq(l->devices[i]->id, want);
        }
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
}

Test(daemon, pushes_hotplug_to_every_stream) {
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        struct lw_stream *a = lw_open(ch), *b = lw_open(ch);
        V1beta1__ListAndWatchResponse *la = lw_next(a, 5000), *lb = lw_next(b, 5000);

        cr_assert(la && lb, "each stream gets the full list at once");
        cr_assert_eq(la->n_devices, 2);
        cr_assert_eq(lb->n_devices, 2);
        v1beta1__list_and_watch_response__free_unpacked(la, NULL);
        v1beta1__list_and_watch_response__free_unpacked(lb, NULL);

        env_touch(&e, "dev/ttyUSB2");
        la = lw_next(a, 5000);
        lb = lw_next(b, 5000);
        cr_assert(la && lb, "both streams get the update");
        cr_assert_eq(la->n_devices, 3);
        cr_assert_eq(lb->n_devices, 3);
        cr_assert_str_eq(la->devices[2]->id, "ttyUSB2");
        v1beta1__list_and_watch_response__free_unpacked(la, NULL);
        v1beta1__list_and_watch_response__free_unpacked(lb, NULL);

        /* A vanished node stays listed, Unhealthy, so capacity does not jump. */
        env_rm(&e, "dev/ttyUSB0");
        la = lw_next(a, 5000);
        cr_assert_not_null(la);
        cr_assert_eq(la->n_devices, 3);
        cr_assert_str_eq(la->devices[0]->id, "ttyUSB0");
        cr_assert_str_eq(la->devices[0]->health, "Unhealthy");
        cr_assert_str_eq(la->devices[1]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(la, NULL);

        /* The new device is allocatable: its spec was written first. */
        V1beta1__AllocateResponse *resp = NULL;
        cr_assert_eq(call_allocate(ch, &resp, NULL, "ttyUSB2", NULL, NULL), GRPC_STATUS_OK);
        v1beta1__allocate_response__free_unpacked(resp, NULL);
        char *path;
        cr_assert(asprintf(&path, "%s/example.com-serial.json", e.cdi_dir) > 0);
        char *spec = env_read(path);
        cr_assert_not_null(strstr(spec, "\"ttyUSB2\""));
        free(spec);
        free(path);
        lw_close(a);
        lw_close(b);
        grpc_channel_destroy(ch);
}

/* Every CDI name in an answer must be defined in a spec file in the dir. */
static bool defined_in_cdi_dir(const char *qualified) {
        const char *eq = strchr(qualified, '=');
        char kind[256], *path;
        snprintf(kind, sizeof(kind), "%.*s", (int)(eq - qualified), qualified);
        char file[256];
        snprintf(file, sizeof(file), "%s", kind);
        *strchr(file, '/') = '-';
        cr_assert(asprintf(&path, "%s/%s.json", e.cdi_dir, file) > 0);
        char *text = env_read(path);
        free(path);
        if (!text)
                return false;
        cJSON *doc = cJSON_Parse(text);
        free(text);
        bool found = false;
        const cJSON *dev;
        if (doc && strcmp(cJSON_GetObjectItem(doc, "kind")->valuestring, kind) == 0)
                cJSON_ArrayForEach(
                        dev, cJSON_GetObjectItem(
                                     doc, "devices")) if (strcmp(cJSON_GetObjectItem(dev, "name")
                                                                         ->valuestring,
                                                                 eq + 1) == 0) found = true;
        cJSON_Delete(doc);
        return found;
}

Test(daemon, allocates_with_cdi_names_per_container) {
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        V1beta1__AllocateResponse *r = NULL;

        cr_assert_eq(
                call_allocate(ch, &r, NULL, "ttyUSB0", "ttyUSB1", NULL, "ttyUSB1x", NULL, NULL),
                GRPC_STATUS_INVALID_ARGUMENT);
        cr_assert_eq(call_allocate(ch, &r, NULL, "ttyUSB1", "ttyUSB0", NULL, NULL), GRPC_STATUS_OK);
        cr_assert_eq(r->n_container_responses, 1);
        cr_assert_eq(r->container_responses[0]->n_cdi_devices, 2);
        cr_assert_str_eq(r->container_responses[0]->cdi_devices[0]->name,
                         "example.com/serial=ttyUSB1");
        cr_assert_str_eq(r->container_responses[0]->cdi_devices[1]->name,
                         "example.com/serial=ttyUSB0");
        cr_assert_eq(r->container_responses[0]->n_devices, 0, "cdi-cri mode sends no DeviceSpecs");
        for (size_t i = 0; i < 2; i++)
                cr_assert(defined_in_cdi_dir(r->container_responses[0]->cdi_devices[i]->name));
        v1beta1__allocate_response__free_unpacked(r, NULL);

        /* Two containers in one request: one answer each. */
        cr_assert_eq(call_allocate(ch, &r, NULL, "ttyUSB0", NULL, "ttyUSB1", NULL, NULL),
                     GRPC_STATUS_OK);
        cr_assert_eq(r->n_container_responses, 2);
        cr_assert_str_eq(r->container_responses[1]->cdi_devices[0]->name,
                         "example.com/serial=ttyUSB1");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        grpc_channel_destroy(ch);

        /* Shares of one device name the CDI device once. */
        ch = tk_dial(tk, "example.com/fuse");
        cr_assert_eq(call_allocate(ch, &r, NULL, "fuse-0", "fuse-3", NULL, NULL), GRPC_STATUS_OK);
        cr_assert_eq(r->container_responses[0]->n_cdi_devices, 1);
        cr_assert_str_eq(r->container_responses[0]->cdi_devices[0]->name, "example.com/fuse=fuse");
        cr_assert(defined_in_cdi_dir("example.com/fuse=fuse"));
        v1beta1__allocate_response__free_unpacked(r, NULL);
        grpc_channel_destroy(ch);
}

Test(daemon, allocates_in_every_configured_mode) {
        grpc_channel *ch = tk_dial(tk, "example.com/kvm");
        V1beta1__AllocateResponse *r = NULL;

        cr_assert_eq(call_allocate(ch, &r, NULL, "kvm", NULL, NULL), GRPC_STATUS_OK);
        V1beta1__ContainerAllocateResponse *c = r->container_responses[0];
        cr_assert_eq(c->n_cdi_devices, 1);
        cr_assert_str_eq(c->cdi_devices[0]->name, "example.com/kvm=kvm");
        cr_assert_eq(c->n_annotations, 1);
        cr_assert_str_eq(c->annotations[0]->key, "cdi.k8s.io/cdiplug_example.com-kvm");
        cr_assert_str_eq(c->annotations[0]->value, "example.com/kvm=kvm");
        cr_assert_eq(c->n_devices, 1);
        cr_assert_str_eq(c->devices[0]->host_path, "/dev/kvm", "paths stay host-absolute");
        cr_assert_str_eq(c->devices[0]->container_path, "/dev/kvm");
        cr_assert_str_eq(c->devices[0]->permissions, "rw");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        grpc_channel_destroy(ch);
}

Test(daemon, refuses_bad_allocate_and_keeps_serving) {
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        V1beta1__AllocateResponse *r = NULL;
        char *msg = NULL;

        cr_assert_eq(call_allocate(ch, &r, &msg, "ttyUSB9", NULL, NULL),
                     GRPC_STATUS_INVALID_ARGUMENT);
        cr_assert_str_eq(msg,
                         "container_requests[0]: unknown device ID \"ttyUSB9\" for resource "
                         "\"example.com/serial\"",
                         "the field, then what is wrong with it");
        free(msg);
        cr_assert_eq(call_allocate(ch, &r, &msg, "ttyUSB0", "ttyUSB0", NULL, NULL),
                     GRPC_STATUS_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(msg, "ttyUSB0"), "message names the duplicate ID: %s", msg);
        free(msg);
        cr_assert_eq(call_allocate(ch, &r, &msg, "", NULL, NULL), GRPC_STATUS_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(msg, "empty"), "%s", msg);
        free(msg);
        cr_assert_eq(call_allocate(ch, &r, &msg, "ttyUSB0", "ttyUSB1", "ttyUSB0", NULL, NULL),
                     GRPC_STATUS_INVALID_ARGUMENT, "more IDs than the resource has");
        free(msg);
        cr_assert_eq(call_allocate(ch, &r, &msg, NULL, NULL), GRPC_STATUS_INVALID_ARGUMENT,
                     "no containers");
        free(msg);

        /* A request over 4 MiB is refused by the transport, not a crash. */
        V1beta1__AllocateRequest big = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *cs[] = { &c };
        char *huge = malloc(5 << 20);
        memset(huge, 'a', (5 << 20) - 1);
        huge[(5 << 20) - 1] = '\0';
        char *ids[] = { huge };
        c.n_devices_ids = 1;
        c.devices_ids = ids;
        big.n_container_requests = 1;
        big.container_requests = cs;
        grpc_status_code st =
                dp_call_unary(ch, DP_METHOD_ALLOCATE, &big.base,
                              &v1beta1__allocate_response__descriptor, NULL, NULL, 5000);
        cr_assert_eq(st, GRPC_STATUS_RESOURCE_EXHAUSTED, "got status %d", st);
        free(huge);

        /* Garbage that is not a protobuf message. */
        V1beta1__DeviceSpec junk = V1BETA1__DEVICE_SPEC__INIT;
        junk.container_path = "\x01\x02";
        st = dp_call_unary(ch, "/v1beta1.DevicePlugin/NoSuchMethod", &junk.base,
                           &v1beta1__empty__descriptor, NULL, NULL, 5000);
        cr_assert_eq(st, GRPC_STATUS_UNIMPLEMENTED);

        /* Still serving, every resource. */
        cr_assert_eq(call_allocate(ch, &r, NULL, "ttyUSB0", NULL, NULL), GRPC_STATUS_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        V1beta1__PreStartContainerRequest ps = V1BETA1__PRE_START_CONTAINER_REQUEST__INIT;
        st = dp_call_unary(ch, DP_METHOD_PRESTART, &ps.base,
                           &v1beta1__pre_start_container_response__descriptor, NULL, NULL, 5000);
        cr_assert_eq(st, GRPC_STATUS_OK);
        grpc_channel_destroy(ch);
}

static void expect_preferred(grpc_channel *ch, const char *avail, const char *must, int size,
                             grpc_status_code want, const char *want_ids) {
        V1beta1__PreferredAllocationResponse *r = NULL;
        char *msg = NULL;
        grpc_status_code st = call_preferred(ch, avail, must, size, &r, &msg);
        cr_assert_eq(st, want, "preferred(%s | %s | %d): status %d %s", avail, must, size, st, msg);
        if (st == GRPC_STATUS_OK) {
                char got[256] = "";
                cr_assert_eq(r->n_container_responses, 1);
                for (size_t i = 0; i < r->container_responses[0]->n_deviceids; i++) {
                        if (i)
                                strcat(got, ",");
                        strcat(got, r->container_responses[0]->deviceids[i]);
                }
                cr_assert_str_eq(got, want_ids);
                v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
        }
        free(msg);
}

Test(daemon, preferred_allocation_keeps_must_include_and_size) {
        grpc_channel *ch = tk_dial(tk, "example.com/fuse");

        expect_preferred(ch, "fuse-0,fuse-1,fuse-2,fuse-3", "fuse-2", 2, GRPC_STATUS_OK,
                         "fuse-2,fuse-0");
        expect_preferred(ch, "fuse-3,fuse-1", "", 1, GRPC_STATUS_OK, "fuse-3");
        expect_preferred(ch, "fuse-0,fuse-1", "fuse-1,fuse-0", 2, GRPC_STATUS_OK, "fuse-1,fuse-0");
        /* Invalid requests. */
        expect_preferred(ch, "fuse-0,fuse-1", "fuse-2", 1, GRPC_STATUS_INVALID_ARGUMENT, NULL);
        expect_preferred(ch, "fuse-0,fuse-1", "", 3, GRPC_STATUS_INVALID_ARGUMENT, NULL);
        expect_preferred(ch, "fuse-0,fuse-1", "", 0, GRPC_STATUS_INVALID_ARGUMENT, NULL);
        expect_preferred(ch, "fuse-0,nope", "", 1, GRPC_STATUS_INVALID_ARGUMENT, NULL);
        expect_preferred(ch, "fuse-0,fuse-0", "", 1, GRPC_STATUS_INVALID_ARGUMENT, NULL);
        expect_preferred(ch, "fuse-0,fuse-1,fuse-2", "fuse-0,fuse-1", 1,
                         GRPC_STATUS_INVALID_ARGUMENT, NULL);
        grpc_channel_destroy(ch);
}

Test(daemon, stops_cleanly_on_sigterm) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int status = env_stop(&e, SIGTERM, 5000);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        cr_assert(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d",
                  status);
        cr_assert_leq(ms, 1000, "took %ld ms to stop", ms);
        /* Its sockets are gone; kubelet.sock is not its to remove. */
        for (size_t i = 0; i < 3; i++) {
                char path[512], name[128];
                snprintf(name, sizeof(name), "cdiplug-%s.sock", resources[i]);
                *strchr(name, '/') = '-';
                snprintf(path, sizeof(path), "%s/%s", e.kubelet_dir, name);
                struct stat st;
                cr_assert_neq(stat(path, &st), 0, "%s still there", path);
        }
        /* Specs stay: the kubelet replays old Allocate answers. */
        cr_assert(defined_in_cdi_dir("example.com/serial=ttyUSB0"));
}

Test(daemon, serves_with_no_capability_and_seccomp_on_every_thread) {
        char *msg = NULL;
        /* Work first, so grpc's threads all exist: a hotplug, a restart,
         * an Allocate. */
        unsigned lists = tk_lists(tk, "example.com/serial");
        env_touch(&e, "dev/ttyUSB7");
        /* Allocate below needs the hotplug seen: the list that has it. */
        V1beta1__ListAndWatchResponse *l = NULL;
        cr_assert_eq(tk_wait_lists(tk, "example.com/serial", lists + 1, 10000, &l), 0);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        cr_assert_eq(tk_restart(tk, false), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 2, 10000), 0);
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        cr_assert_eq(call_allocate(ch, NULL, NULL, "ttyUSB7", NULL, NULL), GRPC_STATUS_OK);
        grpc_channel_destroy(ch);
        if (getenv("CDIPLUG_TEST_NO_SANDBOX") || geteuid() != 0)
                cr_skip_test("sandbox off: not root, or turned off for debugging");
        int r = proc_check_confined(e.pid, &msg);
        cr_assert_eq(r, 0, "daemon not confined: %s", msg ? msg : "?");
}
