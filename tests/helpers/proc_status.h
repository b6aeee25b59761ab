/* SPDX-License-Identifier: Apache-2.0 */
/* proc_status: read /proc/<pid>/task/<tid>/status from a test, to check
 * from outside that a running daemon (or sbx-try) is locked down. Compiled
 * into every test program. Functions return 0 or a negative errno.
 */
#pragma once

#include <sys/types.h>

/* Check every thread of pid: CapEff, CapPrm, CapBnd, CapAmb (and CapInh)
 * all zero, NoNewPrivs 1, Seccomp 2. Returns 0 when all are; -EPERM when a
 * thread is not, another negative errno when /proc could not be read. On
 * any failure, if ret_msg is not NULL, *ret_msg is a malloc'd message
 * naming the thread and the field (or the path that failed); free it. */
int proc_check_confined(pid_t pid, char **ret_msg);

/* The value of one status field ("Uid", "CapEff", ...) of thread tid of
 * pid (tid 0: the process's own status), leading tab stripped, malloc'd
 * into *ret_value. -ENOENT when the field is missing. */
int proc_status_field(pid_t pid, pid_t tid, const char *field, char **ret_value);

/* Voluntary plus involuntary context switches (wake-ups) of the threads
 * of pid named one of names (NULL-terminated, as in /proc/.../comm), and
 * in *ret_threads (may be NULL) how many such threads there are; or a
 * negative errno when /proc could not be read. */
long proc_thread_switches(pid_t pid, const char *const *names, int *ret_threads);
