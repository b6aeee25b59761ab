/* sandbox: the daemon's lock-down, applied once at start-up before
 * grpc_init() starts any thread. Only this module touches libcap-ng and
 * libseccomp. Functions return 0 or a negative errno.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sbx_options {
        bool set_ids;   /* switch to uid/gid below; false keeps uid 0 */
        uid_t uid;
        gid_t gid;
};

/* Which step failed, for the caller's message; valid after a failure. */
struct sbx_error {
        const char *step;  /* "setgroups", "drop capabilities", "seccomp load", ... */
};

/* Drop groups, gid and uid (if asked), every capability in every set
 * (effective, permitted, inheritable, ambient, bounding), set no_new_privs,
 * then load the seccomp allowlist for all threads. */
int sbx_lockdown(const struct sbx_options *opts, struct sbx_error *err);

/* Parse "NAME|UID[:GID]" for --user; resolves names (call before the
 * lock-down). */
int sbx_parse_user(const char *spec, struct sbx_options *ret);

/* The seccomp policy as data: one entry per syscall group, each saying who
 * needs it. Exported so the tests can hold SECURITY.md's table and the
 * try-syscall helper to the same list the filter is built from. */
enum sbx_action {
        SBX_ALLOW,      /* let it through */
        SBX_ENOSYS,     /* fail with ENOSYS so libc falls back to an older call */
        SBX_KILL,       /* kill the whole process with SIGSYS */
};

enum sbx_arg {
        SBX_ARG_ANY,            /* no argument check */
        SBX_ARG_AF_UNIX,        /* arg0 (domain) == AF_UNIX */
        SBX_ARG_THREAD,         /* arg0 (clone flags) has CLONE_THREAD */
        SBX_ARG_SELF,           /* arg0 (pid) == our own pid */
        SBX_ARG_PRCTL,          /* arg0 (option) in a short list of harmless ones */
        SBX_ARG_GETRLIMIT,      /* prlimit64(0, resource, NULL, old): read only */
};

struct sbx_syscall_group {
        const char *group;      /* short name, as in SECURITY.md */
        const char *who;        /* who needs it, and why */
        const char *syscalls;   /* space-separated names; names this
                                 * architecture lacks are skipped */
        enum sbx_action action;
        enum sbx_arg arg;
};

/* The groups, in table order; *ret_n is set to their number. Calls not
 * named in any group fail with EPERM. */
const struct sbx_syscall_group *sbx_syscall_groups(size_t *ret_n);
