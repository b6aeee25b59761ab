/* SPDX-License-Identifier: Apache-2.0 */
/* res_discover and res_watch_dirs: run every selector, then make the IDs
 * unique.
 *
 * ID collisions: two selectors finding the same device (same ID, same
 * nodes) is a duplicate, and the first selector in the match list wins,
 * with its env/mounts/permissions. Distinct devices with the same ID (say
 * /dev/a/b and /dev/a-b, both "a-b") are all refused and handed back in
 * list->clashes: renaming them would change what an ID the kubelet has
 * checkpointed means, so nothing is renamed, and the daemon keeps the one
 * it already serves under that ID, if any.
 *
 * Before that, one device node is one device: the kubelet must never be
 * able to give one port to two pods because it is reachable by two paths
 * (a link the glob catches too, /dev/serial/by-id/ * next to
 * /dev/ttyUSB*). Nodes are told apart by type and st_rdev, what the
 * kernel opens, not by path or inode: a second node made with mknod is
 * the same device too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "res-internal.h"

void res_devlist_free(struct res_devlist *list) {
        if (!list)
                return;
        for (size_t i = 0; i < list->n; i++)
                res_device_clear(&list->devs[i]);
        free(list->devs);
        for (size_t i = 0; i < list->n_clashes; i++)
                res_device_clear(&list->clashes[i]);
        free(list->clashes);
        base_strv_free(list->notes);
        *list = (struct res_devlist){ 0 };
}

static void devvec_clear(struct res_devvec *v) {
        for (size_t i = 0; i < v->n; i++)
                res_device_clear(&v->devs[i]);
        free(v->devs);
        *v = (struct res_devvec){ 0 };
}

/* Sorted by ID, then by discovery order, so the first selector's copy of
 * a duplicate comes first (qsort is not stable). */
struct slot {
        struct res_device *dev;
        size_t order;
};

static int cmp_slot(const void *a, const void *b) {
        const struct slot *x = a, *y = b;
        int c = strcmp(x->dev->id, y->dev->id);
        if (c)
                return c;
        return x->order < y->order ? -1 : x->order > y->order;
}

static bool same_nodes(const struct res_device *a, const struct res_device *b) {
        if (a->n_nodes != b->n_nodes)
                return false;
        for (size_t i = 0; i < a->n_nodes; i++)
                if (strcmp(a->nodes[i], b->nodes[i]) != 0)
                        return false;
        return true;
}

static void sort_slots(struct slot *s, size_t n) {
        if (n > 1)
                qsort(s, n, sizeof(*s), cmp_slot);
}

static int cmp_clash(const void *a, const void *b) {
        const struct res_device *x = a, *y = b;
        int c = strcmp(x->id, y->id);
        return c ? c : strcmp(x->nodes[0], y->nodes[0]);
}

/* Drops duplicates and moves clashing devices to *clashes; leaves
 * s[0..*n) sorted and unique. */
