/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp filter: an allowlist kept as data, a denylist that kills, and
 * everything else failing with EPERM. Built for the native architecture
 * only; every other ABI hits the bad-architecture action, which kills.
 */
#include <errno.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sbx-internal.h"

/* One line per group, each saying who needs it. Keep SECURITY.md's table in
 * step: tests/unit/test_sandbox_table.c compares the two. Names absent on
 * this architecture (open, rename, ... on aarch64) are skipped; a name
 * unknown on every supported architecture is a typo and fails the build of
 * the filter. */
static const struct sbx_syscall_group groups[] = {
        /* glibc malloc, grpc arenas, ASan's allocator and shadow memory. */
        { "memory", "glibc malloc, grpc core, ASan allocator",
          "brk mmap munmap mremap mprotect madvise", SBX_ALLOW, SBX_ARG_ANY },
        /* pthread_create and grpc core's executor/timer threads; clone is
         * limited to CLONE_THREAD so nothing can fork. */
        { "threads", "glibc pthread_create for grpc core's threads", "clone", SBX_ALLOW,
          SBX_ARG_THREAD },
        /* clone3 passes its flags in memory, out of the filter's sight: make
         * it look absent and glibc falls back to clone, checked above. */
        { "clone3", "glibc >= 2.34 tries it first and falls back on ENOSYS", "clone3", SBX_ENOSYS,
          SBX_ARG_ANY },
        /* Per-thread bookkeeping and waiting, glibc and grpc core. */
        /* abseil's mutex reads its thread's scheduling policy when it
         * blocks; refused, it logs "pthread_getschedparam failed". */
        { "thread-sync", "glibc thread start/exit, grpc core's and abseil's mutexes and condvars",
          "set_robust_list rseq set_tid_address gettid futex sched_yield "
          "sched_getaffinity sched_getparam sched_getscheduler exit exit_group restart_syscall",
          SBX_ALLOW, SBX_ARG_ANY },
        /* grpc core's timers and the watcher's timerfd; usually the vDSO. */
        { "time", "grpc core timers, the watcher's timerfd",
          "clock_gettime clock_getres clock_nanosleep nanosleep gettimeofday "
          "time timerfd_create timerfd_settime timerfd_gettime",
          SBX_ALLOW, SBX_ARG_ANY },
        /* grpc core's pollers (epoll1, falling back to poll) and wake-ups. */
        { "event-loop",
          "grpc core's epoll/poll engines and wakeup fds, the watcher's poll, the metrics endpoint's libevent loop",
          "epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 "
          "eventfd2 pipe2 poll ppoll",
          SBX_ALLOW, SBX_ARG_ANY },
        /* Signal masks and the watcher's signalfd; ASan's alternate stack. */
        { "signals", "the watcher's signalfd, glibc, ASan's per-thread sigaltstack",
          "rt_sigaction rt_sigprocmask rt_sigreturn sigaltstack signalfd4", SBX_ALLOW,
          SBX_ARG_ANY },
        /* abort() and ASan/UBSan deaths signal the process itself; uid 0
         * without CAP_KILL could still signal every other root process, so
         * only our own pid is allowed. */
        { "self-signal", "abort(), raise(), sanitizer deaths", "kill tgkill", SBX_ALLOW,
          SBX_ARG_SELF },
        /* Plain descriptor I/O on what the daemon already holds. ioctl is
         * absent on purpose: nothing needs it, and on a terminal stderr it
         * would reach TIOCSTI and friends. */
        { "fd-io", "everything: sockets, spec files, stderr logs",
          "read write readv writev pread64 pwrite64 lseek close fcntl dup dup3 "
          "fstat newfstatat statx",
          SBX_ALLOW, SBX_ARG_ANY },
        /* Scanning /dev and /sys for devices (openat2 with RESOLVE_IN_ROOT
         * keeps --host-root lookups inside it); ASan reads /proc/self/maps. */
        { "fs-read", "device discovery in /dev and /sys, ASan reports",
          "openat openat2 getdents64 readlinkat readlink faccessat faccessat2 access", SBX_ALLOW,
          SBX_ARG_ANY },
        /* CDI spec files: temp file, fsync, chmod, rename into place; the
         * daemon's stale sockets. */
        { "fs-write", "atomic CDI spec writes, removing stale sockets",
          "fsync fdatasync fchmod rename renameat renameat2 unlink unlinkat "
          "mkdir mkdirat",
          SBX_ALLOW, SBX_ARG_ANY },
        /* The DRA checkpoint is shared by the two instances of a rolling
         * update: each read-modify-write holds an exclusive flock of
         * checkpoint.lock beside it (LOCK_NB, retried with a bound). flock
         * only takes advisory locks on files the daemon has open. */
        { "fs-lock", "the DRA checkpoint's lock, shared with another instance", "flock", SBX_ALLOW,
          SBX_ARG_ANY },
        { "inotify", "the watcher: new devices, kubelet restarts",
          "inotify_init1 inotify_add_watch inotify_rm_watch", SBX_ALLOW, SBX_ARG_ANY },
        /* grpc core over unix sockets only: the daemon never needs a network
         * socket, so other families fail with EPERM (grpc core probes
         * AF_INET and AF_INET6 at start-up and reads that as "no IP"). */
        { "unix-sockets", "grpc server and client on unix sockets", "socket", SBX_ALLOW,
          SBX_ARG_AF_UNIX },
        /* The metrics endpoint's TCP socket is made and bound before the
         * filter loads; its connections need only accept4 and these. */
        { "socket-ops",
          "grpc server and client on unix sockets; the metrics endpoint's connections",
          "bind listen accept accept4 connect getsockopt setsockopt getsockname "
          "getpeername shutdown sendmsg recvmsg sendto recvfrom",
          SBX_ALLOW, SBX_ARG_ANY },
        /* The Kubernetes API client (daemon/kube, only with a "dra"
         * section or a resource selected by node labels): libcurl's TCP
         * connections to the API server, and the UDP sockets glibc's resolver uses to look the server's name up
         * again after a failure (a kubeconfig naming a DNS host; resolved
         * on cdiplug-kube, pinned for libcurl with CURLOPT_RESOLVE).
         * libcurl's wake-up socketpair is made before the lock-down.
         * Everything else libcurl, OpenSSL and the resolver do on those
         * sockets (connect, poll, getsockopt/setsockopt, send/recv,
         * getrandom, reading the CA file, /etc/hosts and resolv.conf) is
         * in the groups above. */
        { "api-sockets",
          "the Kubernetes API client (DRA, node labels): TCP to the API server, UDP to the resolver",
          "socket", SBX_ALLOW, SBX_ARG_INET },
        /* glibc's resolver sends its A and AAAA queries with one call. */
        { "api-dns",
          "the Kubernetes API client (DRA, node labels): glibc's resolver, both queries at once",
          "sendmmsg", SBX_ALLOW, SBX_ARG_API },
        /* Harmless reads of our own state by glibc, grpc core and ASan. */
        { "process-info", "glibc, grpc core (ids, entropy), ASan",
          "getpid getppid getuid geteuid getgid getegid getresuid getresgid "
          "getgroups uname getrandom sysinfo getrlimit",
          SBX_ALLOW, SBX_ARG_ANY },
        /* Reading limits (pthread_getattr_np, ASan); setting them is refused. */
        { "rlimits", "glibc pthread_getattr_np, ASan's stack bounds", "prlimit64", SBX_ALLOW,
          SBX_ARG_GETRLIMIT },
        /* Thread names (pthread_setname_np, grpc core). */
        { "prctl", "thread names set by grpc core", "prctl", SBX_ALLOW, SBX_ARG_PRCTL },
        /* Never legitimate after start-up; a call is an attack, so the
         * process dies rather than getting an error it might retry. The
         * setuid family is here because sbx_drop_ids() has already run. */
        { "deny-exec", "nobody: no new programs", "execve execveat", SBX_KILL, SBX_ARG_ANY },
        { "deny-debug", "nobody: no tracing or writing other processes", "ptrace process_vm_writev",
          SBX_KILL, SBX_ARG_ANY },
        { "deny-mount", "nobody: no filesystem or namespace changes",
          "mount umount2 pivot_root unshare setns", SBX_KILL, SBX_ARG_ANY },
        { "deny-kernel", "nobody: no kernel code, BPF, kexec or keyrings",
          "init_module finit_module bpf kexec_load keyctl", SBX_KILL, SBX_ARG_ANY },
        { "deny-ids", "nobody: identity is fixed before the filter loads",
          "setuid setgid setreuid setregid setresuid setresgid setgroups "
          "setfsuid setfsgid",
          SBX_KILL, SBX_ARG_ANY },
};

