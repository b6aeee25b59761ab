/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA model: pool and device names, slice devices, name lookup,
 * Prepare's CDI answer, the checkpoint codec and device health. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dra.h"
#include "plugin.h"
#include "resources.h"

static char *device_name(const char *id) {
        char *name = NULL;
        cr_assert_eq(dra_device_name(id, &name), 0, "%s", id);
        return name;
}

static void expect_name(const char *id, const char *want) {
        char *got = device_name(id);
        cr_assert_str_eq(got, want, "ID \"%s\"", id);
        free(got);
}

Test(dra_names, device_names_follow_the_rule) {
        /* A DNS label stays as it is. */
        expect_name("fuse-1", "fuse-1");
        expect_name("0", "0");
        /* Anything else is rewritten and carries the ID's FNV-1a 32, so
         * "ttyUSB0" and "ttyusb0" stay apart. Fixed values: names outlive
         * the process. */
        expect_name("ttyUSB0", "ttyusb0-4452f912");
        expect_name("0000:01:00.0", "0000-01-00-0-9c632cf6");
        expect_name("___", "045a3b34");
        /* Too long: 54 characters, '-', the hash: 63. */
        char long_id[71];
        memset(long_id, 'a', 70);
        long_id[70] = '\0';
        char *n = device_name(long_id);
        cr_assert_eq(strlen(n), 63);
        cr_assert_eq(strncmp(n, long_id, 54), 0);
        cr_assert_str_eq(n + 54, "-5904740b");
        free(n);
        /* No trailing '-' before the hash when the cut falls on one. */
        char cut[71];
        memset(cut, 'b', 70);
        cut[53] = '_';
        cut[70] = '\0';
        n = device_name(cut);
        cr_assert_eq(strlen(n), 62, "%s", n);
        cr_assert_eq(n[52], 'b');
        cr_assert_eq(n[53], '-');
        free(n);
        char *x = NULL;
        cr_assert_eq(dra_device_name("", &x), -EINVAL);
        cr_assert_null(x);
}

static void expect_pool(const char *node, const char *resource, const char *want) {
        char *got = NULL;
        cr_assert_eq(dra_pool_name(node, resource, &got), 0, "%s %s", node, resource);
        cr_assert_str_eq(got, want);
        free(got);
}

Test(dra_names, pool_names_are_slash_separated_subdomains) {
        expect_pool("node1", "example.com/serial", "node1/example.com/serial");
        expect_pool("node-1.zone.example", "example.com/serial",
                    "node-1.zone.example/example.com/serial");
        /* The kubelet's name part allows uppercase, '_' and "..": that
         * part becomes its device name. */
        expect_pool("node1", "example.com/Serial_Port", "node1/example.com/serial-port-7244299d");
        char *x = NULL;
        cr_assert_eq(dra_pool_name("Node1", "example.com/serial", &x), -EINVAL);
        cr_assert_eq(dra_pool_name("", "example.com/serial", &x), -EINVAL);
        cr_assert_eq(dra_pool_name("node1", "example.com//serial", &x), -EINVAL);
        cr_assert_eq(dra_pool_name("node1", "", &x), -EINVAL);
        /* 253 in all at most. */
        char node[254];
        memset(node, 'n', 253);
        node[253] = '\0';
        for (size_t i = 60; i < 253; i += 61)
                node[i] = '.';
        cr_assert_eq(dra_pool_name(node, "example.com/serial", &x), -ENAMETOOLONG);
        node[253 - strlen("/example.com/serial")] = '\0';
        cr_assert_eq(dra_pool_name(node, "example.com/serial", &x), 0);
        cr_assert_eq(strlen(x), 253);
        free(x);
}

/* Plugins to read from. Devices own their node strings (freed with the
 * list). */
struct devs {
        struct res_device d[16];
        size_t n;
};

static void add(struct devs *v, const char *id, const char *node, int numa) {
        struct res_device *d = &v->d[v->n++];
        *d = (struct res_device){ .id = (char *)id, .n_nodes = node ? 1 : 0, .numa_node = numa };
        d->nodes = calloc(2, sizeof(char *));
        d->nodes[0] = (char *)node;
}

static void devs_clear(struct devs *v) {
        for (size_t i = 0; i < v->n; i++)
                free(v->d[i].nodes);
        v->n = 0;
}

static struct cfg_resource serial_cfg(unsigned shares) {
        return (struct cfg_resource){ .name = "example.com/serial",
                                      .kind = "example.com/serial",
                                      .spec_file = "example.com-serial.json",
                                      .socket_name = "cdiplug-example.com-serial.sock",
                                      .shares = shares,
                                      .alloc_modes = CFG_ALLOC_CDI_CRI };
}

static void update(struct dp_plugin *p, struct res_device *d, size_t n) {
        struct res_devlist list = { .devs = d, .n = n };
        bool changed;
        cr_assert_eq(dp_plugin_update(p, &list, &changed), 0);
}

static struct dp_plugin *plugin(struct cfg_resource *cfg, struct devs *v) {
        struct dp_plugin *p;
        cr_assert_eq(dp_plugin_new(cfg, &p), 0);
        update(p, v->d, v->n);
        return p;
}

static char *devices_text(const struct dp_plugin *p, int want_r) {
        cJSON *arr = NULL;
        cr_assert_eq(dra_devices_json(p, p->cfg->name, &arr), want_r);
        char *s = cJSON_PrintUnformatted(arr);
        cJSON_Delete(arr);
        return s;
}

#define RES "\"resource\":{\"string\":\"example.com/serial\"}"

