/* SPDX-License-Identifier: Apache-2.0 */
/* res_selector_explain: why a selector finds what it finds, in one
 * sentence. The daemon logs it for a selector that finds nothing, and
 * `doctor` prints it, so the sentence names the first thing an operator
 * would check: the directory, the vendor/product, the driver, the sysfs
 * attribute that differs.
 *
 * The rules are not checked here: the scan that discovery runs reports
 * each candidate it refused with the first rule it failed (struct
 * res_miss), and this file only chooses which miss to tell and words it,
 * so an explanation cannot disagree with the match. It runs only when
 * something is wrong or on request, never on the hotplug path of a
 * working selector.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "res-internal.h"

static int set(char **ret, char *msg) {
        if (!msg)
                return -ENOMEM;
        *ret = msg;
        return 0;
}

static bool is_magic(const char *s) {
        return strpbrk(s, "*?[\\") != NULL;
}

static bool dir_exists(int rootfd, const char *path) {
        _cleanup_close_ int fd = res_open_in_root(rootfd, path, O_PATH | O_DIRECTORY);
        return fd >= 0;
}

/* The directory above the glob's first wildcard component (for a literal
 * path, its parent) if it does not exist, else NULL. */
static int missing_dir(int rootfd, const char *glob, char **ret) {
        _cleanup_free_ char *dir = strdup(glob);
        if (!dir)
                return -ENOMEM;
        size_t cut = 0; /* length of the fixed prefix */
        for (size_t i = 0; dir[i];) {
                size_t next = i + 1 + strcspn(dir + i + 1, "/");
                char save = dir[next];
                dir[next] = '\0';
                bool magic = is_magic(dir + i + 1);
                dir[next] = save;
                if (magic || !save)
                        break;
                cut = next;
                i = next;
        }
        dir[cut] = '\0';
        if (cut == 0 || dir_exists(rootfd, dir)) {
                *ret = NULL;
                return 0;
        }
        *ret = TAKE_PTR(dir);
        return 0;
}

/* A sysfs filter's miss (res_sysfs_filter), as the end of a sentence. */
static char *filter_text(const struct res_miss *m) {
        if (strcmp(m->field, "attrs") == 0)
                return strdup("no single device in its sysfs path has all of its attrs");
        if (strncmp(m->field, "attrs.", 6) == 0)
                return res_strdup_printf("%s is \"%s\" on %s, not \"%s\"", m->field + 6, m->got,
                                         m->on, m->want);
        return res_strdup_printf("no device in its sysfs path has %s \"%s\"", m->field, m->want);
}

/* What is wrong with glob (field "path" or "paths[<i>]"): no directory,
 * no match, no device node, or, for the first glob, the sysfs filters as
 * misses has them from the scan; *ret NULL when none of that. */
static int explain_glob(int rootfd, const struct res_misses *misses, const char *field,
                        const char *glob, bool first, char **ret) {
        _cleanup_free_ char *missing = NULL;
        int r = missing_dir(rootfd, glob, &missing);
        if (r < 0)
                return r;
        if (missing)
                return set(ret,
                           res_strdup_printf("%s: directory %s does not exist", field, missing));
        struct base_strvec sv = { 0 }, skipped = { 0 };
        r = res_glob(rootfd, glob, &sv, &skipped);
        if (r < 0) {
                base_strvec_clear(&skipped);
                return set(ret, res_strdup_printf("%s: cannot read \"%s\": %s", field, glob,
                                                  strerror(-r)));
        }
        if (sv.n == 0) {
                char *msg =
                        skipped.n
                                ? res_strdup_printf(
                                          "%s: \"%s\" matches only what is not a device node (%s)",
                                          field, glob, skipped.v[0])
                                : res_strdup_printf("%s: nothing matches \"%s\"", field, glob);
                base_strvec_clear(&sv);
                base_strvec_clear(&skipped);
                return set(ret, msg);
        }
        base_strvec_clear(&skipped);
        base_strvec_clear(&sv);
        /* The first glob's matches all failed the sysfs filters: say why
         * for the first, as the scan found it. */
        const struct res_miss *m = first && misses->n ? &misses->v[0] : NULL;
        if (!m) {
                *ret = NULL;
                return 0;
        }
        if (strcmp(m->field, "sysfs") == 0)
                return set(ret,
                           res_strdup_printf("%s matches \"%s\" but has no sysfs device "
                                             "(/sys/dev/...), so attrs/subsystem/driver/kernel "
                                             "cannot match",
                                             m->device, glob));
        _cleanup_free_ char *why = filter_text(m);
        if (!why)
                return -ENOMEM;
        return set(ret,
                   res_strdup_printf("%s%s matches \"%s\" but %s", m->device,
                                     misses->candidates > 1 ? " (and others)" : "", glob, why));
}

