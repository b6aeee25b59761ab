/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics endpoint of the real daemon: allocation series with pod
 * labels from the test kubelet's PodResources service (shares included,
 * other resources left out), a PodResources restart, a hung or garbled
 * PodResources, /readyz following registration, and hostile HTTP clients
 * that leave it serving. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "http.h"
#include "kubelet.h"
#include "proc_status.h"

static struct env e;
static struct tk *tk;
static struct tk_pr *pr;
static int port;
static char *pr_sock;

static void stop(void) {
        env_cleanup(&e);
        tk_pr_stop(pr);
        tk_stop(tk);
        free(pr_sock);
        tk = NULL;
        pr = NULL;
        pr_sock = NULL;
}

TestSuite(metrics, .fini = stop, .timeout = 90);

static const char config[] =
        "{ \"resources\": ["
        "  { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
        "  { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ], \"shares\": 4 } ] }";

/* The test kubelet records a registration before it answers Register;
 * the daemon counts it when the answer arrives, and logs it then. */
static void wait_registered(void) {
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 1, 10000), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/fuse", 1, 10000), 0);
        cr_assert_eq(file_wait_count(e.log, "registered with the kubelet", 2, 10000), 0);
}

/* The daemon with its endpoint on port (0: a free one); the kubelet
 * first when with_kubelet, and the endpoint up before returning when
 * wait_serving. */
static void start_on(bool with_kubelet, int on_port, bool wait_serving) {
        char addr[64], *pr_dir;

        env_init(&e);
        env_write(&e, "config.json", config);
        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/ttyUSB1");
        env_touch(&e, "dev/fuse");
        cr_assert(asprintf(&pr_dir, "%s/pod-resources", e.root) > 0);
        mkdir(pr_dir, 0755);
        cr_assert(asprintf(&pr_sock, "%s/kubelet.sock", pr_dir) > 0);
        free(pr_dir);
        cr_assert_eq(tk_pr_start(pr_sock, &pr), 0);
        if (with_kubelet)
                cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        else
                mkdir(e.kubelet_dir, 0755);
        port = on_port ? on_port : http_free_port();
        cr_assert_gt(port, 0);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        env_spawn(&e, "--metrics-address", addr, "--pod-resources-socket", pr_sock, NULL);
        if (wait_serving)
                cr_assert_eq(file_wait_for(e.log, "metrics: serving", 10000), 0, "%s",
                             env_read(e.log));
        if (with_kubelet)
                wait_registered();
}

static void start(bool with_kubelet) {
        start_on(with_kubelet, 0, true);
}

static char *scrape(void) {
        char *body = NULL;
        int st = http_get(port, "/metrics", &body);
        cr_assert_eq(st, 200, "scrape answered %d: %s", st, env_read(e.log));
        return body;
}

/* web-0 (shop) holds a serial port and two shares of fuse in two
 * containers, plus a device of a resource that is not ours. */
static void set_pods(void) {
        V1__ContainerDevices serial = V1__CONTAINER_DEVICES__INIT,
                             fuse1 = V1__CONTAINER_DEVICES__INIT,
                             fuse2 = V1__CONTAINER_DEVICES__INIT,
                             other = V1__CONTAINER_DEVICES__INIT;
        char *serial_ids[] = { "ttyUSB1" }, *fuse1_ids[] = { "fuse-0", "fuse-3" },
             *fuse2_ids[] = { "fuse-1" }, *other_ids[] = { "gpu0" };
        serial.resource_name = "example.com/serial";
        serial.n_device_ids = 1;
        serial.device_ids = serial_ids;
        fuse1.resource_name = "example.com/fuse";
        fuse1.n_device_ids = 2;
        fuse1.device_ids = fuse1_ids;
        fuse2.resource_name = "example.com/fuse";
        fuse2.n_device_ids = 1;
        fuse2.device_ids = fuse2_ids;
        other.resource_name = "vendor.example/gpu";
        other.n_device_ids = 1;
        other.device_ids = other_ids;
        V1__ContainerDevices *app_devs[] = { &serial, &fuse1, &other }, *side_devs[] = { &fuse2 };
        V1__ContainerResources app = V1__CONTAINER_RESOURCES__INIT,
                               side = V1__CONTAINER_RESOURCES__INIT;
        app.name = "app";
        app.n_devices = 3;
        app.devices = app_devs;
        side.name = "side\"car";
        side.n_devices = 1;
        side.devices = side_devs;
        V1__ContainerResources *ctrs[] = { &app, &side };
        V1__PodResources pod = V1__POD_RESOURCES__INIT, idle = V1__POD_RESOURCES__INIT;
        pod.name = "web-0";
        pod.namespace_ = "shop";
        pod.n_containers = 2;
        pod.containers = ctrs;
        idle.name = "idle";
        idle.namespace_ = "default";
        V1__PodResources *pods[] = { &pod, &idle };
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        resp.n_pod_resources = 2;
        resp.pod_resources = pods;
        tk_pr_set(pr, &resp);
}

