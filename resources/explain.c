/* SPDX-License-Identifier: Apache-2.0 */
/* res_selector_explain: why a selector finds what it finds, in one
 * sentence. The daemon logs it for a selector that finds nothing, and
 * `doctor` prints it, so the sentence names the first thing an operator
 * would check: the directory, the vendor/product, the driver, the sysfs
 * attribute that differs.
 *
 * Each explanation re-reads sysfs rather than reusing discovery's state:
 * it runs only when something is wrong or on request, never on the hotplug
 * path of a working selector.
 */
#include <dirent.h>
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

static int explain_glob(int rootfd, const struct res_selector *sel, const char *field,
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
        if (!first || !res_sel_has_filters(sel)) {
                base_strvec_clear(&sv);
                *ret = NULL;
                return 0;
        }
        /* Every match failed the sysfs filters: say why for the first. */
        _cleanup_free_ char *node = NULL, *devdir = NULL, *why = NULL;
        r = res_resolve(rootfd, sv.v[0], &node);
        if (r >= 0)
                r = res_node_devdir(rootfd, node, &devdir);
        char *msg;
        if (r == -ENOMEM)
                msg = NULL;
        else if (r < 0)
                msg = res_strdup_printf("%s matches \"%s\" but has no sysfs device "
                                        "(/sys/dev/...), so attrs/subsystem/driver/kernel "
                                        "cannot match",
                                        sv.v[0], glob);
        else if ((r = res_sysfs_filter(rootfd, devdir, sel, &why)) == 0 && why)
                msg = res_strdup_printf("%s%s matches \"%s\" but %s", sv.v[0],
                                        sv.n > 1 ? " (and others)" : "", glob, why);
        else
                msg = r == -ENOMEM ? NULL : res_strdup_printf("%s matches \"%s\"", sv.v[0], glob);
        base_strvec_clear(&sv);
        return set(ret, msg);
}

static int explain_paths(int rootfd, const struct res_selector *sel, char **ret) {
        for (size_t i = 0; i < sel->n_globs; i++) {
                _cleanup_free_ char *field = sel->kind == RES_SEL_PATH
                                                     ? strdup("path")
                                                     : res_strdup_printf("paths[%zu]", i);
                if (!field)
                        return -ENOMEM;
                char *msg = NULL;
                int r = explain_glob(rootfd, sel, field, sel->globs[i], i == 0, &msg);
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

static int read_at(int rootfd, const char *dir, const char *attr, char **ret) {
        _cleanup_free_ char *p = res_strdup_printf("%s/%s", dir, attr);
        return p ? res_read_attr(rootfd, p, ret) : -ENOMEM;
}

static bool hex_is(int rootfd, const char *dir, const char *attr, unsigned digits, uint32_t want,
                   char **ret_val) {
        _cleanup_free_ char *v = NULL;
        uint32_t x;
        if (read_at(rootfd, dir, attr, &v) < 0)
                return false;
        if (res_parse_hex(v, digits, &x) == 0 && x == want)
                return true;
        if (ret_val)
                *ret_val = TAKE_PTR(v);
        return false;
}

/* Entries of a sysfs bus dir, for the explainers below. */
/* Why the device at the sysfs dir dir fails sel's attrs/subsystem/driver/
 * kernel filters (malloc'd), or NULL when it passes or cannot be read. */
static char *filter_miss(int rootfd, const char *dir, const struct res_selector *sel) {
        _cleanup_free_ char *canon = NULL;
        char *why = NULL;

        if (res_sysfs_canon(rootfd, dir, &canon) == 0 &&
            res_sysfs_filter(rootfd, canon, sel, &why) == 0)
                return why;
        free(why);
        return NULL;
}

static int list_dir(int rootfd, const char *path, struct base_strvec *ret) {
        int fd = res_open_in_root(rootfd, path, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d)))
                if (de->d_name[0] != '.')
                        r = base_strvec_push_dup(ret, de->d_name);
        closedir(d);
        return r;
}

