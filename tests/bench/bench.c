/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug-bench: the performance figures in docs/performance.md, measured against
 * the real daemon over unix sockets. Not a test: it prints numbers.
 *
 *   Allocate latency (p50/p99 over 10,000 calls) next to a bare grpc-core
 *   unary echo server with the same one-thread completion-queue loop and
 *   batches, as the floor, measured in alternating blocks so both see the
 *   same noise, in 5 rounds of freshly started servers, once with the
 *   client and the servers on separate CPUs and once all on one, with the
 *   servers' CPU time per call;
 *   kubelet restart → all 64 resources registered again (100 restarts),
 *   split into the daemon's part (every Register has reached the kubelet)
 *   and the whole (the kubelet has dialled back and answered every one);
 *   exec → first Register; RssAnon/VmRSS with 64 resources, before and
 *   after the restarts; device node appears/vanishes → the kubelet's
 *   ListAndWatch stream has the new list; discovery of 10,000 nodes; RssAnon
 *   with 64 resources holding those 10,000 devices; GetPreferredAllocation
 *   of 8 among 10,000 offered IDs (1,250 devices x 8 shares); /metrics with
 *   those 10,000 devices and 1,000 allocated IDs (p50/p99, the PodResources
 *   answer cached, and with a fresh dial and List each), RssAnon and idle
 *   wake-ups with the endpoint on; SIGHUP → the changed one of 64 resources
 *   has its new list on the kubelet's stream; beside 1,000 idle HTTP
 *   connections, scrape and /healthz p50/p99; Allocate p99 beside a client
 *   scraping back to back, with 1,000 IDs listed and with a 4 MiB
 *   PodResources answer, and RssAnon and peak resident after it;
 *   DRA with 64 resources against the fake API server: Prepare of one
 *   claim p50/p99, hotplug → ResourceSlice updated p50/p99, RssAnon;
 *   rollover (a second instance started, then SIGTERM to the first, 5
 *   times): how long Prepare fails per rollover, Prepare p50/p99 across,
 *   slice writes per rollover with every other instance on a config
 *   without the last resource, and slice writes in 10 s of two that
 *   disagree side by side; the same rollovers again under load (4 client threads at once), with how many
 *   Prepares failed and how many unprepared claims the checkpoint kept.
 *
 * Extra arguments are passed to `cdiplug serve` (e.g. --no-sandbox).
 * BENCH_ONLY=alloc,exec,restart,hotplug,reload,dra,rollover,discovery,many,preferred,scrape,
 * hostile
 * picks sections;
 * TMPDIR picks the file system the kubelet, CDI and fake /dev dirs go on;
 * BENCH_RESTARTS=N runs N kubelet restarts instead of 100; BENCH_TRACE=1
 * prints every restart, memory and fds every 50, and the last two
 * restarts per resource; BENCH_LOG=1 keeps the daemon's log on stderr. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dra.h"
#include "fakeapi.h"
#include "kubelet.h"
#include "resources.h"
#include "rpc.h"

#define ALLOC_CALLS 10000
#define ALLOC_BLOCK 500
#define ALLOC_ROUNDS 5
#define RESTARTS 100
#define RESTARTS_MAX 2000
#define EXEC_RUNS 20
#define MANY 64
#define HOTPLUG_EVENTS 200
#define NODES 10000
#define DISCOVER_RUNS 7
#define PREF_DEVICES 1250
#define PREF_SHARES 8
#define PREF_CALLS 1000
#define RELOADS 200
#define DRA_PREPARES 1000
#define DRA_HOTPLUGS 200
#define DRA_DRIVER "bench.example.com"
#define DRA_NODE "node1"

extern char **environ;

static char *root; /* $TMPDIR/cdiplug-bench-XXXXXX */
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

static char *path_join(const char *a, const char *b) {
        char *s;
        if (asprintf(&s, "%s/%s", a, b) < 0)
                die("asprintf");
        return s;
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        if (!f)
                die(path);
        fputs(text, f);
        fclose(f);
}

/* A fake device node: only char/block nodes are devices, and one node is
 * one device, so each gets numbers of its own in the char majors 60-63
 * that are reserved for local/experimental use (no driver answers). */
static void touch(const char *path) {
        static unsigned next;
        unsigned n = next++;

        if (mknod(path, S_IFCHR | 0644, makedev(60 + (n >> 20) % 4, n & 0xfffff)) < 0)
                die(path);
}

/* <root>/<name>/{host/dev,cdi} and config.json with the given text. */
static char *make_dir(const char *name, const char *config) {
        char *dir = path_join(root, name), *p;

        mkdir(dir, 0755);
        p = path_join(dir, "host");
        mkdir(p, 0755);
        free(p);
        p = path_join(dir, "host/dev");
        mkdir(p, 0755);
        free(p);
        p = path_join(dir, "cdi");
        mkdir(p, 0755);
        free(p);
        p = path_join(dir, "config.json");
        write_file(p, config);
        free(p);
        return dir;
}

static const char *name_of(int i) {
        static char names[MANY][32];
        snprintf(names[i], sizeof(names[i]), "bench.example.com/r%02d", i);
        return names[i];
}

/* A config with n resources; resource i matches /dev/<prefix>NN<suffix>. */
static char *resources_config(int n, const char *prefix, const char *suffix) {
        char *cfg = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&cfg, &len);

        fputs("{ \"resources\": [\n", m);
        for (int i = 0; i < n; i++)
                fprintf(m,
                        "  { \"name\": \"%s\", \"match\": [ { \"path\": \"/dev/%s%02d%s\" } ] }%s\n",
                        name_of(i), prefix, i, suffix, i + 1 < n ? "," : "");
        fputs("] }\n", m);
        fclose(m);
        return cfg;
}

/* n resources, each one device /dev/dNN. */
static char *make_env(const char *name, int n) {
        char *cfg = resources_config(n, "d", "");
        char *dir = make_dir(name, cfg);
        free(cfg);
        for (int i = 0; i < n; i++) {
                char node[32];
                snprintf(node, sizeof(node), "host/dev/d%02d", i);
                char *path = path_join(dir, node);
                touch(path);
                free(path);
        }
        return dir;
}

/* more: further arguments (NULL-terminated), or NULL. */
static pid_t spawn_daemon_with(const char *dir, char *const *more) {
        char *argv[40], *cfg, *kdir, *cdir, *host;
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int argc = 0;

        cfg = path_join(dir, "config.json");
        kdir = path_join(dir, "kubelet");
        cdir = path_join(dir, "cdi");
        host = path_join(dir, "host");
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
        for (int i = 0; more && more[i] && argc < 31; i++)
                argv[argc++] = more[i];
        for (int i = 0; i < n_extra && argc < 39; i++)
                argv[argc++] = extra_args[i];
        argv[argc] = NULL;
        posix_spawn_file_actions_init(&fa);
        if (!getenv("BENCH_LOG"))
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

static pid_t spawn_daemon(const char *dir) {
        return spawn_daemon_with(dir, NULL);
}

static void stop_daemon(pid_t pid) {
        int status;
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                die("cdiplug exiting cleanly");
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

static int fd_count(pid_t pid) {
        char path[64];
        int n = 0;
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        DIR *dir = opendir(path);
        if (!dir)
                return -1;
        for (struct dirent *de; (de = readdir(dir));)
                n += de->d_name[0] != '.';
        closedir(dir);
        return n;
}

/* BENCH_SMAPS=1: the daemon's anonymous memory by mapping, on stderr, to
 * see where RssAnon goes (thread stacks are the 8 MB mappings). */
static void dump_anon(pid_t pid, const char *when) {
        char path[64], line[512], range[128] = "", name[256] = "";
        long size = 0, total = 0;

        if (!getenv("BENCH_SMAPS"))
                return;
        snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
                return;
        fprintf(stderr, "anonymous memory of %d, %s:\n", (int)pid, when);
        /* NOLINTBEGIN(cert-err34-c): the kernel's own smaps lines */
        while (fgets(line, sizeof(line), f)) {
                long kb;
                if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' ') && line[0] != ' ') {
                        name[0] = '\0';
                        unsigned long a, b;
                        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %255[^\n]", &a, &b, name) < 2)
                                continue;
                        snprintf(range, sizeof(range), "%lx", a);
                        size = (long)((b - a) / 1024);
                } else if (sscanf(line, "Anonymous: %ld kB", &kb) == 1 && kb > 0) {
                        fprintf(stderr, "  %-14s %8ld kB of %8ld kB  %s\n", range, kb, size, name);
                        total += kb;
                }
        }
        /* NOLINTEND(cert-err34-c) */
        fclose(f);
        fprintf(stderr, "  total %ld kB\n", total);
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

static bool section(const char *name) {
        const char *only = getenv("BENCH_ONLY");
        if (!only)
                return true;
        size_t len = strlen(name);
        for (const char *p = only; (p = strstr(p, name)); p += len)
                if ((p == only || p[-1] == ',') && (p[len] == '\0' || p[len] == ','))
                        return true;
        return false;
}

/* Figures, printed together at the end. */
static struct {
        bool exec, restart, hotplug, discovery, many, preferred, reload;
        struct placement {
                const char *name;
                uint64_t a50, a99, e50, e99;
                double a_cpu, e_cpu; /* server CPU µs per call */
        } place[2];
        int n_place;
        uint64_t x50, x99, xr50, xr99;
        uint64_t rs50, rs99, rr50, rr99;
        long rss_anon, vm_rss, rss_anon_after;
        int fds_before, fds_after, restarts;
        uint64_t h_add50, h_add99, h_del50, h_del99, h_all50, h_all99;
        uint64_t disc50, disc_max, gen50;
        long many_rss_anon, many_vm_rss;
        uint64_t pref50, pref99;
        double pref_cpu; /* server CPU µs per call */
        bool scrape;
        uint64_t sc50, sc99, scl50, scl99;
        size_t scrape_bytes, allocated_series;
        long scrape_rss_anon, scrape_rss_before;
        bool small;
        long small_rss_off, small_rss_before, small_rss_on;
        long idle_wakeups;
        double scrape_cpu_ms, scrape_user_ms, scrape_sys_ms;
        uint64_t rl50, rl99;
        unsigned rl_regs, rl_lists; /* Registers and lists of the 63 others across the reloads */
        bool dra;
        uint64_t dra_p50, dra_p99;     /* Prepare, one claim */
        uint64_t dra_h50, dra_h99;     /* hotplug -> slice updated */
        long dra_rss_anon, dra_vm_rss; /* 64 DRA resources, published */
        long dra_rss_anon_after;       /* after the Prepares and hotplugs */
        bool roll;
        struct roll_fig {
                uint64_t w50, wmax; /* Prepare failing, per rollover */
                uint64_t p50, p99;  /* Prepare during the rollovers */
                unsigned calls, failed;
                unsigned back; /* unprepared (answered so) but still in the checkpoint */
                uint64_t writes50, writes_max; /* slice writes per rollover, config changed */
        } roll_fig[2];                         /* 1 client thread; ROLL_LOAD clients */
        unsigned war_writes;                   /* two that disagree, side by side, 10 s */
        bool hostile;
        uint64_t hi_sc50, hi_sc99, hi_hz50, hi_hz99; /* beside 1,000 idle connections */
        uint64_t hi_a50, hi_a99;                     /* Allocate alone */
        uint64_t hi_s50[2], hi_s99[2]; /* beside scrapes of 1,000 IDs, of a 4 MiB answer */
        unsigned hi_scrapes[2], hi_lists[2];
        long hi_rss_anon, hi_hwm;
} fig;

/* The floor: a unary echo with the daemon's own loop and batch shape, one
 * thread draining one completion queue, the answer in one batch. It runs
 * as `cdiplug-bench --echo SOCK`, its own exec'd program like the daemon,
 * and writes one byte to stdout once it serves. */
static void echo_server(const char *sock) {
        char *addr;
        dp_grpc_init();
        grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server *srv = grpc_server_create(NULL, NULL);
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        if (asprintf(&addr, "unix:%s", sock) < 0)
                die("asprintf");
        grpc_server_register_completion_queue(srv, cq, NULL);
        if (!grpc_server_add_http2_port(srv, addr, creds))
                die("echo listen");
        grpc_server_start(srv);
        if (write(1, "", 1) != 1)
                die("echo ready");
        for (;;) {
                grpc_call *call = NULL;
                grpc_call_details details;
                grpc_metadata_array md;
                grpc_byte_buffer *msg = NULL;
                grpc_slice status_details = grpc_empty_slice();
                int cancelled, tag;
                grpc_op ops[4];

                grpc_call_details_init(&details);
                grpc_metadata_array_init(&md);
                grpc_server_request_call(srv, &call, &details, &md, cq, cq, &tag);
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                memset(ops, 0, sizeof(ops));
                ops[0].op = GRPC_OP_RECV_MESSAGE;
                ops[0].data.recv_message.recv_message = &msg;
                grpc_call_start_batch(call, ops, 1, &tag, NULL);
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                memset(ops, 0, sizeof(ops));
                ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
                ops[1].op = GRPC_OP_SEND_MESSAGE;
                ops[1].data.send_message.send_message = msg;
                ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
                ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
                ops[2].data.send_status_from_server.status_details = &status_details;
                ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
                ops[3].data.recv_close_on_server.cancelled = &cancelled;
                grpc_call_start_batch(call, ops, 4, &tag, NULL);
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                if (msg)
                        grpc_byte_buffer_destroy(msg);
                grpc_call_details_destroy(&details);
                grpc_metadata_array_destroy(&md);
                grpc_call_unref(call);
        }
}

static pid_t spawn_echo(const char *sock) {
        char *argv[] = { "cdiplug-bench", "--echo", (char *)sock, NULL };
        posix_spawn_file_actions_t fa;
        int pipefd[2];
        char ready;
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                die("pipe");
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ) != 0)
                die("spawning the echo server");
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        if (read(pipefd[0], &ready, 1) != 1)
                die("echo server start");
        close(pipefd[0]);
        return pid;
}

