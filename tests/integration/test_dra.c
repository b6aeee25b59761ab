/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA driver's node side in the real daemon, sandboxed: registration
 * through the plugin registry, the health streams following hotplug, a
 * device-plugin resource beside a DRA one, the API switched by a reload,
 * and the registry socket made again when it is deleted. */
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
#include "http.h"
#include "kubelet.h"
#include "logwait.h"
#include "rpc.h"
#include "stuck.h"

#define DRIVER "cdiplug.example.com"
#define WAIT_MS 10000

static struct env e;
static struct tk_dra *kd;
static struct tk *tk;
static char *kroot;
/* The daemon's API client needs an API server even where a test looks at
 * the kubelet's side only. */
static struct fakeapi *api;
static char *kubeconfig;

static void stop(void) {
        tk_dra_stop(kd);
        tk_stop(tk);
        env_cleanup(&e);
        fakeapi_free(api);
        free(kroot);
        free(kubeconfig);
}

static void write_kubeconfig(void) {
        char *text = NULL;

        api = fakeapi_new(true);
        fakeapi_add_node(api, "node1", "6d1b3a4e-0000-4000-8000-000000000001");
        cr_assert_eq(asprintf(&text,
                              "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                              "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                              "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                              "    certificate-authority: %s\n"
                              "users:\n- name: u\n  user: {}\n",
                              fakeapi_url(api), fakeapi_ca_file(api)) > 0,
                     true);
        env_write(&e, "kubeconfig", text);
        free(text);
        free(kubeconfig);
        cr_assert_eq(asprintf(&kubeconfig, "%s/kubeconfig", e.root) > 0, true);
}

TestSuite(dra, .fini = stop, .timeout = 60);

#define CONFIG(serial_api)                                                                         \
        "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": ["                              \
        " { \"name\": \"example.com/serial\", \"api\": \"" serial_api "\","                        \
        " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] },"                                          \
        " { \"name\": \"example.com/usb\", \"match\": [ { \"path\": \"/dev/bus/usb/*/*\" } ] }"    \
        " ] }"

static int port; /* the metrics endpoint's, 0: none */

static void start(const char *config) {
        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_touch(&e, "dev/ttyS1");
        env_touch(&e, "dev/bus/usb/001/001");
        cr_assert_eq(asprintf(&kroot, "%s/kubelet-root", e.root) > 0, true);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        env_write(&e, "config.json", config);
        write_kubeconfig();
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        if (port) {
                char addr[32];
                snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
                env_spawn(&e, "--kubelet-root", kroot, "--node-name", "node1", "--kubeconfig",
                          kubeconfig, "--metrics-address", addr, NULL);
        } else
                env_spawn(&e, "--kubelet-root", kroot, "--node-name", "node1", "--kubeconfig",
                          kubeconfig, NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "never registered");
}

/* "pool/device=HEALTH" of the serial IDs given, as the streams report. */
static char *expect(const char *const *ids, size_t n) {
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        for (size_t i = 0; i < n; i++) {
                char *name = NULL;
                cr_assert_eq(dra_device_name(ids[i], &name), 0);
                fprintf(f, "%snode1/example.com/serial/%s=HEALTHY", i ? "," : "", name);
                free(name);
        }
        fclose(f);
        return out;
}

Test(dra, registers_with_the_exact_info_and_keeps_the_device_plugin_beside) {
        Pluginregistration__PluginInfo *info = NULL;
        _cleanup_free_ char *endpoint = NULL;

        start(CONFIG("dra"));
        cr_assert_eq(tk_dra_info(kd, DRIVER, &info), 0);
        cr_assert_str_eq(info->type, "DRAPlugin");
        cr_assert_str_eq(info->name, DRIVER);
        cr_assert_eq(asprintf(&endpoint, "%s/plugins/%s/dra.sock", kroot, DRIVER) > 0, true);
        cr_assert_str_eq(info->endpoint, endpoint);
        cr_assert_eq(info->n_supported_versions, 4);
        cr_assert_str_eq(info->supported_versions[0], "v1.DRAPlugin");
        cr_assert_str_eq(info->supported_versions[1], "v1beta1.DRAPlugin");
        /* Kubelets from 1.37 open a health stream only for these. */
        cr_assert_str_eq(info->supported_versions[2], "v1.DRAResourceHealth");
        cr_assert_str_eq(info->supported_versions[3], "v1alpha1.DRAResourceHealth");
        pluginregistration__plugin_info__free_unpacked(info, NULL);
        cr_assert_eq(log_wait(e.log, "the kubelet registered driver", WAIT_MS), 0);
        /* Still sandboxed. */
        cr_assert_eq(log_count(e.log, "seccomp filter loaded"), 1);
        /* The device-plugin resource registers; the DRA one has no socket. */
        cr_assert_eq(tk_wait_registered(tk, "example.com/usb", 1, WAIT_MS), 0);
        cr_assert_eq(tk_registrations(tk, "example.com/serial"), 0);
        cr_assert_eq(tk_dra_probe(kd, DRIVER, NULL), GRPC_STATUS_OK);
}

Test(dra, refusal_is_logged_with_the_reason) {
        start(CONFIG("dra"));
        tk_dra_refuse(kd, "another plugin has that name");
        cr_assert_eq(tk_dra_restart(kd), 0);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0);
        cr_assert_eq(log_wait(e.log,
                              "the kubelet refused driver \"" DRIVER
                              "\": another plugin has that name",
                              WAIT_MS),
                     0);
}

Test(dra, registry_socket_deleted_is_made_again) {
        start(CONFIG("dra"));
        cr_assert_eq(tk_dra_restart(kd), 0);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0,
                     "the registry socket was not made again");
        cr_assert_eq(tk_dra_probe(kd, DRIVER, NULL), GRPC_STATUS_OK);
}