static const char expected_alloc[] =
        "cdiplug_device_allocation_info{resource=\"example.com/fuse\",device=\"fuse\",id=\"fuse-0\",namespace=\"shop\",pod=\"web-0\",container=\"app\"} 1\n"
        "cdiplug_device_allocation_info{resource=\"example.com/fuse\",device=\"fuse\",id=\"fuse-1\",namespace=\"shop\",pod=\"web-0\",container=\"side\\\"car\"} 1\n"
        "cdiplug_device_allocation_info{resource=\"example.com/fuse\",device=\"fuse\",id=\"fuse-3\",namespace=\"shop\",pod=\"web-0\",container=\"app\"} 1\n"
        "cdiplug_device_allocation_info{resource=\"example.com/serial\",device=\"ttyUSB1\",id=\"ttyUSB1\",namespace=\"shop\",pod=\"web-0\",container=\"app\"} 1";

static void assert_alloc(const char *body, const char *want) {
        char *got = lines_with(body, "cdiplug_device_allocation_info{");
        cr_assert_str_eq(got, want, "allocation series:\n%s\nwanted:\n%s", got, want);
        free(got);
}

static void assert_has(const char *body, const char *line) {
        cr_assert_not_null(strstr(body, line), "no \"%s\" in:\n%s", line, body);
}

/* A counter's value in a scrape. */
static unsigned long long value_of(const char *body, const char *series) {
        char *line;
        cr_assert(asprintf(&line, "\n%s ", series) > 0);
        char *p = strstr(body, line);
        cr_assert_not_null(p, "no %s in:\n%s", series, body);
        unsigned long long v = strtoull(p + strlen(line), NULL, 10);
        free(line);
        return v;
}

Test(metrics, allocation_series_with_pod_labels) {
        start(true);
        set_pods();
        char *body = scrape();
        assert_alloc(body, expected_alloc);
        assert_has(body, "cdiplug_pod_resources_up 1\n");
        assert_has(
                body,
                "cdiplug_device_info{resource=\"example.com/serial\",device=\"ttyUSB0\",health=\"Healthy\"} 1\n");
        assert_has(
                body,
                "cdiplug_device_info{resource=\"example.com/fuse\",device=\"fuse\",health=\"Healthy\"} 1\n");
        assert_has(body, "cdiplug_devices{resource=\"example.com/serial\",health=\"Healthy\"} 2\n");
        assert_has(body, "cdiplug_registrations_total{resource=\"example.com/fuse\"} 1\n");
        assert_has(body, "cdiplug_listandwatch_streams{resource=\"example.com/serial\"} 1\n");
        assert_has(
                body,
                "cdiplug_cdi_spec_writes_total{resource=\"example.com/serial\",result=\"success\"} 1\n");
        assert_has(body, "cdiplug_build_info{version=\"");
        assert_has(body, "process_resident_memory_bytes ");
        cr_assert_null(strstr(body, "gpu0"), "another resource's device leaked into the scrape");
        free(body);

        /* An Allocate is counted, and a vanished device is Unhealthy. */
        env_rm(&e, "dev/ttyUSB0");
        cr_assert_eq(tk_wait_lists(tk, "example.com/serial", 2, 10000, NULL), 0);
        body = scrape();
        assert_has(
                body,
                "cdiplug_device_info{resource=\"example.com/serial\",device=\"ttyUSB0\",health=\"Unhealthy\"} 1\n");
        assert_has(
                body,
                "cdiplug_device_events_total{resource=\"example.com/serial\",event=\"vanished\"} 1\n");
        free(body);

        char *msg = NULL;
        cr_assert_eq(proc_check_confined(e.pid, &msg), 0, "with the endpoint serving: %s", msg);
}

