/* SPDX-License-Identifier: Apache-2.0 */
/* One config for many nodes, in the real, sandboxed daemon against the
 * test kubelet: a resource whose "nodes" this node does not match never
 * registers; one selected by label follows the node's labels on the (fake)
 * API server, appearing and going as they change; without credentials it
 * is not served and the log says why. And the Node Feature Discovery
 * feature file: its content, rewritten on hotplug and reload, removed on
 * SIGTERM. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "fakeapi.h"
#include "fakeapi_hooks.h"
#include "kubelet.h"
#include "logwait.h"

#define NODE "edge-1"
#define A "example.com/ra"
#define B "example.com/rb"
#define WAIT_MS 10000

static struct env e;
static struct tk *tk;
static struct fakeapi *api;
static char *kubeconfig;

static struct fakeapi_flips flips;

static void stop(void) {
        atomic_store(&flips.release, true);
        tk_stop(tk);
        tk = NULL;
        env_cleanup(&e);
        fakeapi_free(api);
        api = NULL;
        free(kubeconfig);
        kubeconfig = NULL;
}

TestSuite(nodes, .fini = stop, .timeout = 90);

/* example.com/rX matches /dev/rX*, with nodes (JSON, or NULL). */
static char *resource(const char *name, const char *nodes) {
        char *s;
        cr_assert(asprintf(&s,
                           "{ \"name\": \"%s\", \"match\": [ { \"path\": \"/dev/%s*\" } ]%s%s }",
                           name, name + strlen("example.com/"), nodes ? ", \"nodes\": " : "",
                           nodes ? nodes : "") > 0);
        return s;
}

static void write_config(const char *a_nodes) {
        char *a = resource(A, a_nodes), *b = resource(B, NULL), *cfg;
        cr_assert(asprintf(&cfg, "{ \"resources\": [ %s, %s ] }", a, b) > 0);
        env_write(&e, "config.json", cfg);
        free(a);
        free(b);
        free(cfg);
}

static void start_api(cJSON *labels) {
        api = fakeapi_new(true);
        fakeapi_add_node(api, NODE, "6d1b3a4e-0000-4000-8000-000000000002");
        fakeapi_set_node_labels(api, NODE, labels);
        fakeapi_set_token(api, "token-one");
        kubeconfig = fakeapi_write_kubeconfig(api, e.root, "token-one");
        cr_assert_not_null(kubeconfig);
}

static void devices(void) {
        env_touch(&e, "dev/ra0");
        env_touch(&e, "dev/rb0");
}

static bool exists(const char *dir, const char *name) {
        char *p;
        struct stat st;
        cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
        bool r = stat(p, &st) == 0;
        free(p);
        return r;
}

Test(nodes, a_resource_for_other_nodes_never_registers) {
        env_init(&e);
        devices();
        write_config("{ \"names\": [ \"core-*\", \"gpu-?\" ] }");
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        env_spawn(&e, "--node-name", NODE, NULL);
        cr_assert_eq(tk_wait_registered(tk, B, 1, WAIT_MS), 0,
                     "the resource for every node never registered");
        cr_assert_eq(log_wait(e.log,
                              "node \"" NODE "\" does not serve resource \"" A
                              "\" (resources[0]): node \"" NODE
                              "\" matches none of nodes.names (\"core-*\", \"gpu-?\")",
                              WAIT_MS),
                     0, "no reason in the log");
        cr_assert_eq(tk_registrations(tk, A), 0, A " registered on a node it does not select");
        cr_assert(!exists(e.kubelet_dir, "cdiplug-example.com-ra.sock"));
        cr_assert(!exists(e.cdi_dir, "example.com-ra.json"), "a spec for a resource not served");

        /* A reload that names this node: added like any other resource. */
        write_config("{ \"names\": [ \"edge-*\" ] }");
        cr_assert_eq(tk_wait_registered(tk, A, 1, WAIT_MS), 0, "never added by the reload");
        cr_assert_eq(log_wait(e.log, "reload: 1 added, 0 changed, 0 removed, 1 unchanged", WAIT_MS),
                     0);
}

static cJSON *labels(const char *zone) {
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "kubernetes.io/hostname", NODE);
        if (zone)
                cJSON_AddStringToObject(l, "example.com/zone", zone);
        return l;
}

