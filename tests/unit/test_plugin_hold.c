/* SPDX-License-Identifier: Apache-2.0 */
/* dp_plugin_hold: after a failed CDI spec write the list offers only what
 * the spec on disk defines, for devices added, with shares, and for a
 * device whose nodes changed; dp_plugin_spec_written lists everything. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "config.h"
#include "plugin.h"
#include "resources.h"

static struct res_device dev(const char *id, const char *node) {
        struct res_device d = { 0 };
        d.id = (char *)id;
        d.nodes = calloc(2, sizeof(char *));
        d.nodes[0] = (char *)node;
        d.n_nodes = 1;
        d.numa_node = -1;
        return d;
}

static V1beta1__ListAndWatchResponse *list_of(struct dp_plugin *p) {
        uint8_t *buf;
        size_t len;
        cr_assert_eq(dp_plugin_list(p, &buf, &len), 0);
        V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        free(buf);
        return l;
}

static void update(struct dp_plugin *p, struct res_device *devs, size_t n) {
        struct res_devlist list = { .devs = devs, .n = n };
        bool changed;
        cr_assert_eq(dp_plugin_update(p, &list, &changed), 0);
}

static void expect(struct dp_plugin *p, const char *const *ids, const char *const *health,
                   size_t n) {
        V1beta1__ListAndWatchResponse *l = list_of(p);
        cr_assert_eq(l->n_devices, n, "%zu devices listed, want %zu", l->n_devices, n);
        for (size_t i = 0; i < n; i++) {
                cr_expect_str_eq(l->devices[i]->id, ids[i]);
                cr_expect_str_eq(l->devices[i]->health, health[i], "%s", ids[i]);
        }
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
}

static void free_nodes(struct res_device *d, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(d[i].nodes);
}

Test(plugin_hold, lists_only_what_the_written_spec_defines) {
        struct cfg_resource cfg = { .name = "example.com/serial",
                                    .socket_name = "cdiplug-example.com-serial.sock",
                                    .shares = 1,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("ttyS0", "/dev/ttyS0"), dev("ttyS1", "/dev/ttyS1"),
                                  dev("ttyS2", "/dev/ttyS2") };
        struct res_device moved = dev("ttyS0", "/dev/other");
        struct dp_plugin *p;
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        update(p, a, 2);
        dp_plugin_spec_written(p);

        /* ttyS2 appears and ttyS0 changes node; the write fails. */
        struct res_device b[] = { moved, a[1], a[2] };
        update(p, b, 3);
        uint64_t gen = p->generation;
        dp_plugin_hold(p);
        cr_assert_gt(p->generation, gen, "holding changed the list (ttyS0 turns Unhealthy)");
        expect(p, (const char *[]){ "ttyS0", "ttyS1" }, (const char *[]){ "Unhealthy", "Healthy" },
               2);

        /* Still held, another hotplug: ttyS1 goes; nothing new appears. */
        struct res_device c[] = { moved, a[2] };
        update(p, c, 2);
        expect(p, (const char *[]){ "ttyS0", "ttyS1" },
               (const char *[]){ "Unhealthy", "Unhealthy" }, 2);

        /* Written at last: everything, as it is. */
        gen = p->generation;
        dp_plugin_spec_written(p);
        cr_assert_gt(p->generation, gen);
        expect(p, (const char *[]){ "ttyS0", "ttyS1", "ttyS2" },
               (const char *[]){ "Healthy", "Unhealthy", "Healthy" }, 3);
        dp_plugin_free(p);
        free_nodes(a, 3);
        free_nodes(&moved, 1);
}

Test(plugin_hold, holds_back_every_share_of_a_new_device) {
        struct cfg_resource cfg = { .name = "example.com/fuse",
                                    .socket_name = "cdiplug-example.com-fuse.sock",
                                    .shares = 2,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("fuse", "/dev/fuse"), dev("kvm", "/dev/kvm") };
        struct dp_plugin *p;
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        update(p, a, 1);
        dp_plugin_spec_written(p);
        V1beta1__ListAndWatchResponse *l = list_of(p);
        size_t before = l->n_devices;
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        cr_assert_eq(before, 2);
        update(p, a, 2);
        dp_plugin_hold(p);
        l = list_of(p);
        cr_assert_eq(l->n_devices, before);
        for (size_t i = 0; i < l->n_devices; i++)
                cr_expect_null(strstr(l->devices[i]->id, "kvm"), "%s listed before its spec",
                               l->devices[i]->id);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        dp_plugin_spec_written(p);
        l = list_of(p);
        cr_assert_eq(l->n_devices, 4);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        dp_plugin_free(p);
        free_nodes(a, 2);
}

/* Allocate for one container asking for id: 0 or the error; a refusal
 * names id as the device it is about, for the log line. */
static int allocate_one(struct dp_plugin *p, const char *id, char **ret_msg) {
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *creqs[] = { &creq };
        char *ids[] = { (char *)id };
        V1beta1__AllocateResponse *resp = NULL;
        creq.n_devices_ids = 1;
        creq.devices_ids = ids;
        req.n_container_requests = 1;
        req.container_requests = creqs;
        char *dev = NULL;
        int r = dp_allocate(p, &req, &resp, ret_msg, &dev);
        if (r == 0)
                dp_allocate_response_free(resp);
        else
                cr_assert_str_eq(dev, id);
        free(dev);
        return r;
}

