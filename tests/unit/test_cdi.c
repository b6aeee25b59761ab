/* SPDX-License-Identifier: Apache-2.0 */
/* cdi/: names, minimum cdiVersion, validation and JSON output. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"

#ifndef CDIPLUG_SRC_DIR
#error "CDIPLUG_SRC_DIR must point at the source tree (golden files)"
#endif

/* ---- kinds ---------------------------------------------------------------- */

Test(cdi_kind, resource_name_is_kept) {
        char *kind = NULL;

        cr_assert_eq(cdi_kind_from_resource("example.com/serial", &kind), 0);
        cr_assert_str_eq(kind, "example.com/serial");
        free(kind);
        cr_assert_eq(cdi_kind_from_resource("foo.bar.baz/foo-bar123.B_az", &kind), 0);
        cr_assert_str_eq(kind, "foo.bar.baz/foo-bar123.B_az");
        free(kind);
}

Test(cdi_kind, invalid_resources_are_refused) {
        static const char *const bad[] = {
                "serial",              /* no vendor */
                "example.com/",        /* empty class */
                "/serial",             /* empty vendor */
                "example.com/a/b",     /* two slashes */
                "example.com/serial/", /* trailing slash */
                "example.com-/serial", /* vendor must end alphanumeric */
                "example.com/serial-", /* class must end alphanumeric */
                "exa mple.com/serial", /* space */
                "example.com/ser:ial", /* ':' only allowed in device names */
                "",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *kind = (char *)0x1;
                cr_expect_eq(cdi_kind_from_resource(bad[i], &kind), -EINVAL, "\"%s\"", bad[i]);
                cr_expect_eq(kind, (char *)0x1, "output written on failure for \"%s\"", bad[i]);
        }
        cr_expect_eq(cdi_kind_is_valid(NULL), false);
}

Test(cdi_kind, length_limits) {
        char vendor[300], kind[400];

        /* class: 63 chars ok, 64 refused */
        memset(vendor, 'c', sizeof(vendor));
        snprintf(kind, sizeof(kind), "v.com/%.63s", vendor);
        cr_expect(cdi_kind_is_valid(kind));
        snprintf(kind, sizeof(kind), "v.com/%.64s", vendor);
        cr_expect_not(cdi_kind_is_valid(kind));
        /* vendor: 253 ok, 254 refused */
        snprintf(kind, sizeof(kind), "%.253s/cc", vendor);
        cr_expect(cdi_kind_is_valid(kind));
        snprintf(kind, sizeof(kind), "%.254s/cc", vendor);
        cr_expect_not(cdi_kind_is_valid(kind));
}

/* ---- device names: one test per rule in cdi.h ------------------------------ */

static void expect_name(const char *id, const char *want) {
        char *name = NULL;

        cr_assert_eq(cdi_device_name(id, &name), 0, "\"%s\"", id);
        cr_expect_str_eq(name, want, "\"%s\"", id);
        cr_expect(cdi_device_name_is_valid(name), "\"%s\" gave invalid \"%s\"", id, name);
        free(name);
}

Test(cdi_device_name, rule1_valid_ids_unchanged) {
        expect_name("ttyUSB0", "ttyUSB0");
        expect_name("0000:03:00.0", "0000:03:00.0");
        expect_name("a", "a");
        expect_name("gpu_1-a.b:c", "gpu_1-a.b:c");
}

Test(cdi_device_name, rule2_leading_punctuation_dropped) {
        expect_name("/dev/ttyUSB0", "dev_ttyUSB0-09dc2083");
        /* é is two bytes, neither alphanumeric: both dropped */
        expect_name("\xc3\xa9"
                    "1",
                    "1-2295b1d0");
}

Test(cdi_device_name, rule3_invalid_bytes_become_underscores) {
        expect_name("a/b", "a_b-3a8e75c1");
        expect_name("a\xc3\xa9", "a__-79d7a1fc");
}

Test(cdi_device_name, rule4_nothing_left_gives_dev) {
        expect_name("///", "dev-1d37d324");
}

