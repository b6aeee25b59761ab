/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by the daemon's files: ownership via cleanup
 * attributes (after systemd's alloc-util.h), logging, string vectors. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "base.h"

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* One line per event on stderr: "cdiplug: <level>: <message>". */
void log_set_level(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) _printf_(2, 3);
#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* asprintf that returns 0 or -ENOMEM and writes *ret only on success. */
int xasprintf(char **ret, const char *fmt, ...) _printf_(2, 3);

/* Growable NULL-terminated string vector. */
int strv_push(char ***strv, size_t *n, char *s); /* takes s on success */
void strv_free(char **strv);
