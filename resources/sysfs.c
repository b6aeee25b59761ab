/* SPDX-License-Identifier: Apache-2.0 */
/* USB and PCI selectors, NUMA affinity and device-node parents, all read
 * from sysfs under the host root.
 *
 * A device that vanishes or half-appears while we read it (hotplug races
 * sysfs) is skipped, not an error: the next inotify event rediscovers it.
 * Only running out of memory aborts a scan.
 *
 * The usb and pci rules are checked here and nowhere else: a candidate
 * that fails one is reported, when the caller asks, as the first rule it
 * failed (struct res_miss), which is all explain.c words.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "res-internal.h"

static int parse_long(const char *s, long min, long max, long *ret) {
        if (!*s)
                return -EINVAL;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* The attribute dir/attr, read with the usual size cap. */
static int read_attr_in(int rootfd, const char *dir, const char *attr, char **ret) {
        _cleanup_free_ char *path = res_strdup_printf("%s/%s", dir, attr);
        if (!path)
                return -ENOMEM;
        return res_read_attr(rootfd, path, ret);
}

static int read_long(int rootfd, const char *dir, const char *attr, long min, long max, long *ret) {
        _cleanup_free_ char *val = NULL;
        int r = read_attr_in(rootfd, dir, attr, &val);
        return r < 0 ? r : parse_long(val, min, max, ret);
}

int res_node_parent(int rootfd, const char *node, uint64_t *ret_dev, uint64_t *ret_ino) {
        _cleanup_free_ char *dir = NULL;
        struct stat st;
        int r = res_stat_in_root(rootfd, node, 0, &st);
        if (r < 0)
                return r;
        r = res_sys_dev_path(st.st_mode, st.st_rdev, "/device", &dir);
        if (r < 0)
                return r;
        r = res_stat_in_root(rootfd, dir, O_DIRECTORY, &st);
        if (r < 0)
                return r;
        *ret_dev = st.st_dev;
        *ret_ino = st.st_ino;
        return 0;
}