Test(nodes, a_resource_selected_by_label_follows_the_node_labels) {
        env_init(&e);
        devices();
        start_api(labels("b"));
        write_config("{ \"labels\": { \"example.com/zone\": \"a\" } }");
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        env_spawn(&e, "--node-name", NODE, "--kubeconfig", kubeconfig, NULL);
        cr_assert_eq(tk_wait_registered(tk, B, 1, WAIT_MS), 0);
        cr_assert_eq(log_wait(e.log,
                              "does not serve resource \"" A
                              "\" (resources[0]): the node's label \"example.com/zone\" is "
                              "\"b\", not \"a\"",
                              WAIT_MS),
                     0, "the labels were never read");
        cr_assert_eq(tk_registrations(tk, A), 0);

        /* The label changes: the resource comes, as on a config edit. */
        fakeapi_set_node_labels(api, NODE, labels("a"));
        cr_assert_eq(tk_wait_registered(tk, A, 1, WAIT_MS), 0, "the label change never served it");
        cr_assert(exists(e.kubelet_dir, "cdiplug-example.com-ra.sock"));
        cr_assert_eq(log_count(e.log, "(the node's labels were read)"), 1);
        cr_assert_eq(log_count(e.log, "(the node's labels changed)"), 1);

        /* And goes when the label does. */
        fakeapi_set_node_labels(api, NODE, labels(NULL));
        cr_assert_eq(log_wait(e.log, "resource \"" A "\": removed from the config", WAIT_MS), 0,
                     "the label's removal never removed it");
        cr_assert_eq(log_wait(e.log, "the node has no label \"example.com/zone\"", WAIT_MS), 0);
        cr_assert(!exists(e.kubelet_dir, "cdiplug-example.com-ra.sock"));
        cr_assert_eq(tk_registrations(tk, B), 1, "the other resource registered again");
        cr_assert_geq(fakeapi_count(api, "WATCH"), 1);
        int status = env_stop(&e, SIGTERM, WAIT_MS);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "no clean stop: %d", status);
}

/* Labels that flip every 5 ms: the changes are coalesced into about one
 * reload a second, each with its handful of log lines, and the last
 * change (the only one that serves A) is applied. */
#define FLIPS 400

Test(nodes, a_storm_of_label_flips_is_coalesced_and_the_last_wins) {
        env_init(&e);
        devices();
        start_api(labels("a"));
        flips = (struct fakeapi_flips){ .node = NODE, .n = FLIPS, .interval_us = 5000 };
        fakeapi_set_hook(api, fakeapi_flips_hook, &flips);
        write_config("{ \"labels\": { \"example.com/zone\": \"a\" } }");
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        env_spawn(&e, "--node-name", NODE, "--kubeconfig", kubeconfig, NULL);
        cr_assert_eq(tk_wait_registered(tk, A, 1, 30000), 0, "the last change was never applied");
        cr_assert_eq(atomic_load(&flips.sent), FLIPS);
        unsigned reloads = log_count(e.log, "(the node's labels");
        unsigned lines = log_count(e.log, "");
        /* 2 s of flips: a few reloads; one per flip without coalescing. */
        cr_assert_leq(reloads, FLIPS / 20, "%u reloads for %d flips", reloads, FLIPS);
        cr_assert_leq(lines, 300, "%u log lines for %d flips", lines, FLIPS);
        atomic_store(&flips.release, true);
        int status = env_stop(&e, SIGTERM, WAIT_MS);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "no clean stop: %d", status);
}

Test(nodes, without_credentials_a_label_selector_is_not_served_and_says_so) {
        env_init(&e);
        devices();
        /* No in-cluster credentials either. */
        unsetenv("KUBERNETES_SERVICE_HOST");
        write_config("{ \"labels\": { \"example.com/zone\": \"a\" } }");
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        env_spawn(&e, "--node-name", NODE, NULL);
        cr_assert_eq(tk_wait_registered(tk, B, 1, WAIT_MS), 0);
        cr_assert_eq(log_wait(e.log,
                              "resource \"" A "\" (resources[0]) is not served: nodes.labels needs "
                              "the node's labels, which are not known: there are no API server "
                              "credentials to read them with",
                              WAIT_MS),
                     0, "no warning naming the resource and the missing credentials");
        cr_assert_eq(tk_registrations(tk, A), 0);
}

