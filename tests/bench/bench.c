/* cdiplug-bench: the performance figures in the README, measured against
 * the real daemon over unix sockets. Not a test: it prints numbers.
 *
 *   Allocate latency (p50/p99 over 10,000 calls) next to a bare grpc-core
 *   unary echo server with the same one-thread completion-queue loop, as
 *   the floor; kubelet restart → all 64 resources registered again (100
 *   restarts); exec → first Register; RssAnon/VmRSS with 64 resources.
 *
 * Extra arguments are passed to `cdiplug serve` (e.g. --no-sandbox). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kubelet.h"
#include "rpc.h"

#define ALLOC_CALLS 10000
#define RESTARTS 100
#define EXEC_RUNS 20
#define MANY 64

extern char **environ;

static char root[] = "/tmp/cdiplug-bench-XXXXXX";
static char **extra_args;
static int n_extra;

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static uint64_t pct(uint64_t *v, size_t n, double p) {
        qsort(v, n, sizeof(*v), cmp_u64);
        size_t i = (size_t)(p * (double)(n - 1) + 0.5);
        return v[i];
}

static void die(const char *what) {
        fprintf(stderr, "cdiplug-bench: %s failed\n", what);
        exit(1);
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        if (!f)
                die(path);
        fputs(text, f);
        fclose(f);
}

/* A config with n resources, each one device /dev/dNN under the host root. */
static char *make_env(const char *name, int n) {
        char *dir, *path, *cfg = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&cfg, &len);

        if (asprintf(&dir, "%s/%s", root, name) < 0)
                die("asprintf");
        mkdir(dir, 0755);
        if (asprintf(&path, "%s/host", dir) < 0)
                die("asprintf");
        mkdir(path, 0755);
        free(path);
        if (asprintf(&path, "%s/host/dev", dir) < 0)
                die("asprintf");
        mkdir(path, 0755);
        free(path);
        if (asprintf(&path, "%s/cdi", dir) < 0)
                die("asprintf");
        mkdir(path, 0755);
        free(path);
        fputs("{ \"resources\": [\n", m);
        for (int i = 0; i < n; i++) {
                if (asprintf(&path, "%s/host/dev/d%02d", dir, i) < 0)
                        die("asprintf");
                close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
                free(path);
                fprintf(m, "  { \"name\": \"bench.example.com/r%02d\", \"match\": [ { \"path\": \"/dev/d%02d\" } ] }%s\n",
                        i, i, i + 1 < n ? "," : "");
        }
        fputs("] }\n", m);
        fclose(m);
        if (asprintf(&path, "%s/config.json", dir) < 0)
                die("asprintf");
        write_file(path, cfg);
        free(path);
        free(cfg);
        return dir;
}

static pid_t spawn_daemon(const char *dir) {
        char *argv[32], *cfg, *kdir, *cdir, *host;
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int argc = 0;

        if (asprintf(&cfg, "%s/config.json", dir) < 0 || asprintf(&kdir, "%s/kubelet", dir) < 0 ||
            asprintf(&cdir, "%s/cdi", dir) < 0 || asprintf(&host, "%s/host", dir) < 0)
                die("asprintf");
        argv[argc++] = (char *)CDIPLUG_BIN;
        argv[argc++] = "serve";
        argv[argc++] = "--config";
        argv[argc++] = cfg;
        argv[argc++] = "--kubelet-dir";
        argv[argc++] = kdir;
        argv[argc++] = "--cdi-dir";
        argv[argc++] = cdir;
        argv[argc++] = "--host-root";
        argv[argc++] = host;
        for (int i = 0; i < n_extra && argc < 31; i++)
                argv[argc++] = extra_args[i];
        argv[argc] = NULL;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        if (posix_spawn(&pid, CDIPLUG_BIN, &fa, NULL, argv, environ) != 0)
                die("spawning cdiplug");
        posix_spawn_file_actions_destroy(&fa);
        free(cfg);
        free(kdir);
        free(cdir);
        free(host);
        return pid;
}

static void stop_daemon(pid_t pid) {
        int status;
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
}

/* The floor: a unary echo with the daemon's own loop shape, one thread
 * draining one completion queue. Runs in a child forked before grpc_init. */