static int for_each_entry(int rootfd, const char *dir,
                          int (*fn)(int rootfd, const char *name, void *ud), void *ud) {
        int fd = res_open_in_root(rootfd, dir, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        int r = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        r = errno ? -errno : 0;
                        break;
                }
                if (de->d_name[0] == '.')
                        continue;
                r = fn(rootfd, de->d_name, ud);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

/* Pushes a finished device; dev is cleared either way. */
static int emit(struct res_devvec *out, struct res_device *dev, const struct res_selector *sel) {
        int r = base_edits_copy(&sel->edits, &dev->edits);
        if (r >= 0)
                r = res_devvec_push(out, dev);
        res_device_clear(dev);
        return r;
}

static void set_nodes(struct res_device *dev, struct base_strvec *nodes) {
        dev->nodes = nodes->v;
        dev->n_nodes = nodes->n;
        *nodes = (struct base_strvec){ 0 };
}

struct scan {
        const struct res_selector *sel;
        struct res_devvec *out;
        size_t idx;
        struct base_strvec *notes;
        struct res_misses *misses; /* NULL: nobody asks why */
};

/* Errors that mean "this device is in flux or not what we want", as
 * opposed to a failing daemon. */
static int skip_unless_fatal(int r) {
        return r == -ENOMEM || r == -E2BIG ? r : 0;
}

/* A refused candidate, kept for the explanation if one is asked for:
 * 0, or -ENOMEM. */
static int miss(struct scan *s, const char *device, const char *field, const char *want,
                const char *got) {
        struct res_miss m;
        if (!s->misses)
                return 0;
        int r = res_miss_make(&m, device, field, want, got, NULL);
        if (r < 0)
                return r;
        res_misses_add(s->misses, &m);
        return 0;
}

/* The rule "field": attr of dir, hex, masked, is want. 1 it holds, 0 a
 * miss (an unreadable attribute is one), or -ENOMEM. */
static int hex_rule(struct scan *s, int rootfd, const char *name, const char *dir,
                    const char *field, const char *attr, unsigned digits, uint32_t want,
                    uint32_t mask) {
        _cleanup_free_ char *val = NULL;
        uint32_t v;
        int r = read_attr_in(rootfd, dir, attr, &val);
        if (r == -ENOMEM)
                return r;
        if (r == 0 && res_parse_hex(val, digits, &v) == 0 && (v & mask) == want)
                return 1;
        char w[16];
        snprintf(w, sizeof(w), "%0*x", (int)digits, want);
        r = miss(s, name, field, w, val);
        return r < 0 ? r : 0;
}

/* The sysfs filters on the device at dir: 1 they hold (*ret_canon is its
 * canonical dir, for NUMA and serial IDs), 0 a miss, or -ENOMEM. */
static int filter_rules(struct scan *s, int rootfd, const char *name, const char *dir,
                        char **ret_canon) {
        _cleanup_free_ char *canon = NULL;
        struct res_miss m = { 0 };
        int r = res_sysfs_canon(rootfd, dir, &canon);
        if (r < 0)
                return skip_unless_fatal(r);
        r = res_sysfs_filter(rootfd, canon, s->sel, s->misses ? &m : NULL);
        if (r == 0 && s->misses) {
                m.device = strdup(name);
                if (!m.device) {
                        res_miss_clear(&m);
                        return -ENOMEM;
                }
                res_misses_add(s->misses, &m);
        }
        if (r > 0)
                *ret_canon = TAKE_PTR(canon);
        return r;
}

/* The usb rules, in the order an explanation ranks a miss: vendor, then
 * product, serial, the sysfs filters. 1, 0 or -ENOMEM as above. */
static int usb_rules(struct scan *s, int rootfd, const char *name, const char *dir,
                     char **ret_canon) {
        const struct res_selector *sel = s->sel;
        int r = hex_rule(s, rootfd, name, dir, "usb.vendor", "idVendor", 4, sel->usb_vendor,
                         0xffff);
        if (r > 0 && sel->has_usb_product)
                r = hex_rule(s, rootfd, name, dir, "usb.product", "idProduct", 4, sel->usb_product,
                             0xffff);
        if (r > 0 && sel->usb_serial) {
                _cleanup_free_ char *serial = NULL;
                r = read_attr_in(rootfd, dir, "serial", &serial);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || strcmp(serial, sel->usb_serial) != 0) {
                        r = miss(s, name, "usb.serial", sel->usb_serial, serial);
                        return r < 0 ? r : 0;
                }
                r = 1;
        }
        if (r > 0)
                r = filter_rules(s, rootfd, name, dir, ret_canon);
        return r;
}

/* The node of the USB device at dir, /dev/bus/usb/BBB/DDD: 1 it exists
 * (*ret_node), 0 it does not (a "node" miss), or -ENOMEM. */
static int usb_node(struct scan *s, int rootfd, const char *name, const char *dir,
                    char **ret_node) {
        long bus, devnum;
        int r = read_long(rootfd, dir, "busnum", 1, 999, &bus);
        if (r >= 0)
                r = read_long(rootfd, dir, "devnum", 1, 999, &devnum);
        if (r == -ENOMEM)
                return r;
        _cleanup_free_ char *node =
                r < 0 ? NULL : res_strdup_printf("/dev/bus/usb/%03ld/%03ld", bus, devnum);
        if (r >= 0 && !node)
                return -ENOMEM;
        if (node && res_node_exists(rootfd, node)) {
                *ret_node = TAKE_PTR(node);
                return 1;
        }
        r = miss(s, name, "node", node, NULL);
        return r < 0 ? r : 0;
}

/* The device's ID: 1 (*ret_id), 0 it has none of the kind the selector
 * asks for (with a note), or a fatal error. */
static int usb_id(struct scan *s, int rootfd, const char *name, const char *canon, char **ret_id) {
        if (s->sel->id_mode != RES_ID_SERIAL) {
                /* The sysfs name ("1-1.2") is the port path: stable across
                 * reboots and replugs into the same port, unlike devnum. */
                _cleanup_free_ char *raw = res_strdup_printf("usb-%s", name);
                if (!raw || res_id_fit(raw, ret_id) < 0)
                        return -ENOMEM;
                return 1;
        }
        int r = res_sysfs_serial_id(rootfd, canon, ret_id);
        if (r >= 0)
                return 1;
        if (r == -ENOENT)
                r = base_strvec_push(
                        s->notes,
                        res_strdup_printf("match[%zu]: USB device %s has no serial, so no \"id\": "
                                          "\"serial\"; skipped",
                                          s->idx, name));
        return skip_unless_fatal(r);
}