/* plugins_registry deleted (its socket with it) and made again, by hand
 * or by a kubelet reinstall: the daemon watches the new dir and makes its
 * socket there, and a kubelet started then finds the driver. */
Test(dra, a_deleted_plugins_registry_is_watched_again) {
        _cleanup_free_ char *dir = NULL, *old = NULL, *old_sock = NULL;

        start(CONFIG("dra"));
        cr_assert_eq(asprintf(&dir, "%s/plugins_registry", kroot) > 0, true);
        cr_assert_eq(asprintf(&old, "%s/plugins_registry.old", kroot) > 0, true);
        cr_assert_eq(asprintf(&old_sock, "%s/%s-reg.sock", old, DRIVER) > 0, true);
        tk_dra_stop(kd);
        kd = NULL;
        /* Moved away first: the daemon makes its socket again when it is
         * deleted, which would race an rmdir in place. */
        cr_assert_eq(rename(dir, old), 0);
        cr_assert_eq(unlink(old_sock), 0);
        cr_assert_eq(rmdir(old), 0);
        cr_assert_eq(mkdir(dir, 0750), 0);
        cr_assert_eq(log_wait(e.log, "is back, watched again", WAIT_MS), 0);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0,
                     "no registry socket in the new plugins_registry");
        /* And the watch works on: the kubelet's start deletes the socket. */
        cr_assert_eq(tk_dra_restart(kd), 0);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0);
}

Test(dra, health_streams_of_both_versions_follow_hotplug) {
        static const char *const two[] = { "ttyS0", "ttyS1" };
        static const char *const three[] = { "ttyS0", "ttyS1", "ttyS2" };
        _cleanup_free_ char *want2 = NULL, *want3 = NULL;
        struct tk_dra_health *alpha, *v1;
        char *got = NULL;

        start(CONFIG("dra"));
        want2 = expect(two, 2);
        want3 = expect(three, 3);
        cr_assert_eq(tk_dra_health_open(kd, DRIVER, "v1alpha1", &alpha), 0);
        cr_assert_eq(tk_dra_health_open(kd, DRIVER, "v1", &v1), 0);
        cr_assert_eq(tk_dra_health_wait(alpha, 1, WAIT_MS, &got), 0);
        cr_assert_str_eq(got, want2);
        free(got);
        cr_assert_eq(tk_dra_health_wait(v1, 1, WAIT_MS, &got), 0);
        cr_assert_str_eq(got, want2);
        free(got);
        env_touch(&e, "dev/ttyS2");
        cr_assert_eq(tk_dra_health_wait(alpha, 2, WAIT_MS, &got), 0);
        cr_assert_str_eq(got, want3);
        free(got);
        cr_assert_eq(tk_dra_health_wait(v1, 2, WAIT_MS, &got), 0);
        cr_assert_str_eq(got, want3);
        free(got);
        tk_dra_health_close(alpha);
        tk_dra_health_close(v1);
}

