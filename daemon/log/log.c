/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum log_level max_level = LOG_INFO;
/* Switched by a reload on the watcher thread while others log. */
static atomic_bool log_json;

void log_set_level(enum log_level level) {
        max_level = level;
}
void log_set_json(bool json) {
        log_json = json;
}

/* Room for a whole JSON line, escapes (six bytes a byte at worst)
 * included, so none is ever cut into invalid JSON. */
#define LOG_MSG_MAX 1024
#define LOG_FIELD_MAX 256
/* resource, device, and path with its file: four fields at most */
#define LOG_LINE_MAX (6 * (LOG_MSG_MAX + 4 * LOG_FIELD_MAX) + 256)

static const char *const level_names[] = { "error", "warning", "info", "debug" };

/* Appends to a bounded line; a line that does not fit is cut, never
 * overrun. */
struct line {
        char *buf;
        size_t len, cap;
};

static void put(struct line *l, const char *s, size_t n) {
        if (n > l->cap - l->len)
                n = l->cap - l->len;
        memcpy(l->buf + l->len, s, n);
        l->len += n;
}

static void put_str(struct line *l, const char *s) {
        put(l, s, strlen(s));
}

/* The bytes of a JSON string, without its quotes. */
static void put_json_chars(struct line *l, const char *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                char esc[8];
                if (c == '"' || c == '\\') {
                        esc[0] = '\\';
                        esc[1] = (char)c;
                        put(l, esc, 2);
                } else if (c < 0x20 || c == 0x7f) {
                        snprintf(esc, sizeof(esc), "\\u%04x", c);
                        put_str(l, esc);
                } else
                        put(l, (const char *)&c, 1);
        }
}

static void put_json_str(struct line *l, const char *s, size_t n) {
        put(l, "\"", 1);
        put_json_chars(l, s, n);
        put(l, "\"", 1);
}

static size_t field_len(const char *s) {
        return strnlen(s, LOG_FIELD_MAX);
}

static void put_key(struct line *l, const char *key) {
        put(l, ",\"", 2);
        put_str(l, key);
        put(l, "\":", 2);
}

static void put_opt_field(struct line *l, const char *key, const char *val) {
        if (val && *val) {
                put_key(l, key);
                put_json_str(l, val, field_len(val));
        }
}

/* "dir/file", or whichever of the two is there. */
static void put_path(struct line *l, const char *dir, const char *file) {
        if (!dir || !*dir || !file || !*file) {
                put_opt_field(l, "path", dir && *dir ? dir : file);
                return;
        }
        put_key(l, "path");
        put(l, "\"", 1);
        put_json_chars(l, dir, field_len(dir));
        put(l, "/", 1);
        put_json_chars(l, file, field_len(file));
        put(l, "\"", 1);
}

/* Exactly the fields the call site passed. */
static void put_fields(struct line *l, const struct log_fields *f) {
        if (!f)
                return;
        put_opt_field(l, "resource", f->resource);
        put_opt_field(l, "device", f->device);
        put_path(l, f->path, f->file);
        if (f->err) {
                /* -INT_MIN does not exist: such a value is no errno anyway. */
                int err = f->err < 0 && f->err != INT_MIN ? -f->err : f->err;
                const char *name = strerrorname_np(err);
                char num[16];
                if (!name) {
                        snprintf(num, sizeof(num), "%d", err);
                        name = num;
                }
                put_opt_field(l, "errno", name);
        }
}

static void log_v(enum log_level level, const struct log_fields *f, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));

static void log_v(enum log_level level, const struct log_fields *f, const char *fmt, va_list ap) {
        char msg[LOG_MSG_MAX], out[LOG_LINE_MAX];
        struct line l = { .buf = out, .cap = sizeof(out) - 1 };

        if (level > max_level)
                return;
        vsnprintf(msg, sizeof(msg), fmt, ap);
        if (log_json) {
                struct timespec ts;
                struct tm tm;
                char stamp[80];
                clock_gettime(CLOCK_REALTIME, &ts);
                gmtime_r(&ts.tv_sec, &tm);
                snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, (long)(ts.tv_nsec / 1000000) % 1000);
                put_str(&l, "{\"time\":\"");
                put_str(&l, stamp);
                put_str(&l, "\",\"level\":\"");
                put_str(&l, level_names[level]);
                put_str(&l, "\",\"message\":");
                put_json_str(&l, msg, strlen(msg));
                put_fields(&l, f);
                put_str(&l, "}");
        } else {
                put_str(&l, "cdiplug: ");
                put_str(&l, level_names[level]);
                put_str(&l, ": ");
                put_str(&l, msg);
        }
        /* One write per line so lines from several threads never interleave. */
        l.buf[l.len++] = '\n';
        (void)!write(STDERR_FILENO, l.buf, l.len);
}

void log_with(enum log_level level, const struct log_fields *f, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_v(level, f, fmt, ap);
        va_end(ap);
}

int xasprintf(char **ret, const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}