Test(dra_devices, one_v1_device_per_healthy_id_with_its_attributes) {
        struct cfg_resource cfg = serial_cfg(1);
        struct devs v = { 0 };
        char long_path[80] = "/dev/";
        memset(long_path + 5, 'x', 60); /* 65 bytes: no "path" */
        add(&v, "long", long_path, -1);
        add(&v, "ttyS0", "/dev/ttyS0", 1);
        add(&v, "ttyUSB0", "/dev/ttyUSB0", -1);
        struct dp_plugin *p = plugin(&cfg, &v);
        char *s = devices_text(p, 0);
        cr_assert_str_eq(s, "[{\"name\":\"long\",\"attributes\":{" RES "}},"
                            "{\"name\":\"ttys0-6aed0f3f\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/ttyS0\"},\"numaNode\":{\"int\":1}}},"
                            "{\"name\":\"ttyusb0-4452f912\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/ttyUSB0\"}}}]");
        free(s);

        /* ttyS0 vanishes: Unhealthy, so out of the slice; back when found. */
        update(p, &v.d[0], 1);
        s = devices_text(p, 0);
        cr_assert_null(strstr(s, "ttys0"), "%s", s);
        cr_assert_null(strstr(s, "ttyusb0"), "%s", s);
        free(s);
        update(p, v.d, v.n);
        s = devices_text(p, 0);
        cr_assert_not_null(strstr(s, "ttys0-6aed0f3f"), "%s", s);
        free(s);

        /* A resource name the "resource" attribute cannot hold. */
        cJSON *arr = NULL;
        char name[80] = "example.com/";
        memset(name + 12, 'n', 60);
        cr_assert_eq(dra_devices_json(p, name, &arr), -ENAMETOOLONG);
        cr_assert_null(arr);
        cr_assert_not_null(dra_resource_problem(name));
        cr_assert_null(dra_resource_problem("example.com/serial"));
        dp_plugin_free(p);
        devs_clear(&v);
}

