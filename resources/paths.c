/* SPDX-License-Identifier: Apache-2.0 */
/* "path" and "paths" selectors.
 *
 * "paths" builds one device per match of its first glob. Each further glob
 * contributes, to that device:
 *   - its matches whose hardware parent is the same as the first match's
 *     (same directory behind /sys/dev/{char,block}/MAJ:MIN/device — the
 *     DRM card and render node of one GPU share their PCI function);
 *   - else, when the glob has exactly one match and that node has no
 *     hardware parent (a control node such as /dev/nvidiactl or
 *     /dev/vfio/vfio), that node, shared by every device;
 *   - else nothing, and the first match is not a device: a card without a
 *     render node is not what the operator asked for.
 * Pairing by sort order would silently give one GPU's render node to
 * another as soon as one of them lacks a node; the sysfs parent cannot.
 * Nodes without a sysfs entry have no parent, so only the sharing rule
 * applies to them.
 *
 * A match that is a symlink (udev's /dev/serial/by-id/..., /dev/disk/by-path/...)
 * stands for the node it resolves to: that node is injected, and the link's
 * path or name gives the ID, so it stays the same whichever ttyUSB<N> the
 * adapter gets after a re-plug.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "res-internal.h"

struct match {
        char *path;   /* the node, links resolved */
        char *link;   /* what the glob matched; NULL when that is path */
        bool have_st; /* mode and rdev of path are known */
        unsigned mode;
        uint64_t rdev;
        bool owned; /* has a hardware parent, identified by dev/ino */
        uint64_t dev, ino;
};

struct glob_matches {
        struct match *m;
        size_t n;
};

static void matches_clear(struct glob_matches *g) {
        for (size_t i = 0; i < g->n; i++) {
                free(g->m[i].path);
                free(g->m[i].link);
        }
        free(g->m);
        *g = (struct glob_matches){ 0 };
}

static int cmp_match(const void *a, const void *b) {
        const struct match *x = a, *y = b;
        if (x->owned != y->owned)
                return x->owned ? -1 : 1;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        if (x->ino != y->ino)
                return x->ino < y->ino ? -1 : 1;
        return strcmp(x->path, y->path);
}

/* If m->path is a symlink, make it the node it leads to (m->link keeps
 * the match). Only the last component is looked at: the directories of
 * stable links are real ones. */
static int resolve_match(int rootfd, struct match *m) {
        _cleanup_close_ int fd = res_open_in_root(rootfd, m->path, O_PATH | O_NOFOLLOW);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return 0;
        if (!S_ISLNK(st.st_mode)) {
                /* Kept: the sysfs lookup needs the numbers, and 10,000
                 * nodes should not be opened twice. */
                m->have_st = true;
                m->mode = st.st_mode;
                m->rdev = st.st_rdev;
                return 0;
        }
        char *node = NULL;
        int r = res_resolve(rootfd, m->path, &node);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        m->link = m->path;
        m->path = node;
        return 0;
}

/* Notes that the glob's other matches are not device nodes. */
static int note_skipped(size_t idx, struct base_strvec *skipped, struct base_strvec *notes) {
        int r = 0;
        for (size_t i = 0; i < skipped->n && r >= 0; i++)
                if (notes)
                        r = base_strvec_push(
                                notes,
                                res_strdup_printf(
                                        "match[%zu]: %s is not a character or block device node; skipped",
                                        idx, skipped->v[i]));
        base_strvec_clear(skipped);
        return r;
}

/* The glob's matches, links resolved; with parents when sorted (then
 * owned matches come first, grouped by parent, for binary search). */
static int collect(int rootfd, const char *glob, bool parents, bool sorted, size_t idx,
                   struct base_strvec *notes, struct glob_matches *ret) {
        struct base_strvec sv = { 0 }, skipped = { 0 };
        int r = res_glob(rootfd, glob, &sv, &skipped);
        if (r >= 0)
                r = note_skipped(idx, &skipped, notes);
        base_strvec_clear(&skipped);
        if (r < 0) {
                base_strvec_clear(&sv);
                return r;
        }
        struct glob_matches g = { .m = calloc(sv.n ? sv.n : 1, sizeof(struct match)) };
        if (!g.m) {
                base_strvec_clear(&sv);
                return -ENOMEM;
        }
        for (size_t i = 0; i < sv.n; i++) {
                struct match *m = &g.m[g.n++];
                m->path = TAKE_PTR(sv.v[i]);
                r = resolve_match(rootfd, m);
                if (r < 0)
                        break;
                if (!parents)
                        continue;
                r = res_node_parent(rootfd, m->path, &m->dev, &m->ino);
                if (r == -ENOMEM)
                        break;
                m->owned = r == 0;
                r = 0;
        }
        base_strvec_clear(&sv);
        if (r < 0) {
                matches_clear(&g);
                return r;
        }
        if (sorted && g.n > 1)
                qsort(g.m, g.n, sizeof(struct match), cmp_match);
        *ret = g;
        return 0;
}

