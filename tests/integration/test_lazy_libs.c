/* SPDX-License-Identifier: Apache-2.0 */
/* A daemon that serves device plugins only does not map libcurl (nor the
 * ~30 libraries Debian's libcurl4 pulls): it is loaded when the DRA API
 * client is made (daemon/kube/curl-dl.c), so device-plugin users do not
 * pay its RssAnon. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "env.h"
#include "fakeapi.h"
#include "kubelet.h"

#define DRIVER "cdiplug.example.com"

static struct env e;
static struct fakeapi *api;
static struct tk_dra *kd;

static void stop(void) {
        tk_dra_stop(kd);
        env_cleanup(&e);
        fakeapi_free(api);
}

/* Whether the daemon maps a file whose path contains name. */
static bool daemon_maps(const char *name) {
        char maps[64];
        snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)e.pid);
        char *m = env_read(maps);
        cr_assert_not_null(m);
        /* Its sanity: the maps are the daemon's, with its libraries. */
        cr_assert_not_null(strstr(m, "libgrpc"), "%s", m);
        bool found = strstr(m, name) != NULL;
        free(m);
        return found;
}

TestSuite(lazy_libs, .fini = stop, .timeout = 60);

Test(lazy_libs, device_plugin_only_daemon_maps_no_libcurl) {
        env_init(&e);
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": "
                  "\"/dev/ttyUSB*\" } ] } ] }");
        env_touch(&e, "dev/ttyUSB0");
        struct tk *tk;
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        env_spawn(&e, NULL);
        /* Serving (registered) means start-up and the lock-down are over:
         * nothing is loaded later. */
        int r = tk_wait_registered(tk, "example.com/serial", 1, 10000);
        char *log = env_read(e.log);
        cr_assert_eq(r, 0, "%s", log);
        free(log);

        cr_assert_not(daemon_maps("libcurl"), "a device-plugin-only daemon maps libcurl");
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        tk_stop(tk);
}

/* The other half: with a "dra" section the API client loads it at start,
 * before the lock-down, and serves with it. */
Test(lazy_libs, dra_daemon_maps_libcurl) {
        char *kroot = NULL, *kubeconfig = NULL, *text = NULL;

        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_write(&e, "config.json",
                  "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": [ { \"name\": "
                  "\"example.com/serial\", \"api\": \"dra\", \"match\": [ { \"path\": "
                  "\"/dev/ttyS*\" } ] } ] }");
        api = fakeapi_new(true);
        fakeapi_add_node(api, "node1", "6d1b3a4e-0000-4000-8000-000000000001");
        cr_assert_gt(asprintf(&text,
                              "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                              "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                              "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                              "    certificate-authority: %s\n"
                              "users:\n- name: u\n  user: {}\n",
                              fakeapi_url(api), fakeapi_ca_file(api)),
                     0);
        env_write(&e, "kubeconfig", text);
        cr_assert_gt(asprintf(&kubeconfig, "%s/kubeconfig", e.root), 0);
        cr_assert_gt(asprintf(&kroot, "%s/kubelet-root", e.root), 0);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", "node1", "--kubeconfig", kubeconfig,
                  NULL);
        int r = tk_dra_wait_registered(kd, DRIVER, 1, 10000);
        char *log = env_read(e.log);
        cr_assert_eq(r, 0, "%s", log);
        free(log);
        cr_assert(daemon_maps("libcurl"), "a DRA daemon serves without libcurl mapped");
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        free(text);
        free(kubeconfig);
        free(kroot);
}