static int usb_one(int rootfd, const char *name, void *ud) {
        struct scan *s = ud;
        /* "1-1.2:1.0" are interfaces of device "1-1.2", not devices; the
         * kernel names devices "<bus>-<port>[.<port>...]" or "usb<bus>". */
        if (name[strspn(name, "0123456789.-usb")] != '\0')
                return 0;
        if (s->misses)
                s->misses->candidates++;
        _cleanup_free_ char *dir = res_strdup_printf("/sys/bus/usb/devices/%s", name);
        _cleanup_free_ char *canon = NULL, *node = NULL;
        if (!dir)
                return -ENOMEM;
        int r = usb_rules(s, rootfd, name, dir, &canon);
        if (r > 0)
                r = usb_node(s, rootfd, name, dir, &node);
        if (r <= 0)
                return r;

        struct res_device dev = { .numa_node = -1 };
        struct base_strvec nodes = { 0 };
        r = base_strvec_push(&nodes, TAKE_PTR(node));
        if (r < 0)
                return r;
        set_nodes(&dev, &nodes);
        r = usb_id(s, rootfd, name, canon, &dev.id);
        if (r <= 0) {
                res_device_clear(&dev);
                return r;
        }
        dev.numa_node = res_sysfs_numa(rootfd, canon);
        return emit(s->out, &dev, s->sel);
}

/* Scans the bus directory dir with fn; a missing one is a bus without
 * devices, for the explanation to mention. */
static int scan_bus(int rootfd, const char *dir, int (*fn)(int rootfd, const char *name, void *ud),
                    struct scan *s) {
        int r = for_each_entry(rootfd, dir, fn, s);
        if (r == -ENOENT) {
                if (s->misses)
                        s->misses->list_err = r;
                r = 0;
        }
        return r;
}

int res_discover_usb(int rootfd, const struct res_selector *sel, size_t idx, struct res_devvec *out,
                     struct base_strvec *notes, struct res_misses *misses) {
        struct scan s = { .sel = sel, .out = out, .idx = idx, .notes = notes, .misses = misses };
        return scan_bus(rootfd, "/sys/bus/usb/devices", usb_one, &s);
}

