/* SPDX-License-Identifier: Apache-2.0 */
/* Path globs, walked component by component under the host root.
 *
 * Not glob(3): that takes absolute strings, which would resolve symlinks
 * against our own root, and stats every match. Here each directory is opened
 * inside the host root and readdir's d_type settles most entries without a
 * stat, which keeps 10,000 nodes in one directory cheap.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <string.h>

#include "res-internal.h"

struct comps {
        char *buf; /* the pattern, '/' replaced by '\0' */
        const char **v;
        size_t n;
};

static void comps_free(struct comps *c) {
        free(c->buf);
        free(c->v);
}

static bool is_magic(const char *comp) {
        return strpbrk(comp, "*?[\\") != NULL;
}

static int comps_split(const char *pattern, struct comps *ret) {
        if (!pattern || pattern[0] != '/')
                return -EINVAL;
        struct comps c = { .buf = strdup(pattern) };
        if (!c.buf)
                return -ENOMEM;
        c.v = calloc(strlen(pattern) / 2 + 1, sizeof(char *));
        if (!c.v) {
                comps_free(&c);
                return -ENOMEM;
        }
        for (char *save = NULL, *t = strtok_r(c.buf, "/", &save); t;
             t = strtok_r(NULL, "/", &save)) {
                if (strcmp(t, ".") == 0 || strcmp(t, "..") == 0) {
                        comps_free(&c);
                        return -EINVAL;
                }
                c.v[c.n++] = t;
        }
        if (c.n == 0) {
                comps_free(&c);
                return -EINVAL;
        }
        *ret = c;
        return 0;
}

/* A path being built: host-absolute, grown as needed. */
struct pbuf {
        char *s;
        size_t len, cap;
};

static int pbuf_push(struct pbuf *p, const char *comp) {
        size_t clen = strlen(comp);
        size_t need = p->len + 1 + clen + 1;
        if (need > p->cap) {
                size_t ncap = p->cap ? p->cap : 256;
                while (ncap < need)
                        ncap *= 2;
                char *n = realloc(p->s, ncap);
                if (!n)
                        return -ENOMEM;
                p->s = n;
                p->cap = ncap;
        }
        p->s[p->len] = '/';
        memcpy(p->s + p->len + 1, comp, clen + 1);
        p->len += 1 + clen;
        return 0;
}

static void pbuf_pop(struct pbuf *p, size_t len) {
        p->len = len;
        p->s[len] = '\0';
}

static const char *pbuf_str(const struct pbuf *p) {
        return p->len ? p->s : "/";
}

static int open_dir(int rootfd, const char *path, DIR **ret) {
        int fd = res_open_in_root(rootfd, path, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret = d;
        return 0;
}

/* The next entry of d that comp matches, never "." or "..": 1 with *ret
 * set, 0 at the end, or a negative errno. */
static int next_match(DIR *d, const char *comp, struct dirent **ret) {
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de)
                        return errno ? -errno : 0;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                /* FNM_PERIOD: like the shell, '*' does not match dotfiles. */
                if (fnmatch(comp, de->d_name, FNM_PERIOD) != 0)
                        continue;
                *ret = de;
                return 1;
        }
}

/* A directory that vanished or a component that is a file just means no
 * match; anything else (EACCES, EMFILE) is worth telling the operator. */
static bool is_absent(int err) {
        return err == -ENOENT || err == -ENOTDIR || err == -ELOOP;
}

struct walk {
        int rootfd;
        struct comps c;
        struct pbuf p;
        struct base_strvec *out;
        struct base_strvec *skipped; /* matches that are no device node */
};

/* Only char and block nodes are devices: a runtime refuses anything else
 * ("not a device node") when the container starts, long after the kubelet
 * promised it. Other matches go to w->skipped, for the daemon to say so. */
static int take_match(struct walk *w, unsigned char d_type) {
        int kind;
        switch (d_type) {
        case DT_CHR:
        case DT_BLK:
                kind = 1;
                break;
        case DT_DIR:
                return 0;
        case DT_LNK:
        case DT_UNKNOWN:
                kind = res_node_kind(w->rootfd, w->p.s);
                break;
        default:
                kind = 0;
                break;
        }
        if (kind < 0)
                return 0;
        struct base_strvec *to = kind == 1 ? w->out : w->skipped;
        if (!to)
                return 0;
        if (to->n >= RES_MAX_DEVICES)
                return -E2BIG;
        return base_strvec_push_dup(to, w->p.s);
}

/* One frame per pattern component; selector.c refuses patterns of PATH_MAX
 * or more, so the depth stays under PATH_MAX / 2 small frames. */
