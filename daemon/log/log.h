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
 * fields resource, device, path and errno the call site passed. */
void log_set_level(enum log_level level);
void log_set_json(bool json);

/* What a line is about, for log pipelines that filter on it, passed by the
 * call site (as systemd's log_struct does); the message text is never
 * parsed for them. A field left NULL (or "") or 0 is not written:
 *
 *     log_with(LOG_WARN, &(struct log_fields){ .resource = name, .path = p, .err = r },
 *              "resource \"%s\": cannot watch %s: %s", name, p, strerror(-r));
 *
 * Designated initialisers name each field where it is set, so none can
 * land in another's place, and the compiler checks names and types. */
struct log_fields {
        const char *resource; /* the configured resource name */
        const char *device;   /* a device ID as the kubelet sees it */
        const char *path;     /* the file, socket or directory the line is about */
        const char *file;     /* a name in the directory .path: written as path/file */
        int err;              /* an errno of either sign (a -errno return as it is); 0 for none */
};
void log_with(enum log_level level, const struct log_fields *f, const char *fmt, ...)
        _printf_(3, 4);
/* Lines about nothing in particular: no field. */
#define log_error(...) log_with(LOG_ERR, NULL, __VA_ARGS__)
#define log_warn(...) log_with(LOG_WARN, NULL, __VA_ARGS__)
#define log_info(...) log_with(LOG_INFO, NULL, __VA_ARGS__)
#define log_debug(...) log_with(LOG_DEBUG, NULL, __VA_ARGS__)

/* asprintf that returns 0 or -ENOMEM and writes *ret only on success. */
int xasprintf(char **ret, const char *fmt, ...) _printf_(2, 3);
