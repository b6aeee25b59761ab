/* SPDX-License-Identifier: Apache-2.0 */
/* The one bounded file reader: config, CDI specs and their ownership
 * record, runtime configs. Each is read whole and parsed from memory; a
 * limit keeps a hostile or runaway file from costing more than that. */
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "base.h"

int base_read_file_at(int dfd, const char *path, int flags, size_t max, char **ret_buf,
                      size_t *ret_len) {
        _cleanup_close_ int fd = -1;

        /* O_NONBLOCK: a FIFO planted under the name must not hang us. */
        fd = openat(dfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
        if (fd < 0)
                return -errno;
        return base_read_fd(fd, max, ret_buf, ret_len);
}

/* The first read's size. A procfs or sysfs file's size says nothing
 * (0, or a page) and many of them answer only the first read: a sysctl
 * such as fs.inotify.max_user_instances gives its whole value to a read at
 * offset 0 and EOF at any other, so read in small pieces it is cut to its
 * first byte. Such a file gets one read into a buffer that holds any
 * value it may have (up to max); a regular file one byte more than its
 * size, to notice it growing under us. */
static size_t first_read_size(int fd, const struct stat *st, size_t max) {
        struct statfs sfs;

        if (st->st_size == 0 || (fstatfs(fd, &sfs) == 0 &&
                                 (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC)))
                return (max < BASE_PSEUDO_READ ? max : BASE_PSEUDO_READ) + 1;
        return (size_t)st->st_size + 1;
}

int base_read_fd(int fd, size_t max, char **ret_buf, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len = 0, cap;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((unsigned long long)st.st_size > max)
                return -EFBIG;

        cap = first_read_size(fd, &st, max);
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len == cap) {
                        char *nbuf;
                        if (cap > max)
                                return -EFBIG;
                        cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
                        nbuf = realloc(buf, cap + 1);
                        if (!nbuf)
                                return -ENOMEM;
                        buf = nbuf;
                }
        }
        buf[len] = '\0';
        *ret_buf = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}
