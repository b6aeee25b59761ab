/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox/: sbx_lockdown() proven from outside. Each test runs sbx-try
 * (tests/sandbox/try-syscall.c), which locks itself down and then does one
 * thing, and looks at how it ended: an exit status carrying the errno, or
 * death by SIGSYS. Never locks down the test process itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc_status.h"
#include "sandbox.h"

#ifndef SBX_TRY
#error "SBX_TRY must name the sbx-try helper (tests/sandbox/extra.cmake)"
#endif

#define EXIT_SKIP 77

struct run {
        int status; /* from waitpid() */
        char *out;  /* stdout and stderr together */
};

static void run_free(struct run *r) {
        free(r->out);
        r->out = NULL;
}

static char *read_all(int fd) {
        size_t len = 0, cap = 4096;
        char *buf = malloc(cap);
        ssize_t n;

        cr_assert_not_null(buf);
        while ((n = read(fd, buf + len, cap - len - 1)) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                cr_assert_geq(n, 0, "read: %s", strerror(errno));
                len += (size_t)n;
                if (cap - len < 2) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                        cr_assert_not_null(buf);
                }
        }
        buf[len] = '\0';
        return buf;
}

/* Run sbx-try with args (NULL-terminated), collect output and status. */
static struct run try_run(const char *const *args) {
        const char *argv[16] = { SBX_TRY };
        struct run r = { 0 };
        int out[2];
        pid_t pid;
        size_t n = 1;

        for (; args[n - 1]; n++) {
                cr_assert_lt(n, sizeof(argv) / sizeof(argv[0]) - 1);
                argv[n] = args[n - 1];
        }
        argv[n] = NULL;

        cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                dup2(out[1], STDOUT_FILENO);
                dup2(out[1], STDERR_FILENO);
                execv(SBX_TRY, (char *const *)argv);
                _exit(127);
        }
        close(out[1]);
        r.out = read_all(out[0]);
        close(out[0]);
        cr_assert_eq(waitpid(pid, &r.status, 0), pid);
        return r;
}

#define TRY(...) try_run((const char *const[]){ __VA_ARGS__, NULL })

static void assert_exit(struct run *r, int code, const char *what) {
        cr_assert(WIFEXITED(r->status) && WEXITSTATUS(r->status) == code,
                  "%s: want exit %d (%s), got %s %d; output:\n%s", what, code,
                  code ? strerror(code) : "success", WIFSIGNALED(r->status) ? "signal" : "exit",
                  WIFSIGNALED(r->status) ? WTERMSIG(r->status) : WEXITSTATUS(r->status), r->out);
}

static void assert_sigsys(struct run *r, const char *what) {
        cr_assert(WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGSYS,
                  "%s: want death by SIGSYS, got %s %d; output:\n%s", what,
                  WIFSIGNALED(r->status) ? "signal" : "exit",
                  WIFSIGNALED(r->status) ? WTERMSIG(r->status) : WEXITSTATUS(r->status), r->out);
}

/* The lock-down needs CAP_SETPCAP and friends, i.e. root (as in CI). */
static void need_root(void) {
        if (geteuid() != 0)
                cr_skip_test("sbx_lockdown() needs root; running as uid %u", geteuid());
}

/* Every "tid N Field:\tvalue" line of sbx-try's status output for field
 * must have value want; returns how many threads were seen. */
static unsigned count_field(const char *out, const char *field, const char *want) {
        char key[64];
        unsigned n = 0;
        int k = snprintf(key, sizeof(key), " %s:\t", field);

        cr_assert(k > 0 && (size_t)k < sizeof(key));
        for (const char *p = out; (p = strstr(p, key)); p += strlen(key)) {
                const char *v = p + strlen(key);
                size_t len = strcspn(v, "\n");

                cr_assert(len == strlen(want) && strncmp(v, want, len) == 0,
                          "%s is '%.*s', want '%s'; output:\n%s", field, (int)len, v, want, out);
                n++;
        }
        return n;
}