Test(cdi_device_name, rule5_hash_keeps_ids_apart_and_fixes_the_end) {
        char *a = NULL, *b = NULL, *c = NULL;

        cr_assert_eq(cdi_device_name("a/b", &a), 0);
        cr_assert_eq(cdi_device_name("a b", &b), 0);
        cr_assert_eq(cdi_device_name("a_b", &c), 0);
        cr_expect_str_neq(a, b);
        cr_expect_str_neq(a, c);
        cr_expect_str_neq(b, c);
        free(a);
        free(b);
        free(c);
        /* trailing punctuation would be invalid; the suffix ends the name */
        expect_name("abc_", "abc_-b3344f3c");
        expect_name("x:", "x:-17631987");
}

Test(cdi_device_name, stable_across_calls) {
        char *a = NULL, *b = NULL;

        cr_assert_eq(cdi_device_name("/dev/bus/usb/001/002", &a), 0);
        cr_assert_eq(cdi_device_name("/dev/bus/usb/001/002", &b), 0);
        cr_expect_str_eq(a, b);
        free(a);
        free(b);
}

Test(cdi_device_name, empty_and_oversized_ids_refused) {
        char *name = (char *)0x1, *big = malloc(1026);

        cr_assert_not_null(big);
        cr_expect_eq(cdi_device_name("", &name), -EINVAL);
        cr_expect_eq(cdi_device_name(NULL, &name), -EINVAL);
        memset(big, 'a', 1025);
        big[1025] = '\0';
        cr_expect_eq(cdi_device_name(big, &name), -ENAMETOOLONG);
        cr_expect_eq(name, (char *)0x1);
        big[1024] = '\0';
        cr_expect_eq(cdi_device_name(big, &name), 0);
        free(name);
        free(big);
}

Test(cdi_names, qualified_name) {
        char *q = NULL;

        cr_assert_eq(cdi_qualified_name("example.com/serial", "ttyUSB0", &q), 0);
        cr_expect_str_eq(q, "example.com/serial=ttyUSB0");
        free(q);
        cr_expect_eq(cdi_qualified_name("example.com", "ttyUSB0", &q), -EINVAL);
        cr_expect_eq(cdi_qualified_name("example.com/serial", "/dev/x", &q), -EINVAL);
}

Test(cdi_names, spec_file_name) {
        char *n = NULL;

        cr_assert_eq(cdi_spec_file_name("example.com/serial", &n), 0);
        cr_expect_str_eq(n, "example.com-serial.json");
        free(n);
        cr_expect_eq(cdi_spec_file_name("../etc/passwd", &n), -EINVAL);
        cr_expect_eq(cdi_spec_file_name("serial", &n), -EINVAL);
}

/* ---- specs built in code ---------------------------------------------------- */

static struct cdi_node tty_node = { .path = "/dev/ttyUSB0", .access.permissions = "rw" };

#define ONE_DEVICE(n, nodes_, n_nodes_)                                                            \
        (struct cdi_device[]) {                                                                    \
                {                                                                                  \
                        .name = (n), .edits = {.nodes = (nodes_), .n_nodes = (n_nodes_) }          \
                }                                                                                  \
        }

/* File scope: a compound literal inside simple_spec() would die with it. */
static struct cdi_device tty_device[] = { { .name = "ttyUSB0",
                                            .edits = { .nodes = &tty_node, .n_nodes = 1 } } };

static struct cdi_spec simple_spec(void) {
        return (struct cdi_spec){
                .kind = "example.com/serial",
                .devices = tty_device,
                .n_devices = 1,
        };
}

/* ---- minimum version: one row per rule, plus the floor ------------------------ */