static int explain_paths(int rootfd, const struct res_selector *sel,
                         const struct res_misses *misses, char **ret) {
        for (size_t i = 0; i < sel->n_globs; i++) {
                _cleanup_free_ char *field = sel->kind == RES_SEL_PATH
                                                     ? strdup("path")
                                                     : res_strdup_printf("paths[%zu]", i);
                if (!field)
                        return -ENOMEM;
                char *msg = NULL;
                int r = explain_glob(rootfd, misses, field, sel->globs[i], i == 0, &msg);
                if (r < 0)
                        return r;
                if (msg) {
                        *ret = msg;
                        return 0;
                }
        }
        return set(ret, res_strdup_printf("no match of paths[0] has nodes of every further glob "
                                          "under the same sysfs parent"));
}

/* Which miss an explanation tells: the first candidate (in the bus
 * directory's order) whose miss passes pick. */
static const struct res_miss *first_miss(const struct res_misses *ms,
                                         const struct res_selector *sel,
                                         bool (*pick)(const struct res_selector *sel,
                                                      const char *field)) {
        for (size_t i = 0; i < ms->n; i++)
                if (pick(sel, ms->v[i].field))
                        return &ms->v[i];
        return NULL;
}

/* A device of another vendor is no near miss: the operator meant one of
 * the vendor's devices, and the first of those says what differs. */
static bool usb_told(const struct res_selector *sel, const char *field) {
        (void)sel;
        return strcmp(field, "usb.vendor") != 0;
}

static char *usb_text(const struct res_selector *sel, const struct res_misses *ms) {
        if (ms->list_err)
                return res_strdup_printf("/sys/bus/usb/devices cannot be read (%s): no "
                                         "USB, or sysfs is not under the host root",
                                         strerror(-ms->list_err));
        const struct res_miss *m = first_miss(ms, sel, usb_told);
        if (!m)
                return res_strdup_printf("no USB device has vendor %04x (%zu USB devices present)",
                                         sel->usb_vendor, ms->candidates);
        if (strcmp(m->field, "usb.product") == 0)
                return res_strdup_printf("USB device %s has vendor %04x but product %s, not %s",
                                         m->device, sel->usb_vendor,
                                         m->got ? m->got : "(unreadable)", m->want);
        if (strcmp(m->field, "usb.serial") == 0)
                return res_strdup_printf("USB device %s (vendor %04x) has %s%s%s, not \"%s\"",
                                         m->device, sel->usb_vendor,
                                         m->got ? "serial \"" : "no serial", m->got ? m->got : "",
                                         m->got ? "\"" : "", m->want);
        if (strcmp(m->field, "node") == 0)
                return m->want ? res_strdup_printf("USB device %s matches but its node %s is "
                                                   "missing or not a device node",
                                                   m->device, m->want)
                               : res_strdup_printf("USB device %s matches but its busnum or "
                                                   "devnum cannot be read",
                                                   m->device);
        _cleanup_free_ char *why = filter_text(m);
        return why ? res_strdup_printf("USB device %s matches but %s", m->device, why) : NULL;
}

/* Misses at the driver or later are told at once; a function of the
 * right vendor with another device or class is told only when nothing
 * came closer (a class miss only when vendor or device narrowed the
 * search: "no display controller" alone says nothing). */
static bool pci_final(const struct res_selector *sel, const char *field) {
        (void)sel;
        return strncmp(field, "pci.", 4) != 0 || strcmp(field, "pci.driver") == 0;
}

static bool pci_near(const struct res_selector *sel, const char *field) {
        return strcmp(field, "pci.device") == 0 ||
               (strcmp(field, "pci.class") == 0 && (sel->has_pci_vendor || sel->has_pci_device));
}

