/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers: growable vectors, bounded sysfs reads, opening under the
 * host root, the misses a scan keeps for an explanation. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "res-internal.h"

char *res_strdup_printf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;

        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

/* Grow *p (of *cap elements of size sz) to hold at least need, doubling. */
static int grow(void **p, size_t *cap, size_t need, size_t sz) {
        if (need <= *cap)
                return 0;
        size_t ncap = *cap ? *cap : 16;
        while (ncap < need) {
                if (ncap > SIZE_MAX / 2 / sz)
                        return -ENOMEM;
                ncap *= 2;
        }
        void *n = realloc(*p, ncap * sz);
        if (!n)
                return -ENOMEM;
        *p = n;
        *cap = ncap;
        return 0;
}

void res_device_clear(struct res_device *dev) {
        free(dev->id);
        base_strv_free(dev->nodes);
        base_edits_clear(&dev->edits);
        free(dev->matched);
        *dev = (struct res_device){ .numa_node = -1 };
}

int res_devvec_push(struct res_devvec *v, struct res_device *dev) {
        if (v->n >= RES_MAX_DEVICES)
                return -E2BIG;
        int r = grow((void **)&v->devs, &v->cap, v->n + 1, sizeof(*v->devs));
        if (r < 0)
                return r;
        v->devs[v->n++] = *dev;
        *dev = (struct res_device){ .numa_node = -1 };
        return 0;
}