static void call_block(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
                       const ProtobufCMessageDescriptor *desc, uint64_t *t, int n) {
        for (int i = 0; i < n; i++) {
                uint64_t t0 = now_ns();
                if (dp_call_unary(ch, method, req, desc, NULL, NULL, 5000) != GRPC_STATUS_OK)
                        die(method);
                if (t)
                        t[i] = now_ns() - t0;
        }
}

/* The threads of a process (0: this one): their IDs into tids, how many. */
static int threads_of(pid_t pid, pid_t *tids, int max) {
        char path[64];
        DIR *dir;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)(pid ? pid : getpid()));
        if (!(dir = opendir(path)))
                die(path);
        for (struct dirent *de; (de = readdir(dir)) && n < max;)
                if (de->d_name[0] != '.')
                        tids[n++] = (pid_t)strtol(de->d_name, NULL, 10);
        closedir(dir);
        return n;
}

static void pin_process(pid_t pid, const cpu_set_t *set) {
        pid_t tids[64];
        int n = threads_of(pid, tids, 64);

        for (int i = 0; i < n; i++)
                if (sched_setaffinity(tids[i], sizeof(*set), set) < 0)
                        die("sched_setaffinity");
}

/* CPU time of every thread of a process so far, in ns. */
static uint64_t process_cpu_ns(pid_t pid) {
        pid_t tids[64];
        int n = threads_of(pid, tids, 64);
        uint64_t sum = 0;

        for (int i = 0; i < n; i++) {
                char path[80];
                unsigned long long ns;
                snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tids[i]);
                FILE *f = fopen(path, "r");
                /* NOLINTNEXTLINE(cert-err34-c): the kernel's schedstat counter */
                if (f && fscanf(f, "%llu", &ns) == 1)
                        sum += ns;
                if (f)
                        fclose(f);
        }
        return sum;
}

/* The process's user and system CPU time in clock ticks (/proc/PID/stat). */
static void process_user_sys(pid_t pid, unsigned long long *user, unsigned long long *sys) {
        char path[64], buf[1024];
        FILE *f;
        size_t n = 0;

        *user = *sys = 0;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if ((f = fopen(path, "r"))) {
                n = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
        }
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        if (p)
                /* NOLINTNEXTLINE(cert-err34-c): the kernel's stat line */
                (void)sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", user,
                             sys);
}

static cpu_set_t one_cpu(int cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        return set;
}

/* Two things decide the ratio more than either server's code does, so
 * both are fixed the same way for the floor and for cdiplug:
 * - where the threads run. On two CPUs the scheduler picks, run by run,
 *   between client and server sharing a CPU and each having one. Each
 *   placement is measured on its own: every thread of the client (its
 *   grpc pollers read the answers too) on CPU 0, every thread of both
 *   servers on CPU 1, or on CPU 0 as well.
 * - where the code sits. A process's address layout is random, and on a
 *   shared CPU it moves the cost of a call, client side included, by up
 *   to half from one exec to the next. Each round starts both servers
 *   afresh, so the figures pool ALLOC_ROUNDS layouts of each. */
struct alloc_run {
        grpc_channel *ach, *ech;
        pid_t d, echo;
        const ProtobufCMessage *req;
};

static void bench_placement(const struct alloc_run *run, int round, int server_cpu, uint64_t *ta,
                            uint64_t *te, uint64_t *cpu_a, uint64_t *cpu_e) {
        cpu_set_t client = one_cpu(0), server = one_cpu(server_cpu);
        const int per_round = ALLOC_CALLS / ALLOC_ROUNDS;

        pin_process(0, &client);
        pin_process(run->d, &server);
        pin_process(run->echo, &server);
        call_block(run->ach, DP_METHOD_ALLOCATE, run->req, &v1beta1__allocate_response__descriptor,
                   NULL, 200);
        call_block(run->ech, "/bench.Echo/Echo", run->req, &v1beta1__allocate_request__descriptor,
                   NULL, 200);
        for (int i = round * per_round; i < (round + 1) * per_round; i += ALLOC_BLOCK) {
                uint64_t c0 = process_cpu_ns(run->d);
                call_block(run->ach, DP_METHOD_ALLOCATE, run->req,
                           &v1beta1__allocate_response__descriptor, ta + i, ALLOC_BLOCK);
                *cpu_a += process_cpu_ns(run->d) - c0;
                c0 = process_cpu_ns(run->echo);
                call_block(run->ech, "/bench.Echo/Echo", run->req,
                           &v1beta1__allocate_request__descriptor, te + i, ALLOC_BLOCK);
                *cpu_e += process_cpu_ns(run->echo) - c0;
        }
}

static void bench_alloc(void) {
        static uint64_t ta[2][ALLOC_CALLS], te[2][ALLOC_CALLS];
        static const char *names[] = { "2 CPUs", "1 CPU" };
        uint64_t cpu_a[2] = { 0 }, cpu_e[2] = { 0 };
        cpu_set_t all;
        struct tk *tk;
        int first;

        if (sched_getaffinity(0, sizeof(all), &all) < 0)
                die("sched_getaffinity");
        if (!CPU_ISSET(0, &all))
                return;
        /* Both placements need CPUs 0 and 1; with CPU 0 alone, only the
         * shared one. */
        first = CPU_ISSET(1, &all) ? 0 : 1;
        char *one = make_env("alloc", 1), *kdir = path_join(one, "kubelet");
        char *echo_sock = path_join(root, "echo.sock");

        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *creqs[] = { &creq };
        char *ids[] = { "d00" };
        creq.n_devices_ids = 1;
        creq.devices_ids = ids;
        req.n_container_requests = 1;
        req.container_requests = creqs;

        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        for (int round = 0; round < ALLOC_ROUNDS; round++) {
                struct alloc_run run = { .req = &req.base };
                run.d = spawn_daemon(one);
                wait_all(tk, 1, (unsigned)round + 1);
                run.echo = spawn_echo(echo_sock);
                run.ach = tk_dial(tk, name_of(0));
                run.ech = dp_channel_unix(echo_sock);
                for (int pl = first; pl < 2; pl++)
                        bench_placement(&run, round, pl == 0 ? 1 : 0, ta[pl], te[pl], &cpu_a[pl],
                                        &cpu_e[pl]);
                pin_process(0, &all);
                grpc_channel_destroy(run.ach);
                grpc_channel_destroy(run.ech);
                stop_daemon(run.d);
                kill(run.echo, SIGKILL);
                waitpid(run.echo, NULL, 0);
        }
        for (int pl = first; pl < 2; pl++)
                fig.place[fig.n_place++] = (struct placement){
                        .name = names[pl],
                        .a50 = pct(ta[pl], ALLOC_CALLS, 0.50),
                        .a99 = pct(ta[pl], ALLOC_CALLS, 0.99),
                        .e50 = pct(te[pl], ALLOC_CALLS, 0.50),
                        .e99 = pct(te[pl], ALLOC_CALLS, 0.99),
                        .a_cpu = (double)cpu_a[pl] / 1e3 / ALLOC_CALLS,
                        .e_cpu = (double)cpu_e[pl] / 1e3 / ALLOC_CALLS,
                };
        tk_stop(tk);
        free(echo_sock);
        free(one);
        free(kdir);
}

/* exec → first Register (one resource, kubelet already up). */
static void bench_exec(void) {
        static uint64_t ex[EXEC_RUNS], exr[EXEC_RUNS];
        char *one = make_env("exec", 1), *kdir = path_join(one, "kubelet");
        struct tk *tk;

        for (int i = 0; i < EXEC_RUNS; i++) {
                if (tk_start(kdir, &tk) < 0)
                        die("test kubelet");
                uint64_t t0 = now_ns();
                pid_t d = spawn_daemon(one);
                wait_all(tk, 1, 1);
                ex[i] = tk_register_arrived_at_ns(tk, name_of(0)) - t0;
                exr[i] = tk_registered_at_ns(tk, name_of(0)) - t0;
                stop_daemon(d);
                tk_stop(tk);
        }
        fig.x50 = pct(ex, EXEC_RUNS, 0.5);
        fig.x99 = pct(ex, EXEC_RUNS, 0.99);
        fig.xr50 = pct(exr, EXEC_RUNS, 0.5);
        fig.xr99 = pct(exr, EXEC_RUNS, 0.99);
        fig.exec = true;
        free(one);
        free(kdir);
}

