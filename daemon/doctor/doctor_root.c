/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: reading the host's files inside --host-root, as discovery does.
 *
 * A runtime config names further paths (imports, drop-in dirs, CDI dirs),
 * and any of them may be a symlink written for the host: "/etc/cdi" ->
 * "/opt/cdi" means the host's /opt/cdi, not the one doctor runs in. The
 * kernel resolves each path with openat2(RESOLVE_IN_ROOT), so "/" and ".."
 * stop at the host root, and RESOLVE_NO_MAGICLINKS refuses /proc/<pid>/root
 * and the like, which would lead into other processes' file systems.
 *
 * Nothing but a regular file is read: the path is opened O_PATH (which
 * opens no device and waits on no FIFO), its type checked with fstat, and
 * only a regular file reopened, through that very descriptor, for reading. */
#include "doctor-internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "resources.h"
#include "log.h"

/* Directory entries looked at while listing one dir or expanding one glob:
 * enough for any /etc dir, and a bound on time for a pattern such as
 * "/proc/ * /root/ *". */
#define DOC_MAX_SCAN 65536

static const char *root_of(const struct doc_ctx *c) {
        return c->o->host_root && *c->o->host_root ? c->o->host_root : "/";
}

/* Kernels before 5.6 (no openat2): the resources module's in-root
 * resolution for the directory, and the last component not followed, so
 * a symlink there is reported as one instead of leading out. */