static int explain_usb(int rootfd, const struct res_selector *sel, char **ret) {
        struct base_strvec names = { 0 };
        int r = list_dir(rootfd, "/sys/bus/usb/devices", &names);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set(ret, res_strdup_printf("/sys/bus/usb/devices cannot be read (%s): no "
                                                  "USB, or sysfs is not under the host root",
                                                  strerror(-r)));
        char *msg = NULL;
        size_t devices = 0;
        for (size_t i = 0; i < names.n && !msg; i++) {
                const char *name = names.v[i];
                if (name[strspn(name, "0123456789.-usb")] != '\0')
                        continue;
                devices++;
                _cleanup_free_ char *dir = res_strdup_printf("/sys/bus/usb/devices/%s", name);
                _cleanup_free_ char *val = NULL;
                if (!dir) {
                        r = -ENOMEM;
                        break;
                }
                if (!hex_is(rootfd, dir, "idVendor", 4, sel->usb_vendor, NULL))
                        continue;
                if (sel->has_usb_product &&
                    !hex_is(rootfd, dir, "idProduct", 4, sel->usb_product, &val)) {
                        msg = res_strdup_printf("USB device %s has vendor %04x but product %s, "
                                                "not %04x",
                                                name, sel->usb_vendor, val ? val : "(unreadable)",
                                                sel->usb_product);
                        break;
                }
                if (sel->usb_serial) {
                        _cleanup_free_ char *serial = NULL;
                        read_at(rootfd, dir, "serial", &serial);
                        if (!serial || strcmp(serial, sel->usb_serial) != 0) {
                                msg = res_strdup_printf(
                                        "USB device %s (vendor %04x) has %s%s%s, "
                                        "not \"%s\"",
                                        name, sel->usb_vendor, serial ? "serial \"" : "no serial",
                                        serial ? serial : "", serial ? "\"" : "", sel->usb_serial);
                                break;
                        }
                }
                _cleanup_free_ char *why = filter_miss(rootfd, dir, sel);
                if (why) {
                        msg = res_strdup_printf("USB device %s matches but %s", name, why);
                        break;
                }
                _cleanup_free_ char *bus = NULL, *dev = NULL;
                read_at(rootfd, dir, "busnum", &bus);
                read_at(rootfd, dir, "devnum", &dev);
                msg = res_strdup_printf("USB device %s matches but its node /dev/bus/usb/%s/%s "
                                        "is missing or not a device node",
                                        name, bus ? bus : "?", dev ? dev : "?");
        }
        base_strvec_clear(&names);
        if (r == -ENOMEM)
                return r;
        if (!msg)
                msg = res_strdup_printf("no USB device has vendor %04x (%zu USB devices present)",
                                        sel->usb_vendor, devices);
        return set(ret, msg);
}