static void assert_confined_status(const char *out) {
        static const char *const zero[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
        unsigned threads = count_field(out, "Seccomp", "2");

        /* The main thread and one started after the lock-down. */
        cr_assert_geq(threads, 2, "want >= 2 threads; output:\n%s", out);
        cr_assert_eq(count_field(out, "NoNewPrivs", "1"), threads);
        for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++)
                cr_assert_eq(count_field(out, zero[i], "0000000000000000"), threads, "%s", zero[i]);
}

Test(sandbox, every_thread_has_no_caps_nnp_and_seccomp, .init = need_root) {
        struct run r = TRY("status");

        assert_exit(&r, 0, "status");
        assert_confined_status(r.out);
        run_free(&r);
}

/* The same seen through proc_check_confined(), as the daemon's
 * integration tests use it on the real daemon. */
Test(sandbox, proc_check_confined_sees_a_held_child, .init = need_root) {
        int in[2], out[2];
        char buf[16] = { 0 }, *msg = NULL;
        pid_t pid;
        int status;

        cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                dup2(in[0], STDIN_FILENO);
                dup2(out[1], STDOUT_FILENO);
                execl(SBX_TRY, SBX_TRY, "hold", (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        cr_assert_eq(read(out[0], buf, sizeof(buf) - 1), 6, "child said '%s'", buf);
        cr_assert_str_eq(buf, "ready\n");

        int r = proc_check_confined(pid, &msg);
        cr_assert_eq(r, 0, "proc_check_confined: %d %s", r, msg ? msg : "");

        close(in[1]);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(out[0]);
}

/* And it must say no, naming thread and field, for an unconfined process. */
Test(sandbox, proc_check_confined_refuses_the_test_itself) {
        char *msg = NULL;
        int r = proc_check_confined(getpid(), &msg);

        cr_assert_eq(r, -EPERM, "got %d", r);
        cr_assert_not_null(msg);
        cr_assert(strstr(msg, "thread") && (strstr(msg, "Cap") || strstr(msg, "NoNewPrivs")),
                  "message: %s", msg);
        free(msg);
}

Test(sandbox, unlisted_syscall_fails_with_eperm, .init = need_root) {
        struct run base = TRY("--no-sandbox", "denied");
        struct run r = TRY("denied");

        /* getsid works unconfined, so the EPERM below is the filter's. */
        assert_exit(&base, 0, "getsid without sandbox");
        assert_exit(&r, EPERM, "getsid in sandbox");
        run_free(&base);
        run_free(&r);
}

/* Every SBX_KILL entry of the table, called for real. */
Test(sandbox, denylist_kills_with_sigsys, .init = need_root) {
        size_t n, killed = 0;
        const struct sbx_syscall_group *g = sbx_syscall_groups(&n);

        for (size_t i = 0; i < n; i++) {
                if (g[i].action != SBX_KILL)
                        continue;
                char *names = strdup(g[i].syscalls), *save = NULL;

                cr_assert_not_null(names);
                for (char *s = strtok_r(names, " ", &save); s; s = strtok_r(NULL, " ", &save)) {
                        struct run r = TRY("call", s);

                        assert_sigsys(&r, s);
                        run_free(&r);
                        killed++;
                }
                free(names);
        }
        cr_assert_geq(killed, 23, "only %zu denylisted calls", killed);
}

/* A kernel built without IA32 emulation answers int 0x80 with SIGSEGV
 * before seccomp ever sees the call: nothing to test there. */
static void need_abi(const char *abi) {
        struct run r = TRY("--no-sandbox", abi);
        bool works = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
        int sig = WIFSIGNALED(r.status) ? WTERMSIG(r.status) : 0;
        int code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : 0;

        run_free(&r);
        if (!works)
                cr_skip_test("the kernel does not run the %s ABI (probe: %s %d)", abi,
                             sig ? "signal" : "exit", sig ? sig : code);
}

Test(sandbox, x32_abi_is_killed, .init = need_root) {
        struct run r = TRY("x32");

        /* seccomp sees x32 calls (bit 30) before the kernel decides whether
         * it runs that ABI, so this holds even where x32 is off. */
        if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == EXIT_SKIP)
                cr_skip_test("not x86_64");
        assert_sigsys(&r, "x32 getpid");
        run_free(&r);
}

Test(sandbox, i386_abi_is_killed, .init = need_root) {
        struct run r;

        need_abi("i386");
        r = TRY("i386");
        assert_sigsys(&r, "int 0x80 getpid");
        run_free(&r);
}

Test(sandbox, clone3_looks_absent, .init = need_root) {
        struct run r = TRY("call", "clone3");

        assert_exit(&r, ENOSYS, "clone3");
        run_free(&r);
}

/* Argument checks: each works unconfined and fails confined. */
Test(sandbox, argument_checks_refuse, .init = need_root) {
        static const char *const actions[] = { "fork", "inet", "kill-init", "setrlimit" };

        for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
                struct run base = TRY("--no-sandbox", actions[i]);
                struct run r = TRY(actions[i]);

                assert_exit(&base, 0, actions[i]);
                assert_exit(&r, EPERM, actions[i]);
                run_free(&base);
                run_free(&r);
        }
}

