/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug manifests: the objects it prints, read back document by
 * document, and validated offline by deploy/check_dra_manifests.py (the
 * API schema subset and deploy/base's lock-down). */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"

#define CHECKER CDIPLUG_SRC_DIR "/deploy/check_dra_manifests.py"

extern char **environ;

static struct env e;

static void start(void) {
        env_init(&e);
}
static void stop(void) {
        env_cleanup(&e);
}

TestSuite(manifests, .init = start, .fini = stop, .timeout = 60);

/* A config whose text YAML would misread if it were quoted by hand: a
 * quote, a ": ", a " #", a backslash and a tab in a selector. */
static const char config[] =
        "{ \"dra\": { \"driver\": \"cdiplug.example.com\" },\n"
        "  \"resources\": [\n"
        "    { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ],"
        " \"api\": \"dra\" },\n"
        "    { \"name\": \"example.com/Odd_Name\", \"match\": [ { \"path\": "
        "\"/dev/a: \\\"b\\\" #c\\\\d\\te\" } ], \"api\": \"dra\", \"shares\": 2 },\n"
        "    { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] }\n"
        "  ] }\n";

/* Run a program (NULL-ended argv), stdout into *ret_out and stderr into
 * *ret_err, apart; its exit status. */
static int run_split(char *const argv[], char **ret_out, char **ret_err) {
        char *out_path, *err_path;
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int status;

        cr_assert(asprintf(&out_path, "%s/stdout", e.root) > 0);
        cr_assert(asprintf(&err_path, "%s/stderr", e.root) > 0);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        cr_assert_eq(posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ), 0, "%s", argv[0]);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        *ret_out = env_read(out_path);
        *ret_err = env_read(err_path);
        cr_assert_not_null(*ret_out);
        cr_assert_not_null(*ret_err);
        free(out_path);
        free(err_path);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define MAX_DOCS 16

/* The documents of a "---"-separated stream, each parsed as JSON. */
static size_t split_docs(char *text, cJSON **docs) {
        size_t n = 0;
        cr_assert_eq(strncmp(text, "---\n", 4), 0, "the stream starts with ---: %.80s", text);
        char *p = text + 4;
        while (*p) {
                char *next = strstr(p, "\n---\n");
                if (next)
                        *next = '\0';
                cr_assert_lt(n, MAX_DOCS);
                docs[n] = cJSON_Parse(p);
                cr_assert_not_null(docs[n], "document %zu is not JSON: %.200s", n, p);
                n++;
                p = next ? next + 5 : p + strlen(p);
        }
        return n;
}

static const char *str_at(const cJSON *obj, const char *a, const char *b, const char *c) {
        const char *keys[] = { a, b, c };
        for (size_t i = 0; i < 3 && keys[i] && obj; i++)
                obj = cJSON_GetObjectItemCaseSensitive(obj, keys[i]);
        return cJSON_IsString(obj) ? obj->valuestring : NULL;
}

static const cJSON *find_doc(cJSON **docs, size_t n, const char *kind, const char *name) {
        for (size_t i = 0; i < n; i++) {
                const char *k = str_at(docs[i], "kind", NULL, NULL);
                const char *m = str_at(docs[i], "metadata", "name", NULL);
                if (k && strcmp(k, kind) == 0 && (!name || (m && strcmp(m, name) == 0)))
                        return docs[i];
        }
        return NULL;
}

/* The array element of arr whose "name" is name. */
static const cJSON *named(const cJSON *arr, const char *name) {
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
                const char *n = str_at(it, "name", NULL, NULL);
                if (n && strcmp(n, name) == 0)
                        return it;
        }
        return NULL;
}

static bool has_string(const cJSON *arr, const char *s) {
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
                if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0)
                        return true;
        }
        return false;
}

/* A rolling update starts the new pod before it stops the old one, and
 * each pod names its sockets after its UID. */
