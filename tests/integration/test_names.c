/* SPDX-License-Identifier: Apache-2.0 */
/* Every resource name check accepts is one serve serves and every CDI
 * consumer reads; lists the kubelet cannot read are never sent; devices
 * two resources share are pointed out. The real binary throughout. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <signal.h>
#include <unistd.h>

#include "calls.h"
#include "cdigrammar.h"
#include "env.h"
#include "kubelet.h"
#include "logwait.h"

static struct env e;
static struct tk *tk;

static void start(void) {
        env_init(&e);
}
static void stop(void) {
        if (tk)
                tk_stop(tk);
        tk = NULL;
        env_cleanup(&e);
}

TestSuite(names, .init = start, .fini = stop, .timeout = 120);

static void config1(const char *name, const char *extra) {
        char *json;
        cr_assert(
                asprintf(
                        &json,
                        "{ \"resources\": [ { \"name\": \"%s\", \"match\": [ { \"path\": \"/dev/ttyUSB0\" } ]%s } ] }",
                        name, extra ? extra : "") > 0);
        env_write(&e, "config.json", json);
        free(json);
}

/* The one spec file in the CDI dir (besides our record), read whole. */
static char *only_spec(void) {
        DIR *d = opendir(e.cdi_dir);
        struct dirent *de;
        char *text = NULL;
        int n = 0;
        cr_assert_not_null(d);
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0) {
                        char *path;
                        cr_assert(asprintf(&path, "%s/%s", e.cdi_dir, de->d_name) > 0);
                        cr_assert_leq(len, 255);
                        free(text);
                        text = env_read(path);
                        unlink(path);
                        free(path);
                        n++;
                }
        }
        closedir(d);
        cr_assert_eq(n, 1, "one spec file expected, found %d", n);
        return text;
}

static const char long63[] = "a23456789b23456789c23456789d23456789e23456789f23456789g23456789";

Test(names, edge_case_names_through_check_and_the_reference_grammar) {
        static const struct {
                const char *name;
                int rc;
                const char *says; /* in check's output */
        } rows[] = {
                { "example.com/serial", 0, NULL },
                { "example.com/9x", 0, "CDI kind is \"example.com/cdi-9x\"" },
                { "example.com/x", 0, "CDI kind is \"example.com/cdi-x\"" },
                { "a/bc", 0, "CDI kind is \"cdi-a/bc\"" },
                { "3com.com/serial", 0, "CDI kind is \"cdi-3com.com/serial\"" },
                { "example.com/GPU_x-1", 0, NULL },
                { "example.com/gpu.a100", 0, "needs cdiVersion 0.6.0" },
                { "example.com/9.x", 0, "needs cdiVersion 0.6.0" },
                { "very-long-domain-name-for-a-device-vendor.example.com/"
                  "9"
                  "23456789b23456789c23456789d23456789e23456789f23456789g23456789",
                  0, "CDI kind is" },
                { "example.com/-x", 2, "name part must start and end" },
                { "Example.com/x", 2, "lowercase DNS subdomain" },
                { "kubernetes.io/x", 2, "reserved" },
                { "example.com/a:b", 2, "name part may hold only" },
                { "example.com", 2, "<domain>/<name>" },
        };
        char *out = NULL;

        env_touch(&e, "dev/ttyUSB0");
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                config1(rows[i].name, NULL);
                int rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host,
                                 "--kubelet-dir", e.kubelet_dir, NULL);
                cr_expect_eq(rc, rows[i].rc, "%s: exit %d: %s", rows[i].name, rc, out);
                if (rows[i].says)
                        cr_expect_not_null(strstr(out, rows[i].says), "%s: %s", rows[i].name, out);
                bool warned_06 = strstr(out, "needs cdiVersion 0.6.0") != NULL;
                free(out);
                if (rc != 0)
                        continue;
                /* Accepted: what generate writes must load in the reference. */
                rc = env_run(&e, &out, "generate", "--config", e.config, "--host-root", e.host,
                             "--cdi-dir", e.cdi_dir, NULL);
                cr_expect_eq(rc, 0, "%s: generate exit %d: %s", rows[i].name, rc, out);
                free(out);
                char *spec = only_spec();
                const char *why = NULL;
                unsigned readers = cdig_spec_readers(spec, &why);
                cr_expect(readers & CDIG_LIB_06, "%s: the reference refuses the spec (%s):\n%s",
                          rows[i].name, why, spec);
                cr_expect_eq(
                        !(readers & CDIG_LIB_05), warned_06,
                        "%s: check must warn exactly when CDI 0.5 libraries cannot read the spec:\n%s",
                        rows[i].name, spec);
                free(spec);
        }
}

