/* SPDX-License-Identifier: Apache-2.0 */
/* sbx-try: lock down with sbx_lockdown(), then do one named thing, so a
 * test can watch from outside what the sandbox allows, refuses and kills.
 * Test-only (built by tests/sandbox/extra.cmake, never installed); in the
 * spirit of bubblewrap's tests/try-syscall.c.
 *
 *   sbx-try [--user SPEC] [--no-sandbox] ACTION [ARG]
 *
 * Exit status: 0 when the action's call succeeded, its errno when it
 * failed, 77 when the action does not apply to this machine, 125 when the
 * lock-down itself failed, 126 for bad usage. A filter kill shows up as
 * death by SIGSYS.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "sandbox.h"

#define EXIT_SKIP 77
#define EXIT_LOCKDOWN 125
#define EXIT_USAGE 126

/* Report a raw call's outcome and turn it into the exit status. */
static int report(const char *what, long ret) {
        int e = ret < 0 ? errno : 0;

        printf("%s: ret=%ld errno=%d (%s)\n", what, ret, e, e ? strerror(e) : "ok");
        fflush(stdout);
        return e;
}

/* The denylist, callable by name. All arguments are -1: if the filter ever
 * let one through, the kernel rejects it (EINVAL, EFAULT, EBADF or a
 * no-change query), so a broken filter fails the test, not the machine. */
#define SC(n)                                                                                      \
        { #n, SYS_##n }
static const struct {
        const char *name;
        long nr;
} calls[] = {
        SC(execve),
        SC(execveat),
        SC(ptrace),
        SC(mount),
        SC(umount2),
        SC(pivot_root),
        SC(init_module),
        SC(finit_module),
        SC(bpf),
        SC(kexec_load),
        SC(setuid),
        SC(setgid),
        SC(setreuid),
        SC(setregid),
        SC(setresuid),
        SC(setresgid),
        SC(setgroups),
        SC(setfsuid),
        SC(setfsgid),
        SC(unshare),
        SC(setns),
        SC(keyctl),
        SC(process_vm_writev),
        SC(getsid),
        SC(syslog),
        SC(acct),
        SC(clone3),
};

static int do_call(const char *name) {
        const long m1 = -1;

        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
                if (strcmp(calls[i].name, name) == 0)
                        return report(name, syscall(calls[i].nr, m1, m1, m1, m1, m1, m1));
        fprintf(stderr, "sbx-try: no call named '%s'\n", name);
        return EXIT_USAGE;
}

static void print_status(const char *tid) {
        static const char *const keys[] = {
                "Uid:",    "Gid:",    "Groups:", "CapInh:",     "CapPrm:",
                "CapEff:", "CapBnd:", "CapAmb:", "NoNewPrivs:", "Seccomp:",
        };
        char path[64], line[256];
        FILE *f;
        int n = snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);

        if (n < 0 || (size_t)n >= sizeof(path) || !(f = fopen(path, "re"))) {
                printf("tid %s: cannot read status\n", tid);
                return;
        }
        while (fgets(line, sizeof(line), f))
                for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                        if (strncmp(line, keys[i], strlen(keys[i])) == 0)
                                printf("tid %s %s", tid, line);
        fclose(f);
}

static void *wait_on_pipe(void *arg) {
        char c;

        while (read(*(int *)arg, &c, 1) > 0)
                ;
        return NULL;
}

/* A thread started after the lock-down, to show it inherits everything. */
static int with_thread(int (*fn)(void)) {
        int p[2], r;
        pthread_t t;

        if (pipe2(p, O_CLOEXEC) < 0)
                return report("pipe2", -1);
        r = pthread_create(&t, NULL, wait_on_pipe, &p[0]);
        if (r != 0) {
                errno = r;
                return report("pthread_create", -1);
        }
        r = fn();
        close(p[1]);
        pthread_join(t, NULL);
        close(p[0]);
        return r;
}

static int status_all(void) {
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;

        if (!d)
                return report("opendir /proc/self/task", -1);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        print_status(de->d_name);
        closedir(d);
        fflush(stdout);
        return 0;
}