const struct sbx_syscall_group *sbx_syscall_groups(size_t *ret_n) {
        *ret_n = sizeof(groups) / sizeof(groups[0]);
        return groups;
}

/* prctl options glibc and grpc core use after start-up. */
static const int prctl_ok[] = { PR_SET_NAME, PR_GET_NAME };

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static uint32_t action_of(enum sbx_action a) {
        switch (a) {
        case SBX_ALLOW:
                return SCMP_ACT_ALLOW;
        case SBX_ENOSYS:
                return SCMP_ACT_ERRNO(ENOSYS);
        case SBX_KILL:
                break;
        }
        return SCMP_ACT_KILL_PROCESS;
}

/* The architectures the table is written for: a name none of them knows
 * is a typo, not a missing syscall. */
static bool known_anywhere(const char *name) {
        static const uint32_t arches[] = { SCMP_ARCH_X86_64, SCMP_ARCH_AARCH64 };

        for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++)
                if (seccomp_syscall_resolve_name_arch(arches[i], name) != __NR_SCMP_ERROR)
                        return true;
        return false;
}

/* libseccomp's SCMP_A0()..SCMP_A5() leave datum_b out of one-operand
 * comparisons, which clang's -Wmissing-field-initializers reports; a
 * designated initializer states the same 64-bit comparison in full. */