Test(names, names_that_would_share_a_kind_or_spec_file_are_refused) {
        char *out = NULL;

        env_touch(&e, "dev/ttyUSB0");
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/9x\", \"match\": [ { \"path\": \"/dev/ttyUSB0\" } ] },"
                " { \"name\": \"example.com/cdi-9x\", \"match\": [ { \"path\": \"/dev/ttyUSB1\" } ] } ] }");
        cr_expect_eq(env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, NULL),
                     2, "%s", out);
        cr_expect_not_null(
                strstr(out,
                       "\"example.com/9x\" and \"example.com/cdi-9x\" would share the CDI kind"),
                "%s", out);
        free(out);
        cr_expect_eq(env_run(&e, &out, "generate", "--config", e.config, "--host-root", e.host,
                             "--cdi-dir", e.cdi_dir, NULL),
                     2, "%s", out);
        free(out);
        cr_expect_eq(env_run(&e, &out, "serve", "--config", e.config, "--host-root", e.host,
                             "--cdi-dir", e.cdi_dir, "--kubelet-dir", e.kubelet_dir, NULL),
                     2, "%s", out);
        cr_expect_not_null(strstr(out, "would share the CDI kind"), "%s", out);
        free(out);
        cr_expect_eq(env_dir_entries(e.cdi_dir), 0, "nothing written");
        cr_expect_eq(env_dir_entries(e.kubelet_dir), -1, "nor the kubelet dir");
}

Test(names, a_kubelet_dir_too_long_for_any_socket_is_refused_by_check_and_serve) {
        char dir[200], *out = NULL;

        memset(dir, 'k', sizeof(dir));
        memcpy(dir, "/tmp/", 5);
        dir[90] = '\0';
        config1("example.com/serial", NULL);
        cr_expect_eq(env_run(&e, &out, "check", "--config", e.config, "--kubelet-dir", dir, NULL),
                     2, "%s", out);
        cr_expect_not_null(strstr(out, "too long for any socket"), "%s", out);
        free(out);
        cr_expect_eq(env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir", dir,
                             "--cdi-dir", e.cdi_dir, "--host-root", e.host, NULL),
                     2, "%s", out);
        free(out);
}

/* Serve name and wait for its registration; returns the endpoint it gave. */
static char *serve_and_register(const char *name) {
        V1beta1__RegisterRequest *req = NULL;
        V1beta1__DevicePluginOptions *opts = NULL;
        char *endpoint;

        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, name, 1, 10000), 0, "%s did not register: %s", name,
                     env_read(e.log));
        cr_assert_eq(tk_last_register(tk, name, &req, &opts), 0);
        endpoint = strdup(req->endpoint);
        protobuf_c_message_free_unpacked(&req->base, NULL);
        protobuf_c_message_free_unpacked(&opts->base, NULL);
        return endpoint;
}

Test(names, a_name_part_starting_with_a_digit_is_served) {
        V1beta1__AllocateResponse *resp = NULL;
        char *msg = NULL;

        env_touch(&e, "dev/ttyUSB0");
        config1("example.com/9x", NULL);
        free(serve_and_register("example.com/9x"));
        grpc_channel *ch = tk_dial(tk, "example.com/9x");
        cr_assert_eq(call_allocate(ch, &resp, &msg, "ttyUSB0", NULL, NULL), GRPC_STATUS_OK, "%s",
                     msg);
        cr_assert_eq(resp->container_responses[0]->n_cdi_devices, 1);
        cr_expect_str_eq(resp->container_responses[0]->cdi_devices[0]->name,
                         "example.com/cdi-9x=ttyUSB0");
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        grpc_channel_destroy(ch);
        char *spec, *path;
        cr_assert(asprintf(&path, "%s/example.com-cdi-9x.json", e.cdi_dir) > 0);
        spec = env_read(path);
        cr_assert_not_null(spec, "%s missing", path);
        cr_expect(cdig_spec_readers(spec, NULL) & CDIG_LIB_05, "%s", spec);
        free(spec);
        free(path);
}

Test(names, a_63_character_name_part_is_served_under_a_long_kubelet_dir) {
        char name[128], *endpoint, *path;
        struct sockaddr_un sa;
        struct stat st;

        /* Make the kubelet dir long: the full socket name would need
         * 8 + 12 + 63 + 5 bytes after it. */
        free(e.kubelet_dir);
        cr_assert(asprintf(&e.kubelet_dir, "%s/var/lib/kubelet/plugins_registry/device-plugins",
                           e.root) > 0);
        cr_assert_gt(strlen(e.kubelet_dir) + 1 + strlen("cdiplug-example.com-.sock") + 63,
                     sizeof(sa.sun_path) - 1);
        env_write(&e, "var/lib/kubelet/plugins_registry/device-plugins/.keep", "");
        env_touch(&e, "dev/ttyUSB0");
        snprintf(name, sizeof(name), "example.com/%s", long63);
        config1(name, NULL);

        char *out = NULL;
        cr_expect_eq(env_run(&e, &out, "check", "--config", e.config, "--kubelet-dir",
                             e.kubelet_dir, "--host-root", e.host, NULL),
                     0, "%s", out);
        cr_expect_not_null(strstr(out, "the full name would not fit"), "%s", out);
        free(out);

        endpoint = serve_and_register(name);
        cr_expect_eq(strncmp(endpoint, "cdiplug-a2345", 13), 0, "a readable start: %s", endpoint);
        cr_assert(asprintf(&path, "%s/%s", e.kubelet_dir, endpoint) > 0);
        cr_expect_lt(strlen(path), sizeof(sa.sun_path));
        cr_expect_eq(stat(path, &st), 0, "%s", path);
        cr_expect(S_ISSOCK(st.st_mode));

        /* The same name each time: stable across restarts. */
        cr_assert_eq(env_stop(&e, SIGTERM, 5000) >= 0, 1);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_wait_registered(tk, name, 2, 10000), 0, "%s", env_read(e.log));
        V1beta1__RegisterRequest *req = NULL;
        V1beta1__DevicePluginOptions *opts = NULL;
        cr_assert_eq(tk_last_register(tk, name, &req, &opts), 0);
        cr_expect_str_eq(req->endpoint, endpoint);
        protobuf_c_message_free_unpacked(&req->base, NULL);
        protobuf_c_message_free_unpacked(&opts->base, NULL);
        free(endpoint);
        free(path);
}