/* 64 resources: memory, then 100 kubelet restarts. */
static void bench_restart(void) {
        static uint64_t sent[RESTARTS_MAX], done[RESTARTS_MAX];
        const char *env = getenv("BENCH_RESTARTS");
        char *end = NULL;
        long asked = env ? strtol(env, &end, 10) : RESTARTS;
        /* -1 (refused below) for text that is not a number in range. */
        int restarts = (env && (end == env || *end)) || asked < 1 || asked > RESTARTS_MAX
                               ? -1
                               : (int)asked;
        char *many = make_env("restart", MANY), *kdir = path_join(many, "kubelet");
        struct tk *tk;

        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        pid_t d = spawn_daemon(many);
        wait_all(tk, MANY, 1);
        fig.rss_anon = status_kb(d, "RssAnon");
        fig.vm_rss = status_kb(d, "VmRSS");
        fig.fds_before = fd_count(d);
        if (restarts < 1 || restarts > RESTARTS_MAX)
                die("BENCH_RESTARTS");
        for (int i = 0; i < restarts; i++) {
                if (getenv("BENCH_TRACE") && i % 50 == 0)
                        fprintf(stderr, "restart %d: RssAnon %ld kB, %d fds, %ld threads\n", i,
                                status_kb(d, "RssAnon"), fd_count(d), status_kb(d, "Threads"));
                unsigned before[MANY];
                for (int r = 0; r < MANY; r++)
                        before[r] = tk_registrations(tk, name_of(r));
                tk_restart(tk, i % 2);
                uint64_t t0 = tk_restarted_at_ns(tk), last = 0, last_sent = 0;
                for (int r = 0; r < MANY; r++) {
                        /* A Register already on its way to the old kubelet
                         * may land after the restart began: wait for one
                         * that arrived after it. */
                        unsigned want = before[r] + 1;
                        while (tk_wait_registered(tk, name_of(r), want, 20000) == 0 &&
                               tk_register_arrived_at_ns(tk, name_of(r)) < t0)
                                want++;
                        uint64_t t = tk_registered_at_ns(tk, name_of(r));
                        uint64_t a = tk_register_arrived_at_ns(tk, name_of(r));
                        if (a < t0)
                                die("waiting for re-registration");
                        if (t > last)
                                last = t;
                        if (a > last_sent)
                                last_sent = a;
                        if (getenv("BENCH_TRACE") && i >= restarts - 2)
                                fprintf(stderr,
                                        "restart %d %s: Register arrived %.2f ms, answered %.2f ms\n",
                                        i, name_of(r), (double)(a - t0) / 1e6,
                                        (double)(t - t0) / 1e6);
                }
                done[i] = last - t0;
                sent[i] = last_sent - t0;
                if (getenv("BENCH_TRACE"))
                        fprintf(stderr,
                                "restart %d (%s first): all arrived %.2f ms, all answered %.2f ms\n",
                                i, i % 2 ? "kubelet.sock" : "deletion", (double)sent[i] / 1e6,
                                (double)done[i] / 1e6);
        }
        /* grpc closes the old kubelet's connections asynchronously. */
        for (int i = 0; i < 100 && fd_count(d) > fig.fds_before; i++)
                usleep(10000);
        fig.fds_after = fd_count(d);
        fig.rss_anon_after = status_kb(d, "RssAnon");
        stop_daemon(d);
        tk_stop(tk);
        fig.rs50 = pct(sent, (size_t)restarts, 0.5);
        fig.rs99 = pct(sent, (size_t)restarts, 0.99);
        fig.rr50 = pct(done, (size_t)restarts, 0.5);
        fig.rr99 = pct(done, (size_t)restarts, 0.99);
        fig.restarts = restarts;
        fig.restart = true;
        free(many);
        free(kdir);
}

/* Wait for the list after the n-th and return when it arrived; the list
 * must show node hp1 as want ("" absent, "Healthy", "Unhealthy"). */
static uint64_t wait_list(struct tk *tk, const char *res, unsigned n, const char *want) {
        V1beta1__ListAndWatchResponse *list;
        for (;; n++) {
                if (tk_wait_lists(tk, res, n, 5000, &list) < 0)
                        die("waiting for a new device list");
                const char *health = "";
                for (size_t i = 0; i < list->n_devices; i++)
                        if (strcmp(list->devices[i]->id, "hp1") == 0)
                                health = list->devices[i]->health;
                bool ok = strcmp(health, want) == 0;
                v1beta1__list_and_watch_response__free_unpacked(list, NULL);
                if (ok)
                        return tk_list_at_ns(tk, res);
        }
}

/* A node appears or vanishes → the kubelet's stream has the new list. */
static void bench_hotplug(void) {
        static uint64_t add[HOTPLUG_EVENTS / 2], del[HOTPLUG_EVENTS / 2], all[HOTPLUG_EVENTS];
        char *dir = make_dir("hotplug", "{ \"resources\": [ { \"name\": \"bench.example.com/r00\", "
                                        "\"match\": [ { \"path\": \"/dev/hp*\" } ] } ] }\n");
        char *kdir = path_join(dir, "kubelet");
        char *node0 = path_join(dir, "host/dev/hp0"), *node = path_join(dir, "host/dev/hp1");
        struct tk *tk;
        const char *res = name_of(0);

        touch(node0);
        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        pid_t d = spawn_daemon(dir);
        wait_all(tk, 1, 1);
        for (int i = 0; i < HOTPLUG_EVENTS; i++) {
                unsigned n = tk_lists(tk, res) + 1;
                uint64_t t0 = now_ns(), t;
                if (i % 2 == 0) {
                        touch(node);
                        t = wait_list(tk, res, n, "Healthy") - t0;
                        add[i / 2] = t;
                } else {
                        if (unlink(node) < 0)
                                die("unlink");
                        t = wait_list(tk, res, n, "Unhealthy") - t0;
                        del[i / 2] = t;
                }
                all[i] = t;
        }
        stop_daemon(d);
        tk_stop(tk);
        fig.h_add50 = pct(add, HOTPLUG_EVENTS / 2, 0.5);
        fig.h_add99 = pct(add, HOTPLUG_EVENTS / 2, 0.99);
        fig.h_del50 = pct(del, HOTPLUG_EVENTS / 2, 0.5);
        fig.h_del99 = pct(del, HOTPLUG_EVENTS / 2, 0.99);
        fig.h_all50 = pct(all, HOTPLUG_EVENTS, 0.5);
        fig.h_all99 = pct(all, HOTPLUG_EVENTS, 0.99);
        fig.hotplug = true;
        free(dir);
        free(kdir);
        free(node0);
        free(node);
}

/* SIGHUP → the new list of the one changed resource of 64 on its stream.
 * config.json is a symlink into a dir the daemon does not watch, so only
 * the signal starts each reload; resource 7's selector alternates between
 * two env edits, so each reload rewrites its spec (durably) before the
 * list goes out, as a real edit of a selector does. */
static char *with_env(const char *cfg, const char *value) {
        const char *at = strstr(cfg, "/dev/d07\"");
        char *out = NULL;

        if (!at || asprintf(&out, "%.*s/dev/d07\", \"env\": { \"BENCH\": \"%s\" }%s",
                            (int)(at - cfg), cfg, value, at + strlen("/dev/d07\"")) < 0)
                die("building the config");
        return out;
}

static void bench_reload(void) {
        static uint64_t lat[RELOADS];
        char *dir = make_env("reload", MANY), *kdir = path_join(dir, "kubelet");
        char *cfg = path_join(dir, "config.json"), *real_dir = path_join(dir, "real");
        char *real = path_join(real_dir, "config.json"),
             *tmp = path_join(real_dir, "config.json.tmp");
        char *plain = resources_config(MANY, "d", "");
        char *one = with_env(plain, "a"), *wide = with_env(plain, "b");
        struct tk *tk;
        unsigned regs = 0, lists = 0;

        mkdir(real_dir, 0755);
        write_file(real, one);
        unlink(cfg);
        if (symlink("real/config.json", cfg) < 0)
                die("symlink");
        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        pid_t d = spawn_daemon(dir);
        wait_all(tk, MANY, 1);
        for (int i = 0; i < MANY; i++)
                if (i != 7) {
                        regs += tk_registrations(tk, name_of(i));
                        lists += tk_lists(tk, name_of(i));
                }
        for (int i = 0; i < RELOADS; i++) {
                unsigned n = tk_lists(tk, name_of(7)) + 1;
                V1beta1__ListAndWatchResponse *list;
                write_file(tmp, i % 2 ? one : wide);
                if (rename(tmp, real) < 0)
                        die("rename");
                uint64_t t0 = now_ns();
                kill(d, SIGHUP);
                if (tk_wait_lists(tk, name_of(7), n, 5000, &list) < 0)
                        die("waiting for the reloaded list");
                v1beta1__list_and_watch_response__free_unpacked(list, NULL);
                lat[i] = tk_list_at_ns(tk, name_of(7)) - t0;
        }
        for (int i = 0; i < MANY; i++)
                if (i != 7) {
                        regs -= tk_registrations(tk, name_of(i));
                        lists -= tk_lists(tk, name_of(i));
                }
        stop_daemon(d);
        tk_stop(tk);
        fig.rl50 = pct(lat, RELOADS, 0.5);
        fig.rl99 = pct(lat, RELOADS, 0.99);
        fig.rl_regs = -regs;
        fig.rl_lists = -lists;
        fig.reload = true;
        free(dir);
        free(kdir);
        free(cfg);
        free(real_dir);
        free(real);
        free(tmp);
        free(plain);
        free(one);
        free(wide);
}

/* 10,000 nodes /dev/bNN-IIII, spread over 64 resources (bNN-*). */
static char *make_nodes(void) {
        char *cfg = resources_config(MANY, "b", "-*");
        char *dir = make_dir("nodes", cfg);
        free(cfg);
        for (int i = 0; i < NODES; i++) {
                char rel[64];
                snprintf(rel, sizeof(rel), "host/dev/b%02d-%04d", i % MANY, i);
                char *path = path_join(dir, rel);
                touch(path);
                free(path);
        }
        return dir;
}

