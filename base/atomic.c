/* SPDX-License-Identifier: Apache-2.0 */
/* Replacing a file so that a crash at any instant leaves either the old or
 * the new content under its name, never a half-written one: the CDI specs
 * and their ownership record, the DRA checkpoint. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "base.h"

static int write_all(int fd, const char *buf, size_t len) {
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

/* A fresh, exclusively created temp file. The random part keeps two
 * writers (or a stale leftover) from ever sharing one. */
static int tmp_create_at(int dfd, const char *prefix, char **ret_name, int *ret_fd) {
        for (int attempt = 0; attempt < 16; attempt++) {
                _cleanup_free_ char *name = NULL;
                unsigned long long rnd;
                size_t sz = strlen(prefix) + 16 + 1;
                int fd, r;

                if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                        return errno ? -errno : -EIO;
                name = malloc(sz);
                if (!name)
                        return -ENOMEM;
                r = snprintf(name, sz, "%s%016llx", prefix, rnd);
                if (r < 0 || (size_t)r >= sz)
                        return -EOVERFLOW;
                fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0 && errno == EEXIST)
                        continue;
                if (fd < 0)
                        return -errno;
                *ret_name = TAKE_PTR(name);
                *ret_fd = fd;
                return 0;
        }
        return -EEXIST;
}

int base_write_atomic_at(int dfd, const char *name, const char *tmp_prefix, const void *data,
                         size_t len, mode_t mode) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1;
        int r;

        if (!name || !*name || !tmp_prefix || !*tmp_prefix || (mode & ~(mode_t)07777))
                return -EINVAL;
        r = tmp_create_at(dfd, tmp_prefix, &tmp, &fd);
        if (r < 0)
                return r;
        r = write_all(fd, data, len);
        /* Explicit mode: the temp was created 0600 and umask must not
         * decide who may read the file. */
        if (r == 0 && fchmod(fd, mode) < 0)
                r = -errno;
        /* Data must be on disk before the rename makes it visible, or a
         * power cut could leave the new name pointing at an empty file. */
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                /* tmp_create_at returned 0, so tmp is set; the analyzer does
                 * not keep that -errno is negative there.
                 * NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
                unlinkat(dfd, tmp, 0);
                return r;
        }
        /* Make the rename itself durable. */
        if (fsync(dfd) < 0)
                return -errno;
        return 0;
}

int base_remove_temps_at(int dfd, const char *tmp_prefix) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd, n = 0;

        if (!tmp_prefix || !*tmp_prefix)
                return -EINVAL;
        fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                if (strncmp(de->d_name, tmp_prefix, strlen(tmp_prefix)) != 0)
                        continue;
                /* Only regular files: we never create anything else. */
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (unlinkat(dfd, de->d_name, 0) < 0) {
                        if (errno != ENOENT)
                                return -errno;
                        continue;
                }
                n++;
        }
        return errno ? -errno : n;
}