static void expect_surge_rollout(const cJSON *ds, const cJSON *ctr) {
        const cJSON *ru = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ds, "spec"),
                                                 "updateStrategy"),
                "rollingUpdate");
        const cJSON *uid = named(cJSON_GetObjectItemCaseSensitive(ctr, "env"), "POD_UID");

        cr_assert_eq(cJSON_GetObjectItemCaseSensitive(ru, "maxSurge")->valueint, 1);
        cr_assert_eq(cJSON_GetObjectItemCaseSensitive(ru, "maxUnavailable")->valueint, 0);
        cr_assert_str_eq(str_at(uid, "valueFrom", "fieldRef", "fieldPath"), "metadata.uid");
}

/* The admission policy that fences the service account's slice writes
 * to its own node and driver, bound with Deny. */
static void expect_node_fence(cJSON **docs, size_t n, const char *ns) {
        char name[128], user[160];
        snprintf(name, sizeof(name), "cdiplug-dra-node-%s", ns);
        snprintf(user, sizeof(user),
                 "request.userInfo.username == \"system:serviceaccount:%s:cdiplug\"", ns);
        const cJSON *vap = find_doc(docs, n, "ValidatingAdmissionPolicy", name);
        const cJSON *bind = find_doc(docs, n, "ValidatingAdmissionPolicyBinding", name);
        cr_assert_not_null(vap);
        cr_assert_not_null(bind);
        cr_assert_str_eq(str_at(vap, "apiVersion", NULL, NULL), "admissionregistration.k8s.io/v1");
        cr_assert_str_eq(str_at(bind, "spec", "policyName", NULL), name);
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(vap, "spec");
        cr_assert_str_eq(str_at(spec, "failurePolicy", NULL, NULL), "Fail");
        cr_assert_str_eq(
                str_at(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "matchConditions"),
                                          0),
                       "expression", NULL, NULL),
                user);
        const cJSON *vars = cJSON_GetObjectItemCaseSensitive(spec, "variables");
        cr_assert_not_null(strstr(str_at(named(vars, "nodeName"), "expression", NULL, NULL),
                                  "request.userInfo.extra[\"authentication.kubernetes.io/"
                                  "node-name\"][0]"));
        cr_assert_str_eq(str_at(named(vars, "slice"), "expression", NULL, NULL),
                         "request.operation == \"DELETE\" ? oldObject : object");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec, "validations");
        cr_assert_eq(cJSON_GetArraySize(v), 3);
        cr_assert_str_eq(str_at(cJSON_GetArrayItem(v, 2), "expression", NULL, NULL),
                         "variables.slice.spec.driver == \"cdiplug.example.com\"");
}