static void bench_discovery(const char *dir) {
        static uint64_t t[DISCOVER_RUNS];
        cJSON *entry = cJSON_Parse("{ \"path\": \"/dev/b*\" }");
        struct res_selector *sel = NULL;
        char *host = path_join(dir, "host");

        if (!entry || res_selector_parse(entry, &sel, NULL) < 0)
                die("parsing the selector");
        for (int i = 0; i < DISCOVER_RUNS; i++) {
                struct res_devlist found = { 0 };
                uint64_t t0 = now_ns();
                if (res_discover(host, &sel, 1, &found) < 0 || found.n != NODES)
                        die("res_discover");
                t[i] = now_ns() - t0;
                res_devlist_free(&found);
        }
        fig.disc50 = pct(t, DISCOVER_RUNS, 0.5);
        fig.disc_max = t[DISCOVER_RUNS - 1];

        /* The whole `cdiplug generate --stdout`: exec, discovery, 64 specs. */
        char *cfg = path_join(dir, "config.json");
        char *argv[] = { (char *)CDIPLUG_BIN, "generate", "--config", cfg,
                         "--host-root",       host,       "--stdout", NULL };
        for (int i = 0; i < DISCOVER_RUNS; i++) {
                posix_spawn_file_actions_t fa;
                pid_t pid;
                int status;
                posix_spawn_file_actions_init(&fa);
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
                posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
                uint64_t t0 = now_ns();
                if (posix_spawn(&pid, CDIPLUG_BIN, &fa, NULL, argv, environ) != 0)
                        die("spawning cdiplug generate");
                waitpid(pid, &status, 0);
                t[i] = now_ns() - t0;
                posix_spawn_file_actions_destroy(&fa);
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        die("cdiplug generate");
        }
        fig.gen50 = pct(t, DISCOVER_RUNS, 0.5);
        fig.discovery = true;
        res_selector_free(sel);
        cJSON_Delete(entry);
        free(cfg);
        free(host);
}

/* RssAnon with 64 resources holding the 10,000 devices. */
static void bench_many(const char *dir) {
        char *kdir = path_join(dir, "kubelet");
        struct tk *tk;

        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        pid_t d = spawn_daemon(dir);
        wait_all(tk, MANY, 1);
        fig.many_rss_anon = status_kb(d, "RssAnon");
        dump_anon(d, "64 resources, 10,000 devices");
        if (getenv("BENCH_SMAPS")) {
                sleep(1);
                fprintf(stderr, "after 1 s: %ld\n", status_kb(d, "RssAnon"));
        }
        fig.many_vm_rss = status_kb(d, "VmRSS");
        stop_daemon(d);
        tk_stop(tk);
        fig.many = true;
        free(kdir);
}

/* GetPreferredAllocation as the kubelet asks it on a big node: every
 * free ID offered, a few wanted. */
static void bench_preferred(void) {
        static uint64_t t[PREF_CALLS];
        char *cfg = NULL;
        struct tk *tk;
        V1beta1__ListAndWatchResponse *list = NULL;

        if (asprintf(
                    &cfg,
                    "{ \"resources\": [ { \"name\": \"%s\", \"match\": [ { \"path\": \"/dev/p*\" } ],"
                    " \"shares\": %d } ] }\n",
                    name_of(0), PREF_SHARES) < 0)
                die("asprintf");
        char *dir = make_dir("preferred", cfg), *kdir = path_join(dir, "kubelet");
        for (int i = 0; i < PREF_DEVICES; i++) {
                char rel[64];
                snprintf(rel, sizeof(rel), "host/dev/p%04d", i);
                char *path = path_join(dir, rel);
                touch(path);
                free(path);
        }
        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        pid_t d = spawn_daemon(dir);
        wait_all(tk, 1, 1);
        if (tk_wait_lists(tk, name_of(0), 1, 5000, &list) < 0 ||
            list->n_devices != PREF_DEVICES * PREF_SHARES)
                die("the list of 10,000 IDs");

        V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest creq =
                V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest *creqs[] = { &creq };
        char **ids = calloc(list->n_devices, sizeof(char *));
        if (!ids)
                die("calloc");
        for (size_t i = 0; i < list->n_devices; i++)
                ids[i] = list->devices[i]->id;
        creq.n_available_deviceids = list->n_devices;
        creq.available_deviceids = ids;
        creq.allocation_size = 8;
        req.n_container_requests = 1;
        req.container_requests = creqs;
        grpc_channel *ch = tk_dial(tk, name_of(0));
        uint64_t cpu0 = process_cpu_ns(d);
        call_block(ch, DP_METHOD_PREFERRED, &req.base,
                   &v1beta1__preferred_allocation_response__descriptor, t, PREF_CALLS);
        fig.pref_cpu = (double)(process_cpu_ns(d) - cpu0) / 1e3 / PREF_CALLS;
        fig.pref50 = pct(t, PREF_CALLS, 0.5);
        fig.pref99 = pct(t, PREF_CALLS, 0.99);
        fig.preferred = true;
        grpc_channel_destroy(ch);
        free(ids);
        v1beta1__list_and_watch_response__free_unpacked(list, NULL);
        stop_daemon(d);
        tk_stop(tk);
        free(cfg);
        free(dir);
        free(kdir);
}

#define SCRAPES 200
#define SCRAPES_LIST 20
#define ALLOCATED 1000
#define SMALL_SCRAPES 5

