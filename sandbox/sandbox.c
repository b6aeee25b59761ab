/* SPDX-License-Identifier: Apache-2.0 */
/* sbx_lockdown(): the daemon's one-way trip from "root that opens things"
 * to "process that can only serve". The order is fixed and each step
 * depends on the one before; see the comments at each call.
 */
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>

#include "sbx-internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* LeakSanitizer's end-of-process check stops the world with a forked
 * tracer and ptrace, both of which the filter refuses, so in an ASan build
 * it would fail every clean exit. Run the check now instead, while it
 * still can: the start-up code gets checked, and LSan then skips the exit
 * check by design. Only leak checking changes; the lock-down is the same. */
static void sanitizer_leak_check_now(void) {
#if defined(__SANITIZE_ADDRESS__)
        __lsan_do_leak_check();
#endif
}

/* Capabilities, ids and no_new_privs are per thread in the kernel (glibc
 * papers over ids only), so a thread started before the lock-down would
 * keep root's capabilities. Refuse rather than hope. */
static int check_single_thread(void) {
        _cleanup_closedir_ DIR *d = opendir("/proc/self/task");
        struct dirent *de;
        unsigned n = 0;

        if (!d)
                return -errno;
        errno = 0;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        if (errno != 0)
                return -errno;
        return n == 1 ? 0 : -EBUSY;
}

int sbx_lockdown(const struct sbx_options *opts, struct sbx_error *err) {
        struct sbx_error dummy;
        const char *step = NULL;
        int r;

        if (!err)
                err = &dummy;
        if (!opts) {
                err->step = "options";
                return -EINVAL;
        }

        sanitizer_leak_check_now();

        /* 0. Before anything: no other thread may exist yet. */
        r = check_single_thread();
        if (r < 0) {
                err->step = "single-thread check";
                return r;
        }

        /* 1. Identity: groups, gid, uid. Needs CAP_SETGID/CAP_SETUID, so it
         * comes before the capability drop; KEEPCAPS carries CAP_SETPCAP
         * over the uid change so step 2 can still empty the bounding set. */
        if (opts->set_ids) {
                r = sbx_keep_caps_across_setuid(true);
                if (r < 0) {
                        err->step = "keepcaps";
                        return r;
                }
                r = sbx_drop_ids(opts->uid, opts->gid, &step);
                if (r < 0) {
                        err->step = step;
                        return r;
                }
        }

        /* 2. Capabilities: bounding, ambient, then effective, permitted and
         * inheritable, verified from the kernel afterwards. */
        r = sbx_drop_caps(&step);
        if (r < 0) {
                err->step = step;
                return r;
        }

        /* 3. no_new_privs: nothing we could still execute (setuid binaries,
         * file capabilities) may gain privileges; also what lets an
         * unprivileged process load a seccomp filter at all. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                err->step = "no_new_privs";
                return -errno;
        }
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
                err->step = "verify no_new_privs";
                return -EPERM;
        }

        /* 4. seccomp, last: the filter refuses the calls made above. */
        r = sbx_load_seccomp(opts->api_access, &step);
        if (r < 0) {
                err->step = step;
                return r;
        }
        return 0;
}
