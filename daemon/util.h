/* Small helpers shared by the daemon's files: ownership via cleanup
 * attributes (after systemd's alloc-util.h), logging, string vectors. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hand ownership over: returns the pointer and leaves NULL behind. */
#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd) { if (*fd >= 0) close(*fd); }

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