Test(metrics, pod_resources_restart_hang_and_garbage) {
        start(true);
        set_pods();
        char *body = scrape();
        assert_alloc(body, expected_alloc);
        unsigned long long errors = value_of(body, "cdiplug_pod_resources_errors_total");
        free(body);

        /* The kubelet goes away with its socket. */
        tk_pr_stop(pr);
        pr = NULL;
        struct stat st;
        cr_assert_neq(stat(pr_sock, &st), 0, "the PodResources socket outlived its server");
        body = scrape();
        if (strstr(body, "cdiplug_device_allocation_info{"))
                cr_log_error("%s", env_read(e.log));
        assert_alloc(body, "");
        assert_has(body, "cdiplug_pod_resources_up 0\n");
        assert_has(body, "cdiplug_devices{resource=\"example.com/serial\",health=\"Healthy\"} 2\n");
        cr_assert_gt(value_of(body, "cdiplug_pod_resources_errors_total"), errors);
        errors = value_of(body, "cdiplug_pod_resources_errors_total");
        free(body);

        /* A new kubelet on a new socket at the same path. */
        cr_assert_eq(tk_pr_start(pr_sock, &pr), 0);
        set_pods();
        body = scrape();
        assert_alloc(body, expected_alloc);
        assert_has(body, "cdiplug_pod_resources_up 1\n");
        free(body);

        /* Hung: the scrape still answers, within the List deadline. A
         * restart first, so that no cached answer stands in. */
        tk_pr_stop(pr);
        cr_assert_eq(tk_pr_start(pr_sock, &pr), 0);
        tk_pr_mode(pr, TK_PR_SILENT);
        body = scrape();
        assert_alloc(body, "");
        assert_has(body, "cdiplug_pod_resources_up 0\n");
        assert_has(body, "cdiplug_devices{resource=\"example.com/serial\",health=\"Healthy\"} 2\n");
        cr_assert_gt(value_of(body, "cdiplug_pod_resources_errors_total"), errors);
        errors = value_of(body, "cdiplug_pod_resources_errors_total");
        free(body);

        /* Garbage: left out, counted. A failure stands for a second
         * (DP_PODRES_CACHE_S), so a crowd of scrapers costs one List a
         * second: the first scrapes may get the hang's failure again. */
        tk_pr_mode(pr, TK_PR_GARBAGE);
        unsigned calls = tk_pr_calls(pr);
        for (int tries = 0;; tries++) {
                body = scrape();
                assert_alloc(body, "");
                assert_has(body, "cdiplug_pod_resources_up 0\n");
                if (value_of(body, "cdiplug_pod_resources_errors_total") > errors)
                        break;
                free(body);
                cr_assert_lt(tries, 50, "the garbage answer was never counted");
                struct timespec tick = { 0, 100000000 };
                nanosleep(&tick, NULL); /* the cached failure expires by itself */
        }
        free(body);
        /* One List for all those scrapes, not one each. */
        cr_assert_leq(tk_pr_calls(pr), calls + 1, "%u Lists", tk_pr_calls(pr) - calls);
        cr_assert_eq(kill(e.pid, 0), 0, "the daemon died");
}

Test(metrics, readyz_follows_registration) {
        start(false);
        char *body = NULL;
        cr_assert_eq(http_get(port, "/readyz", &body), 503);
        assert_has(body, "example.com/serial: not ready: not registered with the kubelet\n");
        free(body);
        cr_assert_eq(http_get(port, "/healthz", &body), 200);
        free(body);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        wait_registered();
        cr_assert_eq(http_get(port, "/readyz", &body), 200, "%s", body);
        cr_assert_str_eq(body, "example.com/serial: ready\nexample.com/fuse: ready\n");
        free(body);
        body = scrape();
        assert_has(body, "cdiplug_resource_ready{resource=\"example.com/fuse\"} 1\n");
        /* The first kubelet the daemon sees is no restart; the next is. */
        assert_has(body, "\ncdiplug_kubelet_restarts_total 0\n");
        free(body);
        tk_stop(tk);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 1, 10000), 0);
        cr_assert_eq(file_wait_count(e.log, "kubelet.sock appeared", 2, 10000), 0);
        body = scrape();
        assert_has(body, "\ncdiplug_kubelet_restarts_total 1\n");
        free(body);
}

/* The whole answer to raw, status line and header fields included (the
 * server closes after it). */
static char *whole_answer(const char *raw) {
        size_t n = 0, cap = 4 << 20;
        char *buf = malloc(cap);
        struct timeval tv = { .tv_sec = 10 };
        int fd = http_connect(port);
        ssize_t r;

        cr_assert(buf);
        cr_assert_geq(fd, 0);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        cr_assert_eq(write(fd, raw, strlen(raw)), (ssize_t)strlen(raw));
        while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
                n += (size_t)r;
        close(fd);
        buf[n] = '\0';
        return buf;
}