/* An unplugged device is Unhealthy with a message naming its node; each
 * device carries its timeout. */
Test(dra, an_unhealthy_device_says_which_node_went) {
        _cleanup_free_ char *d0 = NULL, *d1 = NULL, *k0 = NULL, *k1 = NULL, *msg = NULL,
                            *want = NULL, *view = NULL;
        struct tk_dra_health *h;
        int64_t timeout = 0;

        start(CONFIG("dra"));
        cr_assert_eq(dra_device_name("ttyS0", &d0), 0);
        cr_assert_eq(dra_device_name("ttyS1", &d1), 0);
        cr_assert_eq(asprintf(&k0, "node1/example.com/serial/%s", d0) > 0, true);
        cr_assert_eq(asprintf(&k1, "node1/example.com/serial/%s", d1) > 0, true);
        cr_assert_eq(tk_dra_health_open(kd, DRIVER, "v1", &h), 0);
        cr_assert_eq(tk_dra_health_wait(h, 1, WAIT_MS, NULL), 0);
        cr_assert_eq(tk_dra_health_detail(h, k0, &timeout, &msg), 0);
        cr_assert_eq(timeout, 30);
        cr_assert_str_eq(msg, "");
        free(TAKE_PTR(msg));
        env_rm(&e, "dev/ttyS1");
        cr_assert_eq(tk_dra_health_wait(h, 2, WAIT_MS, NULL), 0);
        cr_assert_eq(tk_dra_health_detail(h, k1, &timeout, &msg), 0);
        cr_assert_not_null(strstr(msg, "device node /dev/ttyS1 is no longer found by the "
                                       "selectors of resource \"example.com/serial\""),
                           "%s", msg);
        cr_assert_eq(asprintf(&want, "%s=HEALTHY,%s=UNHEALTHY", k0, k1) > 0, true);
        cr_assert_eq(tk_dra_health_view(h, &view), 0);
        cr_assert_str_eq(view, want);
        tk_dra_health_close(h);
}

/* The kubelet takes a device not reported for 30 s for Unknown, whether
 * or not anything changed: the list comes again well before, on both
 * versions (v1alpha1's kubelets ignore the timeout a device carries). */
Test(dra, health_is_sent_again_before_the_kubelet_times_it_out) {
        static const char *const two[] = { "ttyS0", "ttyS1" };
        _cleanup_free_ char *want = NULL, *view = NULL;
        struct tk_dra_health *alpha, *v1;
        struct timespec t0, t1;

        start(CONFIG("dra"));
        want = expect(two, 2);
        cr_assert_eq(tk_dra_health_open(kd, DRIVER, "v1alpha1", &alpha), 0);
        cr_assert_eq(tk_dra_health_open(kd, DRIVER, "v1", &v1), 0);
        cr_assert_eq(tk_dra_health_wait(alpha, 1, WAIT_MS, NULL), 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        /* Four lists: past the 30 s the first one was good for. */
        for (unsigned n = 2; n <= 4; n++) {
                cr_assert_eq(tk_dra_health_wait(alpha, n, 15000, NULL), 0,
                             "list %u did not come within half the kubelet's timeout", n);
                cr_assert_eq(tk_dra_health_wait(v1, n, 15000, NULL), 0);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        /* Past the timeout of the first list: only the resends keep it. */
        cr_assert_geq(t1.tv_sec - t0.tv_sec, 29);
        cr_assert_eq(tk_dra_health_view(alpha, &view), 0);
        cr_assert_str_eq(view, want);
        free(TAKE_PTR(view));
        cr_assert_eq(tk_dra_health_view(v1, &view), 0);
        cr_assert_str_eq(view, want);
        tk_dra_health_close(alpha);
        tk_dra_health_close(v1);
}

Test(dra, reload_moves_a_resource_between_the_apis) {
        static const char *const two[] = { "ttyS0", "ttyS1" };
        _cleanup_free_ char *want2 = NULL;
        struct tk_dra_health *h;
        char *got = NULL;

        start(CONFIG("dra"));
        want2 = expect(two, 2);
        cr_assert_eq(tk_dra_health_open(kd, DRIVER, "v1", &h), 0);
        cr_assert_eq(tk_dra_health_wait(h, 1, WAIT_MS, &got), 0);
        cr_assert_str_eq(got, want2);
        free(got);
        /* To the device-plugin API: a socket and a Register, and the DRA
         * list empty. */
        env_write(&e, "config.json", CONFIG("device-plugin"));
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 1, WAIT_MS), 0, "%s",
                     env_read(e.log));
        cr_assert_eq(tk_dra_health_wait(h, 2, WAIT_MS, &got), 0);
        cr_assert_str_eq(got, "");
        free(got);
        /* And back: its socket goes, the DRA list has it again. */
        env_write(&e, "config.json", CONFIG("dra"));
        cr_assert_eq(tk_dra_health_wait(h, 3, WAIT_MS, &got), 0);
        cr_assert_str_eq(got, want2);
        free(got);
        cr_assert_eq(log_wait_count(e.log, "reload:", 2, WAIT_MS), 2);
        tk_dra_health_close(h);
}