static char *nfd_file(void) {
        char *p;
        cr_assert(asprintf(&p, "%s/features.d/cdiplug", e.root) > 0);
        return p;
}

/* The features dir, made (mode 0755). */
static char *nfd_dir(void) {
        char *dir;
        cr_assert(asprintf(&dir, "%s/features.d", e.root) > 0);
        cr_assert_eq(mkdir(dir, 0755), 0);
        return dir;
}

Test(nodes, the_nfd_feature_file_follows_hotplug_and_reload_and_goes_on_sigterm) {
        env_init(&e);
        devices();
        char *dir = nfd_dir(), *file = nfd_file();
        /* rb is for other nodes: not in the file. */
        write_config(NULL);
        char *a = resource(A, NULL), *b = resource(B, "{ \"names\": [ \"core-*\" ] }"), *c, *cfg;
        c = resource("example.com/rc", NULL);
        cr_assert(asprintf(&cfg, "{ \"resources\": [ %s, %s, %s ] }", a, b, c) > 0);
        env_write(&e, "config.json", cfg);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        env_spawn(&e, "--node-name", NODE, "--nfd-features-dir", dir, NULL);
        cr_assert_eq(tk_wait_registered(tk, A, 1, WAIT_MS), 0);
        cr_assert_eq(log_wait(file, "example.com/rc.count=0", WAIT_MS), 0, "no feature file");
        char *text = env_read(file);
        cr_assert_not_null(text);
        cr_assert_not_null(strstr(text, "\nexample.com/ra.present=true\nexample.com/ra.count=1\n"
                                        "example.com/rc.present=false\nexample.com/rc.count=0\n"),
                           "%s", text);
        cr_assert_null(strstr(text, "example.com/rb"), "a resource this node does not serve");
        free(text);
        cr_assert_eq(env_dir_entries(dir), 1, "a temp file was left");

        /* Hotplug: a second ra, the first rc. */
        env_touch(&e, "dev/ra1");
        env_touch(&e, "dev/rc0");
        cr_assert_eq(log_wait(file, "example.com/ra.count=2", WAIT_MS), 0, "hotplug not written");
        cr_assert_eq(log_wait(file, "example.com/rc.present=true", WAIT_MS), 0);
        env_rm(&e, "dev/ra0");
        env_rm(&e, "dev/ra1");
        cr_assert_eq(log_wait(file, "example.com/ra.present=false", WAIT_MS), 0,
                     "unplug not written");

        /* Reload: rc goes. */
        cr_assert(asprintf(&cfg, "{ \"resources\": [ %s ] }", a) > 0);
        env_write(&e, "config.json", cfg);
        cr_assert_eq(log_wait(e.log, "reload: 0 added, 0 changed, 1 removed", WAIT_MS), 0);
        text = env_read(file);
        cr_assert_null(strstr(text, "example.com/rc"), "%s", text);
        free(text);

        int status = env_stop(&e, SIGTERM, WAIT_MS);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "no clean stop: %d", status);
        cr_assert_eq(env_dir_entries(dir), 0, "the feature file outlived a clean stop");
        free(a);
        free(b);
        free(c);
        free(cfg);
        free(dir);
        free(file);
}

/* A write that fails (the dir made read-only, as a full disk would fail
 * it) is tried again with back-off, without another change to prompt it,
 * and lands once the dir takes it. */