/* A HEAD answer: the status, the header fields GET would have (the body's
 * Content-Length included), and nothing after them. */
static void assert_head(const char *path, const char *status, const char *type) {
        char req[128], get_req[128], *head, *get, *get_body;

        snprintf(req, sizeof(req), "HEAD %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 path);
        snprintf(get_req, sizeof(get_req),
                 "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
        head = whole_answer(req);
        get = whole_answer(get_req);
        cr_assert(strncmp(head, status, strlen(status)) == 0, "HEAD %s: %s", path, head);
        cr_assert(strncmp(get, status, strlen(status)) == 0, "GET %s: %s", path, get);
        cr_assert(strcasestr(head, type), "HEAD %s: %s", path, head);
        size_t hlen = strlen(head);
        cr_assert(hlen >= 4 && strcmp(head + hlen - 4, "\r\n\r\n") == 0, "HEAD %s sent a body: %s",
                  path, head);
        get_body = strstr(get, "\r\n\r\n");
        cr_assert(get_body);
        const char *cl = strcasestr(head, "\r\nContent-Length: ");
        cr_assert(cl, "HEAD %s: no Content-Length: %s", path, head);
        /* /metrics changes between two scrapes (CPU time, fds): only
         * its length's order; the others are the same text. */
        size_t len = strtoul(cl + 18, NULL, 10), get_len = strlen(get_body + 4);
        if (strcmp(path, "/metrics") == 0)
                cr_assert(len > get_len / 2 && len < get_len * 2, "HEAD %s: length %zu, GET %zu",
                          path, len, get_len);
        else
                cr_assert_eq(len, get_len, "HEAD %s: length %zu, GET %zu", path, len, get_len);
        free(head);
        free(get);
}

Test(metrics, methods_and_paths) {
        start(true);
        char *body = NULL;
        static const char post[] =
                "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
        cr_assert_eq(http_raw(port, post, sizeof(post) - 1, &body, 10000), 405);
        free(body);
        /* 405 says what is allowed (RFC 9110 15.5.6). */
        body = whole_answer("PUT /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
        cr_assert(strncmp(body, "HTTP/1.1 405", 12) == 0, "%s", body);
        cr_assert(strcasestr(body, "\r\nAllow: GET, HEAD\r\n"), "%s", body);
        free(body);
        /* HEAD, as probes and uptime checkers send it: GET's header
         * fields, no body. */
        assert_head("/healthz", "HTTP/1.1 200", "text/plain");
        assert_head("/readyz", "HTTP/1.1 200", "text/plain");
        assert_head("/metrics", "HTTP/1.1 200", "text/plain; version=0.0.4");
        assert_head("/nothing", "HTTP/1.1 404", "text/plain");
        /* Any other method too, known to HTTP or not (RFC 9110 15.5.6). */
        body = whole_answer("BREW /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_assert(strncmp(body, "HTTP/1.1 405", 12) == 0, "%s", body);
        free(body);
        static const char del[] = "DELETE /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
        cr_assert_eq(http_raw(port, del, sizeof(del) - 1, &body, 10000), 405);
        free(body);
        cr_assert_eq(http_get(port, "/nothing", &body), 404);
        free(body);
        cr_assert_eq(http_get(port, "/healthz", &body), 200);
        cr_assert_str_eq(body, "ok\n");
        free(body);
}

/* With the endpoint on, a daemon nobody scrapes still never wakes: not
 * its own threads, not the endpoint's (libevent waits in epoll_wait with no
 * timeout while no connection is open), also after a scrape, which left
 * a PodResources channel open and a connection closed. */
Test(metrics, no_wakeups_while_nobody_scrapes) {
        static const char *const threads[] = { "cdiplug", "cdiplug-watch", "cdiplug-http", NULL };
        struct timespec settle = { 0, 300000000 }, idle = { 2, 0 };
        int n = 0;

        start(true);
        free(scrape());
        nanosleep(&settle, NULL); /* the scrape's connection closes */
        long before = proc_thread_switches(e.pid, threads, &n);
        cr_assert_eq(n, 3, "the daemon's threads and the endpoint's: %d of 3 found", n);
        nanosleep(&idle, NULL); /* the point: two seconds in which nothing happens */
        long after = proc_thread_switches(e.pid, threads, NULL);
        cr_assert_eq(after, before,
                     "the daemon's and the endpoint's threads woke %ld times in 2 s of idleness",
                     after - before);
        /* And the endpoint's thread does wake for a scrape. */
        free(scrape());
        cr_assert_gt(proc_thread_switches(e.pid, threads, NULL), after);
}

Test(metrics, hostile_clients_leave_it_serving) {
        start(true);
        char *body = NULL;

        /* Garbage instead of a request line. */
        static const char garbage[] =
                "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n";
        int st = http_raw(port, garbage, sizeof(garbage) - 1, NULL, 10000);
        cr_assert(st == 400 || st == 0, "garbage answered %d", st);

        /* A 1 MiB request: one huge header. Refused, not buffered. */
        size_t big = 1024 * 1024;
        char *req = malloc(big + 128);
        int n = sprintf(req, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
        memset(req + n, 'a', big);
        strcpy(req + n + big, "\r\n\r\n");
        st = http_raw(port, req, strlen(req), NULL, 10000);
        cr_assert(st >= 400 || st == 0, "a 1 MiB request answered %d", st);
        /* And a 1 MiB body on a POST. */
        n = sprintf(req, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", big);
        memset(req + n, 'b', big);
        req[n + big] = '\0';
        st = http_raw(port, req, strlen(req), NULL, 10000);
        cr_assert(st == 405 || st == 413 || st == 0, "a 1 MiB POST answered %d", st);
        free(req);

        /* Slowloris: half a request, never finished. The scrape works
         * beside it, and the daemon cuts it off by itself. */
        int slow = http_connect(port);
        cr_assert_geq(slow, 0);
        cr_assert_gt(write(slow, "GET /metrics HTTP/1.1\r\nX-Slow: ", 31), 0);
        body = scrape();
        free(body);
        cr_assert_eq(wait_closed(slow, 20000), 0, "a slow client held its connection");
        close(slow);

        /* 100 connections at once, all idle: the daemon holds a bounded
         * number (64): each one past them makes the longest idle one
         * close. */
        int fds[100], before = env_fd_count(e.pid);
        for (int i = 0; i < 100; i++) {
                fds[i] = http_connect(port);
                cr_assert_geq(fds[i], 0, "connection %d refused", i);
        }
        /* It takes at least 16; then, given time to take all, it holds
         * no more than 64. */
        struct timespec tick = { 0, 10000000 }, accepting = { 0, 300000000 };
        for (int waited = 0; env_fd_count(e.pid) - before < 16 && waited < 10000; waited += 10)
                nanosleep(&tick, NULL); /* /proc has no change notification */
        nanosleep(&accepting, NULL);
        int held = env_fd_count(e.pid) - before;
        cr_assert(held >= 16 && held <= 64, "the daemon held %d of 100 idle connections", held);
        for (int i = 0; i < 100; i++)
                close(fds[i]);
        /* Held ones free their slots when closed; the endpoint serves on. */
        body = scrape();
        assert_has(body, "cdiplug_devices{resource=\"example.com/serial\",health=\"Healthy\"} 2\n");
        free(body);
        cr_assert_eq(http_get(port, "/healthz", &body), 200);
        free(body);
        cr_assert_eq(kill(e.pid, 0), 0, "the daemon died");

        /* Stopping with connections open, served and waiting, is clean
         * (exit 0, and under ASan no use after free or leak). */
        int open_fds[24];
        for (int i = 0; i < 24; i++)
                cr_assert_geq(open_fds[i] = http_connect(port), 0);
        nanosleep(&accepting, NULL);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "stopped with status %#x", status);
        for (int i = 0; i < 24; i++)
                close(open_fds[i]);
}

/* The attacks of issue 22, each over real sockets against the real
 * daemon. The memory bounds are the daemon's own (32 MiB resident);
 * under ASan its shadow and quarantine make resident memory meaningless,
 * so there the bound is on what the daemon accepts from the attacker. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif
#define DAEMON_RSS_BOUND_KB (32 * 1024)

static long status_kb(const char *field) {
        char *v = NULL;
        cr_assert_eq(proc_status_field(e.pid, 0, field, &v), 0, "no %s", field);
        long kb = strtol(v, NULL, 10);
        free(v);
        return kb;
}

static double mono(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the kubelet's liveness probe sees: answered 200 within 1 s. */
static void assert_live(const char *during) {
        double t0 = mono();
        int st = http_probe(port, "/healthz", 1000);
        cr_assert_eq(st, 200, "/healthz during %s: %d after %.3f s\n%s", during, st, mono() - t0,
                     env_read(e.log));
}

static void raise_fd_limit(rlim_t want) {
        struct rlimit rl;
        cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_max < want)
                rl.rlim_max = want; /* root may */
        rl.rlim_cur = want;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "RLIMIT_NOFILE %lu: %s", (unsigned long)want,
                     strerror(errno));
}

/* 16 connections pipeline GET /healthz as fast as they can and never
 * read an answer: the daemon reads 64 KiB ahead at most on each, so the
 * flood stalls in the kernel's buffers instead of the daemon's heap. */
Test(metrics, pipelined_flood_is_bounded) {
        static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
        enum { CONNS = 16 };
        size_t per = (64 * 1024) / (sizeof(req) - 1), len = per * (sizeof(req) - 1);
        char *chunk = malloc(len);
        int fds[CONNS];
        size_t sent[CONNS] = { 0 };
        long peak = 0;

        start(true);
        for (size_t i = 0; i < per; i++)
                memcpy(chunk + i * (sizeof(req) - 1), req, sizeof(req) - 1);
        for (int i = 0; i < CONNS; i++) {
                fds[i] = http_connect(port);
                cr_assert_geq(fds[i], 0);
                fcntl(fds[i], F_SETFL, O_NONBLOCK);
        }
        /* Two seconds of flooding, the daemon's memory sampled. */
        for (double until = mono() + 2; mono() < until;) {
                struct pollfd p[CONNS];
                for (int i = 0; i < CONNS; i++) {
                        ssize_t w = send(fds[i], chunk, len, MSG_NOSIGNAL);
                        if (w > 0)
                                sent[i] += (size_t)w;
                        p[i] = (struct pollfd){ .fd = fds[i], .events = POLLOUT };
                }
                long rss = status_kb("VmRSS");
                peak = rss > peak ? rss : peak;
                poll(p, CONNS, 50); /* the flood waits for room, as an attacker's would */
        }
        assert_live("a pipelined flood");
        size_t most = 0;
        for (int i = 0; i < CONNS; i++)
                most = sent[i] > most ? sent[i] : most;
        /* Loopback's socket buffers take a few MiB each way; an endpoint
         * that reads all it is sent takes hundreds in two seconds. */
        cr_assert_lt(most, 16u << 20, "a connection got %zu bytes in", most);
        if (!UNDER_ASAN)
                cr_assert_lt(peak, DAEMON_RSS_BOUND_KB, "the daemon reached %ld kB resident", peak);
        for (int i = 0; i < CONNS; i++)
                close(fds[i]);
        free(chunk);
        cr_assert_eq(kill(e.pid, 0), 0, "the daemon died");
}

/* Out of fds, accept() fails: the endpoint pauses accepting, says so,
 * and serves again once fds are free (the old endpoint crashed here). */
Test(metrics, out_of_fds_pauses_accepting) {
        enum { CONNS = 24 };
        int fds[CONNS];

        start(true);
        free(scrape()); /* its PodResources channel is open from now on */
        int used = env_fd_count(e.pid);
        struct rlimit lim = { (rlim_t)used + 6, (rlim_t)used + 6 };
        cr_assert_eq(prlimit(e.pid, RLIMIT_NOFILE, &lim, NULL), 0, "%s", strerror(errno));
        for (int i = 0; i < CONNS; i++)
                cr_assert_geq(fds[i] = http_connect(port), 0);
        cr_assert_eq(file_wait_for(e.log, "cannot accept a connection", 10000), 0, "%s",
                     env_read(e.log));
        cr_assert_eq(kill(e.pid, 0), 0, "the daemon died out of fds");
        for (int i = 0; i < CONNS; i++)
                close(fds[i]);
        /* The held connections close, the rest resumes: a scrape works
         * within the same low limit. */
        static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        char *body = NULL;
        int st = 0;
        for (double until = mono() + 10; mono() < until && st != 200;) {
                free(body);
                body = NULL;
                st = http_raw(port, get, sizeof(get) - 1, &body, 3000);
        }
        cr_assert_eq(st, 200, "no scrape after the fds came back: %d\n%s", st, env_read(e.log));
        assert_has(body, "cdiplug_devices{resource=\"example.com/serial\",health=\"Healthy\"} 2\n");
        free(body);
}

struct churn {
        int n;
        volatile bool stop;
        unsigned reopened;
};

/* Keeps n idle connections open, opening a new one as each is closed. */
static void *churn(void *arg) {
        struct churn *c = arg;
        int fds[64];
        for (int i = 0; i < c->n; i++)
                fds[i] = http_connect(port);
        while (!c->stop) {
                struct pollfd p[64];
                for (int i = 0; i < c->n; i++)
                        p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
                if (poll(p, (nfds_t)c->n, 50) <= 0)
                        continue;
                for (int i = 0; i < c->n; i++)
                        if (p[i].revents) {
                                close(fds[i]);
                                fds[i] = http_connect(port);
                                c->reopened++;
                        }
        }
        for (int i = 0; i < c->n; i++)
                close(fds[i]);
        return NULL;
}

/* The kubelet's probe is answered within 1 s beside 1,000 idle
 * connections, a slowloris crowd, and 40 connections re-opened as they
 * close (the old endpoint let 32 of them in and left the probe in the
 * backlog until one timed out). */
Test(metrics, healthz_beside_idle_slowloris_and_churning_crowds) {
        enum { IDLE = 1000, SLOW = 100 };
        static int idle[IDLE], slow[SLOW];

        raise_fd_limit(IDLE + SLOW + 256);
        start(true);
        /* Not waiting for each to connect: an endpoint that stops
         * accepting leaves them in the backlog (and the probe fails). */
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        for (int i = 0; i < IDLE; i++) {
                idle[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                cr_assert_geq(idle[i], 0, "socket %d: %s", i, strerror(errno));
                int r = connect(idle[i], (struct sockaddr *)&sa, sizeof(sa));
                cr_assert(r == 0 || errno == EINPROGRESS, "connection %d: %s", i, strerror(errno));
        }
        /* Then the crowd is open (as far as the endpoint lets it be
         * within 3 s), idle, before the probes. */
        static struct pollfd p[IDLE];
        for (double until = mono() + 3; mono() < until;) {
                int n = 0;
                for (int i = 0; i < IDLE; i++)
                        if (idle[i] >= 0)
                                p[n++] = (struct pollfd){ .fd = idle[i], .events = POLLOUT };
                if (!n || poll(p, (nfds_t)n, 100) < 0)
                        break;
                for (int i = 0, j = 0; i < n; i++) {
                        while (idle[j] != p[i].fd)
                                j++;
                        if (p[i].revents)
                                idle[j] = -1 - idle[j]; /* connected: out of the set */
                }
        }
        for (int i = 0; i < IDLE; i++)
                if (idle[i] < 0)
                        idle[i] = -1 - idle[i];
        assert_live("1,000 idle connections");
        assert_live("1,000 idle connections");

        /* Slowloris: half a request each, a byte more now and then. */
        for (int i = 0; i < SLOW; i++) {
                cr_assert_geq(slow[i] = http_connect(port), 0);
                (void)!send(slow[i], "GET /metrics HTTP/1.1\r\nX-A: ", 28, MSG_NOSIGNAL);
        }
        for (int round = 0; round < 3; round++) {
                for (int i = 0; i < SLOW; i++)
                        (void)!send(slow[i], "a", 1, MSG_NOSIGNAL);
                assert_live("a slowloris crowd");
        }

        struct churn c = { .n = 40 };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, churn, &c), 0);
        for (int i = 0; i < 5; i++)
                assert_live("40 connections re-opened as they close");
        c.stop = true;
        pthread_join(t, NULL);
        for (int i = 0; i < IDLE; i++)
                close(idle[i]);
        for (int i = 0; i < SLOW; i++)
                close(slow[i]);
        cr_assert_eq(kill(e.pid, 0), 0, "the daemon died");
}

/* A hung PodResources and 8 scrapers: /healthz does not wait on it, and
 * the scrapes get their pages, without allocations, within the List's
 * deadline. */
Test(metrics, healthz_beside_a_hung_pod_resources) {
        enum { SCRAPERS = 8 };
        static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        int fds[SCRAPERS];

        start(true);
        tk_pr_mode(pr, TK_PR_SILENT);
        for (int i = 0; i < SCRAPERS; i++) {
                cr_assert_geq(fds[i] = http_connect(port), 0);
                cr_assert_eq(send(fds[i], req, sizeof(req) - 1, MSG_NOSIGNAL),
                             (ssize_t)sizeof(req) - 1);
        }
        for (int i = 0; i < 4; i++)
                assert_live("8 scrapes of a hung PodResources");
        for (int i = 0; i < SCRAPERS; i++) {
                char buf[64] = { 0 };
                struct pollfd p = { .fd = fds[i], .events = POLLIN };
                cr_assert_eq(poll(&p, 1, 5000), 1, "scrape %d never answered", i);
                cr_assert_gt(read(fds[i], buf, sizeof(buf) - 1), 0);
                cr_assert(strncmp(buf, "HTTP/1.1 200", 12) == 0, "scrape %d: %s", i, buf);
                close(fds[i]);
        }
        char *body = scrape();
        assert_has(body, "cdiplug_pod_resources_up 0\n");
        free(body);
}

/* 300,000 IDs of another resource (a 3.6 MB answer, within the 4 MiB
 * limit) beside ours: the scrape shows ours, and the daemon's peak
 * resident memory stays within its bound (it reached hundreds of MB). */
Test(metrics, huge_pod_resources_answer_costs_only_our_ids) {
        enum { OTHER = 300000 };
        char **ids = malloc(OTHER * sizeof(*ids)), *text = malloc(OTHER * 12);
        for (int i = 0; i < OTHER; i++) {
                ids[i] = text + i * 12;
                snprintf(ids[i], 12, "dev-%06d", i);
        }
        V1__ContainerDevices other = V1__CONTAINER_DEVICES__INIT,
                             mine = V1__CONTAINER_DEVICES__INIT;
        char *mine_ids[] = { "ttyUSB1" };
        other.resource_name = "vendor.example/gpu";
        other.n_device_ids = OTHER;
        other.device_ids = ids;
        mine.resource_name = "example.com/serial";
        mine.n_device_ids = 1;
        mine.device_ids = mine_ids;
        V1__ContainerDevices *devs[] = { &other, &mine };
        V1__ContainerResources ctr = V1__CONTAINER_RESOURCES__INIT;
        ctr.name = "app";
        ctr.n_devices = 2;
        ctr.devices = devs;
        V1__ContainerResources *ctrs[] = { &ctr };
        V1__PodResources pod = V1__POD_RESOURCES__INIT;
        pod.name = "big-0";
        pod.namespace_ = "batch";
        pod.n_containers = 1;
        pod.containers = ctrs;
        V1__PodResources *pods[] = { &pod };
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        resp.n_pod_resources = 1;
        resp.pod_resources = pods;
        size_t wire = v1__list_pod_resources_response__get_packed_size(&resp);
        cr_assert(wire > 3u << 20 && wire < 4u << 20, "answer of %zu bytes", wire);

        start(true);
        tk_pr_set(pr, &resp);
        for (int i = 0; i < 3; i++) {
                char *body = scrape();
                assert_alloc(
                        body,
                        "cdiplug_device_allocation_info{resource=\"example.com/serial\",device=\"ttyUSB1\",id=\"ttyUSB1\",namespace=\"batch\",pod=\"big-0\",container=\"app\"} 1");
                assert_has(body, "cdiplug_pod_resources_up 1\n");
                cr_assert_lt(strlen(body), 256u << 10, "a page of %zu bytes", strlen(body));
                free(body);
                struct timespec past_cache = { 1, 100000000 };
                if (i < 2)
                        nanosleep(&past_cache, NULL); /* the next scrape Lists again */
        }
        if (!UNDER_ASAN) {
                long hwm = status_kb("VmHWM"), anon = status_kb("RssAnon");
                cr_assert_lt(hwm, DAEMON_RSS_BOUND_KB, "peak resident %ld kB", hwm);
                cr_assert_lt(anon, 16 * 1024, "RssAnon %ld kB after the scrapes", anon);
        }
        free(ids);
        free(text);
}

/* A taken port: the devices are served meanwhile, the endpoint comes up
 * once the port is free (the old daemon exited 1 and served nothing). */
Test(metrics, taken_port_is_retried_while_devices_are_served) {
        int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int at = http_free_port();

        sa.sin_port = htons((uint16_t)at);
        setsockopt(taken, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        cr_assert_eq(bind(taken, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
        cr_assert_eq(listen(taken, 4), 0);
        start_on(true, at, false); /* registered: the devices are served */
        cr_assert_eq(file_wait_for(e.log, "cannot listen on", 10000), 0, "%s", env_read(e.log));
        cr_assert_eq(file_count(e.log, "metrics: serving"), 0);
        close(taken);
        cr_assert_eq(file_wait_for(e.log, "metrics: serving", 10000), 0, "%s", env_read(e.log));
        assert_live("the endpoint's late start");
        char *body = scrape();
        assert_has(body, "cdiplug_resource_ready{resource=\"example.com/serial\"} 1\n");
        free(body);
}