static int open_compat(const struct doc_ctx *c, const char *path, bool dir, int *ret_fd) {
        _cleanup_free_ char *host = doc_host_path(c, path);
        _cleanup_close_ int dfd = -1;
        char *slash;
        int r;

        if (!host)
                return -ENOMEM;
        if (dir)
                return res_open_watch_dir(root_of(c), host, ret_fd);
        slash = strrchr(host, '/');
        if (!slash || !slash[1])
                return -EINVAL;
        *slash = '\0';
        r = res_open_watch_dir(root_of(c), *host ? host : "/", &dfd);
        if (r < 0)
                return r;
        int fd = openat(dfd, slash + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

/* An O_PATH descriptor for path (host-absolute) resolved inside the root. */
static int open_path(const struct doc_ctx *c, const char *path, bool dir, int *ret_fd) {
        _cleanup_close_ int rootfd = open(root_of(c), O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct open_how how = { .flags = O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0),
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        const char *rel = path;

        if (rootfd < 0)
                return -errno;
        while (*rel == '/')
                rel++;
        long fd = syscall(SYS_openat2, rootfd, *rel ? rel : ".", &how, sizeof(how));
        if (fd >= 0) {
                *ret_fd = (int)fd;
                return 0;
        }
        if (errno != ENOSYS)
                return -errno;
        return open_compat(c, path, dir, ret_fd);
}

int doc_root_stat(const struct doc_ctx *c, const char *path, struct stat *ret) {
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r = open_path(c, path, false, &fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return -errno;
        *ret = st;
        return 0;
}

static const char *type_name(mode_t mode) {
        switch (mode & S_IFMT) {
        case S_IFDIR:
                return "a directory";
        case S_IFCHR:
                return "a character device";
        case S_IFBLK:
                return "a block device";
        case S_IFIFO:
                return "a FIFO";
        case S_IFSOCK:
                return "a socket";
        case S_IFLNK:
                return "a symlink (not followed: this kernel has no openat2)";
        default:
                return "not a regular file";
        }
}

/* The file pfd (O_PATH) names, opened for reading: through the descriptor
 * itself, so it is the inode just checked and no other. */
static int reopen(int pfd, const struct stat *st, int *ret_fd) {
        char proc[64];
        struct stat now;

        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
        _cleanup_close_ int fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        /* A /proc that is not procfs could name anything. */
        if (fstat(fd, &now) < 0)
                return -errno;
        if (now.st_dev != st->st_dev || now.st_ino != st->st_ino)
                return -ESTALE;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int doc_root_read(struct doc_ctx *c, const char *check, const char *path, size_t max,
                  char **ret_buf, size_t *ret_len) {
        _cleanup_close_ int pfd = -1, fd = -1;
        struct stat st;
        int r;

        r = open_path(c, path, false, &pfd);
        if (r < 0)
                return r;
        if (fstat(pfd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode)) {
                _cleanup_free_ char *host = doc_host_path(c, path);
                doc_add(c, check, DOC_WARN, NULL,
                        "%s: skipped, it is %s: doctor reads regular files only, it never opens "
                        "a device node, FIFO or socket",
                        host ? host : path, type_name(st.st_mode));
                return -EINVAL;
        }
        r = reopen(pfd, &st, &fd);
        if (r < 0)
                return r;
        /* procfs files say size 0: base_read_fd reads to the end, within max. */
        return base_read_fd(fd, max, ret_buf, ret_len);
}

int doc_root_open_dir(const struct doc_ctx *c, const char *path, int *ret_fd) {
        _cleanup_close_ int pfd = -1;
        int r = open_path(c, path, true, &pfd);
        if (r < 0)
                return r;
        /* "." of an O_PATH directory descriptor: that directory, readable. */
        int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int doc_root_list(const struct doc_ctx *c, const char *path, char ***ret_names) {
        _cleanup_strvec_ struct base_strvec names = { 0 };
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *e;
        size_t seen = 0;
        int fd = -1, r;

        r = doc_root_open_dir(c, path, &fd);
        if (r < 0)
                return r;
        if (!(d = fdopendir(fd))) {
                r = -errno;
                close(fd);
                return r;
        }
        for (errno = 0; (e = readdir(d)); errno = 0) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (++seen > DOC_MAX_SCAN)
                        return -E2BIG;
                if (base_strvec_push_dup(&names, e->d_name) < 0)
                        return -ENOMEM;
        }
        if (errno)
                return -errno;
        if (names.n)
                qsort(names.v, names.n, sizeof(char *), cmp_str);
        if (!names.v && !(names.v = calloc(1, sizeof(char *))))
                return -ENOMEM;
        *ret_names = base_strvec_take(&names);
        return 0;
}

struct glob_state {
        const struct doc_ctx *c;
        struct base_strvec *out;
        size_t max;
        size_t scanned;
        int stop; /* 0, or -E2BIG once a bound is reached */
};

static bool has_magic(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\')
                        return true;
        return false;
}

/* Expand rest (components still to match) below prefix. */
/* NOLINTNEXTLINE(misc-no-recursion): one level per component of the pattern */
static int glob_at(struct glob_state *g, const char *prefix, const char *rest) {
        while (*rest == '/')
                rest++;
        size_t n = strcspn(rest, "/");
        _cleanup_free_ char *next = NULL;
        struct stat st;

        if (n == 0) { /* everything matched: keep it if it exists */
                if (doc_root_stat(g->c, *prefix ? prefix : "/", &st) < 0)
                        return 0;
                if (g->out->n == g->max) {
                        g->stop = -E2BIG;
                        return 0;
                }
                return base_strvec_push_dup(g->out, *prefix ? prefix : "/");
        }
        if (!has_magic(rest, n)) {
                if (xasprintf(&next, "%s/%.*s", prefix, (int)n, rest) < 0)
                        return -ENOMEM;
                return glob_at(g, next, rest + n);
        }
        _cleanup_free_ char *pat = strndup(rest, n);
        _cleanup_strv_ char **names = NULL;
        if (!pat)
                return -ENOMEM;
        /* A dir that cannot be listed matches nothing, as in Go's Glob. */
        int r = doc_root_list(g->c, *prefix ? prefix : "/", &names);
        if (r == -E2BIG)
                g->stop = r;
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        for (char **name = names; name && *name && !g->stop; name++) {
                if (++g->scanned > DOC_MAX_SCAN) {
                        g->stop = -E2BIG;
                        break;
                }
                /* containerd globs with Go's filepath.Glob, whose '*'
                 * matches a leading dot too: no FNM_PERIOD. */
                if (fnmatch(pat, *name, 0) != 0)
                        continue;
                _cleanup_free_ char *p = NULL;
                if (xasprintf(&p, "%s/%s", prefix, *name) < 0)
                        return -ENOMEM;
                r = glob_at(g, p, rest + n);
                if (r < 0)
                        return r;
        }
        return 0;
}

int doc_root_glob(const struct doc_ctx *c, const char *pattern, size_t max,
                  struct base_strvec *out) {
        struct glob_state g = { .c = c, .out = out, .max = max };
        if (pattern[0] != '/')
                return -EINVAL;
        /* One recursion per component: the length bounds the depth. */
        if (strlen(pattern) >= PATH_MAX)
                return -ENAMETOOLONG;
        int r = glob_at(&g, "", pattern);
        return r < 0 ? r : g.stop;
}
