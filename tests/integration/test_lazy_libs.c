/* SPDX-License-Identifier: Apache-2.0 */
/* A daemon that serves device plugins only does not map libcurl (nor the
 * ~30 libraries Debian's libcurl4 pulls): it is loaded when the DRA API
 * client is made (daemon/kube/curl-dl.c), so device-plugin users do not
 * pay its RssAnon. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"
#include "kubelet.h"

static struct env e;

static void stop(void) {
        env_cleanup(&e);
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

        char maps[64];
        snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)e.pid);
        char *m = env_read(maps);
        cr_assert_not_null(m);
        cr_assert_null(strstr(m, "libcurl"), "a device-plugin-only daemon maps libcurl");
        /* Its sanity: the maps are the daemon's, with its libraries. */
        cr_assert_not_null(strstr(m, "libgrpc"), "%s", m);
        free(m);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        tk_stop(tk);
}
