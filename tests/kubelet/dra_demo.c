/* SPDX-License-Identifier: Apache-2.0 */
/* test-dra-demo DIR DRIVER NODE -- CDIPLUG-SERVE-COMMAND...: one DRA
 * driver seen from both sides, for the demo. It starts the test API
 * server (tests/helpers/fakeapi: HTTPS with a CA made now, a bearer
 * token, Node NODE) and the test kubelet's DRA side on DIR/kubelet-root,
 * writes DIR/kubeconfig, runs the command with --kubeconfig,
 * --kubelet-root and --node-name added (its log in DIR/daemon.log), and
 * prints what a cluster would see: the registration, the ResourceSlices
 * the driver publishes, a Prepare answer for a claim allocated the first
 * device, the health stream's list, and the Unprepare answer. Then it
 * stops the daemon (SIGTERM). Exits 0 when every step answered. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fakeapi.h"
#include "kubelet.h"
#include "log.h"
#include "rpc.h"

#define WAIT_MS 20000
#define TOKEN "demo-token"

struct demo {
        const char *dir, *driver, *node;
        struct fakeapi *api;
        struct tk_dra *kd;
        pid_t pid;
        char *pool, *device; /* of the first device published */
};

static int fail(const char *what) {
        fprintf(stderr, "test-dra-demo: %s\n", what);
        return 1;
}

static int write_text(const char *dir, const char *name, const char *text) {
        _cleanup_free_ char *path = NULL;
        FILE *f;

        if (xasprintf(&path, "%s/%s", dir, name) < 0 || !(f = fopen(path, "we")))
                return -1;
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -1;
}

static int write_kubeconfig(const struct demo *d) {
        _cleanup_free_ char *text = NULL;

        if (write_text(d->dir, "token", TOKEN "\n") < 0 ||
            xasprintf(&text,
                      "apiVersion: v1\nkind: Config\ncurrent-context: demo\n"
                      "contexts:\n- name: demo\n  context: {cluster: test, user: driver}\n"
                      "clusters:\n- name: test\n  cluster:\n    server: %s\n"
                      "    certificate-authority: %s\n"
                      "users:\n- name: driver\n  user:\n    tokenFile: token\n",
                      fakeapi_url(d->api), fakeapi_ca_file(d->api)) < 0)
                return -1;
        return write_text(d->dir, "kubeconfig", text);
}

static int spawn(struct demo *d, char **cmd, int n_cmd) {
        _cleanup_free_ char *kc = NULL, *root = NULL, *log = NULL;
        char **argv = calloc((size_t)n_cmd + 7, sizeof(*argv));
        posix_spawn_file_actions_t fa;
        int argc = 0, r;

        if (!argv || xasprintf(&kc, "%s/kubeconfig", d->dir) < 0 ||
            xasprintf(&root, "%s/kubelet-root", d->dir) < 0 ||
            xasprintf(&log, "%s/daemon.log", d->dir) < 0) {
                free(argv);
                return -1;
        }
        for (int i = 0; i < n_cmd; i++)
                argv[argc++] = cmd[i];
        argv[argc++] = "--kubeconfig";
        argv[argc++] = kc;
        argv[argc++] = "--kubelet-root";
        argv[argc++] = root;
        argv[argc++] = "--node-name";
        argv[argc++] = (char *)d->node;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        r = posix_spawn(&d->pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        free(argv);
        return r == 0 ? 0 : -1;
}

/* A slice of the driver with at least one device. */
static bool published(const cJSON *slices, void *ctx) {
        const struct demo *d = ctx;
        const cJSON *s;

        cJSON_ArrayForEach(s, slices) {
                const cJSON *spec = cJSON_GetObjectItem(s, "spec");
                const cJSON *drv = cJSON_GetObjectItem(spec, "driver");
                if (cJSON_IsString(drv) && strcmp(drv->valuestring, d->driver) == 0 &&
                    cJSON_GetArraySize(cJSON_GetObjectItem(spec, "devices")) > 0)
                        return true;
        }
        return false;
}

static int show_slices(struct demo *d) {
        cJSON *slices, *s;

        if (!fakeapi_wait(d->api, published, d, WAIT_MS))
                return fail("no ResourceSlice published");
        slices = fakeapi_slices(d->api);
        printf("\n== the ResourceSlices on the test API server\n");
        cJSON_ArrayForEach(s, slices) {
                const cJSON *spec = cJSON_GetObjectItem(s, "spec");
                const cJSON *dev = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "devices"), 0);
                const cJSON *pool = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "pool"), "name");
                _cleanup_free_ char *text = cJSON_Print(s);
                if (text)
                        printf("%s\n", text);
                if (!d->device && cJSON_IsString(cJSON_GetObjectItem(dev, "name")) &&
                    cJSON_IsString(pool)) {
                        d->device = strdup(cJSON_GetObjectItem(dev, "name")->valuestring);
                        d->pool = strdup(pool->valuestring);
                }
        }
        cJSON_Delete(slices);
        return d->device && d->pool ? 0 : fail("no device in the slices");
}

