/* sandbox internals: one file per lock-down step, called in order by
 * sbx_lockdown() in sandbox.c. Not for use outside sandbox/.
 */
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "sandbox.h"

static inline void sbx_freep(void *p)
{
        free(*(void **)p);
}

static inline void sbx_closep(const int *fd)
{
        if (*fd >= 0)
                close(*fd);
}

static inline void sbx_closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

#define _cleanup_free_ __attribute__((cleanup(sbx_freep)))
#define _cleanup_close_ __attribute__((cleanup(sbx_closep)))
#define _cleanup_closedir_ __attribute__((cleanup(sbx_closedirp)))

/* ids.c: setgroups, setresgid, setresuid, then check all three stuck. */
int sbx_drop_ids(uid_t uid, gid_t gid, const char **ret_step);

/* caps.c: empty every capability set, then re-read them from the kernel. */
int sbx_drop_caps(const char **ret_step);
int sbx_keep_caps_across_setuid(bool on);

/* seccomp.c: build the filter from the tables and load it with TSYNC. */
int sbx_load_seccomp(const char **ret_step);