/* First index of an owned match with this parent, or g->n. */
static size_t find_parent(const struct glob_matches *g, uint64_t dev, uint64_t ino) {
        size_t lo = 0, hi = g->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const struct match *m = &g->m[mid];
                bool less = m->owned && (m->dev < dev || (m->dev == dev && m->ino < ino));
                if (less)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo < g->n && g->m[lo].owned && g->m[lo].dev == dev && g->m[lo].ino == ino)
                return lo;
        return g->n;
}

/* Adds glob g's nodes for first match m0; 0 if none fit (not a device). */
static int pair(const struct match *m0, const struct glob_matches *g, struct base_strvec *nodes) {
        size_t added = 0;
        if (m0->owned) {
                for (size_t i = find_parent(g, m0->dev, m0->ino);
                     i < g->n && g->m[i].owned && g->m[i].dev == m0->dev && g->m[i].ino == m0->ino;
                     i++) {
                        if (base_strv_contains(nodes->v, g->m[i].path))
                                continue;
                        int r = base_strvec_push_dup(nodes, g->m[i].path);
                        if (r < 0)
                                return r;
                        added++;
                }
                if (added)
                        return 1;
        }
        if (g->n == 1 && !g->m[0].owned) {
                if (base_strv_contains(nodes->v, g->m[0].path))
                        return 1;
                int r = base_strvec_push_dup(nodes, g->m[0].path);
                return r < 0 ? r : 1;
        }
        return 0;
}

static const char *base_of(const char *path) {
        const char *slash = strrchr(path, '/');
        return slash ? slash + 1 : path;
}

/* The device's ID as the selector's "id" asks; -ENOENT (and a note) when
 * it has none of that kind. */
static int make_id(int rootfd, const struct res_selector *sel, const struct match *m0,
                   const char *devdir, size_t idx, struct base_strvec *notes, char **ret) {
        const char *matched = m0->link ? m0->link : m0->path;
        int r;
        switch (sel->id_mode) {
        case RES_ID_LINK:
                return res_id_sanitize(base_of(matched), ret);
        case RES_ID_SERIAL:
                r = devdir ? res_sysfs_serial_id(rootfd, devdir, ret) : -ENOENT;
                if (r != -ENOENT)
                        return r;
                if (notes)
                        r = base_strvec_push(
                                notes,
                                res_strdup_printf(
                                        "match[%zu]: %s has no USB serial or PCI address in its sysfs path, "
                                        "so no \"id\": \"serial\"; skipped",
                                        idx, matched));
                return r < 0 ? r : -ENOENT;
        case RES_ID_NAME:
        default:
                return res_id_from_path(matched, ret);
        }
}

static const char *matched_of(const struct match *m0) {
        return m0->link ? m0->link : m0->path;
}

/* The sysfs filters on first match m0: 1 they hold (*ret_devdir is its
 * sysfs dir, NULL when it has none), 0 a miss (kept in misses if not
 * NULL; field "sysfs" when the node has no sysfs device for any filter
 * to hold on), or -ENOMEM. */
static int sysfs_rules(int rootfd, const struct res_selector *sel, bool sysdev,
                       const struct match *m0, struct res_misses *misses, char **ret_devdir) {
        _cleanup_free_ char *devdir = NULL;
        struct res_miss m = { 0 };
        int r = !sysdev       ? -ENOENT
                : m0->have_st ? res_devdir_of(rootfd, m0->mode, m0->rdev, &devdir)
                              : res_node_devdir(rootfd, m0->path, &devdir);
        if (r == -ENOMEM)
                return r;
        if (!devdir && res_sel_has_filters(sel))
                r = misses ? res_miss_make(&m, matched_of(m0), "sysfs", NULL, NULL, NULL) : 0;
        else if ((r = res_sysfs_filter(rootfd, devdir ? devdir : "", sel, misses ? &m : NULL)) ==
                         0 &&
                 misses)
                r = (m.device = strdup(matched_of(m0))) ? 0 : -ENOMEM;
        if (r < 0) {
                res_miss_clear(&m);
                return r;
        }
        if (r == 0) {
                if (misses)
                        res_misses_add(misses, &m);
                return 0;
        }
        *ret_devdir = TAKE_PTR(devdir);
        return 1;
}