Test(cdi_version, table) {
        static struct cdi_node host_path_node = { .path = "/dev/ttyS0", .host_path = "/dev/ttyS9" };
        static struct cdi_node same_path_node = { .path = "/dev/ttyS0", .host_path = "/dev/ttyS0" };
        static struct cdi_mount typed = { .host_path = "/a",
                                          .container_path = "/b",
                                          .type = "bind" };
        static struct cdi_mount untyped = { .host_path = "/a", .container_path = "/b", .type = "" };
        struct {
                const char *what;
                struct cdi_spec spec;
                const char *want;
        } rows[] = {
                { "floor", simple_spec(), "0.3.0" },
                { "mount without type",
                  { .kind = "a.com/b",
                    .devices = ONE_DEVICE("d", &tty_node, 1),
                    .n_devices = 1,
                    .edits = { .mounts = &untyped, .n_mounts = 1 } },
                  "0.3.0" },
                { "spec-level mount type",
                  { .kind = "a.com/b",
                    .devices = ONE_DEVICE("d", &tty_node, 1),
                    .n_devices = 1,
                    .edits = { .mounts = &typed, .n_mounts = 1 } },
                  "0.4.0" },
                { "device-level mount type",
                  { .kind = "a.com/b",
                    .devices =
                            (struct cdi_device[]){
                                    { .name = "d", .edits = { .mounts = &typed, .n_mounts = 1 } } },
                    .n_devices = 1 },
                  "0.4.0" },
                { "hostPath",
                  { .kind = "a.com/b",
                    .devices = ONE_DEVICE("d", &host_path_node, 1),
                    .n_devices = 1 },
                  "0.5.0" },
                { "hostPath equal to path is dropped",
                  { .kind = "a.com/b",
                    .devices = ONE_DEVICE("d", &same_path_node, 1),
                    .n_devices = 1 },
                  "0.3.0" },
                { "device name starting with a digit",
                  { .kind = "a.com/b", .devices = ONE_DEVICE("0", &tty_node, 1), .n_devices = 1 },
                  "0.5.0" },
                { "dot in class",
                  { .kind = "a.com/b.c", .devices = ONE_DEVICE("d", &tty_node, 1), .n_devices = 1 },
                  "0.6.0" },
                { "dot in vendor only",
                  { .kind = "a.b.com/c", .devices = ONE_DEVICE("d", &tty_node, 1), .n_devices = 1 },
                  "0.3.0" },
                { "highest rule wins",
                  { .kind = "a.com/b.c",
                    .devices = ONE_DEVICE("0", &host_path_node, 1),
                    .n_devices = 1,
                    .edits = { .mounts = &typed, .n_mounts = 1 } },
                  "0.6.0" },
        };

        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
                cr_expect_str_eq(cdi_spec_min_version(&rows[i].spec), rows[i].want, "%s",
                                 rows[i].what);
}

/* ---- validation --------------------------------------------------------------- */

Test(cdi_validate, refuses_what_runtimes_refuse) {
        static struct cdi_node relative = { .path = "dev/x" };
        static struct cdi_node bad_perm = { .path = "/dev/x", .access.permissions = "rwx" };
        static struct cdi_mount no_dst = { .host_path = "/a" };
        static char *bad_env[] = { "=x", NULL };
        struct cdi_spec s = simple_spec();

        cr_expect_eq(cdi_spec_validate(&s), 0);
        s.kind = "serial";
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "bad kind");
        s = simple_spec();
        s.n_devices = 0;
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "no devices");
        s = simple_spec();
        s.devices = ONE_DEVICE("-x", &tty_node, 1);
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "bad device name");
        s.devices = ONE_DEVICE("x", NULL, 0);
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "device without edits");
        s.devices = ONE_DEVICE("x", &relative, 1);
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "relative node path");
        s.devices = ONE_DEVICE("x", &bad_perm, 1);
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "permissions");
        s = simple_spec();
        s.edits.mounts = &no_dst;
        s.edits.n_mounts = 1;
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "mount without container path");
        s = simple_spec();
        s.edits.env = bad_env;
        cr_expect_eq(cdi_spec_validate(&s), -EINVAL, "env without name");
        s = simple_spec();
        s.devices = (struct cdi_device[]){
                { .name = "a", .edits = { .nodes = &tty_node, .n_nodes = 1 } },
                { .name = "a", .edits = { .nodes = &tty_node, .n_nodes = 1 } }
        };
        s.n_devices = 2;
        cr_expect_eq(cdi_spec_validate(&s), -EEXIST, "duplicate device");
}