static bool all_digits(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

static int vfio_nodes(int rootfd, const char *dir, struct base_strvec *nodes) {
        _cleanup_free_ char *link = res_strdup_printf("%s/iommu_group", dir);
        _cleanup_free_ char *group = NULL;
        if (!link)
                return -ENOMEM;
        int r = res_readlink_base(rootfd, link, &group);
        if (r < 0)
                return r;
        if (!all_digits(group))
                return -EINVAL;
        r = base_strvec_push(nodes, res_strdup_printf("/dev/vfio/%s", group));
        if (r >= 0)
                r = base_strvec_push_dup(nodes, "/dev/vfio/vfio");
        return r;
}

struct drm_scan {
        struct base_strvec *nodes;
};

static bool is_drm_node(const char *name) {
        if (strncmp(name, "card", 4) == 0)
                return all_digits(name + 4);
        if (strncmp(name, "renderD", 7) == 0)
                return all_digits(name + 7);
        return false;
}

static int drm_one(int rootfd, const char *name, void *ud) {
        struct drm_scan *d = ud;
        if (!is_drm_node(name))
                return 0;
        char *node = res_strdup_printf("/dev/dri/%s", name);
        if (!node)
                return -ENOMEM;
        if (!res_node_exists(rootfd, node)) {
                free(node);
                return 0;
        }
        return base_strvec_push(d->nodes, node);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The pci rules, in the order an explanation ranks a miss: vendor,
 * device, class, driver, the sysfs filters. 1, 0 or -ENOMEM as above. */
static int pci_rules(struct scan *s, int rootfd, const char *name, const char *dir,
                     const char *driver, char **ret_canon) {
        const struct res_selector *sel = s->sel;
        int r = 1;
        if (sel->has_pci_vendor)
                r = hex_rule(s, rootfd, name, dir, "pci.vendor", "vendor", 4, sel->pci_vendor,
                             0xffff);
        if (r > 0 && sel->has_pci_device)
                r = hex_rule(s, rootfd, name, dir, "pci.device", "device", 4, sel->pci_device,
                             0xffff);
        if (r > 0 && sel->has_pci_class)
                r = hex_rule(s, rootfd, name, dir, "pci.class", "class", 6, sel->pci_class,
                             sel->pci_class_mask);
        if (r > 0 && sel->pci_driver && (!driver || strcmp(driver, sel->pci_driver) != 0)) {
                r = miss(s, name, "pci.driver", sel->pci_driver, driver);
                return r < 0 ? r : 0;
        }
        if (r > 0)
                r = filter_rules(s, rootfd, name, dir, ret_canon);
        return r;
}

/* A function bound to vfio-pci is its IOMMU group's node; any other one
 * its DRM nodes. 1 all exist (*ret), 0 not (a "node" miss naming the
 * first missing one, if any), or -ENOMEM. */
static int pci_nodes(struct scan *s, int rootfd, const char *name, const char *dir,
                     const char *driver, struct base_strvec *ret) {
        struct base_strvec nodes = { 0 };
        int r;
        if (driver && strcmp(driver, "vfio-pci") == 0) {
                r = vfio_nodes(rootfd, dir, &nodes);
        } else {
                _cleanup_free_ char *drm = res_strdup_printf("%s/drm", dir);
                struct drm_scan d = { .nodes = &nodes };
                r = drm ? for_each_entry(rootfd, drm, drm_one, &d) : -ENOMEM;
                if (nodes.n > 1)
                        qsort(nodes.v, nodes.n, sizeof(char *), cmp_str);
        }
        const char *missing = NULL;
        for (size_t i = 0; r >= 0 && !missing && i < nodes.n; i++)
                if (!res_node_exists(rootfd, nodes.v[i]))
                        missing = nodes.v[i];
        if (r == -ENOMEM || r == -E2BIG) {
                base_strvec_clear(&nodes);
                return r;
        }
        if (r >= 0 && nodes.n > 0 && !missing) {
                *ret = nodes;
                return 1;
        }
        r = miss(s, name, "node", missing, driver);
        base_strvec_clear(&nodes);
        return r < 0 ? r : 0;
}

static int pci_one(int rootfd, const char *name, void *ud) {
        struct scan *s = ud;
        if (!res_is_pci_addr(name))
                return 0;
        if (s->misses)
                s->misses->candidates++;
        _cleanup_free_ char *dir = res_strdup_printf("/sys/bus/pci/devices/%s", name);
        _cleanup_free_ char *drvlink = res_strdup_printf("%s/driver", dir ? dir : "");
        _cleanup_free_ char *driver = NULL, *canon = NULL;
        if (!dir || !drvlink)
                return -ENOMEM;
        /* No driver link: the function is unbound. */
        int r = res_readlink_base(rootfd, drvlink, &driver);
        if (r < 0 && r != -ENOENT)
                return skip_unless_fatal(r);
        r = pci_rules(s, rootfd, name, dir, driver, &canon);
        struct base_strvec nodes = { 0 };
        if (r > 0)
                r = pci_nodes(s, rootfd, name, dir, driver, &nodes);
        if (r <= 0)
                return r;

        struct res_device dev = { .numa_node = res_sysfs_numa(rootfd, canon) };
        set_nodes(&dev, &nodes);
        /* The PCI address is fixed by the slot, so it survives restarts. */
        if (res_id_fit(name, &dev.id) < 0) {
                res_device_clear(&dev);
                return -ENOMEM;
        }
        return emit(s->out, &dev, s->sel);
}

int res_discover_pci(int rootfd, const struct res_selector *sel, size_t idx, struct res_devvec *out,
                     struct base_strvec *notes, struct res_misses *misses) {
        struct scan s = { .sel = sel, .out = out, .idx = idx, .notes = notes, .misses = misses };
        return scan_bus(rootfd, "/sys/bus/pci/devices", pci_one, &s);
}