static void echo_server(const char *sock) {
        char *addr;
        grpc_init();
        grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server *srv = grpc_server_create(NULL, NULL);
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        if (asprintf(&addr, "unix:%s", sock) < 0)
                die("asprintf");
        grpc_server_register_completion_queue(srv, cq, NULL);
        if (!grpc_server_add_http2_port(srv, addr, creds))
                die("echo listen");
        grpc_server_start(srv);
        for (;;) {
                grpc_call *call = NULL;
                grpc_call_details details;
                grpc_metadata_array md;
                grpc_byte_buffer *msg = NULL;
                grpc_slice status_details = grpc_empty_slice();
                int cancelled, tag;
                grpc_op ops[3];

                grpc_call_details_init(&details);
                grpc_metadata_array_init(&md);
                grpc_server_request_call(srv, &call, &details, &md, cq, cq, &tag);
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                memset(ops, 0, sizeof(ops));
                ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
                ops[1].op = GRPC_OP_RECV_MESSAGE;
                ops[1].data.recv_message.recv_message = &msg;
                grpc_call_start_batch(call, ops, 2, &tag, NULL);
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                memset(ops, 0, sizeof(ops));
                ops[0].op = GRPC_OP_SEND_MESSAGE;
                ops[0].data.send_message.send_message = msg;
                ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
                ops[1].data.send_status_from_server.status = GRPC_STATUS_OK;
                ops[1].data.send_status_from_server.status_details = &status_details;
                ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
                ops[2].data.recv_close_on_server.cancelled = &cancelled;
                grpc_call_start_batch(call, ops, 3, &tag, NULL);
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                if (msg)
                        grpc_byte_buffer_destroy(msg);
                grpc_call_details_destroy(&details);
                grpc_metadata_array_destroy(&md);
                grpc_call_unref(call);
        }
}

static void latency(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *desc, uint64_t *p50, uint64_t *p99) {
        static uint64_t t[ALLOC_CALLS];
        for (int i = 0; i < 200; i++) /* warm the connection */
                dp_call_unary(ch, method, req, desc, NULL, NULL, 5000);
        for (int i = 0; i < ALLOC_CALLS; i++) {
                uint64_t t0 = now_ns();
                if (dp_call_unary(ch, method, req, desc, NULL, NULL, 5000) != GRPC_STATUS_OK)
                        die(method);
                t[i] = now_ns() - t0;
        }
        *p50 = pct(t, ALLOC_CALLS, 0.50);
        *p99 = pct(t, ALLOC_CALLS, 0.99);
}

static long status_kb(pid_t pid, const char *field) {
        char path[64], line[256];
        long kb = -1;
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, strlen(field)) == 0 && line[strlen(field)] == ':')
                        kb = strtol(line + strlen(field) + 1, NULL, 10);
        fclose(f);
        return kb;
}

static const char *name_of(int i) {
        static char names[MANY][32];
        snprintf(names[i], sizeof(names[i]), "bench.example.com/r%02d", i);
        return names[i];
}

static void wait_all(struct tk *tk, int n, unsigned count) {
        for (int i = 0; i < n; i++) {
                if (tk_wait_registered(tk, name_of(i), count, 20000) < 0)
                        die("waiting for registration");
        }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st, (void)flag, (void)ftw;
        return remove(path);
}