Test(cdi_json, invalid_spec_gives_no_output) {
        struct cdi_spec s = simple_spec();
        char *json = (char *)0x1;

        s.n_devices = 0;
        cr_expect_eq(cdi_spec_to_json(&s, &json), -EINVAL);
        cr_expect_eq(json, (char *)0x1);
}

/* ---- JSON: golden files and strictness ------------------------------------------ */

static cJSON *parse_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf;
        long len;
        cJSON *j;

        cr_assert_not_null(f, "cannot open %s", path);
        cr_assert_eq(fseek(f, 0, SEEK_END), 0);
        len = ftell(f);
        cr_assert(len > 0 && len < (1 << 20));
        rewind(f);
        buf = malloc((size_t)len + 1);
        cr_assert_not_null(buf);
        cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
        buf[len] = '\0';
        fclose(f);
        j = cJSON_Parse(buf);
        cr_assert_not_null(j, "%s is not JSON", path);
        free(buf);
        return j;
}

static void expect_golden(const struct cdi_spec *spec, const char *golden) {
        char path[4096], *json = NULL;
        cJSON *want, *got;
        int n;

        n = snprintf(path, sizeof(path), "%s/tests/cdi/golden/%s", CDIPLUG_SRC_DIR, golden);
        cr_assert(n > 0 && (size_t)n < sizeof(path));
        want = parse_file(path);
        cr_assert_eq(cdi_spec_to_json(spec, &json), 0);
        got = cJSON_Parse(json);
        cr_assert_not_null(got);
        cr_expect(cJSON_Compare(want, got, true), "%s differs; got:\n%s", golden, json);
        cJSON_Delete(want);
        cJSON_Delete(got);
        free(json);
}

Test(cdi_json, golden_minimal) {
        struct cdi_spec s = simple_spec();

        expect_golden(&s, "minimal.json");
}

static char *serial_env[] = { "SERIAL_BAUD=115200", NULL };
static char *ro_opts[] = { "ro", "nosuid", "nodev", "bind", NULL };
static char *bind_opts[] = { "rbind", NULL };

Test(cdi_json, golden_mount_type) {
        static struct cdi_mount m = { .host_path = "/etc/serial",
                                      .container_path = "/etc/serial",
                                      .type = "bind",
                                      .options = bind_opts };
        struct cdi_spec s = simple_spec();

        s.edits.mounts = &m;
        s.edits.n_mounts = 1;
        expect_golden(&s, "mount-type.json");
}

Test(cdi_json, golden_full) {
        static struct cdi_node n0[] = {
                { .path = "/dev/gpu0", .host_path = "/dev/dri/card0", .access.permissions = "rw" },
                { .path = "/dev/gpu-ctl" }
        };
        static struct cdi_node n1[] = {
                { .path = "/dev/gpu1", .host_path = "/dev/dri/card1", .access.permissions = "rwm" }
        };
        static struct cdi_mount lib = { .host_path = "/usr/lib/gpu",
                                        .container_path = "/usr/lib/gpu",
                                        .options = ro_opts };
        static char *dev_env[] = { "GPU_INDEX=1", NULL };
        struct cdi_spec s = {
                .kind = "vendor.example/gpu.v2",
                .devices =
                        (struct cdi_device[]){
                                { .name = "0", .edits = { .nodes = n0, .n_nodes = 2 } },
                                { .name = "1",
                                  .edits = { .env = dev_env, .nodes = n1, .n_nodes = 1 } } },
                .n_devices = 2,
                .edits = { .env = serial_env, .mounts = &lib, .n_mounts = 1 },
        };

        expect_golden(&s, "full.json");
}

/* Runtimes reject a whole file on an unknown field, so every key we emit
 * must be one the schema knows at that level. */
