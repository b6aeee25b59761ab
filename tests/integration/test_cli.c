/* SPDX-License-Identifier: Apache-2.0 */
/* The command line as an operator meets it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "env.h"

static struct env e;

static void start(void) {
        env_init(&e);
}
static void stop(void) {
        env_cleanup(&e);
}

TestSuite(cli, .init = start, .fini = stop, .timeout = 30);

Test(cli, bad_config_exits_2_naming_the_field_and_writes_nothing) {
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ],\n"
                "    \"shares\": 0 } ] }\n");
        env_touch(&e, "dev/fuse");
        int rc = env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                         "--cdi-dir", e.cdi_dir, "--host-root", e.host, NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "resources[0].shares"), "%s", out);
        cr_assert_eq(env_dir_entries(e.cdi_dir), 0, "nothing may be written to the CDI dir");
        cr_assert_eq(env_dir_entries(e.kubelet_dir), -1, "nor the kubelet dir");
        free(out);

        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"example.com/fuse\",\n  \"match\": [ } ] }");
        rc = env_run(&e, &out, "check", "--config", e.config, NULL);
        cr_assert_eq(rc, 2);
        cr_assert_not_null(strstr(out, "line 2"), "JSON errors say where: %s", out);
        free(out);

        rc = env_run(&e, &out, "check", "--config", "/nonexistent/cdiplug.json", NULL);
        cr_assert_eq(rc, 2);
        cr_assert_not_null(strstr(out, "/nonexistent/cdiplug.json"), "%s", out);
        free(out);
}

Test(cli, check_validates_a_good_config) {
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }");
        cr_assert_eq(env_run(&e, &out, "check", "--config", e.config, NULL), 0, "%s", out);
        cr_assert_not_null(strstr(out, "1 resources"), "%s", out);
        free(out);
}

Test(cli, help_version_and_usage_errors) {
        char *out = NULL;
        cr_assert_eq(env_run(&e, &out, "--help", NULL), 0);
        cr_assert_not_null(strstr(out, "serve"));
        cr_assert_not_null(strstr(out, "--kubelet-dir"));
        free(out);
        cr_assert_eq(env_run(&e, &out, "version", NULL), 0);
        cr_assert_not_null(strstr(out, "cdiplug " CDIPLUG_VERSION));
        free(out);
        cr_assert_eq(env_run(&e, &out, "frobnicate", NULL), 2);
        cr_assert_not_null(strstr(out, "frobnicate"));
        free(out);
        cr_assert_eq(env_run(&e, &out, "serve", "--no-such-flag", NULL), 2);
        free(out);
        cr_assert_eq(env_run(&e, &out, NULL), 2);
        free(out);
}

Test(cli, generate_writes_specs_once_or_prints_them) {
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
                " { \"name\": \"example.com/absent\", \"match\": [ { \"path\": \"/dev/nothing*\" } ] } ] }");
        env_touch(&e, "dev/ttyUSB0");
        cr_assert_eq(env_run(&e, &out, "generate", "--config", e.config, "--cdi-dir", e.cdi_dir,
                             "--host-root", e.host, NULL),
                     0, "%s", out);
        free(out);
        char *path;
        cr_assert(asprintf(&path, "%s/example.com-serial.json", e.cdi_dir) > 0);
        char *spec = env_read(path);
        cr_assert_not_null(spec, "generate must write %s", path);
        cr_assert_not_null(strstr(spec, "\"/dev/ttyUSB0\""));
        free(spec);
        free(path);
        cr_assert_eq(env_dir_entries(e.cdi_dir), 2,
                     "one spec plus the ownership record: none for a resource "
                     "with no devices");

        cr_assert_eq(env_run(&e, &out, "generate", "--config", e.config, "--stdout", "--host-root",
                             e.host, NULL),
                     0);
        cr_assert_not_null(strstr(out, "\"kind\""), "%s", out);
        cr_assert_not_null(strstr(out, "example.com/serial"));
        free(out);

        /* Nothing writable: a clear message and a non-zero exit. */
        cr_assert_eq(env_run(&e, &out, "generate", "--config", e.config, "--cdi-dir",
                             "/proc/cdiplug-no", "--host-root", e.host, NULL),
                     1);
        cr_assert_not_null(strstr(out, "/proc/cdiplug-no"), "%s", out);
        free(out);
}