/* One GET of path on loopback, the whole answer read; its size, or 0. */
static size_t http_path(int port, const char *path, char **ret_body) {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        char req[128];
        int len = snprintf(req, sizeof(req),
                           "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
        size_t cap = 1 << 20, n = 0;
        char *buf = malloc(cap);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (!buf || fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            write(fd, req, (size_t)len) != (ssize_t)len)
                die("scrape");
        for (;;) {
                if (n + 65536 > cap && !(buf = realloc(buf, cap *= 2)))
                        die("realloc");
                ssize_t r = read(fd, buf + n, cap - n - 1);
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        buf[n] = '\0';
        if (strncmp(buf, "HTTP/1.1 200", 12) != 0)
                die("scrape status");
        if (ret_body)
                *ret_body = buf;
        else
                free(buf);
        return n;
}

static size_t http_scrape(int port, char **ret_body) {
        return http_path(port, "/metrics", ret_body);
}

static int free_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
                die("finding a free port");
        close(fd);
        return ntohs(sa.sin_port);
}

/* 1,000 of the 10,000 IDs allocated, ten to a pod. */
static void set_pods(struct tk_pr *pr) {
        static char ids[ALLOCATED][16], pods[ALLOCATED / 10][16];
        static char *idp[ALLOCATED];
        static V1__ContainerDevices cd[ALLOCATED];
        static V1__ContainerDevices *cdp[ALLOCATED];
        static V1__ContainerResources ctr[ALLOCATED / 10];
        static V1__ContainerResources *ctrp[ALLOCATED / 10];
        static V1__PodResources pod[ALLOCATED / 10];
        static V1__PodResources *podp[ALLOCATED / 10];
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;

        for (int k = 0; k < ALLOCATED; k++) {
                int dev = k * (NODES / ALLOCATED);
                snprintf(ids[k], sizeof(ids[k]), "b%02d-%04d", dev % MANY, dev);
                idp[k] = ids[k];
                v1__container_devices__init(&cd[k]);
                cd[k].resource_name = (char *)name_of(dev % MANY);
                cd[k].n_device_ids = 1;
                cd[k].device_ids = &idp[k];
                cdp[k] = &cd[k];
        }
        for (int p = 0; p < ALLOCATED / 10; p++) {
                v1__container_resources__init(&ctr[p]);
                ctr[p].name = "app";
                ctr[p].n_devices = 10;
                ctr[p].devices = &cdp[p * 10];
                ctrp[p] = &ctr[p];
                v1__pod_resources__init(&pod[p]);
                snprintf(pods[p], sizeof(pods[p]), "pod-%03d", p);
                pod[p].name = pods[p];
                pod[p].namespace_ = "bench";
                pod[p].n_containers = 1;
                pod[p].containers = &ctrp[p];
                podp[p] = &pod[p];
        }
        resp.n_pod_resources = ALLOCATED / 10;
        resp.pod_resources = podp;
        tk_pr_set(pr, &resp);
}

static long thread_wakeups(pid_t pid) {
        char path[64];
        long total = 0;
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *dir = opendir(path);
        struct dirent *de;
        while (dir && (de = readdir(dir))) {
                if (de->d_name[0] == '.')
                        continue;
                char status[512], line[256];
                snprintf(status, sizeof(status), "%s/%s/status", path, de->d_name);
                FILE *f = fopen(status, "r");
                while (f && fgets(line, sizeof(line), f))
                        if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
                                total += strtol(line + 24, NULL, 10);
                if (f)
                        fclose(f);
        }
        if (dir)
                closedir(dir);
        return total;
}

/* /metrics with 64 resources, 10,000 devices and 1,000 allocated IDs:
 * scrapes back to back (the PodResources answer cached), then scrapes
 * each after the PodResources socket was re-created (a fresh dial and
 * List in every one); RssAnon after them; wake-ups while idle. */
/* cfg, a config object ending in "}\n", with the metrics endpoint on
 * 127.0.0.1:port and PodResources at prsock. */
static char *with_endpoint(const char *cfg, int port, const char *prsock) {
        char *out;

        if (asprintf(&out,
                     "%.*s, \"metrics\": { \"address\": \"127.0.0.1:%d\", "
                     "\"pod_resources_socket\": \"%s\" } }\n",
                     (int)strlen(cfg) - 2, cfg, port, prsock) < 0)
                die("asprintf");
        return out;
}

static void bench_scrape(const char *dir) {
        static uint64_t t[SCRAPES];
        char *kdir = path_join(dir, "kubelet"), *prsock = path_join(dir, "pod-resources.sock");
        char *cfg_path = path_join(dir, "config.json"), *cfg = resources_config(MANY, "b", "-*");
        int port = free_port();
        struct tk *tk = NULL;
        struct tk_pr *pr = NULL;
        char *metrics_cfg;

        /* The same resources, with the endpoint on. */
        metrics_cfg = with_endpoint(cfg, port, prsock);
        write_file(cfg_path, metrics_cfg);
        if (tk_start(kdir, &tk) < 0 || tk_pr_start(prsock, &pr) < 0)
                die("test kubelet");
        set_pods(pr);
        pid_t d = spawn_daemon(dir);
        wait_all(tk, MANY, 1);
        fig.scrape_rss_before = status_kb(d, "RssAnon");
        char *body = NULL;
        fig.scrape_bytes = http_scrape(port, &body);
        for (char *p = body; (p = strstr(p, "\ncdiplug_device_allocation_info{")); p++)
                fig.allocated_series++;
        free(body);
        uint64_t c0 = process_cpu_ns(d);
        unsigned long long u0, s0, u1, s1;
        process_user_sys(d, &u0, &s0);
        for (int i = 0; i < SCRAPES; i++) {
                uint64_t t0 = now_ns();
                http_scrape(port, NULL);
                t[i] = now_ns() - t0;
        }
        fig.scrape_cpu_ms = (double)(process_cpu_ns(d) - c0) / 1e6 / SCRAPES;
        process_user_sys(d, &u1, &s1);
        fig.scrape_user_ms = (double)(u1 - u0) * 1e3 / (double)sysconf(_SC_CLK_TCK) / SCRAPES;
        fig.scrape_sys_ms = (double)(s1 - s0) * 1e3 / (double)sysconf(_SC_CLK_TCK) / SCRAPES;
        fig.sc50 = pct(t, SCRAPES, 0.5);
        fig.sc99 = pct(t, SCRAPES, 0.99);
        for (int i = 0; i < SCRAPES_LIST; i++) {
                tk_pr_stop(pr);
                if (tk_pr_start(prsock, &pr) < 0)
                        die("PodResources restart");
                set_pods(pr);
                uint64_t t0 = now_ns();
                http_scrape(port, &body);
                t[i] = now_ns() - t0;
                if (!strstr(body, "\ncdiplug_pod_resources_up 1\n"))
                        die("a scrape with a fresh List");
                free(body);
        }
        fig.scl50 = pct(t, SCRAPES_LIST, 0.5);
        fig.scl99 = pct(t, SCRAPES_LIST, 0.99);
        fig.scrape_rss_anon = status_kb(d, "RssAnon");
        dump_anon(d, "endpoint on, after the scrapes");
        long w0 = thread_wakeups(d);
        struct timespec two = { .tv_sec = 2 };
        nanosleep(&two, NULL); /* a benchmark: counting what idling costs */
        fig.idle_wakeups = thread_wakeups(d) - w0;
        stop_daemon(d);
        tk_pr_stop(pr);
        tk_stop(tk);
        write_file(cfg_path, cfg); /* not needed after, but leave it as found */
        fig.scrape = true;
        free(metrics_cfg);
        free(cfg);
        free(cfg_path);
        free(prsock);
        free(kdir);
}

/* The 1,000 allocated IDs, and OTHER_IDS IDs of a resource that is not
 * ours beside them: an answer just under PodResources' 4 MiB limit. */
#define OTHER_IDS 330000
static void set_pods_huge(struct tk_pr *pr) {
        static char text[OTHER_IDS][12];
        static char *ids[OTHER_IDS];
        for (int i = 0; i < OTHER_IDS; i++) {
                snprintf(text[i], sizeof(text[i]), "gpu-%06d", i);
                ids[i] = text[i];
        }
        V1__ContainerDevices other = V1__CONTAINER_DEVICES__INIT;
        other.resource_name = "vendor.example/gpu";
        other.n_device_ids = OTHER_IDS;
        other.device_ids = ids;
        V1__ContainerDevices *devs[] = { &other };
        V1__ContainerResources ctr = V1__CONTAINER_RESOURCES__INIT;
        ctr.name = "trainer";
        ctr.n_devices = 1;
        ctr.devices = devs;
        V1__ContainerResources *ctrs[] = { &ctr };
        V1__PodResources pod = V1__POD_RESOURCES__INIT;
        pod.name = "big-0";
        pod.namespace_ = "batch";
        pod.n_containers = 1;
        pod.containers = ctrs;
        /* Ours first, as set_pods() has them, then the big pod. */
        set_pods(pr);
        tk_pr_add_pod(pr, &pod);
}

struct scraper {
        int port;
        volatile bool stop;
        unsigned scrapes;
};

static void *scrape_loop(void *arg) {
        struct scraper *s = arg;
        while (!s->stop) {
                http_scrape(s->port, NULL);
                s->scrapes++;
        }
        return NULL;
}

/* 1,000 idle connections held open, idle: what a scrape and a kubelet
 * probe of /healthz take beside them; then a 4 MiB PodResources answer
 * (another resource's 330,000 IDs beside our 1,000): Allocate p99 while
 * a client scrapes back to back, against Allocate p99 before, and
 * RssAnon after. */
#define HOSTILE_IDLE 1000
#define HOSTILE_CALLS 10000
static void bench_hostile(const char *dir) {
        static uint64_t t[SCRAPES], ta[HOSTILE_CALLS];
        static int idle[HOSTILE_IDLE];
        char *kdir = path_join(dir, "kubelet"), *prsock = path_join(dir, "pod-resources.sock");
        char *cfg_path = path_join(dir, "config.json"), *cfg = resources_config(MANY, "b", "-*");
        int port = free_port();
        char *metrics_cfg = with_endpoint(cfg, port, prsock);
        struct rlimit rl;
        struct tk *tk = NULL;
        struct tk_pr *pr = NULL;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < HOSTILE_IDLE + 256) {
                rl.rlim_cur = HOSTILE_IDLE + 256;
                if (rl.rlim_max < rl.rlim_cur)
                        rl.rlim_max = rl.rlim_cur;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        die("RLIMIT_NOFILE for 1,000 connections");
        }
        write_file(cfg_path, metrics_cfg);
        if (tk_start(kdir, &tk) < 0 || tk_pr_start(prsock, &pr) < 0)
                die("test kubelet");
        set_pods(pr);
        pid_t d = spawn_daemon(dir);
        wait_all(tk, MANY, 1);

        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        for (int i = 0; i < HOSTILE_IDLE; i++) {
                idle[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (idle[i] < 0 || (connect(idle[i], (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
                                    errno != EINPROGRESS))
                        die("an idle connection");
        }
        struct timespec settle = { 0, 200 * 1000 * 1000L };
        nanosleep(&settle, NULL); /* a benchmark: let the crowd connect */
        for (int i = 0; i < SCRAPES; i++) {
                uint64_t t0 = now_ns();
                http_scrape(port, NULL);
                t[i] = now_ns() - t0;
        }
        fig.hi_sc50 = pct(t, SCRAPES, 0.5);
        fig.hi_sc99 = pct(t, SCRAPES, 0.99);
        for (int i = 0; i < SCRAPES; i++) {
                uint64_t t0 = now_ns();
                http_path(port, "/healthz", NULL);
                t[i] = now_ns() - t0;
        }
        fig.hi_hz50 = pct(t, SCRAPES, 0.5);
        fig.hi_hz99 = pct(t, SCRAPES, 0.99);
        for (int i = 0; i < HOSTILE_IDLE; i++)
                close(idle[i]);

        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *creqs[] = { &creq };
        char *ids[] = { "b00-0000" };
        creq.n_devices_ids = 1;
        creq.devices_ids = ids;
        req.n_container_requests = 1;
        req.container_requests = creqs;
        grpc_channel *ch = tk_dial(tk, name_of(0));
        call_block(ch, DP_METHOD_ALLOCATE, &req.base, &v1beta1__allocate_response__descriptor, NULL,
                   200);
        call_block(ch, DP_METHOD_ALLOCATE, &req.base, &v1beta1__allocate_response__descriptor, ta,
                   HOSTILE_CALLS);
        fig.hi_a50 = pct(ta, HOSTILE_CALLS, 0.5);
        fig.hi_a99 = pct(ta, HOSTILE_CALLS, 0.99);

        /* Beside a client scraping back to back: the page's 10,000
         * devices are written under the daemon's lock either way; what
         * the answer's size adds is the difference. */
        for (int huge = 0; huge < 2; huge++) {
                struct scraper sc = { .port = port };
                pthread_t thread;
                if (huge) {
                        /* A new socket: no answer cached from before. */
                        tk_pr_stop(pr);
                        if (tk_pr_start(prsock, &pr) < 0)
                                die("PodResources restart");
                        set_pods_huge(pr);
                }
                unsigned lists = tk_pr_calls(pr);
                if (pthread_create(&thread, NULL, scrape_loop, &sc) != 0)
                        die("scraper thread");
                call_block(ch, DP_METHOD_ALLOCATE, &req.base,
                           &v1beta1__allocate_response__descriptor, ta, HOSTILE_CALLS);
                sc.stop = true;
                pthread_join(thread, NULL);
                fig.hi_s50[huge] = pct(ta, HOSTILE_CALLS, 0.5);
                fig.hi_s99[huge] = pct(ta, HOSTILE_CALLS, 0.99);
                fig.hi_scrapes[huge] = sc.scrapes;
                fig.hi_lists[huge] = tk_pr_calls(pr) - lists;
        }
        char *body = NULL;
        http_scrape(port, &body);
        if (!strstr(body, "\ncdiplug_pod_resources_up 1\n"))
                die("a scrape of the 4 MiB answer");
        free(body);
        fig.hi_rss_anon = status_kb(d, "RssAnon");
        fig.hi_hwm = status_kb(d, "VmHWM");
        dump_anon(d, "after scrapes of a 4 MiB PodResources answer");
        grpc_channel_destroy(ch);
        stop_daemon(d);
        tk_pr_stop(pr);
        tk_stop(tk);
        write_file(cfg_path, cfg);
        fig.hostile = true;
        free(metrics_cfg);
        free(cfg);
        free(cfg_path);
        free(prsock);
        free(kdir);
}

/* RssAnon with 64 resources of one device each (the memory budget's
 * case), without the endpoint and then with it after scrapes that each
 * call List (the PodResources answer names IDs of other resources). Both
 * measured a second after the last registration, so that start-up's
 * heap trim is done. */
/* DRA: 64 resources served as a DRA driver (one device each) against the
 * fake API server over HTTPS (tests/helpers/fakeapi) and the test
 * kubelet's DRA client. Prepare of one claim: the kubelet's call, the
 * daemon's GET of the ResourceClaim, its checkpoint written (fsynced),
 * the answer; each claim is new (a repeated uid is answered from the
 * checkpoint without the API server) and unprepared after, untimed.
 * Hotplug: a node of one resource appears or vanishes → the fake API
 * server holds that pool's slice with or without it. */
struct dra_pool_want {
        const char *pool;
        int devices; /* in the pool; -1: every pool of the 64 has one device */
};

static bool dra_pools_are(const cJSON *slices, void *ctx) {
        const struct dra_pool_want *w = ctx;
        int pools = 0, devices = 0;
        const cJSON *sl;

        cJSON_ArrayForEach(sl, slices) {
                const cJSON *spec = cJSON_GetObjectItem(sl, "spec");
                const cJSON *name = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "pool"), "name");
                int n = cJSON_GetArraySize(cJSON_GetObjectItem(spec, "devices"));
                if (!cJSON_IsString(name))
                        continue;
                if (w->devices < 0) {
                        pools += n == 1;
                        continue;
                }
                if (strcmp(name->valuestring, w->pool) == 0)
                        devices += n;
        }
        return w->devices < 0 ? pools == MANY : devices == w->devices;
}

/* The first n of the MANY DRA resources. */
static char *dra_config_n(int n) {
        char *cfg = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&cfg, &len);

        fputs("{ \"dra\": { \"driver\": \"" DRA_DRIVER "\" }, \"resources\": [\n", m);
        for (int i = 0; i < n; i++)
                fprintf(m,
                        "  { \"name\": \"%s\", \"api\": \"dra\", \"match\": [ { \"path\": "
                        "\"/dev/d%02d*\" } ] }%s\n",
                        name_of(i), i, i + 1 < n ? "," : "");
        fputs("] }\n", m);
        fclose(m);
        return cfg;
}

static char *dra_config(void) {
        return dra_config_n(MANY);
}

static void dra_kubeconfig(const char *dir, struct fakeapi *api) {
        char *text = NULL, *p = path_join(dir, "token");

        write_file(p, "bench-token\n");
        free(p);
        if (asprintf(&text,
                     "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                     "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                     "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                     "    certificate-authority: %s\n"
                     "users:\n- name: u\n  user:\n    tokenFile: token\n",
                     fakeapi_url(api), fakeapi_ca_file(api)) < 0)
                die("asprintf");
        p = path_join(dir, "kubeconfig");
        write_file(p, text);
        free(p);
        free(text);
}

