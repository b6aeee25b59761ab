/* SPDX-License-Identifier: Apache-2.0 */
/* Waiting on a daemon's log file, woken by inotify rather than sleeps. */
#pragma once

/* Wait up to timeout_ms until the file at path holds needle; 0 or -ETIMEDOUT. */
int log_wait(const char *path, const char *needle, int timeout_ms);
/* Lines of the file at path that contain needle (0 when it is missing). */
unsigned log_count(const char *path, const char *needle);
/* Wait up to timeout_ms until at least n lines contain needle; returns
 * the count then, or -ETIMEDOUT. */
int log_wait_count(const char *path, const char *needle, unsigned n, int timeout_ms);
