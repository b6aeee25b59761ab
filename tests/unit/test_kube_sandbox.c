/* SPDX-License-Identifier: Apache-2.0 */
/* The API client inside the daemon's real seccomp filter (kube-try, built
 * by tests/sandbox/extra.cmake) against the fake API server: with the
 * "dra" groups it publishes, watches (a wipe is repaired) and looks a
 * claim up, and the process is not killed; without them it cannot
 * connect, and says so. The server is named "localhost": the name is
 * resolved before the lock-down and pinned, so no DNS runs under the
 * filter. */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "kubetest.h"

#ifndef KUBE_TRY
#error "KUBE_TRY must name the kube-try helper (tests/sandbox/extra.cmake)"
#endif

#define WAIT_MS 15000

static struct kt t;

static void need_root(void) {
        if (geteuid() != 0)
                cr_skip_test("sbx_lockdown() needs root; running as uid %u", geteuid());
        kt_setup(&t, true);
}

static void teardown(void) {
        kt_teardown(&t);
}

TestSuite(kube_sandbox, .init = need_root, .fini = teardown, .timeout = 60);

/* The kubeconfig, with the server as https://localhost:PORT. */
static void localhost_kubeconfig(void) {
        static const char ip[] = "https://127.0.0.1:";
        struct kube_blob b;
        char *p, *text = NULL;

        cr_assert_eq(kube_read_file(t.kubeconfig, 1 << 20, &b), 0);
        p = strstr(b.data, ip);
        cr_assert_not_null(p);
        *p = '\0';
        cr_assert_geq(asprintf(&text, "%shttps://localhost:%s", b.data, p + sizeof(ip) - 1), 0);
        kt_write(t.kubeconfig, text);
        free(text);
        free(b.data);
}

struct child {
        pid_t pid;
        int in, out;
};

static struct child spawn(const char *mode) {
        int in[2], out[2];
        struct child c;

        cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
        c.pid = fork();
        cr_assert_geq(c.pid, 0);
        if (c.pid == 0) {
                dup2(in[0], 0);
                dup2(out[1], 1);
                execl(KUBE_TRY, KUBE_TRY, t.kubeconfig, KT_NODE, KT_DRIVER, mode, (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        c.in = in[1];
        c.out = out[0];
        return c;
}

static void read_line(struct child *c, char *buf, size_t size) {
        size_t n = 0;

        while (n + 1 < size) {
                ssize_t r = read(c->out, buf + n, 1);
                cr_assert_gt(r, 0, "kube-try ended before answering");
                if (buf[n] == '\n')
                        break;
                n++;
        }
        buf[n] = '\0';
}

static int finish(struct child *c) {
        int status;

        close(c->in);
        cr_assert_eq(waitpid(c->pid, &status, 0), c->pid);
        close(c->out);
        cr_assert(!WIFSIGNALED(status), "kube-try killed by signal %d (SIGSYS: the filter)",
                  WTERMSIG(status));
        return WEXITSTATUS(status);
}

Test(kube_sandbox, publishes_watches_and_gets_claims_under_the_filter) {
        struct kt_pool w = { .pool = KT_POOL_A, .devices = 3, .prefix = "d" };
        struct child c;
        char line[128], want[64];

        fakeapi_add_claim(t.f,
                          cJSON_Parse("{\"metadata\":{\"namespace\":\"default\",\"name\":\"c\","
                                      "\"uid\":\"u\"},\"status\":{\"allocation\":{\"devices\":"
                                      "{\"results\":[{\"request\":\"r\",\"driver\":\"" KT_DRIVER
                                      "\",\"pool\":\"" KT_POOL_A "\",\"device\":\"d1\"}]}}}}"));
        localhost_kubeconfig();
        c = spawn("api");
        read_line(&c, line, sizeof(line));
        cr_assert_str_eq(line, "claim err=0 results=1");
        /* What glibc's resolver needs to look the server's name up again. */
        read_line(&c, line, sizeof(line));
        cr_assert_str_eq(line, "udp socket=0 sendmmsg=0");
        /* TCP and UDP by their numbers, not UDP-Lite (136) nor MPTCP (262),
         * which share their socket types. */
        read_line(&c, line, sizeof(line));
        snprintf(want, sizeof(want), "tcp=0 udp=0 udplite=%d mptcp=%d", -EPERM, -EPERM);
        cr_assert_str_eq(line, want);
        cr_assert(fakeapi_wait(t.f, kt_pool_ok, &w, WAIT_MS), "slices never published");
        fakeapi_wipe(t.f, KT_NODE);
        cr_assert(fakeapi_wait(t.f, kt_pool_ok, &w, WAIT_MS), "wipe never repaired");
        cr_assert_eq(finish(&c), 0);
}

Test(kube_sandbox, without_the_dra_groups_no_tcp_socket) {
        struct child c;
        char line[128], want[64];

        localhost_kubeconfig();
        c = spawn("noapi");
        read_line(&c, line, sizeof(line));
        /* The socket refused: the connect fails (-ECONNREFUSED), or, once
         * a failed connect made the client look the name up again and
         * the resolver's UDP socket was refused too, the host counts as
         * unreachable (-EHOSTUNREACH), whichever comes first on this build. */
        char other[64];
        snprintf(want, sizeof(want), "claim err=%d results=0", -ECONNREFUSED);
        snprintf(other, sizeof(other), "claim err=%d results=0", -EHOSTUNREACH);
        cr_assert(strcmp(line, want) == 0 || strcmp(line, other) == 0, "%s", line);
        read_line(&c, line, sizeof(line));
        snprintf(want, sizeof(want), "udp socket=%d sendmmsg=%d", -EPERM, -EBADF);
        cr_assert_str_eq(line, want);
        cr_assert_eq(fakeapi_count(t.f, "GET") + fakeapi_count(t.f, "POST"), 0);
        cr_assert_eq(finish(&c), 0);
}
