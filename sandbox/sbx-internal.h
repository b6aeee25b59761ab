/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox internals: one file per lock-down step, called in order by
 * sbx_lockdown() in sandbox.c. Not for use outside sandbox/.
 */
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "base.h"
#include "sandbox.h"

/* The lock-down steps below return 0 or a negative errno; on failure
 * *err_step names the step that failed, for struct sbx_error. */

/* ids.c: setgroups, setresgid, setresuid, then check all three stuck. */
int sbx_drop_ids(uid_t uid, gid_t gid, const char **err_step);

/* caps.c: empty every capability set, then re-read them from the kernel. */
int sbx_drop_caps(const char **err_step);
int sbx_keep_caps_across_setuid(bool on);

/* seccomp.c: build the filter from the tables and load it with TSYNC. */
int sbx_load_seccomp(bool api_access, const char **err_step);