Test(nodes, a_failed_nfd_write_is_retried_until_it_lands) {
        env_init(&e);
        devices();
        char *dir = nfd_dir(), *file = nfd_file();
        write_config(NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        env_spawn(&e, "--node-name", NODE, "--nfd-features-dir", dir, NULL);
        cr_assert_eq(log_wait(file, "example.com/ra.count=1", WAIT_MS), 0, "no feature file");
        /* The daemon has no capabilities: the mode holds for it. */
        cr_assert_eq(chmod(dir, 0555), 0);
        env_touch(&e, "dev/ra1");
        cr_assert_eq(log_wait(e.log, "nfd: cannot write", WAIT_MS), 0, "the write never failed");
        cr_assert_eq(chmod(dir, 0755), 0);
        cr_assert_eq(log_wait(file, "example.com/ra.count=2", WAIT_MS), 0, "never retried");
        cr_assert_eq(log_wait(e.log, "failed attempts", WAIT_MS), 0);
        cr_assert_eq(env_dir_entries(dir), 1, "a temp file was left");
        free(dir);
        free(file);
}

Test(nodes, check_says_which_resources_a_node_serves_and_why_not_the_others) {
        env_init(&e);
        char *a = resource(A, "{ \"names\": [ \"edge-*\" ], \"labels\": { \"gpu\": \"yes\" } }");
        char *b = resource(B, "{ \"names\": [ \"core-*\" ] }"), *cfg, *out = NULL;
        cr_assert(asprintf(&cfg, "{ \"resources\": [ %s, %s ] }", a, b) > 0);
        env_write(&e, "config.json", cfg);
        int r = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host,
                        "--kubelet-dir", e.kubelet_dir, "--node-name", NODE, "--node-labels",
                        "gpu=yes,zone=a", NULL);
        cr_assert_eq(r, 0, "%s", out);
        cr_assert_not_null(strstr(out,
                                  "node \"" NODE "\": serves \"" A "\" (resources[0]): node \"" NODE
                                  "\" matches nodes.names and nodes.labels\n"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "node \"" NODE "\": does not serve \"" B
                                       "\" (resources[1]): node \"" NODE
                                       "\" matches none of nodes.names (\"core-*\")\n"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "valid, 1 resources on node \"" NODE "\""), "%s", out);
        free(out);
        out = NULL;

        /* Without the labels check cannot tell, and says so. */
        r = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, "--kubelet-dir",
                    e.kubelet_dir, "--node-name", NODE, NULL);
        cr_assert_eq(r, 0, "%s", out);
        cr_assert_not_null(strstr(out, "cannot tell whether it serves \"" A "\""), "%s", out);
        cr_assert_not_null(strstr(out, "(give them with --node-labels)"), "%s", out);
        free(out);
        out = NULL;

        /* generate writes what the node serves, only. */
        devices();
        r = env_run(&e, &out, "generate", "--config", e.config, "--host-root", e.host, "--stdout",
                    "--node-name", "core-1", NULL);
        cr_assert_eq(r, 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"kind\":\t\"" B "\""), "%s", out);
        cr_assert_null(strstr(out, "\"kind\":\t\"" A "\""), "%s", out);
        free(out);
        out = NULL;

        /* A bad label: named, exit 2. */
        r = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, "--kubelet-dir",
                    e.kubelet_dir, "--node-labels", "gpu=-yes", NULL);
        cr_assert_eq(r, 2, "%s", out);
        cr_assert_not_null(strstr(out, "--node-labels"), "%s", out);
        free(out);
        out = NULL;

        /* doctor, the same verdicts as findings. */
        r = env_run(&e, &out, "doctor", "--config", e.config, "--host-root", e.host,
                    "--kubelet-dir", e.kubelet_dir, "--cdi-dir", e.cdi_dir, "--node-name", NODE,
                    "--node-labels", "gpu=no", NULL);
        cr_assert_not_null(strstr(out, "node \"" NODE "\" does not serve \"" A
                                       "\" (resources[0]): the node's label \"gpu\" is \"no\", "
                                       "not \"yes\""),
                           "%s", out);
        cr_assert_not_null(strstr(out, "node \"" NODE "\" does not serve \"" B "\""), "%s", out);
        free(out);
        free(a);
        free(b);
        free(cfg);
}