/* SECURITY.md: requests are checked against the advertised set. Before,
 * a held list left kvm out, yet Allocate answered with its CDI name,
 * which the spec on disk does not define. */
Test(plugin_hold, allocate_refuses_what_the_held_list_does_not_offer) {
        struct cfg_resource cfg = { .name = "example.com/dev",
                                    .socket_name = "cdiplug-example.com-dev.sock",
                                    .shares = 1,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("fuse", "/dev/fuse"), dev("kvm", "/dev/kvm") };
        struct dp_plugin *p;
        char *msg = NULL;
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        update(p, a, 1);
        dp_plugin_spec_written(p);
        update(p, a, 2);
        dp_plugin_hold(p);
        cr_assert_eq(allocate_one(p, "fuse", NULL), 0);
        cr_assert_eq(allocate_one(p, "kvm", &msg), -EINVAL);
        cr_assert_not_null(strstr(msg, "not advertised"), "%s", msg);
        free(msg);
        dp_plugin_spec_written(p);
        cr_assert_eq(allocate_one(p, "kvm", NULL), 0);
        dp_plugin_free(p);
        free_nodes(a, 2);
}

/* What a spec an earlier run wrote defines decides the held list of a
 * plugin that never wrote one: defined and the same is Healthy, defined
 * otherwise is Unhealthy, not defined is left out. */
Test(plugin_hold, the_spec_on_disk_decides_a_fresh_held_list) {
        struct cfg_resource cfg = { .name = "example.com/serial",
                                    .socket_name = "cdiplug-example.com-serial.sock",
                                    .shares = 1,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("ttyS0", "/dev/ttyS0"), dev("ttyS1", "/dev/ttyS1"),
                                  dev("ttyS2", "/dev/ttyS2") };
        struct dp_plugin *p;
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        update(p, a, 3);
        dp_plugin_spec_on_disk(p, (const bool[]){ true, true, false },
                               (const bool[]){ true, false, false });
        dp_plugin_hold(p);
        expect(p, (const char *[]){ "ttyS0", "ttyS1" }, (const char *[]){ "Healthy", "Unhealthy" },
               2);
        dp_plugin_free(p);
        free_nodes(a, 3);
}

/* A device the old selectors still find and the new ones do not is gone:
 * out of the list and refused by Allocate, in the spec until forgotten;
 * with shares, every share goes. One neither finds stays Unhealthy. */
Test(plugin_hold, gone_devices_leave_the_list_then_the_spec) {
        struct cfg_resource cfg = { .name = "example.com/fuse",
                                    .socket_name = "cdiplug-example.com-fuse.sock",
                                    .shares = 2,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("a", "/dev/a"), dev("b", "/dev/b"), dev("c", "/dev/c") };
        struct dp_plugin *p;
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        update(p, a, 3);
        dp_plugin_spec_written(p);
        /* New config: a only; b still there (old selectors find it), c
         * unplugged. */
        update(p, a, 1);
        struct res_devlist before = { .devs = a, .n = 2 };
        size_t n_gone = 0;
        uint64_t gen = p->generation;
        dp_plugin_retire(p, &before, &n_gone);
        cr_assert_eq(n_gone, 1);
        cr_assert_gt(p->generation, gen);
        cr_assert(dp_plugin_has_gone(p));
        expect(p, (const char *[]){ "a-0", "a-1", "c-0", "c-1" },
               (const char *[]){ "Healthy", "Healthy", "Unhealthy", "Unhealthy" }, 4);
        char *msg = NULL;
        cr_assert_eq(allocate_one(p, "b-1", &msg), -EINVAL);
        cr_assert_not_null(strstr(msg, "no longer offered"), "%s", msg);
        free(msg);
        struct cdi_spec spec;
        cr_assert_eq(dp_plugin_spec(p, &spec), 0);
        cr_assert_eq(spec.n_devices, 3, "b left the spec while a pod may hold it");
        cdi_spec_free(&spec);

        /* No pod holds b: forgotten, the spec loses it, the list stays. */
        bool forget[] = { true, true, true }; /* only gone devices go */
        cr_assert_eq(dp_plugin_forget(p, forget), 0);
        cr_assert_not(dp_plugin_has_gone(p));
        cr_assert_eq(dp_plugin_spec(p, &spec), 0);
        cr_assert_eq(spec.n_devices, 2);
        cdi_spec_free(&spec);
        expect(p, (const char *[]){ "a-0", "a-1", "c-0", "c-1" },
               (const char *[]){ "Healthy", "Healthy", "Unhealthy", "Unhealthy" }, 4);
        cr_assert_eq(allocate_one(p, "b-0", &msg), -EINVAL);
        cr_assert_not_null(strstr(msg, "unknown device ID"), "%s", msg);
        free(msg);
        dp_plugin_free(p);
        free_nodes(a, 3);
}