/* Stay alive, with a second thread, until the test closes our stdin. */
static int hold(void) {
        char c;

        printf("ready\n");
        fflush(stdout);
        while (read(STDIN_FILENO, &c, 1) > 0)
                ;
        return 0;
}

static int x32(void) {
#if defined(__x86_64__)
        /* Bit 30 selects the x32 ABI; same audit arch as x86_64. */
        return report("x32 getpid", syscall(0x40000000L | SYS_getpid));
#else
        printf("x32: not x86_64\n");
        return EXIT_SKIP;
#endif
}

static int i386(void) {
#if defined(__x86_64__)
        long ret = 20; /* getpid in the i386 table */

        /* int 0x80 enters the i386 ABI from 64-bit code. */
        __asm__ volatile("int $0x80" : "+a"(ret) : : "memory", "rcx", "r11");
        if (ret < 0) {
                errno = (int)-ret;
                ret = -1;
        }
        return report("i386 getpid", ret);
#else
        printf("i386: not x86_64\n");
        return EXIT_SKIP;
#endif
}

static int do_fork(void) {
        pid_t pid = fork();

        if (pid == 0)
                _exit(0);
        if (pid > 0)
                waitpid(pid, NULL, 0);
        return report("fork", pid);
}

#define CHECK(what, call)                                                                          \
        do {                                                                                       \
                if ((call) < 0)                                                                    \
                        return report(what, -1);                                                   \
        } while (0)

