/* SPDX-License-Identifier: Apache-2.0 */
/* CDI spec housekeeping at start-up: own specs of resources no longer
 * configured removed once the kubelet's PodResources shows no pod holding
 * one of their devices, kept while one does or while it cannot be asked;
 * foreign specs never touched; clashes reported. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "kubelet.h"
#include "logwait.h"

static struct env e;
static struct tk_pr *pr;

static void stop(void) {
        env_cleanup(&e);
        tk_pr_stop(pr);
        pr = NULL;
}

TestSuite(specs, .fini = stop, .timeout = 60);

#define SERIAL_AND_FUSE                                                                                           \
        "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] }," \
        " { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }"
#define FUSE_ONLY                                                                                  \
        "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }"

/* Serve config until resource registered; wait_for (may be NULL) is a
 * log line to see before stopping. */
static void run_once(const char *config, const char *resource, const char *wait_for) {
        struct tk *tk;
        env_write(&e, "config.json", config);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, resource, 1, 10000), 0);
        if (wait_for)
                cr_assert_eq(log_wait(e.log, wait_for, 20000), 0, "no \"%s\" in the log", wait_for);
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

static bool claimed(const char *name) {
        char path[512];
        snprintf(path, sizeof(path), "%s/.cdiplug-owned", e.cdi_dir);
        char *record = env_read(path);
        bool yes = record && strstr(record, name);
        free(record);
        return yes;
}

/* A first run writes both specs; then serial is no longer configured. */
static void serve_both_once(void) {
        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/fuse");
        run_once(SERIAL_AND_FUSE, "example.com/fuse", NULL);
        cr_assert(exists("example.com-serial.json"));
        cr_assert(exists("example.com-fuse.json"));
}

/* The kubelet's PodResources, up long enough to list every pod. */
static void podresources(void) {
        cr_assert_eq(tk_pr_start(e.podres, &pr), 0);
        cr_assert_eq(tk_pr_age(pr, 3600), 0);
}

Test(specs, removes_only_its_own_specs_no_pod_holds) {
        env_init(&e);
        serve_both_once();
        /* Another tool's spec, for a kind we no longer serve. */
        env_write(
                &e, "cdi/vendor.com-tool.json",
                "{\"cdiVersion\":\"0.3.0\",\"kind\":\"vendor.com/tool\",\"devices\":[{\"name\":\"x\","
                "\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/x\"}]}}]}");
        podresources();
        /* A pod holding another resource's device changes nothing. */
        tk_pr_hold(pr, "default", "web", "example.com/fuse", "fuse");

        run_once(FUSE_ONLY, "example.com/fuse", "removed CDI spec");
        cr_assert_not(exists("example.com-serial.json"), "stale own spec must go");
        cr_assert_not(claimed("example.com-serial.json"),
                      "the record still claims the removed spec");
        cr_assert(exists("example.com-fuse.json"));
        cr_assert(exists("vendor.com-tool.json"), "a spec cdiplug did not write is never removed");
        cr_assert_eq(
                log_count(
                        e.log,
                        "example.com-serial.json (of a resource no longer configured): no pod holds one of "
                        "its devices"),
                1);
}

Test(specs, keeps_a_stale_spec_while_a_pod_holds_one_of_its_devices) {
        env_init(&e);
        serve_both_once();
        podresources();
        tk_pr_hold(pr, "shop", "web-0", "example.com/serial", "ttyUSB0");

        env_write(&e, "config.json", FUSE_ONLY);
        env_spawn(&e, NULL);
        cr_assert_eq(log_wait(e.log, "kept: pod shop/web-0 holds its device \"ttyUSB0\"", 20000),
                     0);
        cr_assert(exists("example.com-serial.json"), "a spec a pod may still need was removed");
        cr_assert(claimed("example.com-serial.json"));
        /* The pod goes: the next check, on the timer, removes the spec. */
        tk_pr_hold(pr, NULL, NULL, NULL, NULL);
        cr_assert_eq(log_wait(e.log, "removed CDI spec", 20000), 0,
                     "the spec was not removed once no pod held it");
        cr_assert_not(exists("example.com-serial.json"));
        cr_assert_not(claimed("example.com-serial.json"));
        cr_assert(exists("example.com-fuse.json"));
        cr_assert_eq(log_count(e.log, "kept: pod"), 1, "the kept spec was logged on every check");
}