/* python3 CHECKER path: its exit status, its output in *out. */
static int check_offline(const char *path, char **out) {
        char *log, *argv[] = { "python3", CDIPLUG_SRC_DIR "/deploy/check_dra_manifests.py",
                               (char *)path, NULL };
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int status;

        cr_assert(asprintf(&log, "%s/checker.out", e.root) > 0);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        cr_assert_eq(posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        *out = env_read(log);
        free(log);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The "---"-separated JSON documents, each printed compact, joined. */
static char *compact(const char *stream) {
        char *copy = strdup(stream), *p, *all = strdup("");
        cr_assert_not_null(copy);
        cr_assert_eq(strncmp(copy, "---\n", 4), 0, "%s", stream);
        for (p = copy + 4; *p;) {
                char *next = strstr(p, "\n---\n"), *one, *more;
                if (next)
                        *next = '\0';
                cJSON *doc = cJSON_Parse(p);
                cr_assert_not_null(doc, "not JSON: %.200s", p);
                one = cJSON_PrintUnformatted(doc);
                cr_assert(asprintf(&more, "%s%s\n", all, one) > 0);
                free(all);
                free(one);
                cJSON_Delete(doc);
                all = more;
                p = next ? next + 5 : p + strlen(p);
        }
        free(copy);
        return all;
}

Test(nodes, manifests_grant_the_node_watch_and_mount_nfd_features_when_asked) {
        env_init(&e);
        env_write(&e, "config.json",
                  "{ \"dra\": { \"driver\": \"cdiplug.example.com\" }, \"resources\": [ "
                  "{ \"name\": \"example.com/serial\", \"api\": \"dra\", \"match\": [ { \"path\": "
                  "\"/dev/ttyS*\" } ], \"nodes\": { \"labels\": { \"example.com/serial\": "
                  "\"yes\" } } } ] }");
        char *out = NULL, *path, *checked = NULL;
        int r = env_run(&e, &out, "manifests", "--config", e.config, "--nfd", NULL);
        cr_assert_eq(r, 0, "%s", out);
        env_write(&e, "manifests.yaml", out);
        char *docs = compact(out);
        free(out);
        out = docs;
        /* The role's nodes rule, the mount, the option. */
        cr_assert_not_null(strstr(out, "\"resources\":[\"nodes\"],\"verbs\":[\"get\",\"list\","
                                       "\"watch\"]"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "{\"name\":\"nfd-features\",\"hostPath\":{\"path\":"
                                       "\"/etc/kubernetes/node-feature-discovery/features.d\","
                                       "\"type\":\"DirectoryOrCreate\"}}"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "{\"name\":\"nfd-features\",\"mountPath\":"
                                       "\"/etc/kubernetes/node-feature-discovery/features.d\"}"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "\"--nfd-features-dir=/etc/kubernetes/"
                                       "node-feature-discovery/features.d\""),
                           "%s", out);
        cr_assert(asprintf(&path, "%s/manifests.yaml", e.root) > 0);
        cr_assert_eq(check_offline(path, &checked), 0, "%s", checked);
        cr_assert_not_null(strstr(checked, ", 0 failed"), "%s", checked);
        free(out);
        free(checked);
        out = NULL;

        /* One name per group of nodes is one resource to the cluster: one
         * DeviceClass, and the manifests pass the checker. */
        env_write(&e, "config.json",
                  "{ \"dra\": { \"driver\": \"cdiplug.example.com\" }, \"resources\": [ "
                  "{ \"name\": \"example.com/serial\", \"api\": \"dra\", \"match\": [ { \"path\": "
                  "\"/dev/ttyUSB*\" } ], \"nodes\": { \"names\": [ \"edge-*\" ] } }, "
                  "{ \"name\": \"example.com/serial\", \"api\": \"dra\", \"match\": [ { \"path\": "
                  "\"/dev/ttyACM*\" } ], \"nodes\": { \"names\": [ \"core-*\" ] } } ] }");
        r = env_run(&e, &out, "manifests", "--config", e.config, NULL);
        cr_assert_eq(r, 0, "%s", out);
        env_write(&e, "manifests.yaml", out);
        docs = compact(out);
        free(out);
        out = docs;
        const char *first = strstr(out, "\"kind\":\"DeviceClass\"");
        cr_assert_not_null(first, "%s", out);
        cr_assert_null(strstr(first + 1, "\"kind\":\"DeviceClass\""), "two DeviceClasses: %s", out);
        cr_assert_eq(check_offline(path, &checked), 0, "%s", checked);
        free(checked);
        free(out);
        out = NULL;

        /* Without label selectors or --nfd: neither. */
        env_write(&e, "config.json",
                  "{ \"dra\": { \"driver\": \"cdiplug.example.com\" }, \"resources\": [ "
                  "{ \"name\": \"example.com/serial\", \"api\": \"dra\", \"match\": [ { \"path\": "
                  "\"/dev/ttyS*\" } ] } ] }");
        r = env_run(&e, &out, "manifests", "--config", e.config, NULL);
        cr_assert_eq(r, 0, "%s", out);
        docs = compact(out);
        free(out);
        out = docs;
        cr_assert_not_null(strstr(out, "\"resources\":[\"nodes\"],\"verbs\":[\"get\"]"), "%s", out);
        cr_assert_null(strstr(out, "nfd"), "%s", out);
        free(out);
        free(path);
}

/* Devices in pool's slices. */
static bool pool_devices(const cJSON *slices, void *ctx) {
        const size_t *want = ctx;
        size_t n = 0;
        const cJSON *s;

        cJSON_ArrayForEach(s, slices) {
                const cJSON *spec = cJSON_GetObjectItem(s, "spec");
                const cJSON *pool = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "pool"), "name");
                if (cJSON_IsString(pool) && strcmp(pool->valuestring, NODE "/" A) == 0)
                        n += (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(spec, "devices"));
        }
        return n == *want;
}