Test(manifests, prints_device_classes_rbac_and_a_daemonset) {
        char *out, *err;
        cJSON *docs[MAX_DOCS];
        env_write(&e, "config.json", config);
        char *argv[] = {
                (char *)CDIPLUG_BIN, "manifests",     "--config", e.config,
                "--namespace",       "devices",       "--image",  "registry.example/cdiplug:9",
                "--kubelet-root",    "/srv/kubelet/", NULL
        };
        int rc = run_split(argv, &out, &err);
        cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
        size_t n = split_docs(out, docs);

        /* One DeviceClass per DRA resource, none for the device-plugin one. */
        size_t classes = 0;
        for (size_t i = 0; i < n; i++)
                classes += strcmp(str_at(docs[i], "kind", NULL, NULL), "DeviceClass") == 0;
        cr_assert_eq(classes, 2);
        const cJSON *dc = find_doc(docs, n, "DeviceClass", "serial.example.com");
        cr_assert_not_null(dc, "%s", out);
        cr_assert_str_eq(str_at(dc, "apiVersion", NULL, NULL), "resource.k8s.io/v1");
        cr_assert_str_eq(str_at(dc, "spec", "extendedResourceName", NULL), "example.com/serial");
        const cJSON *sel = cJSON_GetArrayItem(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dc, "spec"),
                                                 "selectors"),
                0);
        cr_assert_str_eq(str_at(sel, "cel", "expression", NULL),
                         "device.driver == \"cdiplug.example.com\" && "
                         "device.attributes[\"cdiplug.example.com\"].resource == "
                         "\"example.com/serial\"");
        /* Lowercased, '_' made '-': a DNS subdomain. */
        dc = find_doc(docs, n, "DeviceClass", "odd-name.example.com");
        cr_assert_not_null(dc, "%s", out);
        cr_assert_str_eq(str_at(dc, "spec", "extendedResourceName", NULL), "example.com/Odd_Name");

        /* The config travels as written, escapes and all. */
        const cJSON *cm = find_doc(docs, n, "ConfigMap", "cdiplug-config");
        cr_assert_not_null(cm);
        cr_assert_str_eq(str_at(cm, "data", "config.json", NULL), config);
        cr_assert_str_eq(str_at(cm, "metadata", "namespace", NULL), "devices");

        /* RBAC for the driver's service account. */
        const cJSON *crb = find_doc(docs, n, "ClusterRoleBinding", NULL);
        cr_assert_not_null(crb);
        const cJSON *subj =
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(crb, "subjects"), 0);
        cr_assert_str_eq(str_at(subj, "namespace", NULL, NULL), "devices");
        cr_assert_not_null(find_doc(docs, n, "ClusterRole", str_at(crb, "roleRef", "name", NULL)));
        cr_assert_not_null(find_doc(docs, n, "ServiceAccount", "cdiplug"));

        /* The DaemonSet: the node's name from the downward API, the
         * plugin dirs at their host paths, the image asked for. */
        const cJSON *ds = find_doc(docs, n, "DaemonSet", "cdiplug");
        cr_assert_not_null(ds);
        const cJSON *pod = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ds, "spec"),
                                                 "template"),
                "spec");
        const cJSON *ctr =
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pod, "containers"), 0);
        cr_assert_str_eq(str_at(ctr, "image", NULL, NULL), "registry.example/cdiplug:9");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(ctr, "args");
        cr_assert(has_string(args, "--node-name=$(NODE_NAME)"));
        cr_assert(has_string(args, "--kubelet-root=/srv/kubelet"));
        const cJSON *node = named(cJSON_GetObjectItemCaseSensitive(ctr, "env"), "NODE_NAME");
        cr_assert_str_eq(str_at(node, "valueFrom", "fieldRef", "fieldPath"), "spec.nodeName");
        expect_surge_rollout(ds, ctr);
        expect_node_fence(docs, n, "devices");
        const cJSON *vols = cJSON_GetObjectItemCaseSensitive(pod, "volumes");
        const cJSON *mounts = cJSON_GetObjectItemCaseSensitive(ctr, "volumeMounts");
        /* The device plugin dir does not follow the kubelet's root: the
         * kubelet serves that API at /var/lib/kubelet/device-plugins
         * whatever its --root-dir. */
        static const char *const dirs[][2] = {
                { "plugins-registry", "/srv/kubelet/plugins_registry" },
                { "plugins", "/srv/kubelet/plugins" },
                { "pod-resources", "/srv/kubelet/pod-resources" },
                { "device-plugins", "/var/lib/kubelet/device-plugins" },
        };
        for (size_t i = 0; i < 4; i++) {
                cr_assert_str_eq(str_at(named(vols, dirs[i][0]), "hostPath", "path", NULL),
                                 dirs[i][1]);
                cr_assert_str_eq(str_at(named(mounts, dirs[i][0]), "mountPath", NULL, NULL),
                                 dirs[i][1]);
        }
        for (size_t i = 0; i < n; i++)
                cJSON_Delete(docs[i]);

        /* The offline validation, on the very output. */
        char *path;
        cr_assert(asprintf(&path, "%s/manifests.yaml", e.root) > 0);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        rc = run_split(argv, &out, &err);
        fputs(out, f);
        fclose(f);
        free(out);
        free(err);
        char *check[] = { "python3", CHECKER, path, NULL };
        rc = run_split(check, &out, &err);
        cr_assert_eq(rc, 0, "%s%s", out, err);
        cr_assert_not_null(strstr(out, ", 0 failed"), "%s", out);
        free(out);
        free(err);
        free(path);
}