static int explain_pci(int rootfd, const struct res_selector *sel, char **ret) {
        struct base_strvec names = { 0 };
        int r = list_dir(rootfd, "/sys/bus/pci/devices", &names);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set(ret, res_strdup_printf("/sys/bus/pci/devices cannot be read (%s)",
                                                  strerror(-r)));
        char *msg = NULL, *near = NULL;
        size_t present;
        for (size_t i = 0; i < names.n && !msg; i++) {
                const char *name = names.v[i];
                _cleanup_free_ char *dir = res_strdup_printf("/sys/bus/pci/devices/%s", name);
                _cleanup_free_ char *val = NULL, *drvlink = NULL, *driver = NULL;
                if (!dir) {
                        r = -ENOMEM;
                        break;
                }
                if (sel->has_pci_vendor && !hex_is(rootfd, dir, "vendor", 4, sel->pci_vendor, NULL))
                        continue;
                if (sel->has_pci_device &&
                    !hex_is(rootfd, dir, "device", 4, sel->pci_device, &val)) {
                        if (!near)
                                near = res_strdup_printf("PCI function %s has vendor %04x but "
                                                         "device %s, not %04x",
                                                         name, sel->pci_vendor, val ? val : "?",
                                                         sel->pci_device);
                        continue;
                }
                if (sel->has_pci_class) {
                        uint32_t c;
                        _cleanup_free_ char *cv = NULL;
                        if (read_at(rootfd, dir, "class", &cv) < 0 ||
                            res_parse_hex(cv, 6, &c) < 0 ||
                            (c & sel->pci_class_mask) != sel->pci_class) {
                                if (!near && (sel->has_pci_vendor || sel->has_pci_device))
                                        near = res_strdup_printf("PCI function %s has class %s, "
                                                                 "not %06x",
                                                                 name, cv ? cv : "?",
                                                                 sel->pci_class);
                                continue;
                        }
                }
                drvlink = res_strdup_printf("%s/driver", dir);
                if (!drvlink) {
                        r = -ENOMEM;
                        break;
                }
                res_readlink_base(rootfd, drvlink, &driver);
                if (sel->pci_driver && (!driver || strcmp(driver, sel->pci_driver) != 0)) {
                        msg = driver ? res_strdup_printf("PCI function %s is bound to %s, not %s",
                                                         name, driver, sel->pci_driver)
                                     : res_strdup_printf("PCI function %s is bound to no driver, "
                                                         "not %s",
                                                         name, sel->pci_driver);
                        break;
                }
                _cleanup_free_ char *why = filter_miss(rootfd, dir, sel);
                if (why) {
                        msg = res_strdup_printf("PCI function %s matches but %s", name, why);
                        break;
                }
                msg = res_strdup_printf("PCI function %s matches but has no /dev/dri node under "
                                        "its drm/ dir and is not bound to vfio-pci (driver %s)",
                                        name, driver ? driver : "none");
        }
        present = names.n;
        base_strvec_clear(&names);
        if (r == -ENOMEM) {
                free(msg);
                free(near);
                return r;
        }
        if (!msg && near)
                msg = TAKE_PTR(near);
        free(near);
        if (!msg)
                msg = res_strdup_printf("no PCI function matches (%zu present)", present);
        return set(ret, msg);
}

static int explain_found(const struct res_devvec *v, char **ret) {
        size_t len = 0;
        for (size_t i = 0; i < v->n && i < 3; i++)
                len += strlen(v->devs[i].nodes[0]) + 2;
        _cleanup_free_ char *list = calloc(1, len + 1);
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < v->n && i < 3; i++) {
                if (i)
                        strcat(list, ", ");
                strcat(list, v->devs[i].nodes[0]);
        }
        return set(ret, res_strdup_printf("finds %zu device%s: %s%s", v->n, v->n == 1 ? "" : "s",
                                          list, v->n > 3 ? ", ..." : ""));
}

int res_explain_at(int rootfd, const struct res_selector *sel, char **ret_msg, size_t *ret_found) {
        struct res_devvec v = { 0 };
        struct base_strvec notes = { 0 };
        char *msg = NULL;
        int r = res_discover_one(rootfd, sel, 0, &v, &notes);
        if (r >= 0 && v.n > 0)
                r = explain_found(&v, &msg);
        else if (r >= 0 && notes.n > 0)
                /* Matches were refused (not a device, no serial): say so,
                 * without the "match[0]: " the daemon's log lines carry. */
                r = set(&msg, strdup(strchr(notes.v[0], ' ') + 1));
        else if (r >= 0 && (sel->kind == RES_SEL_PATH || sel->kind == RES_SEL_PATHS))
                r = explain_paths(rootfd, sel, &msg);
        else if (r >= 0 && sel->kind == RES_SEL_USB)
                r = explain_usb(rootfd, sel, &msg);
        else if (r >= 0)
                r = explain_pci(rootfd, sel, &msg);
        size_t found = v.n;
        for (size_t i = 0; i < v.n; i++)
                res_device_clear(&v.devs[i]);
        free(v.devs);
        base_strvec_clear(&notes);
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
