/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by the daemon's files: logging and xasprintf.
 * Ownership (cleanup attributes) and string vectors are in base.h. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "base.h"

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* One line per event on stderr: "cdiplug: <level>: <message>", or with
 * log_set_json a JSON object per line: time, level, message, and the
 * fields resource, device, path and errno where the line has them. */
void log_set_level(enum log_level level);
void log_set_json(bool json);

/* What a line is about, for log pipelines that filter on it. NULL or 0:
 * taken from the message as the project writes them (`resource "NAME":`,
 * `device ID "ID"`, the first absolute path, a trailing strerror text);
 * "" for none. */
struct log_fields {
        const char *resource;
        const char *device;
        const char *path;
        int err; /* positive errno, 0 for none */
};
void log_msg(enum log_level level, const char *fmt, ...) _printf_(2, 3);
void log_with(enum log_level level, const struct log_fields *f, const char *fmt, ...)
        _printf_(3, 4);
#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* asprintf that returns 0 or -ENOMEM and writes *ret only on success. */
int xasprintf(char **ret, const char *fmt, ...) _printf_(2, 3);
