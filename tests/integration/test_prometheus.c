/* SPDX-License-Identifier: Apache-2.0 */
/* The real thing: Debian's promtool lints a live scrape, and a real
 * Prometheus scrapes the daemon on loopback; a PromQL query over its
 * HTTP API returns the allocation series with the pod's labels, joined
 * with the device's health as cdiplug(8) shows. Skipped, with the reason,
 * when the prometheus package is missing (tests/deps.sh installs it). */
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

#include "dra.h"
#include "env.h"
#include "fakeapi.h"
#include "http.h"
#include "kubelet.h"
#include "logwait.h"

extern char **environ;

static struct env e;
static struct tk *tk;
static struct tk_pr *pr;
static pid_t prom = -1;
static struct tk_dra *kd;
static struct fakeapi *api;

static void stop(void) {
        tk_dra_stop(kd);
        kd = NULL;
        fakeapi_free(api);
        api = NULL;
        if (prom > 0) {
                kill(prom, SIGTERM);
                waitpid(prom, NULL, 0);
                prom = -1;
        }
        env_cleanup(&e);
        tk_pr_stop(pr);
        tk_stop(tk);
        tk = NULL;
        pr = NULL;
}

TestSuite(prometheus, .fini = stop, .timeout = 150);

static bool have(const char *prog) {
        char path[64];
        snprintf(path, sizeof(path), "/usr/bin/%s", prog);
        return access(path, X_OK) == 0;
}

/* The kubelet lists one pod holding fuse-2 (strings as given: the
 * kubelet's answer may hold any bytes). */
static void set_pod(char *ns, char *name, char *container) {
        V1__ContainerDevices cd = V1__CONTAINER_DEVICES__INIT;
        char *ids[] = { "fuse-2" };
        cd.resource_name = "example.com/fuse";
        cd.n_device_ids = 1;
        cd.device_ids = ids;
        V1__ContainerDevices *cds[] = { &cd };
        V1__ContainerResources ctr = V1__CONTAINER_RESOURCES__INIT;
        ctr.name = container;
        ctr.n_devices = 1;
        ctr.devices = cds;
        V1__ContainerResources *ctrs[] = { &ctr };
        V1__PodResources pod = V1__POD_RESOURCES__INIT;
        pod.name = name;
        pod.namespace_ = ns;
        pod.n_containers = 1;
        pod.containers = ctrs;
        V1__PodResources *pods[] = { &pod };
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        resp.n_pod_resources = 1;
        resp.pod_resources = pods;
        tk_pr_set(pr, &resp);
}

static int start(void) {
        char addr[64], *pr_sock;
        int port = http_free_port();

        env_init(&e);
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ],"
                " \"shares\": 4 } ] }");
        env_touch(&e, "dev/fuse");
        cr_assert(asprintf(&pr_sock, "%s/pod-resources.sock", e.root) > 0);
        cr_assert_eq(tk_pr_start(pr_sock, &pr), 0);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--metrics-address", addr, "--pod-resources-socket", pr_sock, NULL);
        free(pr_sock);
        cr_assert_eq(tk_wait_registered(tk, "example.com/fuse", 1, 10000), 0);
        cr_assert_eq(file_wait_for(e.log, "metrics: serving", 10000), 0);

        set_pod("shop", "web-0", "app");
        return port;
}

