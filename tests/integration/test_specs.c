/* SPDX-License-Identifier: Apache-2.0 */
/* CDI spec housekeeping at start-up: own stale specs removed, foreign
 * specs never touched, clashes reported. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "env.h"
#include "kubelet.h"

static struct env e;

static void stop(void) { env_cleanup(&e); }

TestSuite(specs, .fini = stop, .timeout = 60);

static void run_once(const char *config, const char *resource) {
        struct tk *tk;
        env_write(&e, "config.json", config);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, resource, 1, 10000), 0);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        tk_stop(tk);
}

static bool exists(const char *name) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", e.cdi_dir, name);
        return stat(path, &st) == 0;
}

Test(specs, removes_only_its_own_specs_of_removed_resources) {
        env_init(&e);
        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/fuse");
        run_once("{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
                 " { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }",
                 "example.com/fuse");
        cr_assert(exists("example.com-serial.json"));
        cr_assert(exists("example.com-fuse.json"));
        /* Another tool's spec, for a kind we no longer serve. */
        env_write(&e, "cdi/vendor.com-tool.json",
                  "{\"cdiVersion\":\"0.3.0\",\"kind\":\"vendor.com/tool\",\"devices\":[{\"name\":\"x\","
                  "\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/x\"}]}}]}");

        run_once("{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }",
                 "example.com/fuse");
        cr_assert_not(exists("example.com-serial.json"), "stale own spec must go");
        cr_assert(exists("example.com-fuse.json"));
        cr_assert(exists("vendor.com-tool.json"), "a spec cdiplug did not write is never removed");
        char *log = env_read(e.log);
        cr_assert_not_null(strstr(log, "example.com-serial.json"), "removal is logged");
        free(log);
}

Test(specs, warns_about_specs_that_clash_with_its_own) {
        env_init(&e);
        env_touch(&e, "dev/ttyUSB0");
        env_write(&e, "cdi/other.json",
                  "{\"cdiVersion\":\"0.3.0\",\"kind\":\"example.com/serial\",\"devices\":[{\"name\":\"ttyUSB0\","
                  "\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/ttyUSB9\"}]}}]}");
        run_once("{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }",
                 "example.com/serial");
        char *log = env_read(e.log);
        cr_assert_not_null(strstr(log, "other.json also defines device \"example.com/serial=ttyUSB0\""), "%s", log);
        free(log);
        cr_assert(exists("other.json"), "and leaves it alone");
}
