/* SPDX-License-Identifier: Apache-2.0 */
/* A resource's identity (config/names.c): its CDI kind, spec file and
 * socket worked out once by dp_names_prepare and stored, and the one check
 * that refuses two resources sharing any of them. The configs are built by
 * hand, past the parser's own duplicate check, to reach each clash. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static const char dir[] = "/var/lib/kubelet/device-plugins";

static struct cfg_config *config(const char *const *names, size_t n) {
        struct cfg_config *cfg = calloc(1, sizeof(*cfg));

        cr_assert_not_null(cfg);
        cfg->resources = calloc(n, sizeof(*cfg->resources));
        cr_assert_not_null(cfg->resources);
        cfg->n_resources = n;
        for (size_t i = 0; i < n; i++) {
                cfg->resources[i].name = strdup(names[i]);
                cr_assert_not_null(cfg->resources[i].name);
                cr_assert_eq(cfg_socket_name_full(names[i], &cfg->resources[i].socket_name), 0);
        }
        return cfg;
}

Test(names_prepare, stores_each_resource_s_names) {
        static const char *const names[] = { "example.com/serial", "example.com/9x" };
        struct cfg_config *cfg = config(names, 2);

        cr_assert_eq(dp_names_prepare(cfg, dir, true), 0);
        cr_expect_str_eq(cfg->resources[0].kind, "example.com/serial");
        cr_expect_str_eq(cfg->resources[0].spec_file, "example.com-serial.json");
        cr_expect_str_eq(cfg->resources[0].socket_name, "cdiplug-example.com-serial.sock");
        /* A class starting with a digit is rewritten: the file follows the kind. */
        cr_expect_str_eq(cfg->resources[1].kind, "example.com/cdi-9x");
        cr_expect_str_eq(cfg->resources[1].spec_file, "example.com-cdi-9x.json");
        cr_expect_str_eq(cfg->resources[1].socket_name, "cdiplug-example.com-9x.sock");
        cfg_free(cfg);
}

Test(names_prepare, a_socket_too_long_for_the_dir_is_shortened_in_place) {
        static const char *const names[] = {
                "example.com/a23456789b23456789c23456789d23456789e23456789f23456789g23456789"
        };
        struct cfg_config *cfg = config(names, 1);

        cr_assert_eq(dp_names_prepare(cfg, dir, true), 0);
        cr_expect_lt(strlen(cfg->resources[0].socket_name), 107 - sizeof(dir));
        cfg_free(cfg);

        /* generate has no socket: the parser's name stays. */
        cfg = config(names, 1);
        cr_assert_eq(dp_names_prepare(cfg, dir, false), 0);
        cr_expect_gt(strlen(cfg->resources[0].socket_name), 107 - sizeof(dir));
        cfg_free(cfg);
}

static void expect_clash(const char *a, const char *b, bool sockets) {
        const char *const names[] = { a, b };
        struct cfg_config *cfg = config(names, 2);

        cr_expect_eq(dp_names_prepare(cfg, dir, sockets), -EINVAL, "\"%s\" and \"%s\"", a, b);
        cfg_free(cfg);
}

Test(names_prepare, refuses_two_resources_with_one_kind) {
        /* "9x" becomes "cdi-9x", the other's own name. */
        expect_clash("example.com/9x", "example.com/cdi-9x", false);
}

Test(names_prepare, refuses_two_resources_with_one_spec_file) {
        /* Two kinds, "a.com/bb-cc" and "a.com-bb/cc", one file "a.com-bb-cc.json". */
        expect_clash("a.com/bb-cc", "a.com-bb/cc", false);
}

Test(names_prepare, refuses_two_resources_with_one_socket) {
        /* Kinds "a.com/cdi-9x-yy" and "a.com-9x/yy", two spec files, but one
         * socket "cdiplug-a.com-9x-yy.sock"; only where there are sockets. */
        expect_clash("a.com/9x-yy", "a.com-9x/yy", true);

        const char *const names[] = { "a.com/9x-yy", "a.com-9x/yy" };
        struct cfg_config *cfg = config(names, 2);
        cr_expect_eq(dp_names_prepare(cfg, dir, false), 0);
        cfg_free(cfg);
}

Test(names_prepare, resources_past_a_refused_one_still_have_their_names) {
        static const char *const names[] = { "example.com/9x", "example.com/cdi-9x",
                                             "example.com/serial" };
        struct cfg_config *cfg = config(names, 3);

        cr_assert_eq(dp_names_prepare(cfg, dir, true), -EINVAL);
        cr_expect_str_eq(cfg->resources[1].kind, "example.com/cdi-9x");
        cr_expect_str_eq(cfg->resources[2].kind, "example.com/serial");
        cr_expect_str_eq(cfg->resources[2].spec_file, "example.com-serial.json");
        cfg_free(cfg);
}

Test(names_prepare, names_of_a_resource_outside_the_config_agree) {
        static const char *const names[] = { "example.com/9x" };
        struct cfg_config *cfg = config(names, 1);
        char *kind = NULL, *file = NULL;

        cr_assert_eq(dp_names_prepare(cfg, dir, true), 0);
        cr_assert_eq(cfg_names_of("example.com/9x", &kind, &file), 0);
        cr_expect_str_eq(kind, cfg->resources[0].kind);
        cr_expect_str_eq(file, cfg->resources[0].spec_file);
        free(kind);
        free(file);
        kind = file = (char *)names;
        cr_expect_eq(cfg_names_of("9x", &kind, &file), -EINVAL);
        cr_expect_eq(kind, (char *)names, "ret written only on success");
        cr_expect_eq(file, (char *)names);
        cfg_free(cfg);
}