/* Pushes the device of first match m0 with nodes (taken); 0 when it has
 * no ID of the kind the selector asks for. */
static int emit(struct res_devvec *out, int rootfd, const struct res_selector *sel,
                const char *devdir, const struct match *m0, size_t idx, struct base_strvec *notes,
                struct base_strvec *nodes) {
        struct res_device dev = { .numa_node = -1 };
        int r = make_id(rootfd, sel, m0, devdir, idx, notes, &dev.id);
        if (r < 0) {
                base_strvec_clear(nodes);
                return r == -ENOMEM ? r : 0;
        }
        dev.id_is_path = sel->id_mode == RES_ID_NAME && !m0->link;
        if (m0->link && !(dev.matched = strdup(m0->link))) {
                res_device_clear(&dev);
                base_strvec_clear(nodes);
                return -ENOMEM;
        }
        /* The nearest device up the sysfs path with a numa_node: a tty
         * behind a PCI USB controller, a DRM node under its GPU. */
        dev.numa_node = devdir ? res_sysfs_numa(rootfd, devdir) : -1;
        dev.nodes = nodes->v;
        dev.n_nodes = nodes->n;
        *nodes = (struct base_strvec){ 0 };
        r = base_edits_copy(&sel->edits, &dev.edits);
        if (r >= 0)
                r = res_devvec_push(out, &dev);
        res_device_clear(&dev);
        return r;
}

/* The device of first match k: its sysfs filters, then a node of every
 * further glob, then its ID. Only the first match's miss is kept: an
 * explanation names the first, and 10,000 refused nodes must not cost
 * 10,000 of them. */
static int one_match(struct res_devvec *out, int rootfd, const struct res_selector *sel,
                     bool sysdev, const struct glob_matches *g, size_t k, size_t idx,
                     struct base_strvec *notes, struct res_misses *misses) {
        _cleanup_free_ char *devdir = NULL;
        int r = sysfs_rules(rootfd, sel, sysdev, &g[0].m[k], k == 0 ? misses : NULL, &devdir);
        if (r <= 0)
                return r;
        struct base_strvec nodes = { 0 };
        r = base_strvec_push_dup(&nodes, g[0].m[k].path);
        int ok = 1;
        for (size_t i = 1; r >= 0 && ok > 0 && i < sel->n_globs; i++) {
                ok = pair(&g[0].m[k], &g[i], &nodes);
                if (ok < 0)
                        r = ok;
        }
        if (r >= 0 && ok > 0)
                r = emit(out, rootfd, sel, devdir, &g[0].m[k], idx, notes, &nodes);
        base_strvec_clear(&nodes);
        return r;
}

int res_discover_paths(int rootfd, const struct res_selector *sel, size_t idx,
                       struct res_devvec *out, struct base_strvec *notes,
                       struct res_misses *misses) {
        struct glob_matches *g = calloc(sel->n_globs, sizeof(*g));
        if (!g)
                return -ENOMEM;
        /* Without /sys/dev (a container without sysfs, a fake tree) no node
         * has a sysfs device: asked once, not once per node. */
        _cleanup_close_ int sysfd = res_open_in_root(rootfd, "/sys/dev", O_PATH | O_DIRECTORY);
        bool sysdev = sysfd >= 0;
        int r = 0;
        /* The first glob only needs parents when there is pairing to do; a
         * plain "path" skips that sysfs work. */
        for (size_t i = 0; i < sel->n_globs && r >= 0; i++)
                r = collect(rootfd, sel->globs[i], sel->n_globs > 1, i > 0, idx, notes, &g[i]);
        if (misses && r >= 0)
                misses->candidates = g[0].n;
        for (size_t k = 0; r >= 0 && k < g[0].n; k++)
                r = one_match(out, rootfd, sel, sysdev, g, k, idx, notes, misses);
        for (size_t i = 0; i < sel->n_globs; i++)
                matches_clear(&g[i]);
        free(g);
        return r;
}