static char *doctor(void) {
        char *out = NULL;
        env_run(&e, &out, "doctor", "--config", e.config, "--host-root", e.host, "--kubelet-dir",
                e.kubelet_dir, "--cdi-dir", e.cdi_dir, NULL);
        return out;
}

Test(specs, keeps_a_stale_spec_when_podresources_cannot_be_asked) {
        env_init(&e);
        serve_both_once();
        /* No PodResources socket at all. */
        env_write(&e, "config.json", FUSE_ONLY);
        env_spawn(&e, NULL);
        cr_assert_eq(log_wait(e.log, "cannot ask the kubelet's PodResources", 20000), 0);
        cr_assert(exists("example.com-serial.json"));
        cr_assert(claimed("example.com-serial.json"));
        char *want;
        cr_assert(asprintf(&want, "rm %s/example.com-serial.json", e.cdi_dir) > 0);
        cr_assert_eq(log_count(e.log, want), 1, "the log does not say how to remove it by hand");
        /* doctor lists it, with the command. */
        char *out = doctor();
        cr_assert_not_null(
                strstr(out,
                       "example.com-serial.json was written by cdiplug, but no configured resource "
                       "owns it"),
                "%s", out);
        cr_assert_not_null(strstr(out, want), "%s", out);
        free(out);

        /* Removed by hand as the log says: the daemon drops its claim at its next look. */
        cr_assert_eq(unlink(want + strlen("rm ")), 0);
        free(want);
        kill(e.pid, SIGHUP);
        cr_assert_eq(
                log_wait(e.log,
                         "example.com-serial.json (of a resource no longer configured) is gone",
                         20000),
                0);
        cr_assert_not(claimed("example.com-serial.json"));
        out = doctor();
        cr_assert_null(strstr(out, "example.com-serial.json was written by cdiplug"), "%s", out);
        free(out);
        cr_assert(exists("example.com-fuse.json"));
}

Test(specs, does_not_trust_a_kubelet_that_just_started) {
        env_init(&e);
        serve_both_once();
        /* Just started: its empty list may only mean it has not synced its pods yet. */
        cr_assert_eq(tk_pr_start(e.podres, &pr), 0);
        env_write(&e, "config.json", FUSE_ONLY);
        env_spawn(&e, NULL);
        cr_assert_eq(log_wait(e.log, "may not list every pod yet", 20000), 0);
        cr_assert(exists("example.com-serial.json"));
        cr_assert_eq(tk_pr_calls(pr), 0);
        /* Settled, and asked again by a reload. */
        cr_assert_eq(tk_pr_age(pr, 3600), 0);
        kill(e.pid, SIGHUP);
        cr_assert_eq(log_wait(e.log, "removed CDI spec", 20000), 0);
        cr_assert_not(exists("example.com-serial.json"));
}

Test(specs, warns_about_specs_that_clash_with_its_own) {
        env_init(&e);
        env_touch(&e, "dev/ttyUSB0");
        env_write(
                &e, "cdi/other.json",
                "{\"cdiVersion\":\"0.3.0\",\"kind\":\"example.com/serial\",\"devices\":[{\"name\":\"ttyUSB0\","
                "\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/ttyUSB9\"}]}}]}");
        run_once(
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }",
                "example.com/serial", NULL);
        char *log = env_read(e.log);
        cr_assert_not_null(
                strstr(log, "other.json also defines device \"example.com/serial=ttyUSB0\""), "%s",
                log);
        free(log);
        cr_assert(exists("other.json"), "and leaves it alone");
}
