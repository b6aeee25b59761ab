/* SPDX-License-Identifier: Apache-2.0 */
/* Resolving a path inside the host root without openat2: what
 * RESOLVE_IN_ROOT does in the kernel, done one component at a time, for
 * kernels before 5.6. An absolute symlink restarts at the root, ".." never
 * climbs above it, and at most 40 links are followed (the kernel's
 * MAXSYMLINKS). Each component is looked at with AT_SYMLINK_NOFOLLOW and
 * the result opened with O_NOFOLLOW, so a link is only ever followed here;
 * a directory swapped for a link between the two steps is the one race
 * left, which is why openat2 is used wherever the kernel has it. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "res-internal.h"

#define MAX_LINKS 40
#define MAX_PATH 4096

/* Drop the last component of the resolved path (clamped at the root). */
static void pop(char *resolved, size_t *len) {
        while (*len > 0 && resolved[*len - 1] != '/')
                (*len)--;
        if (*len > 0)
                (*len)--; /* the '/' before it */
        resolved[*len] = '\0';
}

int res_open_in_root_compat(int rootfd, const char *path, int flags) {
        /* todo: what is left to resolve; resolved: root-relative, no links. */
        _cleanup_free_ char *todo = malloc(MAX_PATH + 1), *resolved = malloc(MAX_PATH + 1);
        _cleanup_free_ char *target = malloc(MAX_PATH + 1);
        size_t len = 0;
        unsigned links = 0;

        if (!todo || !resolved || !target)
                return -ENOMEM;
        if (strlen(path) > MAX_PATH)
                return -ENAMETOOLONG;
        memcpy(todo, path, strlen(path) + 1);
        resolved[0] = '\0';
        for (;;) {
                char *p = todo;
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                char *end = strchrnul(p, '/');
                size_t clen = (size_t)(end - p);
                bool last = !*end || !end[strspn(end, "/")];

                if (clen == 1 && p[0] == '.') {
                        memmove(todo, end, strlen(end) + 1);
                        continue;
                }
                if (clen == 2 && p[0] == '.' && p[1] == '.') {
                        pop(resolved, &len);
                        memmove(todo, end, strlen(end) + 1);
                        continue;
                }
                if (len + 1 + clen > MAX_PATH)
                        return -ENAMETOOLONG;
                size_t old = len;
                if (len)
                        resolved[len++] = '/';
                memcpy(resolved + len, p, clen);
                len += clen;
                resolved[len] = '\0';

                struct stat st;
                if (fstatat(rootfd, resolved, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT && last && (flags & O_CREAT))
                                break;
                        return -errno;
                }
                if (!S_ISLNK(st.st_mode) || (last && (flags & O_NOFOLLOW))) {
                        memmove(todo, end, strlen(end) + 1);
                        continue;
                }
                if (++links > MAX_LINKS)
                        return -ELOOP;
                ssize_t n = readlinkat(rootfd, resolved, target, MAX_PATH + 1);
                if (n < 0)
                        return -errno;
                if (n > MAX_PATH || (size_t)n + 1 + strlen(end) > MAX_PATH)
                        return -ENAMETOOLONG;
                target[n] = '\0';
                /* The link is replaced by its target, then the rest. */
                len = target[0] == '/' ? 0 : old;
                resolved[len] = '\0';
                memmove(todo + n, end, strlen(end) + 1);
                memcpy(todo, target, (size_t)n);
        }
        int fd = openat(rootfd, len ? resolved : ".", flags | O_NOFOLLOW | O_CLOEXEC);
        return fd >= 0 ? fd : -errno;
}
