/* SPDX-License-Identifier: Apache-2.0 */
/* Matching through the running daemon, on a fake sysfs under --host-root:
 * a USB serial adapter selected by its sysfs attributes, hotplugged and
 * re-plugged under a stable ID over a real ListAndWatch stream; IDs that
 * clash at start-up and at hotplug; matches that are no device node;
 * check's errors and warnings for the new keys. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "faketree.h"
#include "kubelet.h"
#include "tfmt.h"

static struct env e;
static struct tk *tk;

static void stop(void) {
        tk_stop(tk);
        tk = NULL;
        env_cleanup(&e);
}

TestSuite(match, .fini = stop, .timeout = 60);

static void serve(const char *resource, const char *config) {
        env_write(&e, "config.json", config);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, resource, 1, 10000), 0);
}

static V1beta1__ListAndWatchResponse *next_with(struct lw_stream *s, size_t n) {
        V1beta1__ListAndWatchResponse *l = lw_next(s, 5000);
        cr_assert_not_null(l, "no list pushed");
        cr_assert_eq(l->n_devices, n, "list has %zu devices, want %zu", l->n_devices, n);
        return l;
}

static void host_file(const char *path, const char *content) {
        cr_assert_eq(ft_file(e.host, path, content), 0, "%s", path);
}

static void host_link(const char *path, const char *target) {
        cr_assert_eq(ft_symlink(e.host, path, target), 0, "%s", path);
}

#define XHCI "sys/devices/pci0000:00/0000:00:14.0"

/* A USB serial adapter in port 1-<port>: USB device (vendor, serial),
 * interface 1-<port>:1.0, and tty ttyUSB<n> (188:<n>) below it, sysfs
 * first, then the node, as the kernel and devtmpfs do. */
static void plug(int port, const char *vendor, const char *serial, int n) {
        char *dev = tfmt(XHCI "/usb1/1-%d", port);
        char *intf = tfmt("%s/1-%d:1.0", dev, port);
        char *tty = tfmt("%s/ttyUSB%d/tty/ttyUSB%d", intf, n, n);
        const char *files[][2] = {
                { "uevent", "" },
                { "idVendor", vendor },
                { "serial", serial },
        };
        for (size_t i = 0; i < 3; i++) {
                char *p = tfmt("%s/%s", dev, files[i][0]), *v = tfmt("%s\n", files[i][1]);
                host_file(p, *files[i][1] ? v : "");
                free(p), free(v);
        }
        char *p = tfmt("%s/subsystem", dev);
        host_link(p, "/sys/bus/usb");
        free(p);
        host_file(p = tfmt("%s/bInterfaceNumber", intf), "00\n"), free(p);
        host_link(p = tfmt("%s/subsystem", intf), "/sys/bus/usb"), free(p);
        host_file(p = tfmt("%s/uevent", tty), ""), free(p);
        char *t = tfmt("../../%s", tty + 4);
        host_link(p = tfmt("sys/dev/char/188:%d", n), t), free(p), free(t);
        if (geteuid() != 0)
                cr_skip_test("making fake device nodes (mknod) needs root");
        cr_assert_eq(ft_chrdev(e.host, p = tfmt("dev/ttyUSB%d", n), 188, (unsigned)n), 0);
        free(p), free(tty), free(intf), free(dev);
}

/* The node goes first, then sysfs, as on a real unplug. */
static void unplug(int port, int n) {
        char *p = NULL;
        cr_assert(asprintf(&p, "dev/ttyUSB%d", n) > 0);
        env_rm(&e, p);
        free(p);
        cr_assert(asprintf(&p, "%s/%s/sys/dev/char/188:%d", e.root, "host", n) > 0);
        cr_assert_eq(unlink(p), 0);
        free(p);
        (void)port;
}

static char *spec_text(const char *file) {
        char *path = NULL;
        cr_assert(asprintf(&path, "%s/%s", e.cdi_dir, file) > 0);
        char *s = env_read(path);
        cr_assert_not_null(s, "%s", path);
        free(path);
        return s;
}