int res_root_open(const char *host_root, int *ret_fd) {
        if (!host_root || !*host_root)
                host_root = "/";
        int fd = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

int res_open_in_root(int rootfd, const char *path, int flags) {
        while (*path == '/')
                path++;
        if (!*path)
                path = ".";

        /* RESOLVE_IN_ROOT makes "/" and ".." in symlinks mean the host root,
         * so an absolute link such as /dev/disk/by-id/x -> /dev/sda under
         * --host-root=/host resolves to /host/dev/sda, not our own /dev. */
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
        if (fd >= 0)
                return (int)fd;
        if (errno != ENOSYS)
                return -errno;
        /* Kernels before 5.6: the same resolution, done here. */
        return res_open_in_root_compat(rootfd, path, flags);
}

int res_read_attr(int rootfd, const char *path, char **ret) {
        /* A hostile tree can put a FIFO where an attribute should be: with
         * O_NONBLOCK its open returns at once, and only a regular file (as
         * every sysfs attribute is) is read, so nothing here can block. */
        _cleanup_close_ int fd = res_open_in_root(rootfd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return fd;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;

        _cleanup_free_ char *buf = malloc(RES_ATTR_MAX + 1);
        if (!buf)
                return -ENOMEM;
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, RES_ATTR_MAX + 1 - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > RES_ATTR_MAX)
                        return -EFBIG;
        }
        /* sysfs ends values with one newline; keep everything else, so a
         * serial number with odd spacing still matches exactly. */
        if (len > 0 && buf[len - 1] == '\n')
                len--;
        if (memchr(buf, '\0', len))
                return -EINVAL;
        buf[len] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

int res_readlink_base(int rootfd, const char *path, char **ret) {
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (!slash)
                return -EINVAL;
        *slash = '\0';
        const char *name = slash + 1;

        _cleanup_close_ int dfd = res_open_in_root(rootfd, dir, O_PATH | O_DIRECTORY);
        if (dfd < 0)
                return dfd;

        _cleanup_free_ char *target = malloc(RES_ATTR_MAX + 1);
        if (!target)
                return -ENOMEM;
        ssize_t n = readlinkat(dfd, name, target, RES_ATTR_MAX + 1);
        if (n < 0)
                return -errno;
        if (n > RES_ATTR_MAX)
                return -ENAMETOOLONG;
        target[n] = '\0';
        while (n > 0 && target[n - 1] == '/')
                target[--n] = '\0';
        const char *base = strrchr(target, '/');
        base = base ? base + 1 : target;
        if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
                return -EINVAL;
        char *b = strdup(base);
        if (!b)
                return -ENOMEM;
        *ret = b;
        return 0;
}

int res_stat_in_root(int rootfd, const char *path, int flags, struct stat *ret) {
        _cleanup_close_ int fd = res_open_in_root(rootfd, path, O_PATH | flags);
        if (fd < 0)
                return fd;
        return fstat(fd, ret) < 0 ? -errno : 0;
}

int res_node_kind(int rootfd, const char *path) {
        struct stat st;
        int r = res_stat_in_root(rootfd, path, 0, &st);
        if (r < 0)
                return r;
        if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
                return 1;
        return S_ISDIR(st.st_mode) ? -EISDIR : 0;
}

bool res_node_exists(int rootfd, const char *path) {
        return res_node_kind(rootfd, path) == 1;
}

int res_parse_hex(const char *s, unsigned max_digits, uint32_t *ret) {
        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
                s += 2;
        size_t len = strlen(s);
        if (len == 0 || len > max_digits || len > 8)
                return -EINVAL;
        uint32_t v = 0;
        for (const char *p = s; *p; p++) {
                unsigned d;
                if (*p >= '0' && *p <= '9')
                        d = (unsigned)(*p - '0');
                else if (*p >= 'a' && *p <= 'f')
                        d = (unsigned)(*p - 'a' + 10);
                else if (*p >= 'A' && *p <= 'F')
                        d = (unsigned)(*p - 'A' + 10);
                else
                        return -EINVAL;
                v = v << 4 | d;
        }
        *ret = v;
        return 0;
}

/* Drop the last component of the host-absolute path in buf ("" is "/"). */
static void path_up(char *buf) {
        char *slash = strrchr(buf, '/');
        if (slash)
                *slash = '\0';
}

int res_resolve(int rootfd, const char *path, char **ret) {
        if (!path || path[0] != '/')
                return -EINVAL;
        /* done: resolved so far, "" meaning the root; todo: still to walk. */
        _cleanup_free_ char *done = calloc(1, 1);
        _cleanup_free_ char *todo = strdup(path);
        _cleanup_free_ char *target = malloc(PATH_MAX);
        if (!done || !todo || !target)
                return -ENOMEM;
        unsigned links = 0;
        size_t pos = 0;
        while (todo[pos]) {
                while (todo[pos] == '/')
                        pos++;
                if (!todo[pos])
                        break;
                size_t len = strcspn(todo + pos, "/");
                const char *comp = todo + pos;
                size_t next = pos + len;
                if (len == 1 && comp[0] == '.') {
                        pos = next;
                        continue;
                }
                if (len == 2 && comp[0] == '.' && comp[1] == '.') {
                        path_up(done);
                        pos = next;
                        continue;
                }
                _cleanup_free_ char *name = strndup(comp, len);
                if (!name)
                        return -ENOMEM;
                _cleanup_close_ int dfd =
                        res_open_in_root(rootfd, *done ? done : "/", O_PATH | O_DIRECTORY);
                if (dfd < 0)
                        return dfd;
                ssize_t n = readlinkat(dfd, name, target, PATH_MAX);
                if (n < 0 && errno != EINVAL)
                        return -errno;
                if (n < 0) { /* not a link */
                        char *d = res_strdup_printf("%s/%s", done, name);
                        if (!d)
                                return -ENOMEM;
                        free(done);
                        done = d;
                        pos = next;
                        continue;
                }
                if (n >= PATH_MAX || n == 0)
                        return -ENAMETOOLONG;
                if (++links > 40)
                        return -ELOOP;
                target[n] = '\0';
                char *t = res_strdup_printf("%s/%s", target, todo + next);
                if (!t)
                        return -ENOMEM;
                free(todo);
                todo = t;
                pos = 0;
                if (target[0] == '/')
                        done[0] = '\0';
        }
        if (!*done) {
                char *d = strdup("/");
                if (!d)
                        return -ENOMEM;
                free(done);
                done = d;
        }
        *ret = TAKE_PTR(done);
        return 0;
}

int res_miss_make(struct res_miss *ret, const char *device, const char *field, const char *want,
                  const char *got, const char *on) {
        const char *in[] = { device, field, want, got, on };
        char *out[5] = { NULL };
        for (size_t i = 0; i < 5; i++)
                if (in[i] && !(out[i] = strdup(in[i]))) {
                        for (size_t k = 0; k < i; k++)
                                free(out[k]);
                        return -ENOMEM;
                }
        *ret = (struct res_miss){
                .device = out[0], .field = out[1], .want = out[2], .got = out[3], .on = out[4]
        };
        return 0;
}

void res_miss_clear(struct res_miss *m) {
        if (!m)
                return;
        free(m->device);
        free(m->field);
        free(m->want);
        free(m->got);
        free(m->on);
        *m = (struct res_miss){ 0 };
}

void res_misses_add(struct res_misses *misses, struct res_miss *m) {
        bool drop = !m->field || misses->n == RES_MAX_MISSES;
        for (size_t i = 0; i < misses->n && !drop; i++)
                drop = strcmp(misses->v[i].field, m->field) == 0;
        if (drop) {
                res_miss_clear(m);
                return;
        }
        misses->v[misses->n++] = *m;
        *m = (struct res_miss){ 0 };
}

void res_misses_clear(struct res_misses *misses) {
        for (size_t i = 0; i < misses->n; i++)
                res_miss_clear(&misses->v[i]);
        *misses = (struct res_misses){ 0 };
}

/* A pure string check, here beside the hex parser: sysfs discovery and a
 * device's identity (devpath.c) both use it. */
bool res_is_pci_addr(const char *s) {
        size_t len = strlen(s);
        if (len < 12 || len > 16)
                return false;
        const char *tail = s + len - 8; /* ":bb:dd.f" */
        for (const char *p = s; p < tail; p++)
                if (!strchr("0123456789abcdef", *p))
                        return false;
        return tail[0] == ':' && tail[3] == ':' && tail[6] == '.' &&
               strchr("0123456789abcdef", tail[1]) && strchr("0123456789abcdef", tail[2]) &&
               strchr("0123456789abcdef", tail[4]) && strchr("0123456789abcdef", tail[5]) &&
               tail[7] >= '0' && tail[7] <= '7';
}