/* What the daemon does while serving, in a directory the test owns. */
static int allowed_fs(int dfd) {
        char buf[16];
        int fd;

        CHECK("mkdirat", mkdirat(dfd, "sub", 0755));
        fd = openat(dfd, "sub/.spec.tmp", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        CHECK("openat O_CREAT|O_EXCL", fd);
        CHECK("write", write(fd, "{}\n", 3));
        CHECK("fsync", fsync(fd));
        CHECK("fchmod", fchmod(fd, 0644));
        close(fd);
        CHECK("renameat", renameat(dfd, "sub/.spec.tmp", dfd, "sub/spec.json"));
        CHECK("readlinkat /proc/self/exe",
              readlinkat(AT_FDCWD, "/proc/self/exe", buf, sizeof(buf)));
        struct stat st;
        CHECK("fstatat", fstatat(dfd, "sub/spec.json", &st, 0));
        DIR *d = opendir("/sys/class");
        if (d) {
                while (readdir(d))
                        ;
                closedir(d);
        }
        CHECK("unlinkat file", unlinkat(dfd, "sub/spec.json", 0));
        CHECK("unlinkat dir", unlinkat(dfd, "sub", AT_REMOVEDIR));
        return 0;
}

static int allowed_ipc(const char *dir) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct itimerspec its = { .it_value = { .tv_nsec = 1000 } };
        struct epoll_event ev = { .events = EPOLLIN };
        int ls, cs, as, efd, tfd, ifd, ep, n;
        uint64_t v;

        n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s.sock", dir);
        if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
                return ENAMETOOLONG;
        CHECK("socket AF_UNIX", ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        CHECK("bind", bind(ls, (struct sockaddr *)&sa, sizeof(sa)));
        CHECK("listen", listen(ls, 4));
        CHECK("socket AF_UNIX client", cs = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        CHECK("connect", connect(cs, (struct sockaddr *)&sa, sizeof(sa)));
        CHECK("accept4", as = accept4(ls, NULL, NULL, SOCK_CLOEXEC));
        CHECK("write socket", write(cs, "x", 1));
        CHECK("inotify_init1", ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
        CHECK("inotify_add_watch", inotify_add_watch(ifd, dir, IN_CREATE | IN_DELETE));
        CHECK("eventfd", efd = eventfd(0, EFD_CLOEXEC));
        CHECK("timerfd_create", tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
        CHECK("timerfd_settime", timerfd_settime(tfd, 0, &its, NULL));
        CHECK("epoll_create1", ep = epoll_create1(EPOLL_CLOEXEC));
        CHECK("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev));
        CHECK("epoll_wait", epoll_wait(ep, &ev, 1, 1000));
        CHECK("read timerfd", read(tfd, &v, sizeof(v)));
        CHECK("shutdown", shutdown(as, SHUT_RDWR));
        CHECK("unlinkat socket", unlinkat(AT_FDCWD, sa.sun_path, 0));
        close(ep), close(tfd), close(efd), close(ifd), close(as), close(cs), close(ls);
        return 0;
}

static const char *allowed_dir;

static int allowed(void) {
        int dfd = open(allowed_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r;

        if (dfd < 0)
                return report("open dir", -1);
        r = allowed_fs(dfd);
        close(dfd);
        if (r == 0)
                r = allowed_ipc(allowed_dir);
        printf("allowed: %s\n", r == 0 ? "ok" : "FAILED");
        return r;
}

static int asan_report(void) {
        /* Use after free: under ASan the report must come out whole (and
         * the process exit 1), not die of SIGSYS half-way through. UBSan
         * cannot see this one, so ASan is the one reporting. */
        char *volatile p = malloc(8);

        free(p);
        return p[0];
}

int main(int argc, char **argv) {
        struct sbx_options opts = { 0 };
        struct sbx_error err = { 0 };
        bool sandbox = true, thread_first = false;
        const char *action;
        pthread_t t;
        int p[2] = { -1, -1 };
        int i = 1, r;

        for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
                if (strcmp(argv[i], "--no-sandbox") == 0)
                        sandbox = false;
                else if (strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
                        r = sbx_parse_user(argv[++i], &opts);
                        if (r < 0) {
                                fprintf(stderr, "sbx-try: --user '%s': %s\n", argv[i],
                                        strerror(-r));
                                return EXIT_USAGE;
                        }
                } else
                        return EXIT_USAGE;
        }
        if (i >= argc)
                return EXIT_USAGE;
        action = argv[i++];

        if (strcmp(action, "thread-first") == 0) {
                /* A thread started before the lock-down must make it fail. */
                thread_first = true;
                if (pipe2(p, O_CLOEXEC) < 0 || pthread_create(&t, NULL, wait_on_pipe, &p[0]) != 0)
                        return report("thread before lock-down", -1);
        }

        if (sandbox) {
                r = sbx_lockdown(&opts, &err);
                if (r < 0) {
                        printf("lockdown failed at \"%s\": %s\n", err.step ? err.step : "?",
                               strerror(-r));
                        fflush(stdout);
                        if (thread_first) {
                                close(p[1]);
                                pthread_join(t, NULL);
                                return -r;
                        }
                        return EXIT_LOCKDOWN;
                }
        }
        if (thread_first)
                return 0;

        if (strcmp(action, "status") == 0)
                return with_thread(status_all);
        if (strcmp(action, "hold") == 0)
                return with_thread(hold);
        if (strcmp(action, "denied") == 0)
                return report("getsid", syscall(SYS_getsid, 0));
        if (strcmp(action, "call") == 0 && i < argc)
                return sandbox ? do_call(argv[i]) : EXIT_USAGE;
        if (strcmp(action, "x32") == 0)
                return x32();
        if (strcmp(action, "i386") == 0)
                return i386();
        if (strcmp(action, "fork") == 0)
                return do_fork();
        if (strcmp(action, "inet") == 0)
                return report("socket AF_INET", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (strcmp(action, "kill-init") == 0)
                return report("kill(1, 0)", kill(1, 0));
        if (strcmp(action, "setrlimit") == 0) {
                struct rlimit rl = { 16, 16 };
                return report("prlimit64 set", syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &rl, NULL));
        }
        if (strcmp(action, "allowed") == 0 && i < argc) {
                allowed_dir = argv[i];
                return with_thread(allowed);
        }
        if (strcmp(action, "asan") == 0)
                return asan_report();
        fprintf(stderr, "sbx-try: unknown action '%s'\n", action);
        return EXIT_USAGE;
}