/* With DRA the one API client does both: the pool of a resource selected
 * by label is published once the node carries the label, and goes with it. */
Test(nodes, a_dra_resource_selected_by_label_publishes_its_pool_with_the_label) {
        struct tk_dra *kd = NULL;
        char *kroot, *cfg;
        size_t want = 1;

        env_init(&e);
        devices();
        start_api(labels("b"));
        cr_assert(asprintf(&kroot, "%s/kubelet-root", e.root) > 0);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        cr_assert(asprintf(&cfg,
                           "{ \"dra\": { \"driver\": \"cdiplug.example.com\" }, \"resources\": [ "
                           "{ \"name\": \"" A "\", \"api\": \"dra\", \"match\": [ { \"path\": "
                           "\"/dev/ra*\" } ], \"nodes\": { \"labels\": { \"example.com/zone\": "
                           "\"a\" } } } ] }") > 0);
        env_write(&e, "config.json", cfg);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, "cdiplug.example.com", 1, WAIT_MS), 0);
        cr_assert_eq(log_wait(e.log, "(the node's labels were read)", WAIT_MS), 0);
        want = 0;
        cr_assert(fakeapi_wait(api, pool_devices, &want, WAIT_MS), "a pool for another zone");

        fakeapi_set_node_labels(api, NODE, labels("a"));
        want = 1;
        cr_assert(fakeapi_wait(api, pool_devices, &want, WAIT_MS), "the pool never came");
        fakeapi_set_node_labels(api, NODE, labels("b"));
        want = 0;
        cr_assert(fakeapi_wait(api, pool_devices, &want, WAIT_MS), "the pool stayed");
        cr_assert_eq(log_count(e.log, "nodes: following the labels"), 1);
        env_stop(&e, SIGTERM, WAIT_MS);
        tk_dra_stop(kd);
        free(kroot);
        free(cfg);
}

Test(nodes, doctor_checks_the_nfd_features_dir) {
        char *cfg, *out = NULL;

        env_init(&e);
        cr_assert(asprintf(&cfg,
                           "{ \"nfd\": { \"features_dir\": \"%s/features.d\" }, "
                           "\"resources\": [] }",
                           e.root) > 0);
        env_write(&e, "config.json", cfg);
        env_run(&e, &out, "doctor", "--config", e.config, "--host-root", e.host, "--kubelet-dir",
                e.kubelet_dir, "--cdi-dir", e.cdi_dir, NULL);
        cr_assert_not_null(strstr(out, "/features.d: No such file or directory"), "%s", out);
        free(out);
        out = NULL;
        env_write(&e, "features.d/.keep", "");
        env_run(&e, &out, "doctor", "--config", e.config, "--host-root", e.host, "--kubelet-dir",
                e.kubelet_dir, "--cdi-dir", e.cdi_dir, NULL);
        cr_assert_not_null(
                strstr(out, "/features.d: serve keeps its feature file \"cdiplug\" there"), "%s",
                out);
        free(out);
        free(cfg);
}
