/* SPDX-License-Identifier: Apache-2.0 */
/* doctor's findings: the list every check adds to, and the helpers the
 * checks share, apart from the orchestrator (doctor.c) that runs the
 * checks and prints the list. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "doctor-internal.h"

void doc_add(struct doc_ctx *c, const char *check, enum doc_level level, const char *fix,
             const char *fmt, ...) {
        struct doc_finding f = { .check = check, .level = level };
        va_list ap;
        int r;

        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 32;
                struct doc_finding *v = realloc(c->v, cap * sizeof(*v));
                if (!v) {
                        c->oom = true;
                        return;
                }
                c->v = v;
                c->cap = cap;
        }
        va_start(ap, fmt);
        r = vasprintf(&f.msg, fmt, ap);
        va_end(ap);
        if (r < 0 || (fix && !(f.fix = strdup(fix)))) {
                if (r >= 0)
                        free(f.msg);
                c->oom = true;
                return;
        }
        c->v[c->n++] = f;
}

char *doc_host_path(const struct doc_ctx *c, const char *path) {
        const char *root = c->o->host_root;
        char *p = NULL;
        if (strcmp(root, "/") == 0)
                root = "";
        else {
                size_t n = strlen(root);
                while (n > 1 && root[n - 1] == '/')
                        n--;
                if (asprintf(&p, "%.*s%s", (int)n, root, path) < 0)
                        return NULL;
                return p;
        }
        return strdup(path);
}

/* Write access as the kernel decides it for an identity without any
 * capability (the daemon drops them all, and its supplementary groups):
 * the owner, group or other bits alone. ACLs are not looked at. */
bool doc_can_write(const struct stat *st, uid_t uid, gid_t gid, bool need_exec) {
        mode_t w = st->st_uid == uid ? S_IWUSR : st->st_gid == gid ? S_IWGRP : S_IWOTH;
        mode_t x = st->st_uid == uid ? S_IXUSR : st->st_gid == gid ? S_IXGRP : S_IXOTH;
        return (st->st_mode & w) && (!need_exec || (st->st_mode & x));
}