static size_t count(const char *hay, const char *needle) {
        size_t n = 0;
        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

#define FTDI_CONFIG                                                                                \
        "{ \"resources\": [ { \"name\": \"example.com/ftdi\", \"match\": [ { \"path\": "           \
        "\"/dev/ttyUSB*\", \"attrs\": { \"idVendor\": \"0403\" }, \"id\": \"serial\", "            \
        "\"mode\": \"0666\" } ] } ] }"

Test(match, attribute_matched_adapter_replugs_under_its_stable_id) {
        env_init(&e);
        plug(1, "067b", "P77", 0); /* a Prolific adapter: not selected */
        serve("example.com/ftdi", FTDI_CONFIG);
        grpc_channel *ch = tk_dial(tk, "example.com/ftdi");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 0);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* Hotplug: the FTDI adapter appears as ttyUSB1. */
        plug(2, "0403", "A12B", 1);
        l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "A12B-if00");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        char *spec = spec_text("example.com-ftdi.json");
        cr_assert_not_null(strstr(spec, "\"/dev/ttyUSB1\""), "%s", spec);
        /* "0666" is 438; no uid/gid, so the container's user gets it. */
        cr_assert_not_null(strstr(spec, "\"fileMode\":\t438"), "%s", spec);
        cr_assert_null(strstr(spec, "\"uid\""), "%s", spec);
        free(spec);

        /* Unplugged: listed, Unhealthy, same ID. */
        unplug(2, 1);
        l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "A12B-if00");
        cr_assert_str_eq(l->devices[0]->health, "Unhealthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* Re-plugged into another port, it comes back as ttyUSB2: same ID,
         * Healthy in place, and the spec follows the new node. */
        plug(3, "0403", "A12B", 2);
        l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "A12B-if00");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        spec = spec_text("example.com-ftdi.json");
        cr_assert_not_null(strstr(spec, "\"/dev/ttyUSB2\""), "%s", spec);
        cr_assert_null(strstr(spec, "\"/dev/ttyUSB1\""), "%s", spec);
        free(spec);
        V1beta1__AllocateResponse *r = NULL;
        cr_assert_eq(call_allocate(ch, &r, NULL, "A12B-if00", NULL, NULL), GRPC_STATUS_OK);
        cr_assert_str_eq(r->container_responses[0]->cdi_devices[0]->name,
                         "example.com/ftdi=A12B-if00");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        lw_close(s);
        grpc_channel_destroy(ch);
}

#define CLASH_CONFIG                                                                                      \
        "{ \"resources\": [ { \"name\": \"example.com/clash\", \"match\": [ { \"path\": \"/dev/a/*\" }, " \
        "{ \"path\": \"/dev/a-*\" } ] } ] }"

Test(match, clashing_ids_at_start_are_both_refused) {
        env_init(&e);
        env_touch(&e, "dev/a/b");
        env_touch(&e, "dev/a-b");
        env_touch(&e, "dev/a-c");
        serve("example.com/clash", CLASH_CONFIG);
        grpc_channel *ch = tk_dial(tk, "example.com/clash");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "a-c");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        char *log = env_read(e.log);
        cr_assert_not_null(
                strstr(log, "devices /dev/a-b, /dev/a/b all want ID \"a-b\": all refused"), "%s",
                log);
        free(log);
        lw_close(s);
        grpc_channel_destroy(ch);
}

Test(match, a_clash_at_hotplug_never_renames_the_served_device) {
        env_init(&e);
        env_touch(&e, "dev/a-b");
        serve("example.com/clash", CLASH_CONFIG);
        grpc_channel *ch = tk_dial(tk, "example.com/clash");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "a-b");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* /dev/a/b would also be "a-b": refused, "a-b" stays /dev/a-b.
         * Nothing changes for the kubelet, so a further node marks when
         * the daemon has seen both. */
        env_touch(&e, "dev/a/b");
        env_touch(&e, "dev/a-c");
        l = lw_next(s, 5000);
        cr_assert_not_null(l);
        cr_assert_eq(l->n_devices, 2);
        cr_assert_str_eq(l->devices[0]->id, "a-b");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        cr_assert_str_eq(l->devices[1]->id, "a-c");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        char *spec = spec_text("example.com-clash.json");
        cr_assert_not_null(strstr(spec, "\"/dev/a-b\""), "%s", spec);
        cr_assert_null(strstr(spec, "\"/dev/a/b\""), "%s", spec);
        free(spec);
        char *log = env_read(e.log);
        cr_assert_not_null(
                strstr(log,
                       "devices /dev/a-b, /dev/a/b all want ID \"a-b\": the one already served"),
                "%s", log);
        free(log);

        /* /dev/a-b unplugged: "a-b" stays its ID, Unhealthy; /dev/a/b,
         * alone now, still may not take it over. */
        env_rm(&e, "dev/a-b");
        l = next_with(s, 2);
        cr_assert_str_eq(l->devices[0]->id, "a-b");
        cr_assert_str_eq(l->devices[0]->health, "Unhealthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        spec = spec_text("example.com-clash.json");
        cr_assert_null(strstr(spec, "\"/dev/a/b\""), "%s", spec);
        free(spec);
        log = env_read(e.log);
        cr_assert_not_null(strstr(log, "device /dev/a/b refused: its ID \"a-b\" names /dev/a-b"),
                           "%s", log);
        free(log);
        /* Back: Healthy again under its ID. */
        env_touch(&e, "dev/a-b");
        l = next_with(s, 2);
        cr_assert_str_eq(l->devices[0]->id, "a-b");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        lw_close(s);
        grpc_channel_destroy(ch);
}