static void expect_keys(const cJSON *obj, const char *const *allowed, const char *where) {
        const cJSON *it;

        cr_assert(cJSON_IsObject(obj), "%s is not an object", where);
        cJSON_ArrayForEach(it, obj) {
                bool ok = false;
                for (const char *const *a = allowed; *a; a++)
                        ok |= strcmp(*a, it->string) == 0;
                cr_expect(ok, "unknown key \"%s\" in %s", it->string, where);
        }
}

static void expect_edits_keys(const cJSON *e) {
        static const char *const edits[] = { "env", "deviceNodes", "mounts", NULL };
        static const char *const node[] = { "path", "hostPath", "permissions", NULL };
        static const char *const mount[] = { "hostPath", "containerPath", "type", "options", NULL };
        const cJSON *it;

        expect_keys(e, edits, "containerEdits");
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(e, "deviceNodes"))
                expect_keys(it, node, "deviceNode");
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(e, "mounts")) expect_keys(it, mount, "mount");
        cJSON_ArrayForEach(it, e)
                cr_expect(cJSON_GetArraySize(it) > 0, "empty \"%s\" emitted", it->string);
}

Test(cdi_json, only_known_fields_and_nothing_empty) {
        static const char *const top[] = { "cdiVersion", "kind", "devices", "containerEdits",
                                           NULL };
        static const char *const dev[] = { "name", "containerEdits", NULL };
        static struct cdi_node bare = { .path = "/dev/x",
                                        .host_path = "",
                                        .access.permissions = "" };
        static char *no_env[] = { NULL };
        struct cdi_spec s = {
                .kind = "example.com/serial",
                .devices = ONE_DEVICE("x", &bare, 1),
                .n_devices = 1,
                .edits = { .env = no_env },
        };
        char *json = NULL;
        cJSON *root, *d, *node;

        cr_assert_eq(cdi_spec_to_json(&s, &json), 0);
        root = cJSON_Parse(json);
        cr_assert_not_null(root);
        expect_keys(root, top, "spec");
        cr_expect_null(cJSON_GetObjectItem(root, "containerEdits"), "empty spec edits emitted");
        d = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0);
        expect_keys(d, dev, "device");
        expect_edits_keys(cJSON_GetObjectItem(d, "containerEdits"));
        node = cJSON_GetArrayItem(
                cJSON_GetObjectItem(cJSON_GetObjectItem(d, "containerEdits"), "deviceNodes"), 0);
        cr_expect_eq(cJSON_GetArraySize(node), 1, "unset node fields emitted: %s", json);
        cJSON_Delete(root);
        free(json);
}

Test(cdi_json, strings_are_escaped) {
        static char *env[] = { "MSG=say \"hi\"\n", NULL };
        struct cdi_spec s = simple_spec();
        char *json = NULL;
        cJSON *root;

        s.edits.env = env;
        cr_assert_eq(cdi_spec_to_json(&s, &json), 0);
        root = cJSON_Parse(json);
        cr_assert_not_null(root);
        cr_expect_str_eq(
                cJSON_GetArrayItem(
                        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "containerEdits"), "env"), 0)
                        ->valuestring,
                env[0]);
        cJSON_Delete(root);
        free(json);
}

Test(cdi_spec, free_accepts_null_and_heap_specs) {
        struct cdi_spec *s = calloc(1, sizeof(*s));

        cdi_spec_free(NULL);
        cr_assert_not_null(s);
        s->kind = strdup("a.com/b");
        s->n_devices = 1;
        s->devices = calloc(1, sizeof(*s->devices));
        s->devices[0].name = strdup("d");
        s->devices[0].edits.n_nodes = 1;
        s->devices[0].edits.nodes = calloc(1, sizeof(struct cdi_node));
        s->devices[0].edits.nodes[0].path = strdup("/dev/d");
        s->devices[0].edits.env = calloc(2, sizeof(char *));
        s->devices[0].edits.env[0] = strdup("A=1");
        cdi_spec_free(s);
        cr_expect_null(s->kind);
        cr_expect_eq(s->n_devices, 0);
        cdi_spec_free(s); /* twice: members were reset */
        free(s);
}