static int make_unique(struct slot *s, size_t *n, struct res_devvec *clashes) {
        sort_slots(s, *n);
        size_t w = 0;
        for (size_t i = 0; i < *n;) {
                size_t j = i + 1;
                while (j < *n && strcmp(s[j].dev->id, s[i].dev->id) == 0)
                        j++;
                size_t group = w;
                for (size_t k = i; k < j; k++) {
                        bool dup = false;
                        for (size_t m = group; m < w && !dup; m++)
                                dup = same_nodes(s[m].dev, s[k].dev);
                        if (dup)
                                res_device_clear(s[k].dev);
                        else
                                s[w++] = s[k];
                }
                if (w - group > 1) {
                        for (size_t m = group; m < w; m++) {
                                int r = res_devvec_push(clashes, s[m].dev);
                                if (r < 0)
                                        return r;
                        }
                        w = group;
                }
                i = j;
        }
        *n = w;
        if (clashes->n > 1)
                qsort(clashes->devs, clashes->n, sizeof(*clashes->devs), cmp_clash);
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, unique, NULL-terminated; NULL when empty. */
static char **notes_take(struct base_strvec *notes) {
        if (notes->n > 1)
                qsort(notes->v, notes->n, sizeof(char *), cmp_str);
        size_t w = 0;
        for (size_t i = 0; i < notes->n; i++) {
                if (w > 0 && strcmp(notes->v[w - 1], notes->v[i]) == 0)
                        free(notes->v[i]);
                else
                        notes->v[w++] = notes->v[i];
        }
        if (notes->v)
                notes->v[w] = NULL;
        char **v = notes->v;
        *notes = (struct base_strvec){ 0 };
        return v;
}

/* A selector that finds nothing is usually a typo or a missing driver:
 * say why, unless the operator marked it optional. */
static int note_empty(int rootfd, const struct res_selector *sel, size_t idx,
                      struct base_strvec *notes) {
        if (sel->optional)
                return 0;
        _cleanup_free_ char *why = NULL;
        int r = res_explain_at(rootfd, sel, &why, NULL);
        if (r < 0)
                return r;
        return base_strvec_push(notes,
                                res_strdup_printf("match[%zu]: finds no device: %s", idx, why));
}

/* A device's first node as the kernel knows it. */
struct node_key {
        size_t order; /* index in the discovery vector */
        unsigned type;
        uint64_t rdev;
};

static int cmp_key(const void *a, const void *b) {
        const struct node_key *x = a, *y = b;
        if (x->type != y->type)
                return x->type < y->type ? -1 : 1;
        if (x->rdev != y->rdev)
                return x->rdev < y->rdev ? -1 : 1;
        return x->order < y->order ? -1 : x->order > y->order;
}

static const char *path_of(const struct res_device *dev) {
        return dev->matched ? dev->matched : dev->nodes[0];
}

/* Paths named in one note at most: 2,000 udev links to one node must
 * not make a 100 kB log line. */
#define SAME_NODE_NAMED 16

/* The note for keeper k, which paths (distinct, k's first) all reach. */
static int note_same_node(const struct res_device *k, const struct node_key *key, size_t sel,
                          char *const *paths, size_t n_paths, struct base_strvec *notes) {
        _cleanup_free_ char *list = NULL;
        for (size_t i = 0; i < n_paths && i < SAME_NODE_NAMED; i++) {
                char *more =
                        res_strdup_printf("%s%s%s", list ? list : "", list ? ", " : "", paths[i]);
                if (!more)
                        return -ENOMEM;
                free(list);
                list = more;
        }
        if (n_paths > SAME_NODE_NAMED) {
                char *more =
                        res_strdup_printf("%s and %zu more paths", list, n_paths - SAME_NODE_NAMED);
                if (!more)
                        return -ENOMEM;
                free(list);
                list = more;
        }
        return base_strvec_push(
                notes,
                res_strdup_printf("match[%zu]: %s are one device node (%s %u:%u): listed once, as "
                                  "\"%s\" (%s)",
                                  sel, list, key->type == S_IFBLK ? "block" : "char",
                                  major(key->rdev), minor(key->rdev), k->id, path_of(k)));
}

/* Clears every device of v whose first node is that of an earlier one
 * (dropped[i] set), with one note per node reached by several paths.
 * sel_of[i] is the index of the selector that found device i, pci[i]
 * whether that is a "pci" selector. */
static int drop_same_nodes(int rootfd, struct res_devvec *v, const size_t *sel_of, const bool *pci,
                           bool *dropped, struct base_strvec *notes) {
        _cleanup_free_ struct node_key *keys = calloc(v->n + 1, sizeof(*keys));
        _cleanup_free_ char **paths = calloc(v->n + 1, sizeof(*paths));
        size_t n = 0;
        if (!keys || !paths)
                return -ENOMEM;
        for (size_t i = 0; i < v->n; i++) {
                struct stat st;
                int r = res_stat_in_root(rootfd, v->devs[i].nodes[0], 0, &st);
                if (r == -ENOMEM)
                        return r;
                /* Gone since the selector saw it: nothing to compare. */
                if (r < 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
                        continue;
                keys[n++] = (struct node_key){ .order = i,
                                               .type = (unsigned)(st.st_mode & S_IFMT),
                                               .rdev = st.st_rdev };
        }
        if (n > 1)
                qsort(keys, n, sizeof(*keys), cmp_key);
        for (size_t i = 0; i < n;) {
                size_t j = i + 1, n_paths = 0;
                const struct node_key *k = &keys[i];
                struct res_device *keep = &v->devs[k->order];
                paths[n_paths++] = (char *)path_of(keep);
                for (; j < n && keys[j].type == k->type && keys[j].rdev == k->rdev; j++) {
                        size_t o = keys[j].order;
                        /* PCI functions in one IOMMU group share its node
                         * yet are distinct devices (by address). */
                        if (pci[o] && pci[k->order])
                                continue;
                        const char *p = path_of(&v->devs[o]);
                        bool seen = false;
                        for (size_t m = 0; m < n_paths && !seen; m++)
                                seen = strcmp(paths[m], p) == 0;
                        if (!seen)
                                paths[n_paths++] = (char *)p;
                        dropped[o] = true;
                }
                if (n_paths > 1) {
                        int r = note_same_node(keep, k, sel_of[k->order], paths, n_paths, notes);
                        if (r < 0)
                                return r;
                }
                /* Cleared only now: the note names their paths. */
                for (size_t m = i + 1; m < j; m++)
                        if (dropped[keys[m].order])
                                res_device_clear(&v->devs[keys[m].order]);
                i = j;
        }
        return 0;
}

/* Runs every selector into v, with a note for each that finds nothing,
 * and leaves in *ret_sel_of and *ret_pci, per device of v, the index of
 * its selector and whether that is a "pci" one. */
static int scan_all(int rootfd, struct res_selector *const *sels, size_t n_sels,
                    struct res_devvec *v, struct base_strvec *notes, size_t **ret_sel_of,
                    bool **ret_pci) {
        /* Where each selector's devices end in v. */
        _cleanup_free_ size_t *ends = calloc(n_sels + 1, sizeof(*ends));
        if (!ends)
                return -ENOMEM;
        int r = 0;
        for (size_t i = 0; i < n_sels && r >= 0; i++) {
                size_t before = v->n;
                r = res_discover_one(rootfd, sels[i], i, v, notes, NULL);
                if (r >= 0 && v->n == before)
                        r = note_empty(rootfd, sels[i], i, notes);
                ends[i] = v->n;
        }
        if (r < 0)
                return r;
        _cleanup_free_ size_t *sel_of = calloc(v->n + 1, sizeof(*sel_of));
        _cleanup_free_ bool *pci = calloc(v->n + 1, sizeof(*pci));
        if (!sel_of || !pci)
                return -ENOMEM;
        for (size_t i = 0, k = 0; i < n_sels; i++)
                for (; k < ends[i]; k++) {
                        sel_of[k] = i;
                        pci[k] = sels[i]->kind == RES_SEL_PCI;
                }
        *ret_sel_of = TAKE_PTR(sel_of);
        *ret_pci = TAKE_PTR(pci);
        return 0;
}

/* The devices of v not dropped, in ID order and unique, into *ret (devs,
 * clashes); every device left in v is then moved out or cleared, so only
 * v's array remains to free. */
static int take_unique(struct res_devvec *v, const bool *dropped, struct res_devlist *ret) {
        struct res_devvec clashes = { 0 };
        struct res_devlist list = { 0 };
        _cleanup_free_ struct slot *slots = calloc(v->n, sizeof(*slots));
        list.devs = calloc(v->n, sizeof(*list.devs));
        if (!slots || !list.devs) {
                free(list.devs);
                return -ENOMEM;
        }
        size_t n = 0;
        for (size_t i = 0; i < v->n; i++)
                if (!dropped[i])
                        slots[n++] = (struct slot){ .dev = &v->devs[i], .order = i };
        int r = make_unique(slots, &n, &clashes);
        if (r < 0) {
                free(list.devs);
                devvec_clear(&clashes);
                return r;
        }
        /* Move the survivors into ID order; dropped duplicates are already
         * cleared, so freeing v's array releases nothing twice. */
        for (size_t i = 0; i < n; i++) {
                list.devs[i] = *slots[i].dev;
                *slots[i].dev = (struct res_device){ .numa_node = -1 };
        }
        list.n = n;
        list.clashes = clashes.devs;
        list.n_clashes = clashes.n;
        *ret = list;
        return 0;
}

int res_discover(const char *host_root, struct res_selector *const *sels, size_t n_sels,
                 struct res_devlist *ret) {
        _cleanup_close_ int rootfd = -1;
        int r = res_root_open(host_root, &rootfd);
        if (r < 0)
                return r;

        struct res_devvec v = { 0 };
        struct base_strvec notes = { 0 };
        struct res_devlist list = { 0 };
        _cleanup_free_ size_t *sel_of = NULL;
        _cleanup_free_ bool *pci = NULL, *dropped = NULL;
        r = scan_all(rootfd, sels, n_sels, &v, &notes, &sel_of, &pci);
        if (r >= 0) {
                dropped = calloc(v.n + 1, sizeof(*dropped));
                r = dropped ? 0 : -ENOMEM;
        }
        if (r >= 0)
                r = drop_same_nodes(rootfd, &v, sel_of, pci, dropped, &notes);
        if (r >= 0 && v.n > 0)
                r = take_unique(&v, dropped, &list);
        devvec_clear(&v);
        if (r < 0) {
                base_strvec_clear(&notes);
                return r;
        }
        list.notes = notes_take(&notes);
        *ret = list;
        return 0;
}

/* Where nodes for a USB or PCI selector appear; sysfs itself sends no
 * inotify events, but devtmpfs does when the kernel adds the node. */
static const char *const usb_globs[] = { "/dev/bus/usb/*/*", NULL };
static const char *const pci_globs[] = { "/dev/vfio/*", "/dev/dri/*", NULL };

static int sel_watch(int rootfd, const struct res_selector *sel, struct base_strvec *out) {
        int r = 0;
        switch (sel->kind) {
        case RES_SEL_PATH:
        case RES_SEL_PATHS:
                for (size_t i = 0; i < sel->n_globs && r >= 0; i++)
                        r = res_glob_watch_dirs(rootfd, sel->globs[i], out);
                return r;
        case RES_SEL_USB:
                for (size_t i = 0; usb_globs[i] && r >= 0; i++)
                        r = res_glob_watch_dirs(rootfd, usb_globs[i], out);
                return r;
        case RES_SEL_PCI:
                for (size_t i = 0; pci_globs[i] && r >= 0; i++)
                        r = res_glob_watch_dirs(rootfd, pci_globs[i], out);
                return r;
        }
        return -EINVAL;
}

/* Length of host_root without trailing slashes: 0 for "/". */
static size_t root_prefix_len(const char *host_root) {
        size_t plen = host_root ? strlen(host_root) : 0;
        while (plen > 0 && host_root[plen - 1] == '/')
                plen--;
        return plen;
}

int res_open_watch_dir(const char *host_root, const char *dir, int *ret_fd) {
        size_t plen = root_prefix_len(host_root);
        _cleanup_close_ int rootfd = -1;
        int r;

        /* Strings res_watch_dirs made: the prefix, then "/..." or nothing. */
        if (strncmp(dir, host_root ? host_root : "", plen) != 0 || (dir[plen] && dir[plen] != '/'))
                return -EINVAL;
        r = res_root_open(host_root, &rootfd);
        if (r < 0)
                return r;
        int fd = res_open_in_root(rootfd, dir + plen, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

int res_watch_dirs(const char *host_root, struct res_selector *const *sels, size_t n_sels,
                   char ***ret_dirs) {
        _cleanup_close_ int rootfd = -1;
        int r = res_root_open(host_root, &rootfd);
        if (r < 0)
                return r;

        struct base_strvec dirs = { 0 };
        for (size_t i = 0; i < n_sels && r >= 0; i++)
                r = sel_watch(rootfd, sels[i], &dirs);
        if (r < 0) {
                base_strvec_clear(&dirs);
                return r;
        }
        if (dirs.n > 1)
                qsort(dirs.v, dirs.n, sizeof(char *), cmp_str);

        /* "/" and "/host/" both mean "prefix nothing extra". */
        size_t plen = root_prefix_len(host_root);

        struct base_strvec out = { 0 };
        for (size_t i = 0; i < dirs.n && r >= 0; i++) {
                if (i > 0 && strcmp(dirs.v[i], dirs.v[i - 1]) == 0)
                        continue;
                if (plen == 0)
                        r = base_strvec_push_dup(&out, dirs.v[i]);
                else if (strcmp(dirs.v[i], "/") == 0)
                        r = base_strvec_push(&out, strndup(host_root, plen));
                else
                        r = base_strvec_push(
                                &out, res_strdup_printf("%.*s%s", (int)plen, host_root, dirs.v[i]));
        }
        base_strvec_clear(&dirs);
        if (r >= 0 && !out.v) {
                out.v = calloc(1, sizeof(char *));
                if (!out.v)
                        r = -ENOMEM;
        }
        if (r < 0) {
                base_strvec_clear(&out);
                return r;
        }
        *ret_dirs = out.v;
        return 0;
}