static char *make_tmpdir(void) {
        char *dir = strdup("/tmp/sbx-test-XXXXXX");

        cr_assert_not_null(dir);
        cr_assert_not_null(mkdtemp(dir));
        return dir;
}

Test(sandbox, daemon_work_is_allowed, .init = need_root) {
        char *dir = make_tmpdir();
        struct run r = TRY("allowed", dir);

        assert_exit(&r, 0, "allowed");
        cr_assert(strstr(r.out, "allowed: ok"), "%s", r.out);
        run_free(&r);
        rmdir(dir);
        free(dir);
}

Test(sandbox, thread_before_lockdown_is_refused, .init = need_root) {
        struct run r = TRY("thread-first");

        assert_exit(&r, EBUSY, "lock-down with a second thread");
        cr_assert(strstr(r.out, "\"single-thread check\""), "%s", r.out);
        run_free(&r);
}

Test(sandbox, user_switch_is_real, .init = need_root) {
        struct run r = TRY("--user", "65534:65534", "status");

        assert_exit(&r, 0, "status as 65534:65534");
        assert_confined_status(r.out);
        unsigned threads = count_field(r.out, "Uid", "65534\t65534\t65534\t65534");
        cr_assert_geq(threads, 2);
        cr_assert_eq(count_field(r.out, "Gid", "65534\t65534\t65534\t65534"), threads);
        cr_assert_eq(count_field(r.out, "Groups", " "), threads, "supplementary groups left:\n%s",
                     r.out);
        run_free(&r);
}

Test(sandbox, user_can_still_do_daemon_work, .init = need_root) {
        char *dir = make_tmpdir();

        cr_assert_eq(chown(dir, 65534, 65534), 0);
        struct run r = TRY("--user", "65534:65534", "allowed", dir);

        assert_exit(&r, 0, "allowed as 65534:65534");
        run_free(&r);
        rmdir(dir);
        free(dir);
}

/* The allowlist must let a sanitizer report come out whole. */
Test(sandbox, asan_report_survives_the_filter, .init = need_root) {
#if defined(__SANITIZE_ADDRESS__)
        struct run r = TRY("asan");

        cr_assert(strstr(r.out, "heap-use-after-free"), "no ASan report:\n%s", r.out);
        cr_assert(strstr(r.out, "SUMMARY: AddressSanitizer"), "report cut short:\n%s", r.out);
        assert_exit(&r, 1, "ASan death");
        run_free(&r);
#else
        cr_skip_test("not an ASan build");
#endif
}