static void dra_claims(struct fakeapi *api, char (*uids)[16]) {
        char *dev = NULL, *pool = NULL;

        if (dra_device_name("d00", &dev) < 0 || dra_pool_name(DRA_NODE, name_of(0), &pool) < 0)
                die("DRA names");
        for (int i = 0; i < DRA_PREPARES; i++) {
                char *text = NULL;
                snprintf(uids[i], 16, "uid-%d", i);
                if (asprintf(&text,
                             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                             "\"metadata\":{\"namespace\":\"ns\",\"name\":\"c%d\",\"uid\":\"%s\"},"
                             "\"status\":{\"allocation\":{\"devices\":{\"results\":["
                             "{\"request\":\"r\",\"driver\":\"" DRA_DRIVER "\",\"pool\":\"%s\","
                             "\"device\":\"%s\"}]}}}}",
                             i, uids[i], pool, dev) < 0)
                        die("asprintf");
                fakeapi_add_claim(api, cJSON_Parse(text));
                free(text);
        }
        free(dev);
        free(pool);
}

static void bench_dra(void) {
        static uint64_t prep[DRA_PREPARES], hp[DRA_HOTPLUGS];
        static char uids[DRA_PREPARES][16], names[DRA_PREPARES][16];
        char *cfg = dra_config(), *dir = make_dir("dra", cfg);
        /* Short: the registry socket's path must fit a sun_path under TMPDIR. */
        char *kroot = path_join(dir, "k"), *kubeconfig = path_join(dir, "kubeconfig");
        char *node = path_join(dir, "host/dev/d05x"), *pool = NULL;
        struct fakeapi *api = fakeapi_new(true);
        struct tk_dra *kd;

        free(cfg);
        mkdir(kroot, 0755);
        for (int i = 0; i < MANY; i++) {
                char n[32];
                snprintf(n, sizeof(n), "host/dev/d%02d", i);
                char *path = path_join(dir, n);
                touch(path);
                free(path);
        }
        fakeapi_add_node(api, DRA_NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(api, "bench-token");
        dra_kubeconfig(dir, api);
        dra_claims(api, uids);
        if (tk_dra_start(kroot, &kd) < 0)
                die("test kubelet's DRA side");
        char *more[] = { "--kubelet-root", kroot,      "--node-name", DRA_NODE,
                         "--kubeconfig",   kubeconfig, NULL };
        pid_t d = spawn_daemon_with(dir, more);
        if (tk_dra_wait_registered(kd, DRA_DRIVER, 1, 20000) < 0)
                die("the DRA driver registering");
        struct dra_pool_want all = { NULL, -1 };
        if (!fakeapi_wait(api, dra_pools_are, &all, 20000))
                die("64 pools published");
        fig.dra_rss_anon = status_kb(d, "RssAnon");
        fig.dra_vm_rss = status_kb(d, "VmRSS");
        dump_anon(d, "DRA, 64 resources published");

        for (int i = 0; i < DRA_PREPARES; i++) {
                K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
                K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse *u = NULL;
                snprintf(names[i], 16, "c%d", i);
                struct tk_dra_claim c = { "ns", names[i], uids[i] };
                uint64_t t0 = now_ns();
                if (tk_dra_prepare(kd, DRA_DRIVER, "v1", &c, 1, &r) != GRPC_STATUS_OK ||
                    r->n_claims != 1 || r->claims[0]->value->error[0])
                        die("Prepare");
                prep[i] = now_ns() - t0;
                k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(
                        r, NULL);
                if (tk_dra_unprepare(kd, DRA_DRIVER, "v1", &c, 1, &u) != GRPC_STATUS_OK)
                        die("Unprepare");
                k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                        u, NULL);
        }

        if (dra_pool_name(DRA_NODE, name_of(5), &pool) < 0)
                die("pool name");
        for (int i = 0; i < DRA_HOTPLUGS; i++) {
                struct dra_pool_want w = { pool, i % 2 == 0 ? 2 : 1 };
                uint64_t t0 = now_ns();
                if (i % 2 == 0)
                        touch(node);
                else if (unlink(node) < 0)
                        die("unlink");
                if (!fakeapi_wait(api, dra_pools_are, &w, 10000))
                        die("hotplug reaching the slice");
                hp[i] = now_ns() - t0;
        }
        fig.dra_rss_anon_after = status_kb(d, "RssAnon");
        dump_anon(d, "DRA, after the Prepares and hotplugs");
        stop_daemon(d);
        tk_dra_stop(kd);
        fakeapi_free(api);
        fig.dra_p50 = pct(prep, DRA_PREPARES, 0.5);
        fig.dra_p99 = pct(prep, DRA_PREPARES, 0.99);
        fig.dra_h50 = pct(hp, DRA_HOTPLUGS, 0.5);
        fig.dra_h99 = pct(hp, DRA_HOTPLUGS, 0.99);
        fig.dra = true;
        free(pool);
        free(node);
        free(kroot);
        free(kubeconfig);
        free(dir);
}

/* Rollover: a second instance (its own POD_UID) started beside the
 * serving one, which then gets SIGTERM, as a DaemonSet with maxSurge 1
 * rolls; 5 times in a row. Meanwhile one client thread calls Prepare
 * (each a new claim, unprepared after, untimed) back to back through the
 * endpoint the test kubelet registered last, as the kubelet calls the
 * newest instance. A Prepare fails when its status or its claim's error
 * says so; per rollover, the failing window runs from the start of the
 * first failed call to the end of the last one (0 when none failed). */
#define ROLLOVERS 5
#define ROLL_CLAIMS 20000
#define ROLL_LOAD 4

struct roll_loop {
        struct tk_dra *kd;
        char (*uids)[16];
        bool *unprepared; /* per claim: its Unprepare answered without error */
        int next;
        atomic_bool stop;
        struct fakeapi *api;
        pthread_mutex_t mu; /* the fields below, between the client threads */
        uint64_t first_fail, last_fail, *lat;
        unsigned calls, failed, max_calls;
};

static void roll_note(struct roll_loop *l, bool ok, uint64_t t0, uint64_t t1) {
        pthread_mutex_lock(&l->mu);
        if (!ok) {
                if (!l->failed++ || t0 < l->first_fail)
                        l->first_fail = t0;
                if (t1 > l->last_fail)
                        l->last_fail = t1;
        }
        l->lat[l->calls++] = t1 - t0;
        pthread_mutex_unlock(&l->mu);
}

static void *roll_prepares(void *arg) {
        struct roll_loop *l = arg;

        while (!atomic_load(&l->stop)) {
                K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
                K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse *u = NULL;
                char name[16];
                pthread_mutex_lock(&l->mu);
                if (l->next == ROLL_CLAIMS || l->calls == l->max_calls)
                        die("rollover: out of claims");
                int i = l->next++;
                pthread_mutex_unlock(&l->mu);
                snprintf(name, sizeof(name), "c%d", i);
                struct tk_dra_claim c = { "ns", name, l->uids[i] };
                uint64_t t0 = now_ns();
                grpc_status_code st = tk_dra_prepare(l->kd, DRA_DRIVER, "v1", &c, 1, &r);
                bool ok =
                        st == GRPC_STATUS_OK && r->n_claims == 1 && !r->claims[0]->value->error[0];
                uint64_t t1 = now_ns();
                if (!ok && getenv("BENCH_TRACE"))
                        fprintf(stderr, "rollover: Prepare of %s: status %d, %s\n", c.uid, st,
                                st == GRPC_STATUS_OK && r->n_claims == 1
                                        ? r->claims[0]->value->error
                                        : "");
                if (r)
                        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(
                                r, NULL);
                roll_note(l, ok, t0, t1);
                if (tk_dra_unprepare(l->kd, DRA_DRIVER, "v1", &c, 1, &u) == GRPC_STATUS_OK) {
                        l->unprepared[i] = u->n_claims == 1 && !u->claims[0]->value->error[0];
                        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                                u, NULL);
                }
        }
        return NULL;
}

static void roll_claims(struct fakeapi *api, char (*uids)[16]) {
        char *dev = NULL, *pool = NULL;

        if (dra_device_name("d00", &dev) < 0 || dra_pool_name(DRA_NODE, name_of(0), &pool) < 0)
                die("DRA names");
        for (int i = 0; i < ROLL_CLAIMS; i++) {
                char *text = NULL;
                snprintf(uids[i], 16, "roll-%d", i);
                if (asprintf(&text,
                             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                             "\"metadata\":{\"namespace\":\"ns\",\"name\":\"c%d\",\"uid\":\"%s\"},"
                             "\"status\":{\"allocation\":{\"devices\":{\"results\":["
                             "{\"request\":\"r\",\"driver\":\"" DRA_DRIVER "\",\"pool\":\"%s\","
                             "\"device\":\"%s\"}]}}}}",
                             i, uids[i], pool, dev) < 0)
                        die("asprintf");
                fakeapi_add_claim(api, cJSON_Parse(text));
                free(text);
        }
        free(dev);
        free(pool);
}

/* One instance with POD_UID "bench-pod-<n>". */
static pid_t roll_spawn(const char *dir, char *const *more, int n) {
        char uid[32];

        snprintf(uid, sizeof(uid), "bench-pod-%d", n);
        if (setenv("POD_UID", uid, 1) < 0)
                die("setenv");
        return spawn_daemon_with(dir, more);
}

static unsigned slice_writes(struct fakeapi *api) {
        return fakeapi_count(api, "POST") + fakeapi_count(api, "PUT") +
               fakeapi_count(api, "DELETE");
}

static void roll_once(struct roll_loop *l, const char *dir, char *const *more, pid_t *a, int n,
                      int clients, uint64_t *window, uint64_t *writes, struct roll_fig *f) {
        struct timespec settle = { .tv_nsec = 300 * 1000 * 1000L }, tail = { .tv_sec = 2 };
        unsigned w0 = slice_writes(l->api);
        pthread_t th[ROLL_LOAD];

        l->failed = 0;
        l->first_fail = l->last_fail = 0;
        atomic_store(&l->stop, false);
        for (int k = 0; k < clients; k++)
                if (pthread_create(&th[k], NULL, roll_prepares, l) != 0)
                        die("pthread_create");
        nanosleep(&settle, NULL);
        pid_t b = roll_spawn(dir, more, n + 1);
        if (tk_dra_wait_registered(l->kd, DRA_DRIVER, (unsigned)n + 2, 20000) < 0)
                die("the new instance registering");
        stop_daemon(*a);
        nanosleep(&settle, NULL);
        atomic_store(&l->stop, true);
        for (int k = 0; k < clients; k++)
                pthread_join(th[k], NULL);
        *window = l->failed ? l->last_fail - l->first_fail : 0;
        f->failed += l->failed;
        /* The new instance's clean-up of what the old one wanted. */
        nanosleep(&tail, NULL);
        *writes = slice_writes(l->api) - w0;
        *a = b;
}

