/* SPDX-License-Identifier: Apache-2.0 */
/* See faketree.h. Test-only code, but it still keeps to our habits: no
 * fixed path buffers, errors as negative errno. */
#include "faketree.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

char *ft_path(const char *root, const char *path) {
        char *s = NULL;
        while (*path == '/')
                path++;
        if (asprintf(&s, "%s/%s", root, path) < 0)
                return NULL;
        return s;
}

char *ft_new(void) {
        const char *tmp = getenv("TMPDIR");
        char *s = NULL;
        if (asprintf(&s, "%s/faketree.XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0)
                return NULL;
        if (!mkdtemp(s)) {
                free(s);
                return NULL;
        }
        return s;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

void ft_free(char *root) {
        if (!root)
                return;
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(root);
}

/* mkdir -p of every parent of full (and of full itself when last). */
static int mkparents(char *full, size_t root_len, int last) {
        for (char *p = full + root_len + 1; (p = strchr(p, '/')); p++) {
                *p = '\0';
                int r = mkdir(full, 0755);
                *p = '/';
                if (r < 0 && errno != EEXIST)
                        return -errno;
        }
        if (last && mkdir(full, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static char *prepare(const char *root, const char *path, int is_dir, int *ret_err) {
        char *full = ft_path(root, path);
        if (!full) {
                *ret_err = -ENOMEM;
                return NULL;
        }
        *ret_err = mkparents(full, strlen(root), is_dir);
        if (*ret_err < 0) {
                free(full);
                return NULL;
        }
        return full;
}

int ft_dir(const char *root, const char *path) {
        int r;
        free(prepare(root, path, 1, &r));
        return r;
}

int ft_file(const char *root, const char *path, const char *content) {
        int r;
        char *full = prepare(root, path, 0, &r);
        if (!full)
                return r;
        int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        free(full);
        if (fd < 0)
                return -errno;
        size_t len = content ? strlen(content) : 0;
        ssize_t n = len ? write(fd, content, len) : 0;
        r = n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
        close(fd);
        return r;
}

int ft_symlink(const char *root, const char *path, const char *target) {
        int r;
        char *full = prepare(root, path, 0, &r);
        if (!full)
                return r;
        r = symlink(target, full) < 0 ? -errno : 0;
        free(full);
        return r;
}

int ft_chrdev(const char *root, const char *path, unsigned major, unsigned minor) {
        int r;
        char *full = prepare(root, path, 0, &r);
        if (!full)
                return r;
        r = mknod(full, S_IFCHR | 0600, makedev(major, minor)) < 0 ? -errno : 0;
        free(full);
        return r;
}

void ft_next_devnum(unsigned *ret_major, unsigned *ret_minor) {
        static unsigned next;
        unsigned n = next++;

        *ret_major = 60 + (n >> 20) % 4;
        *ret_minor = n & 0xfffff;
}

int ft_fifo(const char *root, const char *path) {
        int r;
        char *full = prepare(root, path, 0, &r);
        if (!full)
                return r;
        r = mkfifo(full, 0600) < 0 ? -errno : 0;
        free(full);
        return r;
}
