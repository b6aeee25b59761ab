/* SPDX-License-Identifier: Apache-2.0 */
/* The configs the packages ship: the default serves nothing and says so,
 * the example is valid. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"

static struct env e;

static void start(void) {
        env_init(&e);
}
static void stop(void) {
        env_cleanup(&e);
}

/* The log once it holds text, woken by inotify, within timeout_ms. */
static char *wait_log(const char *text, int timeout_ms) {
        int fd = inotify_init1(IN_CLOEXEC);
        cr_assert(fd >= 0);
        cr_assert(inotify_add_watch(fd, e.log, IN_MODIFY) >= 0, "watch %s", e.log);
        char *log = NULL;
        for (;;) {
                free(log);
                log = env_read(e.log);
                if ((log && strstr(log, text)) || timeout_ms <= 0)
                        break;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char buf[4096];
                cr_assert(poll(&p, 1, timeout_ms) > 0, "no \"%s\" in the log: %s", text,
                          log ? log : "");
                (void)!read(fd, buf, sizeof(buf));
                timeout_ms -= 10;
        }
        close(fd);
        return log;
}

TestSuite(default_config, .init = start, .fini = stop, .timeout = 30);

Test(default_config, serves_nothing_and_says_so) {
        char *text = env_read(CDIPLUG_SRC_DIR "/packaging/config.json");
        cr_assert_not_null(text);
        env_write(&e, "config.json", text);
        free(text);
        env_touch(&e, "dev/ttyUSB0");
        mkdir(e.kubelet_dir, 0755);
        env_spawn(&e, NULL);
        /* Logged once signals are handled: SIGTERM then means a clean stop. */
        char *log = wait_log("before serving", 10000);
        cr_assert_not_null(strstr(log, "configures no resources: serving nothing"), "%s", log);
        free(log);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
        cr_assert(env_dir_entries(e.cdi_dir) <= 0, "no spec is written");
}

Test(default_config, example_is_valid) {
        char *out = NULL;
        int rc = env_run(&e, &out, "check", "--config",
                         CDIPLUG_SRC_DIR "/packaging/config.example.json", NULL);
        cr_assert_eq(rc, 0, "%s", out);
        cr_assert_not_null(strstr(out, "valid, 5 resources"), "%s", out);
        free(out);
        rc = env_run(&e, &out, "check", "--config", CDIPLUG_SRC_DIR "/packaging/config.json", NULL);
        cr_assert_eq(rc, 0, "%s", out);
        cr_assert_not_null(strstr(out, "valid, 0 resources"), "%s", out);
        free(out);
}