static int prepare(struct demo *d) {
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
        struct tk_dra_claim c = { "default", "demo-claim", "demo-claim-uid" };
        _cleanup_free_ char *text = NULL;

        if (xasprintf(&text,
                      "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                      "\"metadata\":{\"namespace\":\"default\",\"name\":\"demo-claim\","
                      "\"uid\":\"demo-claim-uid\"},\"status\":{\"allocation\":{\"devices\":"
                      "{\"results\":[{\"request\":\"serial\",\"driver\":\"%s\",\"pool\":\"%s\","
                      "\"device\":\"%s\"}]}}}}",
                      d->driver, d->pool, d->device) < 0)
                return -1;
        fakeapi_add_claim(d->api, cJSON_Parse(text));
        printf("\n== NodePrepareResources (v1) of claim default/demo-claim, allocated %s/%s\n",
               d->pool, d->device);
        if (tk_dra_prepare(d->kd, d->driver, "v1", &c, 1, &r) != GRPC_STATUS_OK || !r ||
            r->n_claims != 1)
                return fail("Prepare failed");
        const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse *v =
                r->claims[0]->value;
        printf("claim %s: error \"%s\"\n", r->claims[0]->key, v->error);
        for (size_t i = 0; i < v->n_devices; i++) {
                printf("  request %s -> pool %s, device %s, CDI", v->devices[i]->request_names[0],
                       v->devices[i]->pool_name, v->devices[i]->device_name);
                for (size_t j = 0; j < v->devices[i]->n_cdi_device_ids; j++)
                        printf(" %s", v->devices[i]->cdi_device_ids[j]);
                printf("\n");
        }
        bool ok = !v->error[0] && v->n_devices == 1;
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        return ok ? 0 : fail("the claim was not prepared");
}

static int health_and_unprepare(struct demo *d) {
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse *u = NULL;
        struct tk_dra_claim c = { "default", "demo-claim", "demo-claim-uid" };
        struct tk_dra_health *h = NULL;
        _cleanup_free_ char *list = NULL;

        printf("\n== the health stream (v1 NodeWatchResources): its first list\n");
        if (tk_dra_health_open(d->kd, d->driver, "v1", &h) < 0 ||
            tk_dra_health_wait(h, 1, WAIT_MS, &list) < 0) {
                tk_dra_health_close(h);
                return fail("no health list");
        }
        printf("%s\n", list);
        tk_dra_health_close(h);
        printf("\n== NodeUnprepareResources of the claim\n");
        if (tk_dra_unprepare(d->kd, d->driver, "v1", &c, 1, &u) != GRPC_STATUS_OK || !u ||
            u->n_claims != 1)
                return fail("Unprepare failed");
        printf("claim %s: error \"%s\"\n", u->claims[0]->key, u->claims[0]->value->error);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                u, NULL);
        return 0;
}

static int registered(struct demo *d) {
        Pluginregistration__PluginInfo *info = NULL;

        if (tk_dra_wait_registered(d->kd, d->driver, 1, WAIT_MS) < 0 ||
            tk_dra_info(d->kd, d->driver, &info) < 0)
                return fail("the driver never registered");
        printf("== the test kubelet registered DRA driver %s (GetInfo)\n", info->name);
        printf("endpoint %s\nservices", info->endpoint);
        for (size_t i = 0; i < info->n_supported_versions; i++)
                printf(" %s", info->supported_versions[i]);
        printf("\n");
        pluginregistration__plugin_info__free_unpacked(info, NULL);
        return 0;
}

int main(int argc, char **argv) {
        struct demo d = { 0 };
        _cleanup_free_ char *root = NULL;
        int r = 1, status = 0;

        if (argc < 6 || strcmp(argv[4], "--") != 0) {
                fprintf(stderr,
                        "usage: test-dra-demo DIR DRIVER NODE -- CDIPLUG-SERVE-COMMAND...\n");
                return 2;
        }
        d.dir = argv[1];
        d.driver = argv[2];
        d.node = argv[3];
        if (xasprintf(&root, "%s/kubelet-root", d.dir) < 0)
                return 1;
        (void)mkdir(d.dir, 0755);
        d.api = fakeapi_new(true);
        fakeapi_set_token(d.api, TOKEN);
        fakeapi_add_node(d.api, d.node, "6d1b3a4e-0000-4000-8000-0000000000de");
        if (write_kubeconfig(&d) < 0 || tk_dra_start(root, &d.kd) < 0 ||
            spawn(&d, argv + 5, argc - 5) < 0)
                r = fail("cannot start");
        else if (registered(&d) == 0 && show_slices(&d) == 0 && prepare(&d) == 0 &&
                 health_and_unprepare(&d) == 0)
                r = 0;
        if (d.pid > 0) {
                kill(d.pid, SIGTERM);
                waitpid(d.pid, &status, 0);
                printf("\n== the DRA daemon stopped with status %d\n",
                       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
        tk_dra_stop(d.kd);
        fakeapi_free(d.api);
        free(d.pool);
        free(d.device);
        return r;
}