Test(names, a_list_over_the_kubelets_limit_is_refused_and_others_keep_serving) {
        char *out = NULL, *msg = NULL;
        V1beta1__ListAndWatchResponse *l = NULL;

        /* 200 devices x 1024 shares: about 5 MB of list. */
        for (int i = 0; i < 200; i++) {
                char rel[64];
                snprintf(rel, sizeof(rel), "dev/ttyB%d", i);
                env_touch(&e, rel);
        }
        env_touch(&e, "dev/fuse");
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/big\", \"match\": [ { \"path\": \"/dev/ttyB*\" } ],"
                " \"shares\": 1024 }, { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }");
        cr_expect_eq(env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, NULL),
                     0, "%s", out);
        cr_expect_not_null(
                strstr(out,
                       "\"example.com/big\": its device list of 204800 IDs (200 devices x 1024 shares)"),
                "%s", out);
        cr_expect_not_null(strstr(out, "over the kubelet's message limit of 4194304 bytes"), "%s",
                           out);
        free(out);

        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        /* Both register (the big one too: only its list is refused), in
         * either order; waiting for one says nothing about the other. */
        cr_assert_eq(tk_wait_registered(tk, "example.com/fuse", 1, 10000), 0);
        cr_assert_eq(
                log_wait(e.log, "resource \"example.com/big\": registered with the kubelet", 10000),
                0);
        cr_assert_eq(tk_wait_lists(tk, "example.com/fuse", 1, 5000, &l), 0);
        cr_expect_eq(l->n_devices, 1);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        cr_expect_eq(tk_lists(tk, "example.com/big"), 0,
                     "no list of the big resource reached the kubelet");

        /* A stream of our own: ended with a status naming count and limit. */
        grpc_channel *ch = tk_dial(tk, "example.com/big");
        cr_assert_not_null(ch);
        struct lw_stream *s = lw_open(ch);
        grpc_status_code st = lw_status(s, &msg, 10000);
        cr_expect_eq(st, GRPC_STATUS_RESOURCE_EXHAUSTED, "status %d: %s", st, msg);
        cr_expect_not_null(strstr(msg, "204800 IDs"), "%s", msg);
        cr_expect_not_null(strstr(msg, "4194304 bytes"), "%s", msg);
        gpr_free(msg);
        lw_close(s);
        grpc_channel_destroy(ch);

        /* The other resource still answers. */
        V1beta1__AllocateResponse *resp = NULL;
        ch = tk_dial(tk, "example.com/fuse");
        cr_expect_eq(call_allocate(ch, &resp, &msg, "fuse", NULL, NULL), GRPC_STATUS_OK, "%s", msg);
        if (resp)
                protobuf_c_message_free_unpacked(&resp->base, NULL);
        grpc_channel_destroy(ch);
        char *log = env_read(e.log);
        cr_expect_not_null(
                strstr(log, "resource \"example.com/big\": the device list of 204800 IDs"), "%s",
                log);
        free(log);
}

Test(names, devices_two_resources_match_are_pointed_out_by_check_and_serve) {
        char *out = NULL;

        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/ttyUSB1");
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
                " { \"name\": \"example.com/modem\", \"match\": [ { \"path\": \"/dev/ttyUSB1\" } ] } ] }");
        static const char want[] =
                "resources \"example.com/serial\" and \"example.com/modem\" both offer device /dev/ttyUSB1";
        cr_expect_eq(env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, NULL),
                     0, "%s", out);
        cr_expect_not_null(strstr(out, want), "%s", out);
        cr_expect_null(strstr(out, "/dev/ttyUSB0 ("), "only the shared device: %s", out);
        free(out);

        free(serve_and_register("example.com/modem"));
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 1, 10000), 0);
        char *log = env_read(e.log);
        cr_expect_not_null(strstr(log, want), "%s", log);
        free(log);
        /* Both offer it, as documented. */
        V1beta1__ListAndWatchResponse *l = NULL;
        cr_assert_eq(tk_wait_lists(tk, "example.com/modem", 1, 5000, &l), 0);
        cr_expect_eq(l->n_devices, 1);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
}