Test(match, regular_files_are_skipped_with_one_log_line) {
        env_init(&e);
        env_touch(&e, "dev/ttyUSB0");
        host_file("dev/ttyUSB9", "not a node");
        serve("example.com/serial",
              "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ "
              "{ \"path\": \"/dev/ttyUSB*\" }, { \"path\": \"/dev/gone*\" } ] } ] }");
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 1);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        /* Two more discoveries. */
        env_touch(&e, "dev/ttyUSB1");
        l = next_with(s, 2);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        env_touch(&e, "dev/ttyUSB2");
        l = next_with(s, 3);
        for (size_t i = 0; i < l->n_devices; i++)
                cr_assert_null(strstr(l->devices[i]->id, "9"), "a file is not a device");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        char *log = env_read(e.log);
        cr_assert_eq(count(log, "/dev/ttyUSB9 is not a character or block device node; skipped"), 1,
                     "%s", log);
        /* And the selector that finds nothing says why, once. */
        cr_assert_eq(count(log, "match[1]: finds no device: path: nothing matches \"/dev/gone*\""),
                     1, "%s", log);
        free(log);
        lw_close(s);
        grpc_channel_destroy(ch);
}

static int check(const char *config, char **out) {
        env_write(&e, "config.json", config);
        return env_run(&e, out, "check", "--config", e.config, NULL);
}

Test(match, check_names_the_field_of_bad_match_keys) {
        env_init(&e);
        static const struct {
                const char *entry, *field;
        } bad[] = {
                { "\"attrs\": [\"idVendor\"]", "resources[0].match[0].attrs" },
                { "\"attrs\": {\"idVendor\": 403}", "resources[0].match[0].attrs.idVendor" },
                { "\"attrs\": {\"../idVendor\": \"0403\"}",
                  "resources[0].match[0].attrs.../idVendor" },
                { "\"attrs\": {\"serial\": \"A[12\"}", "resources[0].match[0].attrs.serial" },
                { "\"subsystem\": 1", "resources[0].match[0].subsystem" },
                { "\"id\": \"uuid\"", "resources[0].match[0].id" },
                { "\"optional\": \"yes\"", "resources[0].match[0].optional" },
                { "\"mode\": 660", "resources[0].match[0].mode" },
                { "\"mode\": \"01777\"", "resources[0].match[0].mode" },
                { "\"mode\": \"0968\"", "resources[0].match[0].mode" },
                { "\"owner\": -1", "resources[0].match[0].owner" },
                { "\"group\": 1.5", "resources[0].match[0].group" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *config = NULL, *out = NULL;
                cr_assert(asprintf(&config,
                                   "{ \"resources\": [ { \"name\": \"example.com/x\", \"match\": [ "
                                   "{ \"path\": \"/dev/x*\", %s } ] } ] }",
                                   bad[i].entry) > 0);
                int rc = check(config, &out);
                cr_expect_eq(rc, 2, "%s: exit %d: %s", bad[i].entry, rc, out);
                char *want = NULL;
                cr_assert(asprintf(&want, "%s: ", bad[i].field) > 0);
                cr_expect_not_null(strstr(out, want), "%s: want %s in: %s", bad[i].entry, want,
                                   out);
                free(want), free(out), free(config);
        }
        /* "link" needs a glob of links. */
        char *out = NULL;
        cr_expect_eq(check("{ \"resources\": [ { \"name\": \"example.com/x\", \"match\": [ "
                           "{ \"usb\": { \"vendor\": \"0403\" }, \"id\": \"link\" } ] } ] }",
                           &out),
                     2);
        cr_expect_not_null(strstr(out, "resources[0].match[0].id: "), "%s", out);
        free(out);
}

Test(match, check_accepts_the_new_keys_and_warns_about_owner) {
        env_init(&e);
        char *out = NULL;
        int rc = check(
                "{ \"resources\": [ { \"name\": \"example.com/x\", \"match\": [ "
                "{ \"path\": \"/dev/serial/by-id/*\", \"id\": \"link\", \"optional\": true, "
                "\"attrs\": { \"idVendor\": \"0403\", \"serial\": \"A12*\" }, \"subsystem\": \"tty\", "
                "\"driver\": \"ftdi_sio\", \"kernel\": \"ttyUSB*\", \"mode\": \"0660\", \"group\": 20 } ] } ] }",
                &out);
        cr_assert_eq(rc, 0, "%s", out);
        cr_expect_not_null(strstr(out, "warning: resources[0].match[0].group: "), "%s", out);
        free(out);
        rc = check("{ \"resources\": [ { \"name\": \"example.com/x\", \"match\": [ "
                   "{ \"path\": \"/dev/ttyUSB*\", \"mode\": \"0666\" } ] } ] }",
                   &out);
        cr_assert_eq(rc, 0, "%s", out);
        cr_expect_null(strstr(out, "warning"), "mode alone keeps per-container ownership: %s", out);
        free(out);
}
