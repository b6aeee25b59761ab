/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox: the daemon's lock-down, applied once at start-up before
 * grpc_init() starts any thread. Only this module touches libcap-ng and
 * libseccomp. Functions return 0 or a negative errno.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sbx_options {
        bool set_ids; /* switch to uid/gid below; false keeps uid 0 */
        uid_t uid;
        gid_t gid;
        /* The config has a "dra" section: the Kubernetes API client
         * (daemon/kube) may open TCP sockets (the "api-sockets" group). */
        bool api_access;
};

/* Which step failed, for the caller's message; valid after a failure. */
struct sbx_error {
        const char *step; /* "setgroups", "drop capabilities", "seccomp load", ... */
};

/* Drop groups, gid and uid (if asked), every capability in every set
 * (effective, permitted, inheritable, ambient, bounding), set no_new_privs,
 * then load the seccomp allowlist for all threads. One way, once.
 *
 * Call it from the only thread (-EBUSY otherwise: capabilities are per
 * thread), after opening everything start-up needs and before grpc_init()
 * or anything else that starts threads. Needs root's capabilities
 * (CAP_SETPCAP always, CAP_SETUID/CAP_SETGID with set_ids); every set is
 * re-read from the kernel afterwards, so a silent partial drop fails.
 * After it, execve, ptrace, fork, mount and the setuid family kill the
 * process and everything not allowlisted fails with EPERM (see SECURITY.md).
 * In ASan builds it runs LeakSanitizer's check first (see sandbox.c).
 * On failure err->step (err may be NULL) names the step; the process is
 * then half locked down and should exit. */
int sbx_lockdown(const struct sbx_options *opts, struct sbx_error *err);

/* Parse "NAME|UID[:GROUP|GID]" for --user into *ret (with set_ids true);
 * resolves names through NSS, so call it before the lock-down. Without a
 * group, a name uses its primary group; a bare UID uses the primary group
 * of its passwd entry if there is one, else the GID of the same number.
 * Returns -EINVAL (malformed), -ERANGE (id >= 4294967295), -ENOENT
 * (unknown name) or another negative errno from NSS. */
int sbx_parse_user(const char *spec, struct sbx_options *ret);
/* The same, and on failure *err_problem (may be NULL) says what is wrong
 * for a person: "no such user", "no such group", "must be
 * NAME|UID[:GROUP|GID]", ...; NULL when NSS itself failed (then the errno
 * says why). serve and check both resolve the identity through it. */
int sbx_resolve_user(const char *spec, struct sbx_options *ret, const char **err_problem);

/* The seccomp policy as data: one entry per syscall group, each saying who
 * needs it. Exported so the tests can hold SECURITY.md's table and the
 * try-syscall helper to the same list the filter is built from. */
enum sbx_action {
        SBX_ALLOW,  /* let it through */
        SBX_ENOSYS, /* fail with ENOSYS so libc falls back to an older call */
        SBX_KILL,   /* kill the whole process with SIGSYS */
};

enum sbx_arg {
        SBX_ARG_ANY,       /* no argument check */
        SBX_ARG_AF_UNIX,   /* arg0 (domain) == AF_UNIX */
        SBX_ARG_THREAD,    /* arg0 (clone flags) has CLONE_THREAD */
        SBX_ARG_SELF,      /* arg0 (pid) == our own pid */
        SBX_ARG_PRCTL,     /* arg0 (option) in a short list of harmless ones */
        SBX_ARG_GETRLIMIT, /* prlimit64(0, resource, NULL, old): read only */
        SBX_ARG_INET,      /* arg0 AF_INET or AF_INET6, arg1 type SOCK_STREAM with
                              * arg2 0 or IPPROTO_TCP, or SOCK_DGRAM with 0 or
                              * IPPROTO_UDP; the group counts only with
                              * sbx_options.api_access */
        SBX_ARG_API,       /* no argument check, but the group counts only with
                              * sbx_options.api_access */
};

struct sbx_syscall_group {
        const char *group;    /* short name, as in SECURITY.md */
        const char *who;      /* who needs it, and why */
        const char *syscalls; /* space-separated names; names this
                                 * architecture lacks are skipped */
        enum sbx_action action;
        enum sbx_arg arg;
};

/* The groups, in table order; *ret_n is set to their number. Calls not
 * named in any group fail with EPERM (SBX_ARG_INET and SBX_ARG_API groups count
 * only with api_access). A call may be named by more than one group only with the
 * same action (libseccomp ORs their argument checks). */
const struct sbx_syscall_group *sbx_syscall_groups(size_t *ret_n);