/* Moved to DRA while a ListAndWatch stream holds its server stopping (a
 * peer that never reads), and back before that server is gone: once it is,
 * the resource gets its socket and registers again, without another
 * reload. */
Test(dra, back_to_the_device_plugin_while_its_server_stops) {
        _cleanup_free_ char *sock = NULL;

        start(CONFIG("device-plugin"));
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 1, WAIT_MS), 0, "%s",
                     env_read(e.log));
        cr_assert(asprintf(&sock, "%s/cdiplug-example.com-serial.sock", e.kubelet_dir) > 0);
        int fd = stuck_stream(sock, DP_METHOD_LIST_AND_WATCH);
        /* The test kubelet's stream and this one. */
        cr_assert_geq(log_wait_count(e.log, "\"example.com/serial\": ListAndWatch stream opened", 2,
                                     WAIT_MS),
                      0);
        env_write(&e, "config.json", CONFIG("dra"));
        cr_assert_geq(log_wait_count(e.log, "now served through dra", 1, WAIT_MS), 0);
        env_write(&e, "config.json", CONFIG("device-plugin"));
        cr_assert_geq(log_wait_count(e.log, "now served through device-plugin", 1, WAIT_MS), 0);
        /* The peer never reads: the reload's stop is bounded as SIGTERM's
         * is, and the resource is served again while it still holds on. */
        cr_assert_eq(log_wait(e.log, "a ListAndWatch peer took no status within 1000 ms", WAIT_MS),
                     0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 2, WAIT_MS), 0,
                     "no socket and no Register once the old server was gone: %s", env_read(e.log));
        close(fd);
}

Test(dra, no_node_name_is_a_usage_error) {
        _cleanup_free_ char *out = NULL;

        env_init(&e);
        cr_assert_eq(asprintf(&kroot, "%s/kubelet-root", e.root) > 0, true);
        env_write(&e, "config.json", CONFIG("dra"));
        unsetenv("NODE_NAME");
        cr_assert_eq(env_run(&e, &out, "serve", "--config", e.config, "--kubelet-root", kroot,
                             "--kubelet-dir", e.kubelet_dir, "--cdi-dir", e.cdi_dir, "--host-root",
                             e.host, NULL),
                     2, "%s", out);
        cr_assert(strstr(out, "--node-name"), "%s", out);
        cr_assert(strstr(out, "NODE_NAME"), "%s", out);
        cr_assert(strstr(out, "example.com/serial"), "%s", out);
}

/* /readyz: a DRA resource is ready once the kubelet accepted its driver
 * and its slices are published (test_dra_hostile: when they cannot be). */
Test(dra, readyz_follows_the_drivers_registration) {
        _cleanup_free_ char *body = NULL;
        int code = 0;

        port = http_free_port();
        start(CONFIG("dra"));
        cr_assert_eq(log_wait(e.log, "the kubelet registered driver", WAIT_MS), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/usb", 1, WAIT_MS), 0);
        for (int waited = 0; waited < WAIT_MS && code != 200; waited += 50) {
                free(body);
                body = NULL;
                code = http_get(port, "/readyz", &body);
                if (code != 200)
                        usleep(50000);
        }
        cr_assert_eq(code, 200, "%s", body);
        free(body);
        body = NULL;
        tk_dra_refuse(kd, "no");
        cr_assert_eq(tk_dra_restart(kd), 0);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0);
        cr_assert_eq(log_wait(e.log, "refused driver", WAIT_MS), 0);
        cr_assert_neq(http_get(port, "/readyz", &body), 200);
        cr_assert(strstr(body, "example.com/serial"), "%s", body);
}