/* One more instance, with the other config, beside the last for 10 s:
 * the slice writes the two make while they disagree on a pool. */
static void roll_war(struct fakeapi *api, const char *dir, char *const *more) {
        struct timespec ten = { .tv_sec = 10 };
        unsigned w0 = slice_writes(api);
        pid_t c = roll_spawn(dir, more, ROLLOVERS + 1);

        nanosleep(&ten, NULL);
        fig.war_writes = slice_writes(api) - w0;
        stop_daemon(c);
}

/* Claims whose Unprepare was answered without error and which the
 * checkpoint still holds (0 unless an instance wrote back a claim the
 * other unprepared). */
static unsigned roll_back(const char *kroot, const struct roll_loop *l) {
        char *path = NULL, *text = NULL, *msg = NULL;
        struct dra_claim *claims = NULL;
        size_t n = 0, len = 0;
        unsigned back = 0;
        FILE *f;

        if (asprintf(&path, "%s/plugins/" DRA_DRIVER "/checkpoint.json", kroot) < 0)
                die("asprintf");
        f = fopen(path, "r");
        if (f && getdelim(&text, &len, '\0', f) > 0 &&
            dra_checkpoint_decode(text, strlen(text), &claims, &n, &msg) >= 0)
                for (size_t k = 0; k < n; k++) {
                        const char *u = claims[k].uid;
                        char *end = NULL;
                        long i = strncmp(u, "roll-", 5) ? -1 : strtol(u + 5, &end, 10);
                        back += end && end > u + 5 && !*end && i >= 0 && i < ROLL_CLAIMS &&
                                l->unprepared[i];
                }
        if (f)
                fclose(f);
        dra_claims_free(claims, n);
        free(msg);
        free(text);
        free(path);
        return back;
}