int main(int argc, char **argv) {
        extra_args = argv + 1;
        n_extra = argc - 1;
        if (!mkdtemp(root))
                die("mkdtemp");
        char *echo_sock;
        if (asprintf(&echo_sock, "%s/echo.sock", root) < 0)
                die("asprintf");
        pid_t echo = fork();
        if (echo == 0)
                echo_server(echo_sock);
        grpc_init();

        /* 1. Allocate vs. the echo floor. */
        char *one = make_env("one", 1), *kdir;
        if (asprintf(&kdir, "%s/kubelet", one) < 0)
                die("asprintf");
        struct tk *tk;
        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        pid_t d = spawn_daemon(one);
        wait_all(tk, 1, 1);
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *creqs[] = {&creq};
        char *ids[] = {"d00"};
        creq.n_devices_ids = 1;
        creq.devices_ids = ids;
        req.n_container_requests = 1;
        req.container_requests = creqs;
        grpc_channel *ch = tk_dial(tk, "bench.example.com/r00");
        uint64_t a50, a99, e50, e99;
        latency(ch, DP_METHOD_ALLOCATE, &req.base, &v1beta1__allocate_response__descriptor, &a50, &a99);
        grpc_channel_destroy(ch);
        ch = dp_channel_unix(echo_sock);
        latency(ch, "/bench.Echo/Echo", &req.base, &v1beta1__allocate_request__descriptor, &e50, &e99);
        grpc_channel_destroy(ch);
        stop_daemon(d);
        tk_stop(tk);
        kill(echo, SIGKILL);
        waitpid(echo, NULL, 0);

        /* 2. exec → first Register (one resource, kubelet already up). */
        static uint64_t ex[EXEC_RUNS];
        for (int i = 0; i < EXEC_RUNS; i++) {
                if (tk_start(kdir, &tk) < 0)
                        die("test kubelet");
                uint64_t t0 = now_ns();
                d = spawn_daemon(one);
                wait_all(tk, 1, 1);
                ex[i] = tk_registered_at_ns(tk, "bench.example.com/r00") - t0;
                stop_daemon(d);
                tk_stop(tk);
        }

        /* 3. 64 resources: memory, then 100 kubelet restarts. */
        char *many = make_env("many", MANY);
        free(kdir);
        if (asprintf(&kdir, "%s/kubelet", many) < 0)
                die("asprintf");
        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        d = spawn_daemon(many);
        wait_all(tk, MANY, 1);
        long rss_anon = status_kb(d, "RssAnon"), vm_rss = status_kb(d, "VmRSS");
        static uint64_t re[RESTARTS];
        for (int i = 0; i < RESTARTS; i++) {
                unsigned before[MANY];
                for (int r = 0; r < MANY; r++)
                        before[r] = tk_registrations(tk, name_of(r));
                tk_restart(tk, i % 2);
                uint64_t t0 = tk_restarted_at_ns(tk), last = 0;
                for (int r = 0; r < MANY; r++) {
                        /* A Register already on its way to the old kubelet
                         * may land after the restart began: wait for one
                         * that arrived after it. */
                        unsigned want = before[r] + 1;
                        while (tk_wait_registered(tk, name_of(r), want, 20000) == 0 &&
                               tk_registered_at_ns(tk, name_of(r)) < t0)
                                want++;
                        uint64_t t = tk_registered_at_ns(tk, name_of(r));
                        if (t < t0)
                                die("waiting for re-registration");
                        if (t > last)
                                last = t;
                        if (getenv("BENCH_TRACE") && i == RESTARTS - 1)
                                fprintf(stderr, "%s %.2f ms\n", name_of(r), (double)(t - t0) / 1e6);
                }
                re[i] = last - t0;
        }
        long rss_anon_after = status_kb(d, "RssAnon");
        stop_daemon(d);
        tk_stop(tk);

        struct utsname u;
        uname(&u);
        printf("cdiplug-bench: %s %s, %ld CPUs, grpc %s%s\n", u.sysname, u.machine, sysconf(_SC_NPROCESSORS_ONLN),
               grpc_version_string(), n_extra ? " (extra daemon args given)" : "");
        printf("%-44s %10s %10s %s\n", "measure", "p50", "p99", "target");
        printf("%-44s %8.1fus %8.1fus\n", "grpc-core unary echo (floor)", (double)e50 / 1e3, (double)e99 / 1e3);
        printf("%-44s %8.1fus %8.1fus p50 <= 1.2x floor: %.2fx\n", "Allocate, 1 device", (double)a50 / 1e3,
               (double)a99 / 1e3, (double)a50 / (double)e50);
        printf("%-44s %8.2fms %8.2fms p99 < 20 ms\n", "kubelet restart -> 64 resources registered",
               (double)pct(re, RESTARTS, 0.5) / 1e6, (double)pct(re, RESTARTS, 0.99) / 1e6);
        printf("%-44s %8.2fms %8.2fms within 10 ms\n", "exec -> first Register", (double)pct(ex, EXEC_RUNS, 0.5) / 1e6,
               (double)pct(ex, EXEC_RUNS, 0.99) / 1e6);
        printf("%-44s %8ldkB %8s under 4 MB (after 100 restarts: %ld kB)\n", "RssAnon, 64 resources", rss_anon, "",
               rss_anon_after);
        printf("%-44s %8ldkB\n", "VmRSS, 64 resources", vm_rss);
        grpc_shutdown();
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        return 0;
}