Test(dra_devices, held_and_gone_devices_are_not_offered) {
        struct cfg_resource cfg = serial_cfg(1);
        struct devs v = { 0 };
        add(&v, "a", "/dev/a", -1);
        add(&v, "b", "/dev/b", -1);
        add(&v, "c", "/dev/c", -1);
        struct dp_plugin *p = plugin(&cfg, &v);
        update(p, v.d, 2); /* c not found: Unhealthy */
        struct res_devlist before = { .devs = &v.d[2], .n = 1 };
        size_t n_gone;
        dp_plugin_retire(p, &before, &n_gone); /* and no longer named */
        cr_assert_eq(n_gone, 1);
        dp_plugin_spec_written(p);
        add(&v, "d", "/dev/d", -1);
        update(p, v.d, 2);
        update(p, (struct res_device[]){ v.d[0], v.d[1], v.d[3] }, 3);
        dp_plugin_hold(p); /* d is not in the spec on disk */
        char *s = devices_text(p, 0);
        cr_assert_str_eq(
                s, "[{\"name\":\"a\",\"attributes\":{" RES ",\"path\":{\"string\":\"/dev/a\"}}},"
                   "{\"name\":\"b\",\"attributes\":{" RES ",\"path\":{\"string\":\"/dev/b\"}}}]");
        free(s);

        /* Health names only what the slices publish while healthy: not
         * c (no longer named) nor d (not in the spec on disk). */
        struct dra_health *h;
        size_t n;
        cr_assert_eq(dra_health(p, &h, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(h[0].name, "a");
        cr_assert(h[0].healthy);
        cr_assert_null(h[0].message);
        cr_assert_str_eq(h[1].name, "b");
        cr_assert(h[1].healthy);
        dra_health_list_free(h, n);
        /* b vanishes: Unhealthy, with its node named. */
        update(p, (struct res_device[]){ v.d[0], v.d[3] }, 2);
        cr_assert_eq(dra_health(p, &h, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(h[1].name, "b");
        cr_assert_not(h[1].healthy);
        cr_assert_str_eq(h[1].message,
                         "device node /dev/b is no longer found by the selectors of resource "
                         "\"example.com/serial\": it was unplugged or removed, or an attribute it "
                         "was matched on changed (cdiplug doctor explains each selector)");
        dra_health_list_free(h, n);
        dp_plugin_free(p);
        devs_clear(&v);
}

Test(dra_devices, shares_are_devices_naming_their_physical_device) {
        struct cfg_resource cfg = serial_cfg(2);
        struct devs v = { 0 };
        add(&v, "fuse", "/dev/fuse", 0);
        struct dp_plugin *p = plugin(&cfg, &v);
        char *s = devices_text(p, 0);
        cr_assert_str_eq(s, "[{\"name\":\"fuse-0\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/fuse\"},\"numaNode\":{\"int\":0},"
                            "\"device\":{\"string\":\"fuse\"}}},"
                            "{\"name\":\"fuse-1\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/fuse\"},\"numaNode\":{\"int\":0},"
                            "\"device\":{\"string\":\"fuse\"}}}]");
        free(s);
        size_t id;
        cr_assert_eq(dra_device_find(p, "fuse-1", &id), 0);
        cr_assert_eq(id, 1);
        cr_assert_eq(dra_device_find(p, "fuse", &id), -ENOENT, "a device is not a share");
        dp_plugin_free(p);
        devs_clear(&v);
}

/* Identities are per device (p->devs order), so every share of a device
 * carries its device's. */
Test(dra_devices, devices_carry_their_pci_or_usb_identity) {
        struct cfg_resource cfg = serial_cfg(1);
        struct devs v = { 0 };
        char serial[RES_SERIAL_MAX + 1];
        add(&v, "gpu", "/dev/dri/card1", -1);
        add(&v, "none", "/dev/null", -1);
        add(&v, "ttyUSB0", "/dev/ttyUSB0", -1);
        add(&v, "vmd", "/dev/nvme0", -1);
        struct dp_plugin *p = plugin(&cfg, &v);
        struct res_identity ids[4] = {
                { .bus = RES_BUS_PCI,
                  .vendor = 0x1002,
                  .product = 0x73bf,
                  .address = "0000:01:00.0" },
                { .bus = RES_BUS_NONE },
                { .bus = RES_BUS_USB, .vendor = 0x0403, .product = 0x6001, .serial = "FT1XYZ" },
                /* A VMD domain: no pciBusID in a form upstream refuses. */
                { .bus = RES_BUS_PCI,
                  .vendor = 0x8086,
                  .product = 0x0a54,
                  .address = "10000:01:00.0" },
        };
        cJSON *arr = NULL;
        cr_assert_eq(dra_devices_json_ids(p, p->cfg->name, ids, &arr), 0);
        char *s = cJSON_PrintUnformatted(arr);
        cJSON_Delete(arr);
        cr_assert_str_eq(s, "[{\"name\":\"gpu\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/dri/card1\"}"
                            ",\"pciVendorID\":{\"string\":\"0x1002\"}"
                            ",\"pciDeviceID\":{\"string\":\"0x73bf\"}"
                            ",\"resource.kubernetes.io/pciBusID\":{\"string\":\"0000:01:00.0\"}}},"
                            "{\"name\":\"none\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/null\"}}},"
                            "{\"name\":\"ttyusb0-4452f912\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/ttyUSB0\"}"
                            ",\"usbVendorID\":{\"string\":\"0x0403\"}"
                            ",\"usbProductID\":{\"string\":\"0x6001\"}"
                            ",\"usbSerial\":{\"string\":\"FT1XYZ\"}}},"
                            "{\"name\":\"vmd\",\"attributes\":{" RES
                            ",\"path\":{\"string\":\"/dev/nvme0\"}"
                            ",\"pciVendorID\":{\"string\":\"0x8086\"}"
                            ",\"pciDeviceID\":{\"string\":\"0x0a54\"}}}]");
        free(s);
        dp_plugin_free(p);

        /* Shares: each share of the USB device carries its identity; a
         * serial of the longest kept size still fits the API. */
        memset(serial, 'S', RES_SERIAL_MAX);
        serial[RES_SERIAL_MAX] = '\0';
        memcpy(ids[2].serial, serial, sizeof(serial));
        cfg = serial_cfg(2);
        p = plugin(&cfg, &v);
        cr_assert_eq(dra_devices_json_ids(p, p->cfg->name, ids, &arr), 0);
        cr_assert_eq(cJSON_GetArraySize(arr), 8);
        for (int i = 4; i < 6; i++) {
                const cJSON *a = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, i), "attributes");
                const cJSON *sn =
                        cJSON_GetObjectItem(cJSON_GetObjectItem(a, "usbSerial"), "string");
                cr_assert_not_null(sn, "share %d", i);
                cr_expect_str_eq(sn->valuestring, serial);
                cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "device"), "string")
                                         ->valuestring,
                                 "ttyUSB0");
                cr_expect_leq(cJSON_GetArraySize(a), DRA_ATTRS_MAX);
        }
        cJSON_Delete(arr);
        /* Without identities, none of these attributes. */
        s = devices_text(p, 0);
        cr_expect_null(strstr(s, "VendorID"), "%s", s);
        free(s);
        dp_plugin_free(p);
        devs_clear(&v);
}

/* Two IDs, one name: both published, the later under its second name,
 * found by that name (with and without a table), with health of its own. */