static struct scmp_arg_cmp arg_cmp(unsigned int arg, enum scmp_compare op, scmp_datum_t a,
                                   scmp_datum_t b) {
        return (struct scmp_arg_cmp){ .arg = arg, .op = op, .datum_a = a, .datum_b = b };
}

static int add_rule(scmp_filter_ctx ctx, const struct sbx_syscall_group *g, int nr) {
        uint32_t act = action_of(g->action);
        struct scmp_arg_cmp cmp[3];

        switch (g->arg) {
        case SBX_ARG_ANY:
        case SBX_ARG_API:
                return seccomp_rule_add_exact_array(ctx, act, nr, 0, NULL);
        case SBX_ARG_AF_UNIX:
                cmp[0] = arg_cmp(0, SCMP_CMP_EQ, AF_UNIX, 0);
                return seccomp_rule_add_exact_array(ctx, act, nr, 1, cmp);
        case SBX_ARG_THREAD:
                cmp[0] = arg_cmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD);
                return seccomp_rule_add_exact_array(ctx, act, nr, 1, cmp);
        case SBX_ARG_SELF:
                /* Fork is refused (threads-only clone), so our pid is fixed
                 * for the filter's lifetime. */
                cmp[0] = arg_cmp(0, SCMP_CMP_EQ, (scmp_datum_t)getpid(), 0);
                return seccomp_rule_add_exact_array(ctx, act, nr, 1, cmp);
        case SBX_ARG_GETRLIMIT:
                cmp[0] = arg_cmp(0, SCMP_CMP_EQ, 0, 0);
                cmp[1] = arg_cmp(2, SCMP_CMP_EQ, 0, 0);
                return seccomp_rule_add_exact_array(ctx, act, nr, 2, cmp);
        case SBX_ARG_INET: {
                /* TCP to the API server, UDP to the resolver: each type
                 * with its own protocol or 0 (its default), so UDP-Lite
                 * (IPPROTO_UDPLITE, a SOCK_DGRAM) and MPTCP (IPPROTO_MPTCP,
                 * a SOCK_STREAM) stay refused. */
                static const int families[] = { AF_INET, AF_INET6 };
                static const struct {
                        int type, proto;
                } kinds[] = { { SOCK_STREAM, 0 },
                              { SOCK_STREAM, IPPROTO_TCP },
                              { SOCK_DGRAM, 0 },
                              { SOCK_DGRAM, IPPROTO_UDP } };
                const size_t nk = sizeof(kinds) / sizeof(kinds[0]);

                /* The type argument carries SOCK_NONBLOCK/SOCK_CLOEXEC in
                 * its high bits; the low nibble is the type. */
                for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) * nk; i++) {
                        int r;

                        cmp[0] = arg_cmp(0, SCMP_CMP_EQ, (scmp_datum_t)families[i / nk], 0);
                        cmp[1] = arg_cmp(1, SCMP_CMP_MASKED_EQ, 0xf,
                                         (scmp_datum_t)kinds[i % nk].type);
                        cmp[2] = arg_cmp(2, SCMP_CMP_EQ, (scmp_datum_t)kinds[i % nk].proto, 0);
                        r = seccomp_rule_add_exact_array(ctx, act, nr, 3, cmp);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case SBX_ARG_PRCTL:
                for (size_t i = 0; i < sizeof(prctl_ok) / sizeof(prctl_ok[0]); i++) {
                        int r;

                        cmp[0] = arg_cmp(0, SCMP_CMP_EQ, (scmp_datum_t)prctl_ok[i], 0);
                        r = seccomp_rule_add_exact_array(ctx, act, nr, 1, cmp);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        return -EINVAL;
}

static int add_group(scmp_filter_ctx ctx, const struct sbx_syscall_group *g) {
        const char *p = g->syscalls;

        while (*p) {
                char name[64];
                size_t len = strcspn(p, " ");
                int nr;

                if (len == 0 || len >= sizeof(name))
                        return -EINVAL;
                memcpy(name, p, len);
                name[len] = '\0';
                p += len;
                p += strspn(p, " ");

                nr = seccomp_syscall_resolve_name(name);
                if (nr == __NR_SCMP_ERROR) {
                        if (!known_anywhere(name))
                                return -EINVAL;
                        continue;
                }
                /* Negative numbers are libseccomp's stand-ins for calls
                 * this architecture does not have. */
                if (nr < 0)
                        continue;

                int r = add_rule(ctx, g, nr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int sbx_load_seccomp(bool api_access, const char **err_step) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        size_t n;
        const struct sbx_syscall_group *g = sbx_syscall_groups(&n);
        int r;

        /* seccomp_init() targets seccomp_arch_native() only. */
        ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        if (!ctx) {
                *err_step = "seccomp init";
                return -ENOMEM;
        }

        /* Any other ABI (i386 via int 0x80 on x86_64, arm32 on aarch64) has
         * its own syscall numbers the table never speaks of: kill. On
         * x86_64, libseccomp >= 2.4 also sends x32 calls (nr with bit 30,
         * same audit arch as x86_64) to this action when x32 is not in the
         * filter; the "x32" case of tests/sandbox/try-syscall.c proves it
         * against the libseccomp we link. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0) {
                *err_step = "seccomp bad-arch action";
                return r;
        }

        /* The filter must cover every thread, including any a library may
         * have started behind our back; TSYNC fails the load rather than
         * leaving one out. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        if (r < 0) {
                *err_step = "seccomp tsync";
                return r;
        }

        for (size_t i = 0; i < n; i++) {
                if ((g[i].arg == SBX_ARG_INET || g[i].arg == SBX_ARG_API) && !api_access)
                        continue;
                r = add_group(ctx, &g[i]);
                if (r < 0) {
                        *err_step = "seccomp rules";
                        return r;
                }
        }

        r = seccomp_load(ctx);
        if (r < 0) {
                *err_step = "seccomp load";
                return r;
        }
        return 0;
}