static char *pci_node_text(const struct res_miss *m) {
        if (m->got && strcmp(m->got, "vfio-pci") == 0)
                return m->want ? res_strdup_printf("PCI function %s is bound to vfio-pci but its "
                                                   "node %s is missing or not a device node",
                                                   m->device, m->want)
                               : res_strdup_printf("PCI function %s is bound to vfio-pci but has "
                                                   "no IOMMU group",
                                                   m->device);
        return res_strdup_printf("PCI function %s matches but has no /dev/dri node under "
                                 "its drm/ dir and is not bound to vfio-pci (driver %s)",
                                 m->device, m->got ? m->got : "none");
}

static char *pci_text(const struct res_selector *sel, const struct res_misses *ms) {
        if (ms->list_err)
                return res_strdup_printf("/sys/bus/pci/devices cannot be read (%s)",
                                         strerror(-ms->list_err));
        const struct res_miss *m = first_miss(ms, sel, pci_final);
        if (!m)
                m = first_miss(ms, sel, pci_near);
        if (!m)
                return res_strdup_printf("no PCI function matches (%zu present)", ms->candidates);
        if (strcmp(m->field, "pci.device") == 0)
                return res_strdup_printf("PCI function %s has vendor %04x but device %s, not %s",
                                         m->device, sel->pci_vendor, m->got ? m->got : "?",
                                         m->want);
        if (strcmp(m->field, "pci.class") == 0)
                return res_strdup_printf("PCI function %s has class %s, not %s", m->device,
                                         m->got ? m->got : "?", m->want);
        if (strcmp(m->field, "pci.driver") == 0)
                return m->got ? res_strdup_printf("PCI function %s is bound to %s, not %s",
                                                  m->device, m->got, m->want)
                              : res_strdup_printf("PCI function %s is bound to no driver, not %s",
                                                  m->device, m->want);
        if (strcmp(m->field, "node") == 0)
                return pci_node_text(m);
        _cleanup_free_ char *why = filter_text(m);
        return why ? res_strdup_printf("PCI function %s matches but %s", m->device, why) : NULL;
}

static int explain_found(const struct res_devvec *v, char **ret) {
        _cleanup_free_ char *list = NULL;
        for (size_t i = 0; i < v->n && i < 3; i++) {
                char *more = res_strdup_printf("%s%s%s", list ? list : "", list ? ", " : "",
                                               v->devs[i].nodes[0]);
                if (!more)
                        return -ENOMEM;
                free(list);
                list = more;
        }
        return set(ret, res_strdup_printf("finds %zu device%s: %s%s", v->n, v->n == 1 ? "" : "s",
                                          list, v->n > 3 ? ", ..." : ""));
}

int res_explain_at(int rootfd, const struct res_selector *sel, char **ret_msg, size_t *ret_found) {
        struct res_devvec v = { 0 };
        struct base_strvec notes = { 0 };
        struct res_misses misses = { 0 };
        char *msg = NULL;
        int r = res_discover_one(rootfd, sel, 0, &v, &notes, &misses);
        if (r >= 0 && v.n > 0)
                r = explain_found(&v, &msg);
        else if (r >= 0 && notes.n > 0)
                /* Matches were refused (not a device, no serial): say so,
                 * without the "match[0]: " the daemon's log lines carry. */
                r = set(&msg, strdup(strchr(notes.v[0], ' ') + 1));
        else if (r >= 0 && (sel->kind == RES_SEL_PATH || sel->kind == RES_SEL_PATHS))
                r = explain_paths(rootfd, sel, &misses, &msg);
        else if (r >= 0 && sel->kind == RES_SEL_USB)
                r = set(&msg, usb_text(sel, &misses));
        else if (r >= 0)
                r = set(&msg, pci_text(sel, &misses));
        size_t found = v.n;
        for (size_t i = 0; i < v.n; i++)
                res_device_clear(&v.devs[i]);
        free(v.devs);
        base_strvec_clear(&notes);
        res_misses_clear(&misses);
        if (r < 0) {
                free(msg);
                return r;
        }
        *ret_msg = msg;
        if (ret_found)
                *ret_found = found;
        return 0;
}

int res_selector_explain(const char *host_root, const struct res_selector *sel, char **ret_msg,
                         size_t *ret_found) {
        _cleanup_close_ int rootfd = -1;
        int r = res_root_open(host_root, &rootfd);
        if (r < 0)
                return r;
        return res_explain_at(rootfd, sel, ret_msg, ret_found);
}