static int walk(struct walk *w, size_t idx) { /* NOLINT(misc-no-recursion) */
        const char *comp = w->c.v[idx];
        bool last = idx + 1 == w->c.n;
        size_t save = w->p.len;
        int r;

        if (!is_magic(comp)) {
                r = pbuf_push(&w->p, comp);
                if (r < 0)
                        return r;
                if (last)
                        r = take_match(w, DT_UNKNOWN);
                else
                        r = walk(w, idx + 1);
                pbuf_pop(&w->p, save);
                return r;
        }

        DIR *d = NULL;
        r = open_dir(w->rootfd, pbuf_str(&w->p), &d);
        if (r < 0 || !d) /* !d: never, said for the analyzer */
                return is_absent(r) ? 0 : r;
        struct dirent *de = NULL;
        while ((r = next_match(d, comp, &de)) > 0 && de) {
                if (!last && de->d_type != DT_DIR && de->d_type != DT_LNK &&
                    de->d_type != DT_UNKNOWN)
                        continue;
                r = pbuf_push(&w->p, de->d_name);
                if (r < 0)
                        break;
                r = last ? take_match(w, de->d_type) : walk(w, idx + 1);
                pbuf_pop(&w->p, save);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int res_glob(int rootfd, const char *pattern, struct base_strvec *ret,
             struct base_strvec *ret_skipped) {
        struct walk w = { .rootfd = rootfd, .skipped = ret_skipped };
        struct base_strvec out = { 0 };
        int r = comps_split(pattern, &w.c);
        if (r < 0)
                return r;
        w.out = &out;
        r = walk(&w, 0);
        comps_free(&w.c);
        free(w.p.s);
        if (r < 0) {
                base_strvec_clear(&out);
                return r;
        }
        if (out.n > 1)
                qsort(out.v, out.n, sizeof(char *), cmp_str);
        *ret = out;
        return 0;
}

static bool is_dir(int rootfd, const char *path) {
        _cleanup_close_ int fd = res_open_in_root(rootfd, path, O_PATH | O_DIRECTORY);
        return fd >= 0;
}

/* Push every existing directory matching components [idx, n-1) below the
 * directory in w->p: nodes appear in those, so each needs its own watch. */
static int watch_walk(struct walk *w, size_t idx) { /* NOLINT(misc-no-recursion): as walk */
        if (idx + 1 >= w->c.n)
                return 0;
        const char *comp = w->c.v[idx];
        size_t save = w->p.len;
        int r;

        if (!is_magic(comp)) {
                r = pbuf_push(&w->p, comp);
                if (r < 0)
                        return r;
                if (is_dir(w->rootfd, w->p.s)) {
                        r = base_strvec_push_dup(w->out, w->p.s);
                        if (r >= 0)
                                r = watch_walk(w, idx + 1);
                }
                pbuf_pop(&w->p, save);
                return r < 0 ? r : 0;
        }

        DIR *d = NULL;
        r = open_dir(w->rootfd, pbuf_str(&w->p), &d);
        if (r < 0 || !d) /* !d: never, said for the analyzer */
                return is_absent(r) ? 0 : r;
        struct dirent *de = NULL;
        while ((r = next_match(d, comp, &de)) > 0 && de) {
                if (de->d_type != DT_DIR && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
                        continue;
                r = pbuf_push(&w->p, de->d_name);
                if (r < 0)
                        break;
                if (is_dir(w->rootfd, w->p.s)) {
                        if (w->out->n >= RES_MAX_DEVICES)
                                r = -E2BIG;
                        else
                                r = base_strvec_push_dup(w->out, w->p.s);
                        if (r >= 0)
                                r = watch_walk(w, idx + 1);
                }
                pbuf_pop(&w->p, save);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

int res_glob_watch_dirs(int rootfd, const char *pattern, struct base_strvec *out) {
        struct walk w = { .rootfd = rootfd, .out = out };
        int r = comps_split(pattern, &w.c);
        if (r < 0)
                return r;

        /* The fixed part: the parent of the first glob component, or of the
         * node itself when nothing is a glob. */
        size_t fixed = 0;
        while (fixed + 1 < w.c.n && !is_magic(w.c.v[fixed]))
                fixed++;
        for (size_t i = 0; i < fixed && r >= 0; i++)
                r = pbuf_push(&w.p, w.c.v[i]);

        /* Creating a missing directory is an event in its nearest existing
         * ancestor, after which the caller asks again. */
        size_t depth = fixed;
        while (r >= 0 && !is_dir(rootfd, pbuf_str(&w.p))) {
                if (depth == 0) {
                        r = -ENOENT;
                        break;
                }
                depth--;
                char *slash = strrchr(w.p.s, '/');
                pbuf_pop(&w.p, (size_t)(slash - w.p.s));
        }
        if (r >= 0)
                r = base_strvec_push_dup(out, pbuf_str(&w.p));
        if (r >= 0 && depth == fixed)
                r = watch_walk(&w, fixed);
        comps_free(&w.c);
        free(w.p.s);
        return r;
}
