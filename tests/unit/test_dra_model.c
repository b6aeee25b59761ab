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