static void assert_both_published(const char *id0, const char *id1, const char *name0,
                                  const char *name1) {
        struct cfg_resource cfg = serial_cfg(1);
        struct devs v = { 0 };
        add(&v, id0, "/dev/zero0", -1);
        add(&v, id1, "/dev/zero1", -1);
        struct dp_plugin *p = plugin(&cfg, &v);
        char *s = devices_text(p, 0);
        char *want = NULL;
        cr_assert_eq(asprintf(&want,
                              "[{\"name\":\"%s\",\"attributes\":{" RES
                              ",\"path\":{\"string\":\"/dev/zero0\"}}},"
                              "{\"name\":\"%s\",\"attributes\":{" RES
                              ",\"path\":{\"string\":\"/dev/zero1\"}}}]",
                              name0, name1) > 0,
                     true);
        cr_assert_str_eq(s, want);
        free(s);
        free(want);
        struct dra_clash *c;
        size_t n, id;
        cr_assert_eq(dra_name_clashes(p, &c, &n), 0);
        cr_assert_eq(n, 0);
        free(c);
        struct dra_index *idx = NULL;
        const char *names[] = { name0, name1 };
        for (size_t i = 0; i < 2; i++) {
                cr_assert_eq(dra_device_find(p, names[i], &id), 0, "%s", names[i]);
                cr_assert_eq(id, i);
                cr_assert_eq(dra_index_find(&idx, p, names[i], &id), 0, "%s", names[i]);
                cr_assert_eq(id, i);
        }
        dra_index_free(idx);
        struct dra_health *h;
        cr_assert_eq(dra_health(p, &h, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(h[0].name, name0);
        cr_assert_str_eq(h[1].name, name1);
        dra_health_list_free(h, n);
        dp_plugin_free(p);
        devs_clear(&v);
}

Test(dra_devices, a_name_clash_publishes_both_ids) {
        /* "ttyUSB0" is rewritten to the other's ID; sorted, it comes first. */
        assert_both_published("ttyUSB0", "ttyusb0-4452f912", "ttyusb0-4452f912",
                              "ttyusb0-4452f912-5419b021acb041ec");
        /* Two rewritten IDs with one start and one 32-bit FNV-1a. */
        assert_both_published("TTyUsb.SeriAL.PORT", "TtYuSB.sErIAl.PORt",
                              "ttyusb-serial-port-09d66401", "ttyusb-serial-port-e336da8843dc8021");
}

/* Two DRA resources on node1: serial (ttyUSB0 healthy, ttyUSB1 vanished,
 * ttyUSB2 no longer named) and fuse with two shares. */
struct node {
        struct cfg_resource serial_cfg, fuse_cfg;
        struct devs serial, fuse;
        struct dra_pool pools[2];
};

static void node_init(struct node *n) {
        *n = (struct node){ 0 };
        n->serial_cfg = serial_cfg(1);
        n->fuse_cfg = serial_cfg(2);
        n->fuse_cfg.name = "example.com/fuse";
        n->fuse_cfg.kind = "example.com/fuse";
        n->fuse_cfg.spec_file = "example.com-fuse.json";
        add(&n->serial, "ttyUSB0", "/dev/ttyUSB0", -1);
        add(&n->serial, "ttyUSB1", "/dev/ttyUSB1", -1);
        add(&n->serial, "ttyUSB2", "/dev/ttyUSB2", -1);
        add(&n->fuse, "fuse", "/dev/fuse", -1);
        struct dp_plugin *s = plugin(&n->serial_cfg, &n->serial);
        update(s, n->serial.d, 1);
        struct res_devlist before = { .devs = &n->serial.d[2], .n = 1 };
        size_t gone;
        dp_plugin_retire(s, &before, &gone);
        cr_assert_eq(gone, 1);
        n->pools[0] = (struct dra_pool){ .name = "node1/example.com/serial", .p = s };
        n->pools[1] = (struct dra_pool){ .name = "node1/example.com/fuse",
                                         .p = plugin(&n->fuse_cfg, &n->fuse) };
}

static void node_clear(struct node *n) {
        for (size_t i = 0; i < 2; i++) {
                dra_index_free(n->pools[i].index);
                dp_plugin_free((struct dp_plugin *)n->pools[i].p);
        }
        devs_clear(&n->serial);
        devs_clear(&n->fuse);
}

static char *prepare_fails(struct node *n, const struct dra_result *res, size_t count) {
        struct dra_device *d = NULL;
        size_t n_d = 0;
        char *msg = NULL;
        cr_assert_eq(dra_prepare_devices(n->pools, 2, res, count, &d, &n_d, &msg), -EINVAL);
        cr_assert_null(d);
        cr_assert_not_null(msg);
        return msg;
}

Test(dra_prepare, answers_the_cdi_ids_allocate_answers) {
        struct node n;
        node_init(&n);
        const struct dra_result res[] = {
                { "serial", "node1/example.com/serial", "ttyusb0-4452f912" },
                /* Unhealthy now: still prepares, as Allocate does. */
                { "serial", "node1/example.com/serial", "ttyusb1-4552faa5" },
                { "fuse", "node1/example.com/fuse", "fuse-1" },
        };
        struct dra_device *d = NULL;
        size_t n_d = 0;
        char *msg = NULL;
        cr_assert_eq(dra_prepare_devices(n.pools, 2, res, 3, &d, &n_d, &msg), 0, "%s", msg);
        cr_assert_eq(n_d, 3);
        cr_assert_str_eq(d[0].request, "serial");
        cr_assert_str_eq(d[0].pool, "node1/example.com/serial");
        cr_assert_str_eq(d[0].device, "ttyusb0-4452f912");
        cr_assert_str_eq(d[0].cdi_ids[0], "example.com/serial=ttyUSB0");
        cr_assert_null(d[0].cdi_ids[1]);
        cr_assert_str_eq(d[1].cdi_ids[0], "example.com/serial=ttyUSB1");
        /* A share prepares to its physical device's CDI device. */
        cr_assert_str_eq(d[2].cdi_ids[0], "example.com/fuse=fuse");
        for (size_t i = 0; i < n_d; i++) {
                char *want = NULL;
                size_t id;
                const struct dp_plugin *p = n.pools[i == 2].p;
                cr_assert_eq(dra_device_find(p, res[i].device, &id), 0);
                cr_assert_eq(dp_plugin_qualified(p, dp_plugin_id_dev(p, id), &want), 0);
                cr_assert_str_eq(d[i].cdi_ids[0], want);
                free(want);
                dra_device_clear(&d[i]);
        }
        free(d);
        node_clear(&n);
}

/* DRAPrioritizedList: the result names "<request>/<subrequest>", the
 * container's claim names the request; the kubelet matches the two. */
Test(dra_prepare, a_subrequest_answers_its_base_request) {
        struct node n;
        node_init(&n);
        const struct dra_result res[] = {
                { "port/any", "node1/example.com/serial", "ttyusb0-4452f912" },
                { "fuse/first-choice", "node1/example.com/fuse", "fuse-1" },
        };
        struct dra_device *d = NULL;
        size_t n_d = 0;
        char *msg = NULL;
        cr_assert_eq(dra_prepare_devices(n.pools, 2, res, 2, &d, &n_d, &msg), 0, "%s", msg);
        cr_assert_eq(n_d, 2);
        cr_assert_str_eq(d[0].request, "port");
        cr_assert_str_eq(d[1].request, "fuse");
        for (size_t i = 0; i < n_d; i++)
                dra_device_clear(&d[i]);
        free(d);
        node_clear(&n);
}

Test(dra_prepare, a_device_not_ours_is_the_claims_error) {
        struct node n;
        node_init(&n);
        struct dra_result r = { "serial", "node2/example.com/serial", "ttyusb0-4452f912" };
        char *msg = prepare_fails(&n, &r, 1);
        cr_assert_str_eq(msg, "request \"serial\": device \"ttyusb0-4452f912\" in pool "
                              "\"node2/example.com/serial\": the pool is not one of this node's "
                              "DRA resources");
        free(msg);
        r = (struct dra_result){ "serial", "node1/example.com/serial", "ttyusb9" };
        msg = prepare_fails(&n, &r, 1);
        cr_assert_not_null(strstr(msg, "resource \"example.com/serial\" has no such device"), "%s",
                           msg);
        free(msg);
        r.device = "ttyusb2-4252f5ec";
        msg = prepare_fails(&n, &r, 1);
        cr_assert_not_null(strstr(msg, "no longer offered"), "%s", msg);
        free(msg);
        r.device = NULL;
        msg = prepare_fails(&n, &r, 1);
        cr_assert_not_null(strstr(msg, "lacks"), "%s", msg);
        free(msg);
        /* One bad device fails the claim, with the good ones before it. */
        struct dra_result two[] = { { "serial", "node1/example.com/serial", "ttyusb0-4452f912" },
                                    { "fuse", "node1/example.com/fuse", "fuse-2" } };
        msg = prepare_fails(&n, two, 2);
        cr_assert_not_null(strstr(msg, "\"fuse-2\""), "%s", msg);
        free(msg);
        struct dra_result many[DRA_MAX_RESULTS + 1];
        for (size_t i = 0; i <= DRA_MAX_RESULTS; i++)
                many[i] = two[0];
        msg = prepare_fails(&n, many, DRA_MAX_RESULTS + 1);
        free(msg);
        node_clear(&n);
}

Test(dra_prepare, a_device_the_spec_on_disk_lacks_is_refused) {
        struct node n;
        node_init(&n);
        struct dp_plugin *p = (struct dp_plugin *)n.pools[0].p;
        struct dra_result first = { "serial", "node1/example.com/serial", "ttyusb0-4452f912" };
        struct dra_device *d = NULL;
        size_t n_d;
        char *msg = NULL;
        cr_assert_eq(dra_prepare_devices(n.pools, 2, &first, 1, &d, &n_d, &msg), 0);
        cr_assert_not_null(n.pools[0].index);
        dra_device_clear(&d[0]);
        free(d);
        dp_plugin_spec_written(p);
        add(&n.serial, "ttyUSB3", "/dev/ttyUSB3", -1);
        update(p, (struct res_device[]){ n.serial.d[0], n.serial.d[3] }, 2);
        dp_plugin_hold(p);
        struct dra_result r = { "serial", "node1/example.com/serial", "ttyusb3-4352f77f" };
        msg = prepare_fails(&n, &r, 1);
        cr_assert_not_null(strstr(msg, "CDI spec could not be written"), "%s", msg);
        free(msg);
        /* Written: it prepares. The pool's name table was built before
         * ttyUSB3 came and is rebuilt. */
        dp_plugin_spec_written(p);
        cr_assert_eq(dra_prepare_devices(n.pools, 2, &r, 1, &d, &n_d, &msg), 0);
        cr_assert_str_eq(d[0].cdi_ids[0], "example.com/serial=ttyUSB3");
        dra_device_clear(&d[0]);
        free(d);
        node_clear(&n);
}

Test(dra_find, every_name_finds_its_id_with_or_without_a_table) {
        struct cfg_resource cfg = serial_cfg(1);
        enum { N = 1000 };
        struct res_device *d = calloc(N, sizeof(*d));
        static char ids[N][16], nodes[N][24];
        for (size_t i = 0; i < N; i++) {
                /* Sorted IDs, half of them rewritten as names. */
                snprintf(ids[i], sizeof(ids[i]), i % 2 ? "d%04zu_X" : "d%04zu", i);
                snprintf(nodes[i], sizeof(nodes[i]), "/dev/d%04zu", i);
                d[i] = (struct res_device){ .id = ids[i], .n_nodes = 1, .numa_node = -1 };
                d[i].nodes = calloc(2, sizeof(char *));
                d[i].nodes[0] = nodes[i];
        }
        struct dp_plugin *p;
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        update(p, d, N);
        struct dra_index *idx = NULL;
        for (size_t i = 0; i < N; i++) {
                char *name = device_name(ids[i]);
                size_t a = SIZE_MAX, b = SIZE_MAX;
                cr_assert_eq(dra_device_find(p, name, &a), 0, "%s", name);
                cr_assert_eq(dra_index_find(&idx, p, name, &b), 0, "%s", name);
                cr_assert_eq(a, i);
                cr_assert_eq(b, i);
                free(name);
        }
        const char *unknown[] = { "d0001_x", "d0001-x", "d0001-x-00000000", "D0000",
                                  "",        "-a",      "d0001-x-" };
        for (size_t k = 0; k < ELEMENTSOF(unknown); k++) {
                size_t id;
                cr_assert_eq(dra_device_find(p, unknown[k], &id), -ENOENT, "%s", unknown[k]);
                cr_assert_eq(dra_index_find(&idx, p, unknown[k], &id), -ENOENT, "%s", unknown[k]);
        }
        dra_index_free(idx);
        dp_plugin_free(p);
        for (size_t i = 0; i < N; i++)
                free(d[i].nodes);
        free(d);
}

Test(dra_find, the_table_follows_ids_that_move) {
        struct cfg_resource cfg = serial_cfg(1);
        struct devs v = { 0 };
        add(&v, "a", "/dev/a", -1);
        add(&v, "b", "/dev/b", -1);
        add(&v, "c", "/dev/c", -1);
        struct dp_plugin *p = plugin(&cfg, &v);
        struct dra_index *idx = NULL;
        size_t id;
        cr_assert_eq(dra_index_find(&idx, p, "c", &id), 0);
        cr_assert_eq(id, 2);
        /* b is unplugged, then no longer named, then no pod holds it: it
         * is forgotten without a new generation, and c moves down. */
        update(p, (struct res_device[]){ v.d[0], v.d[2] }, 2);
        struct res_devlist before = { .devs = &v.d[1], .n = 1 };
        size_t gone;
        dp_plugin_retire(p, &before, &gone);
        cr_assert_eq(dra_index_find(&idx, p, "c", &id), 0);
        cr_assert_eq(id, 2);
        uint64_t gen = p->generation;
        cr_assert_eq(dp_plugin_forget(p, (bool[]){ false, true, false }), 0);
        cr_assert_eq(p->generation, gen);
        cr_assert_eq(dra_index_find(&idx, p, "c", &id), 0);
        cr_assert_eq(id, 1);
        cr_assert_eq(dra_index_find(&idx, p, "b", &id), -ENOENT);
        dra_index_free(idx);
        dp_plugin_free(p);
        devs_clear(&v);
}

static struct dra_claim claim(const char *uid, const char *ns, const char *name, size_t n_devs) {
        struct dra_claim c = { .uid = strdup(uid), .ns = strdup(ns), .name = strdup(name) };
        c.devices = calloc(n_devs + 1, sizeof(*c.devices));
        for (size_t i = 0; i < n_devs; i++) {
                struct dra_device *d = &c.devices[i];
                d->request = strdup(i ? "req/sub" : "serial");
                d->pool = strdup("node1/example.com/serial");
                cr_assert_eq(asprintf(&d->device, "dev%zu", i) > 0, 1);
                d->cdi_ids = calloc(3, sizeof(char *));
                d->cdi_ids[0] = strdup("example.com/serial=ttyUSB0");
                d->cdi_ids[1] = i ? strdup("example.com/serial=ttyUSB1") : NULL;
        }
        c.n_devices = n_devs;
        return c;
}

static char *encode(const struct dra_claim *c, size_t n) {
        char *text = NULL, *msg = NULL;
        size_t len;
        cr_assert_eq(dra_checkpoint_encode(c, n, &text, &len, &msg), 0, "%s", msg);
        cr_assert_eq(strlen(text), len);
        return text;
}

Test(dra_checkpoint, round_trip) {
        struct dra_claim c[3] = { claim("uid-1", "default", "claim-a", 1),
                                  claim("uid-2", "kube-system", "pod.x-gpu", 2),
                                  claim("uid-3", "ns", "empty", 0) };
        char *text = encode(c, 3);
        cr_assert_str_eq(
                text,
                "{\"version\":1,\"claims\":{\"uid-1\":{\"namespace\":\"default\",\"name\":"
                "\"claim-a\",\"devices\":[{\"request\":\"serial\",\"pool\":\"node1/example.com/"
                "serial\",\"device\":\"dev0\",\"cdiDevices\":[\"example.com/serial=ttyUSB0\"]}]},"
                "\"uid-2\":{\"namespace\":\"kube-system\",\"name\":\"pod.x-gpu\",\"devices\":[{"
                "\"request\":\"serial\",\"pool\":\"node1/example.com/serial\",\"device\":\"dev0\","
                "\"cdiDevices\":[\"example.com/serial=ttyUSB0\"]},{\"request\":\"req/sub\","
                "\"pool\":\"node1/example.com/serial\",\"device\":\"dev1\",\"cdiDevices\":["
                "\"example.com/serial=ttyUSB0\",\"example.com/serial=ttyUSB1\"]}]},\"uid-3\":{"
                "\"namespace\":\"ns\",\"name\":\"empty\",\"devices\":[]}}}");
        struct dra_claim *back = NULL;
        size_t n = 0;
        char *msg = NULL;
        cr_assert_eq(dra_checkpoint_decode(text, strlen(text), &back, &n, &msg), 0, "%s", msg);
        cr_assert_eq(n, 3);
        cr_assert_str_eq(back[1].uid, "uid-2");
        cr_assert_str_eq(back[1].ns, "kube-system");
        cr_assert_str_eq(back[1].name, "pod.x-gpu");
        cr_assert_eq(back[1].n_devices, 2);
        cr_assert_str_eq(back[1].devices[1].request, "req/sub");
        cr_assert_str_eq(back[1].devices[1].cdi_ids[1], "example.com/serial=ttyUSB1");
        cr_assert_null(back[1].devices[1].cdi_ids[2]);
        cr_assert_eq(back[2].n_devices, 0);
        char *again = encode(back, n);
        cr_assert_str_eq(again, text);
        /* Whitespace around the document is fine; an empty set too. */
        char *spaced = NULL;
        cr_assert_gt(asprintf(&spaced, "\n %s\n\t", text), 0);
        dra_claims_free(back, n);
        cr_assert_eq(dra_checkpoint_decode(spaced, strlen(spaced), &back, &n, &msg), 0, "%s", msg);
        dra_claims_free(back, n);
        const char *none = "{\"version\":1,\"claims\":{}}";
        cr_assert_eq(dra_checkpoint_decode(none, strlen(none), &back, &n, &msg), 0, "%s", msg);
        cr_assert_eq(n, 0);
        free(back);
        free(spaced);
        free(again);
        free(text);
        for (size_t i = 0; i < 3; i++)
                dra_claim_clear(&c[i]);
}

static void refused(const char *text, size_t len, const char *want) {
        struct dra_claim *c = NULL;
        size_t n = 0;
        char *msg = NULL;
        cr_assert_eq(dra_checkpoint_decode(text, len, &c, &n, &msg), -EINVAL, "%s", text);
        cr_assert_null(c);
        cr_assert_not_null(msg, "%s", text);
        cr_assert_not_null(strstr(msg, want), "\"%s\": got \"%s\", want \"%s\"", text, msg, want);
        free(msg);
}

#define DEV "{\"request\":\"r\",\"pool\":\"n/a.b/c\",\"device\":\"d\",\"cdiDevices\":[\"k=v\"]}"
#define CLAIM(devs) "{\"namespace\":\"ns\",\"name\":\"n\",\"devices\":[" devs "]}"
#define DOC(claims) "{\"version\":1,\"claims\":{" claims "}}"

Test(dra_checkpoint, every_malformed_input_is_refused_with_a_message) {
        static const struct {
                const char *text, *want;
        } bad[] = {
                { "", "not JSON" },
                { "{", "not JSON" },
                { "[]", "must be a JSON object" },
                { "{\"claims\":{}}", "version: must be a number" },
                { "{\"version\":\"1\",\"claims\":{}}", "version: must be a number" },
                { "{\"version\":2,\"claims\":{}}", "version: 2 is not supported" },
                { "{\"version\":1.5,\"claims\":{}}", "version: 1.5 is not supported" },
                { "{\"version\":1}", "checkpoint.claims: is missing" },
                { "{\"version\":1,\"claims\":[]}", "claims: must be an object" },
                { "{\"version\":1,\"claims\":{},\"x\":1}", "unknown key \"x\"" },
                { "{\"version\":1,\"version\":1,\"claims\":{}}", "version: given twice" },
                { DOC("\"u\":" CLAIM(DEV)) " x", "text after the JSON" },
                { DOC("\"u\":[]"), "claims.\"u\": must be an object" },
                { DOC("\"u\":" CLAIM(DEV) ",\"u\":" CLAIM(DEV)), "uid \"u\" twice" },
                { DOC("\"\":" CLAIM(DEV)), "a uid must be" },
                { DOC("\"u\":{\"name\":\"n\",\"devices\":[]}"),
                  "claims.\"u\".namespace: is missing" },
                { DOC("\"u\":{\"namespace\":\"ns\",\"name\":\"n\",\"devices\":[],\"extra\":0}"),
                  "claims.\"u\": unknown key \"extra\"" },
                { DOC("\"u\":{\"namespace\":1,\"name\":\"n\",\"devices\":[]}"),
                  "claims.\"u\".namespace: must be a string" },
                { DOC("\"u\":{\"namespace\":\"NS\",\"name\":\"n\",\"devices\":[]}"),
                  "claims.\"u\".namespace: must be a DNS label" },
                { DOC("\"u\":{\"namespace\":\"ns\",\"name\":\"a..b\",\"devices\":[]}"),
                  "claims.\"u\".name: must be a DNS subdomain" },
                { DOC("\"u\":{\"namespace\":\"ns\",\"name\":\"n\",\"devices\":{}}"),
                  "claims.\"u\".devices: must be an array" },
                { DOC("\"u\":" CLAIM("1")), "claims.\"u\".devices[0]: must be an object" },
                { DOC("\"u\":" CLAIM("{\"request\":\"r\",\"pool\":\"n/a.b/c\",\"device\":\"d\"}")),
                  "devices[0].cdiDevices: is missing" },
                { DOC("\"u\":" CLAIM(DEV ",{\"request\":\"r/s/t\",\"pool\":\"n/a.b/c\",\"device\":"
                                         "\"d\",\"cdiDevices\":[\"k=v\"]}")),
                  "devices[1].request: must be a DNS label, or two" },
                { DOC("\"u\":" CLAIM("{\"request\":\"r\",\"pool\":\"n//c\",\"device\":\"d\","
                                     "\"cdiDevices\":[\"k=v\"]}")),
                  "devices[0].pool: must be DNS subdomains" },
                { DOC("\"u\":" CLAIM("{\"request\":\"r\",\"pool\":\"n/a.b/c\",\"device\":\"D\","
                                     "\"cdiDevices\":[\"k=v\"]}")),
                  "devices[0].device: must be a DNS label" },
                { DOC("\"u\":" CLAIM("{\"request\":\"r\",\"pool\":\"n/a.b/c\",\"device\":\"d\","
                                     "\"cdiDevices\":[]}")),
                  "devices[0].cdiDevices: must be an array of 1 to 16" },
                { DOC("\"u\":" CLAIM("{\"request\":\"r\",\"pool\":\"n/a.b/c\",\"device\":\"d\","
                                     "\"cdiDevices\":[1]}")),
                  "devices[0].cdiDevices[0]: must be a string" },
                { DOC("\"u\":" CLAIM("{\"request\":\"r\",\"pool\":\"n/a.b/c\",\"device\":\"d\","
                                     "\"cdiDevices\":[\"a\\nb\"]}")),
                  "devices[0].cdiDevices[0]: must be 1 to 512 printable" },
                { DOC("\"u\":" CLAIM("{\"request\":\"r\",\"request\":\"r\",\"pool\":\"n/a.b/c\","
                                     "\"device\":\"d\",\"cdiDevices\":[\"k=v\"]}")),
                  "devices[0].request: given twice" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                refused(bad[i].text, strlen(bad[i].text), bad[i].want);
        /* A NUL inside the text, and the checked length honoured. */
        const char nul[] = "{\"version\":1,\"claims\":{}}\0";
        refused(nul, sizeof(nul) - 1, "NUL");
        refused(DOC(""), strlen(DOC("")) - 1, "not JSON");
        /* A valid document of the same shapes, so the refusals above are
         * about what each changed. */
        const char *good = DOC("\"u\":" CLAIM(DEV ",{\"request\":\"r/s\",\"pool\":\"n/a.b/c\","
                                                  "\"device\":\"d\",\"cdiDevices\":[\"k=v\"]}"));
        struct dra_claim *c;
        size_t n;
        char *msg = NULL;
        cr_assert_eq(dra_checkpoint_decode(good, strlen(good), &c, &n, &msg), 0, "%s", msg);
        dra_claims_free(c, n);
}

Test(dra_checkpoint, encoding_refuses_what_would_not_decode) {
        struct dra_claim c[2] = { claim("u", "ns", "a", 1), claim("u", "ns", "b", 0) };
        char *text = NULL, *msg = NULL;
        size_t len;
        cr_assert_eq(dra_checkpoint_encode(c, 2, &text, &len, &msg), -EINVAL);
        cr_assert_str_eq(msg, "claims: uid \"u\" twice");
        free(msg);
        free(c[1].uid);
        c[1].uid = strdup("v");
        base_strv_free(c[0].devices[0].cdi_ids);
        c[0].devices[0].cdi_ids = NULL;
        cr_assert_eq(dra_checkpoint_encode(c, 2, &text, &len, &msg), -EINVAL);
        cr_assert_str_eq(msg, "claims.\"u\".devices[0].cdiDevices: must hold 1 to 16 IDs");
        free(msg);
        cr_assert_null(text);
        dra_claim_clear(&c[0]);
        dra_claim_clear(&c[1]);
}

/* The limits hold exactly where they are said to. */
Test(dra_checkpoint, bounds) {
        size_t n = DRA_CHECKPOINT_MAX_CLAIMS + 1;
        struct dra_claim *c = calloc(n, sizeof(*c));
        for (size_t i = 0; i < n; i++) {
                cr_assert_gt(asprintf(&c[i].uid, "%08zx-0000-0000-0000-000000000000", i), 0);
                c[i].ns = strdup("default");
                c[i].name = strdup("claim");
        }
        char *text = NULL, *msg = NULL;
        size_t len;
        cr_assert_eq(dra_checkpoint_encode(c, n, &text, &len, &msg), -EINVAL);
        cr_assert_not_null(strstr(msg, "more than 65536"), "%s", msg);
        free(msg);
        msg = NULL;
        text = encode(c, n - 1);
        struct dra_claim *back;
        size_t n_back;
        cr_assert_eq(dra_checkpoint_decode(text, strlen(text), &back, &n_back, &msg), 0);
        cr_assert_eq(n_back, n - 1);
        dra_claims_free(back, n_back);
        /* One more claim in the text. */
        size_t tlen = strlen(text);
        char *more = malloc(tlen + 128);
        memcpy(more, text, tlen - 2);
        strcpy(more + tlen - 2, ",\"x\":{\"namespace\":\"ns\",\"name\":\"n\",\"devices\":[]}}}");
        refused(more, strlen(more), "claims: more than 65536");
        free(more);
        free(text);
        dra_claims_free(c, n);

        /* Past the byte limit, whatever it holds. */
        size_t big = (size_t)DRA_CHECKPOINT_MAX_BYTES + 1;
        char *spaces = malloc(big);
        memset(spaces, ' ', big);
        static const char doc[] = DOC("");
        memcpy(spaces, doc, sizeof(doc) - 1); /* the rest stays spaces */
        refused(spaces, big, "more than");
        cr_assert_eq(dra_checkpoint_decode(spaces, big - 1, &back, &n_back, &msg), 0, "%s", msg);
        free(back);
        free(spaces);

        /* Devices a claim, and string lengths. */
        struct dra_claim one = claim("u", "ns", "n", DRA_MAX_RESULTS + 1);
        cr_assert_eq(dra_checkpoint_encode(&one, 1, &text, &len, &msg), -EINVAL);
        cr_assert_not_null(strstr(msg, "devices: more than 128"), "%s", msg);
        free(msg);
        one.n_devices = DRA_MAX_RESULTS;
        text = encode(&one, 1);
        free(text);
        one.n_devices = DRA_MAX_RESULTS + 1;
        dra_claim_clear(&one);
        char uid[130];
        memset(uid, 'u', 129);
        uid[129] = '\0';
        one = claim(uid, "ns", "n", 0);
        cr_assert_eq(dra_checkpoint_encode(&one, 1, &text, &len, &msg), -EINVAL);
        cr_assert_not_null(strstr(msg, "uid must be 1 to 128"), "%s", msg);
        free(msg);
        one.uid[128] = '\0';
        text = encode(&one, 1);
        free(text);
        dra_claim_clear(&one);
}