/* Run argv with stdin from in_path, stdout+stderr into *out; exit status. */
static int run(char *const argv[], const char *in_path, char **out) {
        char *out_path;
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int status;

        cr_assert(asprintf(&out_path, "%s/run.out", e.root) > 0);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        cr_assert_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        *out = env_read(out_path);
        free(out_path);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(prometheus, promtool_accepts_a_live_scrape) {
        if (!have("promtool"))
                cr_skip_test(
                        "promtool is missing (Debian package prometheus; tests/deps.sh installs it)");
        int port = start();
        char *body = NULL, *path, *out = NULL;
        cr_assert_eq(http_get(port, "/metrics", &body), 200);
        cr_assert_not_null(strstr(body, "pod=\"web-0\""), "%s", body);
        cr_assert(asprintf(&path, "%s/scrape.txt", e.root) > 0);
        env_write(&e, "scrape.txt", body);
        char *argv[] = { "/usr/bin/promtool", "check", "metrics", NULL };
        int st = run(argv, path, &out);
        cr_assert_eq(st, 0, "promtool check metrics: exit %d:\n%s", st, out);
        cr_assert_str_eq(out, "", "promtool has complaints:\n%s", out);
        free(out);
        free(path);
        free(body);
}

/* With DRA on (a DRA resource beside a device-plugin one, the driver
 * registered, its slices published through the fake API server, a claim
 * prepared and one failed on an API error), the DRA series pass too. */
Test(prometheus, promtool_accepts_a_live_scrape_with_dra) {
        if (!have("promtool"))
                cr_skip_test(
                        "promtool is missing (Debian package prometheus; tests/deps.sh installs it)");
        char addr[64], *text = NULL, *kroot, *kubeconfig, *body = NULL, *path, *out = NULL, *dev;
        int port = http_free_port();
        struct tk_dra_claim c[] = { { "ns", "ok", "uid-ok" }, { "ns", "gone", "uid-gone" } };
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;

        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_touch(&e, "dev/fuse");
        env_write(&e, "config.json",
                  "{ \"dra\": { \"driver\": \"cdiplug.example.com\" }, \"resources\": ["
                  " { \"name\": \"example.com/serial\", \"api\": \"dra\","
                  " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] },"
                  " { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] }"
                  " ] }");
        api = fakeapi_new(true);
        fakeapi_add_node(api, "node1", "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(api, "token-one");
        cr_assert_eq(dra_device_name("ttyS0", &dev), 0);
        cr_assert(asprintf(&text,
                           "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                           "\"metadata\":{\"namespace\":\"ns\",\"name\":\"ok\",\"uid\":\"uid-ok\"},"
                           "\"status\":{\"allocation\":{\"devices\":{\"results\":["
                           "{\"request\":\"r\",\"driver\":\"cdiplug.example.com\","
                           "\"pool\":\"node1/example.com/serial\",\"device\":\"%s\"}]}}}}",
                           dev) > 0);
        free(dev);
        fakeapi_add_claim(api, cJSON_Parse(text));
        free(text);
        kubeconfig = fakeapi_write_kubeconfig(api, e.root, "token-one");
        cr_assert_not_null(kubeconfig);
        cr_assert(asprintf(&kroot, "%s/kubelet-root", e.root) > 0);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--metrics-address", addr, "--kubelet-root", kroot, "--node-name", "node1",
                  "--kubeconfig", kubeconfig, NULL);
        cr_assert_eq(tk_wait_registered(tk, "example.com/fuse", 1, 10000), 0);
        cr_assert_eq(tk_dra_wait_registered(kd, "cdiplug.example.com", 1, 10000), 0);
        cr_assert_eq(file_wait_for(e.log, "metrics: serving", 10000), 0);
        /* "gone" is not a claim the fake knows: a 404, counted. */
        cr_assert_eq(tk_dra_prepare(kd, "cdiplug.example.com", "v1", c, 2, &r), GRPC_STATUS_OK);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        cr_assert_eq(http_get(port, "/metrics", &body), 200);
        cr_assert_not_null(strstr(body, "cdiplug_dra_prepared_claims 1\n"), "%s", body);
        cr_assert_not_null(strstr(body, "cdiplug_dra_api_errors_total{class=\"not_found\"} 1\n"),
                           "%s", body);
        cr_assert_not_null(strstr(body, "cdiplug_dra_publish_duration_seconds_count"), "%s", body);
        cr_assert(asprintf(&path, "%s/scrape.txt", e.root) > 0);
        env_write(&e, "scrape.txt", body);
        char *argv[] = { "/usr/bin/promtool", "check", "metrics", NULL };
        int st = run(argv, path, &out);
        cr_assert_eq(st, 0, "promtool check metrics: exit %d:\n%s", st, out);
        cr_assert_str_eq(out, "", "promtool has complaints:\n%s", out);
        free(out);
        free(path);
        free(body);
        free(kroot);
        free(kubeconfig);
}

/* Names that are not UTF-8 (a lone byte, a cut sequence, an overlong
 * form, a surrogate) and control bytes in a pod's labels: each bad byte
 * becomes U+FFFD, and promtool accepts the page (it refused the whole
 * page for one such label). */
Test(prometheus, promtool_accepts_names_that_are_not_utf8) {
        if (!have("promtool"))
                cr_skip_test(
                        "promtool is missing (Debian package prometheus; tests/deps.sh installs it)");
        int port = start();
        set_pod("sh\xc3op", "web-\xff\xfe-0\x01\\\"\n", "ap\xe0\x80p\xed\xa0\x80");
        char *body = NULL, *path, *out = NULL;
        cr_assert_eq(http_get(port, "/metrics", &body), 200);
        cr_assert_not_null(
                strstr(body,
                       "namespace=\"sh\xef\xbf\xbdop\",pod=\"web-\xef\xbf\xbd\xef\xbf\xbd-0\x01\\\\\\\"\\n\","
                       "container=\"ap\xef\xbf\xbd\xef\xbf\xbdp\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""),
                "%s", body);
        cr_assert(asprintf(&path, "%s/scrape.txt", e.root) > 0);
        env_write(&e, "scrape.txt", body);
        char *argv[] = { "/usr/bin/promtool", "check", "metrics", NULL };
        int st = run(argv, path, &out);
        cr_assert_eq(st, 0, "promtool check metrics: exit %d:\n%s", st, out);
        cr_assert_str_eq(out, "", "promtool has complaints:\n%s", out);
        free(out);
        free(path);
        free(body);
}

/* The query's answer once it holds needle, waiting scrape by scrape. */
static char *query_until(int prom_port, const char *promql_escaped, const char *needle) {
        char path[1024];
        snprintf(path, sizeof(path), "/api/v1/query?query=%s", promql_escaped);
        for (int seen = file_count(e.log, "metrics endpoint: GET /metrics");;) {
                /* A scrape's samples are committed before the next one
                 * begins: query after each new scrape the daemon logs. */
                if (file_wait_count(e.log, "metrics endpoint: GET /metrics", seen + 2, 30000) < 0)
                        return NULL;
                seen = file_count(e.log, "metrics endpoint: GET /metrics");
                char *body = NULL;
                if (http_get(prom_port, path, &body) == 200 && strstr(body, needle))
                        return body;
                free(body);
        }
}

Test(prometheus, real_prometheus_scrapes_pod_labels) {
        if (!have("prometheus"))
                cr_skip_test(
                        "prometheus is missing (Debian package prometheus; tests/deps.sh installs it)");
        int port = start(), prom_port = http_free_port();
        char *yml, *cfg_path, *data, *listen, *log;

        cr_assert(asprintf(&yml,
                           "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                           "scrape_configs:\n  - job_name: cdiplug\n    static_configs:\n"
                           "      - targets: ['127.0.0.1:%d']\n",
                           port) > 0);
        env_write(&e, "prometheus.yml", yml);
        cr_assert(asprintf(&cfg_path, "--config.file=%s/prometheus.yml", e.root) > 0);
        cr_assert(asprintf(&data, "--storage.tsdb.path=%s/prom-data", e.root) > 0);
        cr_assert(asprintf(&listen, "--web.listen-address=127.0.0.1:%d", prom_port) > 0);
        cr_assert(asprintf(&log, "%s/prometheus.log", e.root) > 0);
        char *argv[] = { "/usr/bin/prometheus", cfg_path, data, listen, NULL };
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        cr_assert_eq(posix_spawn(&prom, argv[0], &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(file_wait_for(log, "Server is ready to receive web requests", 60000), 0, "%s",
                     env_read(log));

        char *body = query_until(prom_port, "cdiplug_device_allocation_info", "\"pod\":\"web-0\"");
        cr_assert_not_null(body, "Prometheus never had the allocation series:\n%s", env_read(log));
        cr_assert_not_null(strstr(body, "\"namespace\":\"shop\""), "%s", body);
        cr_assert_not_null(strstr(body, "\"container\":\"app\""), "%s", body);
        cr_assert_not_null(strstr(body, "\"id\":\"fuse-2\""), "%s", body);
        cr_assert_not_null(strstr(body, "\"device\":\"fuse\""), "%s", body);
        free(body);
        /* cdiplug(8)'s join: which pod holds which device, and its health.
         *   cdiplug_device_allocation_info
         *     * on(resource, device) group_left(health) cdiplug_device_info */
        body = query_until(
                prom_port,
                "cdiplug_device_allocation_info%20*%20on(resource,device)%20group_left(health)"
                "%20cdiplug_device_info",
                "\"health\":\"Healthy\"");
        cr_assert_not_null(body, "the join returned nothing");
        cr_assert_not_null(strstr(body, "\"pod\":\"web-0\""), "%s", body);
        free(body);
        free(yml);
        free(cfg_path);
        free(data);
        free(listen);
        free(log);
}