static void bench_rollover_with(int clients, struct roll_fig *f) {
        static char uids[ROLL_CLAIMS][16];
        static uint64_t lat[ROLL_CLAIMS];
        static bool unprepared[ROLL_CLAIMS];
        uint64_t windows[ROLLOVERS], writes[ROLLOVERS];
        char *cfg = dra_config(), *dir = make_dir(clients > 1 ? "rollload" : "roll", cfg);
        char *kroot = path_join(dir, "k"), *kubeconfig = path_join(dir, "kubeconfig");
        /* Every other instance without the last resource: each rollover
         * changes the config, and the two instances disagree on a pool. */
        char *cfg_b = dra_config_n(MANY - 1), *path_b = path_join(dir, "config-b.json");
        struct fakeapi *api = fakeapi_new(true);
        struct roll_loop l = { .uids = uids,
                               .unprepared = unprepared,
                               .api = api,
                               .lat = lat,
                               .max_calls = ROLL_CLAIMS,
                               .mu = PTHREAD_MUTEX_INITIALIZER };

        memset(unprepared, 0, sizeof(unprepared));
        write_file(path_b, cfg_b);
        free(cfg_b);
        free(cfg);
        mkdir(kroot, 0755);
        for (int i = 0; i < MANY; i++) {
                char n[32];
                snprintf(n, sizeof(n), "host/dev/d%02d", i);
                char *path = path_join(dir, n);
                touch(path);
                free(path);
        }
        fakeapi_add_node(api, DRA_NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(api, "bench-token");
        dra_kubeconfig(dir, api);
        roll_claims(api, uids);
        if (tk_dra_start(kroot, &l.kd) < 0)
                die("test kubelet's DRA side");
        char *more[] = { "--kubelet-root", kroot,      "--node-name", DRA_NODE,
                         "--kubeconfig",   kubeconfig, NULL };
        char *more_b[] = { "--kubelet-root", kroot,      "--node-name", DRA_NODE, "--kubeconfig",
                           kubeconfig,       "--config", path_b,        NULL };
        pid_t a = roll_spawn(dir, more, 0);
        if (tk_dra_wait_registered(l.kd, DRA_DRIVER, 1, 20000) < 0)
                die("the DRA driver registering");
        struct dra_pool_want all = { NULL, -1 };
        if (!fakeapi_wait(api, dra_pools_are, &all, 20000))
                die("64 pools published");
        for (int i = 0; i < ROLLOVERS; i++)
                roll_once(&l, dir, i % 2 ? more : more_b, &a, i, clients, &windows[i], &writes[i],
                          f);
        if (clients == 1)
                roll_war(api, dir, ROLLOVERS % 2 ? more : more_b);
        stop_daemon(a);
        unsetenv("POD_UID");
        tk_dra_stop(l.kd);
        fakeapi_free(api);
        f->back = roll_back(kroot, &l);
        f->calls = l.calls;
        f->w50 = pct(windows, ROLLOVERS, 0.5);
        f->wmax = pct(windows, ROLLOVERS, 1.0);
        f->p50 = pct(lat, l.calls, 0.5);
        f->p99 = pct(lat, l.calls, 0.99);
        f->writes50 = pct(writes, ROLLOVERS, 0.5);
        f->writes_max = pct(writes, ROLLOVERS, 1.0);
        fig.roll = true;
        free(path_b);
        free(kroot);
        free(kubeconfig);
        free(dir);
}

static void bench_rollover(void) {
        bench_rollover_with(1, &fig.roll_fig[0]);
        bench_rollover_with(ROLL_LOAD, &fig.roll_fig[1]);
}

static void bench_scrape_small(void) {
        char *dir = make_env("small", MANY), *kdir = path_join(dir, "kubelet");
        char *cfg_path = path_join(dir, "config.json"),
             *prsock = path_join(dir, "pod-resources.sock");
        char *cfg = resources_config(MANY, "d", ""), *metrics_cfg;
        struct timespec settle = { .tv_sec = 1 },
                        gap = { .tv_sec = 1, .tv_nsec = 100 * 1000 * 1000L };
        struct tk *tk = NULL;
        struct tk_pr *pr = NULL;
        int port = free_port();

        if (tk_start(kdir, &tk) < 0 || tk_pr_start(prsock, &pr) < 0)
                die("test kubelet");
        set_pods(pr);
        pid_t d = spawn_daemon(dir);
        wait_all(tk, MANY, 1);
        nanosleep(&settle, NULL);
        fig.small_rss_off = status_kb(d, "RssAnon");
        dump_anon(d, "64 resources, endpoint off");
        stop_daemon(d);
        tk_stop(tk);

        metrics_cfg = with_endpoint(cfg, port, prsock);
        write_file(cfg_path, metrics_cfg);
        if (tk_start(kdir, &tk) < 0)
                die("test kubelet");
        d = spawn_daemon(dir);
        wait_all(tk, MANY, 1);
        nanosleep(&settle, NULL);
        fig.small_rss_before = status_kb(d, "RssAnon");
        dump_anon(d, "64 resources, endpoint on, before any scrape");
        /* A second apart, so that each scrape calls List. */
        for (int i = 0; i < SMALL_SCRAPES; i++) {
                http_scrape(port, NULL);
                if (i + 1 < SMALL_SCRAPES)
                        nanosleep(&gap, NULL);
        }
        fig.small_rss_on = status_kb(d, "RssAnon");
        dump_anon(d, "64 resources, endpoint on, after the scrapes");
        stop_daemon(d);
        tk_pr_stop(pr);
        tk_stop(tk);
        fig.small = true;
        free(metrics_cfg);
        free(cfg);
        free(cfg_path);
        free(prsock);
        free(kdir);
        free(dir);
}

static void row_us(const char *what, uint64_t p50, uint64_t p99, const char *target) {
        printf("%-46s %8.1fus %8.1fus  %s\n", what, (double)p50 / 1e3, (double)p99 / 1e3, target);
}

static void row_ms(const char *what, uint64_t p50, uint64_t p99, const char *target) {
        printf("%-46s %8.2fms %8.2fms  %s\n", what, (double)p50 / 1e6, (double)p99 / 1e6, target);
}

static void row_kb(const char *what, long kb, const char *target) {
        printf("%-46s %8ldkB %10s  %s\n", what, kb, "", target);
}

static const char *verdict(bool met) {
        return met ? "met" : "NOT met";
}

/* Whether the ext4 holding path has a journal: its block device has a
 * jbd2 entry in /proc/fs. */
static bool ext4_journaled(const char *path) {
        char line[1024], dev[32], src[256], want[32];
        struct stat st;
        bool journaled = false;
        FILE *f;

        if (stat(path, &st) < 0 || !(f = fopen("/proc/self/mountinfo", "r")))
                return false;
        snprintf(want, sizeof(want), "%u:%u", major(st.st_dev), minor(st.st_dev));
        while (fgets(line, sizeof(line), f)) {
                const char *rest = strstr(line, " - ");
                if (sscanf(line, "%*s %*s %31s", dev) != 1 || strcmp(dev, want) != 0 || !rest ||
                    sscanf(rest, " - %*s %255s", src) != 1)
                        continue;
                const char *base = strrchr(src, '/');
                char jbd[300];
                int n = snprintf(jbd, sizeof(jbd), "/proc/fs/jbd2/%s-8", base ? base + 1 : src);
                journaled = n > 0 && (size_t)n < sizeof(jbd) && access(jbd, F_OK) == 0;
                break;
        }
        fclose(f);
        return journaled;
}

/* The kubelet dir's file system shapes the restart figures: each restart
 * makes 65 socket inodes (64 re-created sockets and kubelet.sock), and an
 * ext4 without a journal, making one, skips every inode freed in the last
 * 5 minutes, one buffer lookup each: 100 quick restarts slow themselves
 * down there, as do the test suite's and earlier runs' sockets. */
static const char *fs_name(const char *path) {
        static char other[32];
        struct statfs st;

        if (statfs(path, &st) < 0)
                return "unknown";
        switch ((unsigned long)st.f_type) {
        case 0xEF53:
                return ext4_journaled(path) ? "ext4 (journal)" : "ext4 (no journal)";
        case 0x01021994:
                return "tmpfs";
        case 0x58465342:
                return "xfs";
        case 0x9123683E:
                return "btrfs";
        case 0x794c7630:
                return "overlayfs";
        }
        snprintf(other, sizeof(other), "fs 0x%lx", (unsigned long)st.f_type);
        return other;
}

static void print_table(void) {
        struct utsname u;
        char t[128];

        uname(&u);
        printf("cdiplug-bench: %s %s, %ld CPUs, grpc %s, sandbox %s, dirs on %s\n", u.sysname,
               u.machine, sysconf(_SC_NPROCESSORS_ONLN), grpc_version_string(),
               n_extra ? "as per extra args" : "on", fs_name(root));
        printf("%-46s %10s %10s  %s\n", "measure", "p50", "p99", "target");
        for (int i = 0; i < fig.n_place; i++) {
                const struct placement *pl = &fig.place[i];
                char what[64];
                double x = (double)pl->a50 / (double)pl->e50;
                snprintf(what, sizeof(what), "grpc-core unary echo (floor), %s", pl->name);
                snprintf(t, sizeof(t), "(server CPU %.1fus a call)", pl->e_cpu);
                row_us(what, pl->e50, pl->e99, t);
                snprintf(what, sizeof(what), "Allocate, 1 device, %s", pl->name);
                snprintf(t, sizeof(t), "p50 <= 1.2x floor: %.2fx, %s (server CPU %.1fus a call)", x,
                         verdict(x <= 1.2), pl->a_cpu);
                row_us(what, pl->a50, pl->a99, t);
        }
        if (fig.restart) {
                snprintf(t, sizeof(t), "(daemon's part)");
                row_ms("kubelet restart -> 64 Registers arrived", fig.rs50, fig.rs99, t);
                snprintf(t, sizeof(t), "p99 < 20 ms: %s", verdict(fig.rr99 < 20000000));
                row_ms("kubelet restart -> 64 resources registered", fig.rr50, fig.rr99, t);
        }
        if (fig.exec) {
                snprintf(t, sizeof(t), "within 10 ms: %s", verdict(fig.x50 <= 10000000));
                row_ms("exec -> first Register arrived", fig.x50, fig.x99, t);
                row_ms("exec -> first resource registered", fig.xr50, fig.xr99,
                       "(kubelet dialled back)");
        }
        if (fig.hotplug) {
                row_ms("device node appears -> new list on stream", fig.h_add50, fig.h_add99, "");
                row_ms("device node vanishes -> new list on stream", fig.h_del50, fig.h_del99, "");
                snprintf(t, sizeof(t), "p99 < 20 ms: %s", verdict(fig.h_all99 < 20000000));
                row_ms("hotplug -> ListAndWatch update, all 200", fig.h_all50, fig.h_all99, t);
        }
        if (fig.reload) {
                snprintf(t, sizeof(t), "(the 63 others: %u Registers, %u lists)", fig.rl_regs,
                         fig.rl_lists);
                row_ms("SIGHUP -> new list, 64 resources, 1 changed", fig.rl50, fig.rl99, t);
        }
        if (fig.discovery) {
                snprintf(t, sizeof(t), "< 100 ms: %s (max of %d: %.2f ms)",
                         verdict(fig.disc50 < 100000000), DISCOVER_RUNS,
                         (double)fig.disc_max / 1e6);
                printf("%-46s %8.2fms %10s  %s\n", "discovery, 10,000 matching nodes",
                       (double)fig.disc50 / 1e6, "", t);
                printf("%-46s %8.2fms %10s  %s\n", "cdiplug generate --stdout, 10,000 nodes",
                       (double)fig.gen50 / 1e6, "", "(exec to exit, 64 specs)");
        }
        if (fig.preferred) {
                snprintf(t, sizeof(t), "p99 < 5 ms: %s (server CPU %.0fus a call)",
                         verdict(fig.pref99 < 5000000), fig.pref_cpu);
                row_ms("GetPreferredAllocation, 8 of 10,000 IDs", fig.pref50, fig.pref99, t);
        }
        if (fig.restart) {
                snprintf(t, sizeof(t), "under 4 MB: %s", verdict(fig.rss_anon < 4096));
                row_kb("RssAnon, 64 resources", fig.rss_anon, t);
                snprintf(t, sizeof(t), "open fds %d before, %d after", fig.fds_before,
                         fig.fds_after);
                char what[64];
                snprintf(what, sizeof(what), "RssAnon, 64 resources, after %d restarts",
                         fig.restarts);
                row_kb(what, fig.rss_anon_after, t);
                row_kb("VmRSS, 64 resources", fig.vm_rss, "");
        }
        if (fig.many) {
                snprintf(t, sizeof(t), "under 4 MB: %s", verdict(fig.many_rss_anon < 4096));
                row_kb("RssAnon, 64 resources, 10,000 devices", fig.many_rss_anon, t);
                row_kb("VmRSS, 64 resources, 10,000 devices", fig.many_vm_rss, "");
        }
        if (fig.small) {
                row_kb("RssAnon, 64 resources, endpoint off", fig.small_rss_off, "");
                row_kb("RssAnon, 64 resources, endpoint on", fig.small_rss_before,
                       "(before any scrape)");
                snprintf(t, sizeof(t), "under 4 MB: %s", verdict(fig.small_rss_on < 4096));
                row_kb("RssAnon, 64 resources, endpoint on, scraped", fig.small_rss_on, t);
        }
        if (fig.scrape) {
                char t2[128];
                snprintf(t2, sizeof(t2),
                         "(%zu kB, %zu allocation series; daemon CPU %.2f ms: user %.1f, sys %.1f)",
                         fig.scrape_bytes / 1024, fig.allocated_series, fig.scrape_cpu_ms,
                         fig.scrape_user_ms, fig.scrape_sys_ms);
                row_ms("scrape, 10,000 devices, List cached", fig.sc50, fig.sc99, t2);
                snprintf(t2, sizeof(t2), "p99 < 50 ms: %s", verdict(fig.scl99 < 50000000));
                row_ms("scrape, 10,000 devices, fresh dial + List", fig.scl50, fig.scl99, t2);
                row_kb("RssAnon, endpoint on, before any scrape", fig.scrape_rss_before, "");
                snprintf(t2, sizeof(t2), "under 4 MB: %s", verdict(fig.scrape_rss_anon < 4096));
                row_kb("RssAnon, endpoint on, after the scrapes", fig.scrape_rss_anon, t2);
                printf("%-46s %8ld %12s  %s\n", "idle wake-ups in 2 s, all threads",
                       fig.idle_wakeups, "", "(grpc core's timers; the endpoint adds none)");
        }
        if (fig.dra) {
                row_us("DRA Prepare, 1 claim (API GET, checkpoint)", fig.dra_p50, fig.dra_p99,
                       "(v1; the claim looked up on the API server each time)");
                snprintf(t, sizeof(t), "within 1 s: %s", verdict(fig.dra_h99 < 1000000000));
                row_ms("DRA hotplug -> ResourceSlice updated", fig.dra_h50, fig.dra_h99, t);
                snprintf(t, sizeof(t), "at most 5 MB: %s", verdict(fig.dra_rss_anon <= 5120));
                row_kb("RssAnon, 64 DRA resources, published", fig.dra_rss_anon, t);
                snprintf(t, sizeof(t), "at most 5 MB: %s (%d Prepares, %d hotplugs)",
                         verdict(fig.dra_rss_anon_after <= 5120), DRA_PREPARES, DRA_HOTPLUGS);
                row_kb("RssAnon, 64 DRA resources, after use", fig.dra_rss_anon_after, t);
                row_kb("VmRSS, 64 DRA resources", fig.dra_vm_rss, "");
        }
        if (fig.roll) {
                const struct roll_fig *r = &fig.roll_fig[0], *rl = &fig.roll_fig[1];
                snprintf(t, sizeof(t), "at most 1 s: %s (%u of %u Prepares failed, %d rollovers)",
                         verdict(r->wmax <= 1000000000), r->failed, r->calls, ROLLOVERS);
                row_ms("DRA rollover: Prepare failing (p50, worst)", r->w50, r->wmax, t);
                row_us("DRA Prepare across the rollovers", r->p50, r->p99,
                       "(start B beside A, SIGTERM A; calls to the newest)");
                printf("%-46s %8llu   %8llu    %s\n", "DRA rollover, config changed: slice writes",
                       (unsigned long long)r->writes50, (unsigned long long)r->writes_max,
                       "(p50, worst; B beside A until 2 s after A's exit)");
                snprintf(t, sizeof(t), "at most 30: %s", verdict(fig.war_writes <= 30));
                printf("%-46s %8u %10s    %s\n", "two that disagree: slice writes in 10 s",
                       fig.war_writes, "", t);
                snprintf(t, sizeof(t),
                         "at most 1 s: %s (%u of %u Prepares failed; %u unprepared claims kept: "
                         "0 %s)",
                         verdict(rl->wmax <= 1000000000), rl->failed, rl->calls, rl->back,
                         verdict(rl->back == 0));
                row_ms("DRA rollover, 4 clients: failing (p50, worst)", rl->w50, rl->wmax, t);
                row_us("DRA Prepare across them, 4 clients", rl->p50, rl->p99,
                       "(the same rollovers, 4 client threads at once)");
        }
        if (fig.hostile) {
                char t3[128];
                row_ms("scrape beside 1,000 idle connections", fig.hi_sc50, fig.hi_sc99, "");
                snprintf(t3, sizeof(t3), "p99 < 1 s (a probe's timeout): %s",
                         verdict(fig.hi_hz99 < 1000000000));
                row_ms("/healthz beside 1,000 idle connections", fig.hi_hz50, fig.hi_hz99, t3);
                row_us("Allocate, 10,000 devices, no scrapes", fig.hi_a50, fig.hi_a99, "");
                snprintf(t3, sizeof(t3), "(%u scrapes, %u Lists)", fig.hi_scrapes[0],
                         fig.hi_lists[0]);
                row_us("Allocate beside scrapes, 1,000 IDs listed", fig.hi_s50[0], fig.hi_s99[0],
                       t3);
                snprintf(t3, sizeof(t3), "p99 within 1.5x of 1,000 IDs: %s (%u scrapes, %u Lists)",
                         verdict(2 * fig.hi_s99[1] <= 3 * fig.hi_s99[0]), fig.hi_scrapes[1],
                         fig.hi_lists[1]);
                row_us("Allocate beside scrapes, 4 MiB answer", fig.hi_s50[1], fig.hi_s99[1], t3);
                snprintf(t3, sizeof(t3), "under 32 MiB: %s (peak resident %ld kB)",
                         verdict(fig.hi_hwm < 32 * 1024), fig.hi_hwm);
                row_kb("RssAnon after a 4 MiB PodResources answer", fig.hi_rss_anon, t3);
        }
}

int main(int argc, char **argv) {
        if (argc == 3 && strcmp(argv[1], "--echo") == 0)
                echo_server(argv[2]);
        extra_args = argv + 1;
        n_extra = argc - 1;
        root = path_join(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", "cdiplug-bench-XXXXXX");
        if (!mkdtemp(root))
                die("mkdtemp");
        dp_grpc_init();
        if (section("alloc"))
                bench_alloc();
        if (section("exec"))
                bench_exec();
        if (section("restart"))
                bench_restart();
        if (section("hotplug"))
                bench_hotplug();
        if (section("preferred"))
                bench_preferred();
        if (section("reload"))
                bench_reload();
        if (section("dra"))
                bench_dra();
        if (section("rollover"))
                bench_rollover();
        if (section("discovery") || section("many") || section("scrape") || section("hostile")) {
                char *nodes = make_nodes();
                if (section("discovery"))
                        bench_discovery(nodes);
                if (section("many"))
                        bench_many(nodes);
                if (section("scrape"))
                        bench_scrape(nodes);
                if (section("scrape"))
                        bench_scrape_small();
                if (section("hostile"))
                        bench_hostile(nodes);
                free(nodes);
        }
        print_table();
        grpc_shutdown();
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(root);
        return 0;
}