/* The checker fails what it should: a privileged container, a field the
 * API does not have, a DeviceClass missing. */
Test(manifests, the_checker_refuses_what_the_api_or_the_lockdown_would) {
        static const char *const edits[][2] = {
                { "\"privileged\": false", "\"privileged\": true" },
                { "\"extendedResourceName\"", "\"extendedResourcename\"" },
                { "\"readOnlyRootFilesystem\": true", "\"readOnlyRootFilesystem\": \"true\"" },
                { "\"kind\": \"DeviceClass\"", "\"kind\": \"DeviceKlass\"" },
                { "\"fieldPath\": \"spec.nodeName\"", "\"fieldPath\": \"metadata.name\"" },
                { "\"maxUnavailable\": 0", "\"maxUnavailable\": 1" },
                { "\"fieldPath\": \"metadata.uid\"", "\"fieldPath\": \"metadata.name\"" },
                { "\"validationActions\": [\"Deny\"]", "\"validationActions\": [\"Warn\"]" },
                { "oldObject", "object" },
                { "\"kind\": \"ValidatingAdmissionPolicyBinding\"",
                  "\"kind\": \"ValidatingAdmissionPolicyBindin\"" },
        };
        char *out, *err, *path;
        env_write(&e, "config.json", config);
        char *argv[] = { (char *)CDIPLUG_BIN, "manifests", "--config", e.config, NULL };
        cr_assert_eq(run_split(argv, &out, &err), 0, "%s", err);
        cr_assert(asprintf(&path, "%s/edited.yaml", e.root) > 0);
        for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
                char *at = strstr(out, edits[i][0]);
                cr_assert_not_null(at, "%s", edits[i][0]);
                FILE *f = fopen(path, "w");
                cr_assert_not_null(f);
                fprintf(f, "%.*s%s%s", (int)(at - out), out, edits[i][1], at + strlen(edits[i][0]));
                fclose(f);
                char *cout, *cerr;
                char *check[] = { "python3", CHECKER, path, NULL };
                int rc = run_split(check, &cout, &cerr);
                cr_assert_eq(rc, 1, "%s → %s: exit %d: %s%s", edits[i][0], edits[i][1], rc, cout,
                             cerr);
                cr_assert_not_null(strstr(cout, "FAIL"), "%s", cout);
                free(cout);
                free(cerr);
        }
        free(path);
        free(out);
        free(err);
}

/* Mistakes: exit 2, a message on stderr, nothing on stdout. */
Test(manifests, refuses_a_bad_config_no_dra_resource_and_bad_options) {
        static const struct {
                const char *config, *opt, *val, *says;
        } bad[] = {
                { "{ \"dra\": { \"driver\": \"x_y\" }, \"resources\": [] }", NULL, NULL,
                  "dra.driver: " },
                { "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": "
                  "\"/dev/fuse\" } ] } ] }",
                  NULL, NULL, "has no resource with \"api\": \"dra\"" },
                { config, "--namespace", "Devices",
                  "--namespace \"Devices\": must be a DNS label" },
                { config, "--image", "a b", "--image \"a b\": holds a space" },
                { config, "--kubelet-root", "var/lib/kubelet", "must be an absolute path" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *out, *err;
                env_write(&e, "config.json", bad[i].config);
                char *argv[] = { (char *)CDIPLUG_BIN, "manifests",        "--config", e.config,
                                 (char *)bad[i].opt,  (char *)bad[i].val, NULL };
                int rc = run_split(argv, &out, &err);
                cr_assert_eq(rc, 2, "case %zu: exit %d: %s", i, rc, err);
                cr_assert_str_empty(out, "case %zu prints nothing: %s", i, out);
                cr_assert_not_null(strstr(err, bad[i].says), "case %zu: %s", i, err);
                free(out);
                free(err);
        }
}
