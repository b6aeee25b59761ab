/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <stdio.h>
#include <string.h>

static enum log_level max_level = LOG_INFO;

void log_set_level(enum log_level level) { max_level = level; }

void log_msg(enum log_level level, const char *fmt, ...) {
        static const char *const names[] = {"error", "warning", "info", "debug"};
        char line[1024];
        va_list ap;
        int n;

        if (level > max_level)
                return;
        n = snprintf(line, sizeof(line), "cdiplug: %s: ", names[level]);
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        /* One write per line so lines from several threads never interleave. */
        size_t len = strlen(line);
        line[len++] = '\n';
        (void)!write(STDERR_FILENO, line, len);
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

int strv_push(char ***strv, size_t *n, char *s) {
        char **v = realloc(*strv, (*n + 2) * sizeof(char *));
        if (!v)
                return -ENOMEM;
        v[(*n)++] = s;
        v[*n] = NULL;
        *strv = v;
        return 0;
}

void strv_free(char **strv) {
        if (!strv)
                return;
        for (char **s = strv; *s; s++)
                free(*s);
        free(strv);
}
