/* SPDX-License-Identifier: Apache-2.0 */
/* A device's place in sysfs: the chain of devices from a node up to
 * /sys/devices, matched the way udev's ATTRS{}, SUBSYSTEMS, DRIVERS and
 * KERNELS keys match, and the NUMA node and serial number found on it.
 *
 * sysfs links (/sys/dev/char/188:0, /sys/bus/usb/devices/1-1.2) are
 * relative and point into /sys/devices, so the chain is read from the
 * canonical path by dropping components: no path walk ever goes through
 * "..", and every read is bounded (RES_ATTR_MAX bytes, RES_MAX_SYSFS_DEPTH
 * levels).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "res-internal.h"

/* Normalise "dir/target" textually: sysfs link targets are relative and
 * contain only real directories, so ".." can be applied to the string. */
static int join_normal(const char *dir, const char *target, char **ret) {
        _cleanup_free_ char *in =
                target[0] == '/' ? strdup(target) : res_strdup_printf("%s/%s", dir, target);
        if (!in)
                return -ENOMEM;
        char *out = calloc(1, strlen(in) + 2);
        if (!out)
                return -ENOMEM;
        size_t len = 0;
        for (char *save = NULL, *c = strtok_r(in, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (strcmp(c, ".") == 0)
                        continue;
                if (strcmp(c, "..") == 0) {
                        while (len > 0 && out[len - 1] != '/')
                                len--;
                        if (len > 0)
                                len--;
                        out[len] = '\0';
                        continue;
                }
                out[len++] = '/';
                size_t cl = strlen(c);
                memcpy(out + len, c, cl);
                len += cl;
                out[len] = '\0';
        }
        if (len == 0) {
                out[0] = '/';
                out[1] = '\0';
        }
        *ret = out;
        return 0;
}

int res_sysfs_canon(int rootfd, const char *path, char **ret) {
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (!slash || !slash[1])
                return -EINVAL;
        *slash = '\0';
        const char *name = slash + 1;
        _cleanup_close_ int dfd = res_open_in_root(rootfd, *dir ? dir : "/", O_PATH | O_DIRECTORY);
        if (dfd < 0)
                return dfd;
        char target[PATH_MAX];
        ssize_t n = readlinkat(dfd, name, target, sizeof(target));
        if (n < 0 && errno == EINVAL) /* a real directory already */
                return join_normal("/", path, ret);
        if (n < 0)
                return -errno;
        if ((size_t)n >= sizeof(target))
                return -ENAMETOOLONG;
        target[n] = '\0';
        return join_normal(*dir ? dir : "/", target, ret);
}

int res_sys_dev_path(unsigned mode, uint64_t rdev, const char *suffix, char **ret) {
        if (!S_ISCHR(mode) && !S_ISBLK(mode))
                return -ENOENT;
        char *p = res_strdup_printf("/sys/dev/%s/%u:%u%s", S_ISCHR(mode) ? "char" : "block",
                                    major(rdev), minor(rdev), suffix);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int res_node_devdir(int rootfd, const char *node, char **ret) {
        struct stat st;
        int r = res_stat_in_root(rootfd, node, 0, &st);
        if (r < 0)
                return r;
        return res_devdir_of(rootfd, st.st_mode, st.st_rdev, ret);
}

int res_devdir_of(int rootfd, unsigned mode, uint64_t rdev, char **ret) {
        _cleanup_free_ char *p = NULL;
        int r = res_sys_dev_path(mode, rdev, "", &p);
        if (r < 0)
                return r;
        _cleanup_free_ char *canon = NULL;
        r = res_sysfs_canon(rootfd, p, &canon);
        if (r < 0)
                return r;
        /* Only a directory is a device; a dangling link is a device that
         * is going away. */
        _cleanup_close_ int dfd = res_open_in_root(rootfd, canon, O_PATH | O_DIRECTORY);
        if (dfd < 0)
                return dfd;
        *ret = TAKE_PTR(canon);
        return 0;
}

/* The chain of sysfs devices from devdir up, nearest first: every
 * directory on the way that has a "subsystem" link or a "uevent" file
 * (class directories such as ".../ttyUSB0/tty" are not devices). */
struct chain {
        char *dirs[RES_MAX_SYSFS_DEPTH];
        size_t n;
};

static void chain_clear(struct chain *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->dirs[i]);
        c->n = 0;
}

static bool is_device_dir(int rootfd, const char *dir) {
        _cleanup_free_ char *ue = res_strdup_printf("%s/uevent", dir);
        _cleanup_free_ char *ss = res_strdup_printf("%s/subsystem", dir);
        _cleanup_free_ char *name = NULL;
        if (!ue || !ss)
                return false;
        _cleanup_close_ int fd = res_open_in_root(rootfd, ue, O_PATH);
        return fd >= 0 || res_readlink_base(rootfd, ss, &name) == 0;
}

static int chain_build(int rootfd, const char *devdir, struct chain *ret) {
        struct chain c = { .n = 0 };
        _cleanup_free_ char *p = strdup(devdir);
        if (!p)
                return -ENOMEM;
        for (size_t depth = 0; depth < RES_MAX_SYSFS_DEPTH && c.n < RES_MAX_SYSFS_DEPTH; depth++) {
                if (strcmp(p, "/sys/devices") == 0 || strncmp(p, "/sys/devices/", 13) != 0)
                        break;
                if (is_device_dir(rootfd, p)) {
                        c.dirs[c.n] = strdup(p);
                        if (!c.dirs[c.n]) {
                                chain_clear(&c);
                                return -ENOMEM;
                        }
                        c.n++;
                }
                *strrchr(p, '/') = '\0';
        }
        *ret = c;
        return 0;
}

static const char *base_of(const char *dir) {
        return strrchr(dir, '/') + 1;
}

/* A link's target name ("usb" for subsystem, "ftdi_sio" for driver). */
static int link_name(int rootfd, const char *dir, const char *link, char **ret) {
        _cleanup_free_ char *p = res_strdup_printf("%s/%s", dir, link);
        if (!p)
                return -ENOMEM;
        return res_readlink_base(rootfd, p, ret);
}

/* Attribute values with control bytes are binary, never a match. */
static bool printable(const char *s) {
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
                        return false;
        return true;
}

static int read_attr_at(int rootfd, const char *dir, const char *name, char **ret) {
        _cleanup_free_ char *p = res_strdup_printf("%s/%s", dir, name);
        if (!p)
                return -ENOMEM;
        _cleanup_free_ char *v = NULL;
        int r = res_read_attr(rootfd, p, &v);
        if (r < 0)
                return r;
        if (!printable(v))
                return -EINVAL;
        *ret = TAKE_PTR(v);
        return 0;
}

/* Whether every attr of sel matches on dir: 1, 0, or -ENOMEM. */
static int attrs_on(int rootfd, const char *dir, const struct res_selector *sel) {
        for (size_t i = 0; i < sel->n_attrs; i++) {
                _cleanup_free_ char *v = NULL;
                int r = read_attr_at(rootfd, dir, sel->attrs[i].name, &v);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || fnmatch(sel->attrs[i].glob, v, 0) != 0)
                        return 0;
        }
        return 1;
}

/* Whether some device of the chain has a "what" (kernel name, subsystem
 * or driver) matching glob. */
static int chain_has(int rootfd, const struct chain *c, const char *what, const char *glob) {
        for (size_t i = 0; i < c->n; i++) {
                _cleanup_free_ char *name = NULL;
                if (strcmp(what, "kernel") == 0) {
                        if (fnmatch(glob, base_of(c->dirs[i]), 0) == 0)
                                return 1;
                        continue;
                }
                int r = link_name(rootfd, c->dirs[i], what, &name);
                if (r == -ENOMEM)
                        return r;
                if (r == 0 && fnmatch(glob, name, 0) == 0)
                        return 1;
        }
        return 0;
}

/* The first attribute that fails, for an explanation: the nearest device
 * of the chain that has it with another value (field "attrs.<name>"), or
 * field "attrs" when each one matches somewhere but never all on one
 * device. */
static int attr_miss(int rootfd, const struct chain *c, const struct res_selector *sel,
                     struct res_miss *ret) {
        for (size_t a = 0; a < sel->n_attrs; a++) {
                for (size_t i = 0; i < c->n; i++) {
                        _cleanup_free_ char *v = NULL;
                        int r = read_attr_at(rootfd, c->dirs[i], sel->attrs[a].name, &v);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                continue;
                        if (fnmatch(sel->attrs[a].glob, v, 0) == 0)
                                break;
                        _cleanup_free_ char *field =
                                res_strdup_printf("attrs.%s", sel->attrs[a].name);
                        if (!field)
                                return -ENOMEM;
                        return res_miss_make(ret, NULL, field, sel->attrs[a].glob, v,
                                             base_of(c->dirs[i]));
                }
        }
        return res_miss_make(ret, NULL, "attrs", NULL, NULL, NULL);
}

/* kernel, subsystem, driver: each on some device of the chain. */
static int names_match(int rootfd, const struct chain *c, const struct res_selector *sel,
                       struct res_miss *ret_miss) {
        const char *keys[] = { "kernel", "subsystem", "driver" };
        const char *globs[] = { sel->kernel, sel->subsystem, sel->driver };
        for (size_t k = 0; k < 3; k++) {
                if (!globs[k])
                        continue;
                int r = chain_has(rootfd, c, keys[k], globs[k]);
                if (r < 0)
                        return r;
                if (r == 0 && ret_miss) {
                        r = res_miss_make(ret_miss, NULL, keys[k], globs[k], NULL, NULL);
                        return r < 0 ? r : 0;
                }
                if (r == 0)
                        return 0;
        }
        return 1;
}

int res_sysfs_filter(int rootfd, const char *devdir, const struct res_selector *sel,
                     struct res_miss *ret_miss) {
        if (!res_sel_has_filters(sel))
                return 1;
        struct chain c;
        int r = chain_build(rootfd, devdir, &c);
        if (r < 0)
                return r;
        r = names_match(rootfd, &c, sel, ret_miss);
        if (r > 0 && sel->n_attrs) {
                /* Like udev's ATTRS{}: all on one device of the chain. */
                r = 0;
                for (size_t i = 0; i < c.n && r == 0; i++)
                        r = attrs_on(rootfd, c.dirs[i], sel);
                if (r == 0 && ret_miss)
                        r = attr_miss(rootfd, &c, sel, ret_miss);
        }
        chain_clear(&c);
        return r;
}

static int parse_numa(const char *s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < -1 || v > INT_MAX)
                return -1;
        return (int)v;
}

int res_sysfs_numa(int rootfd, const char *devdir) {
        struct chain c;
        if (chain_build(rootfd, devdir, &c) < 0)
                return -1;
        int numa = -1;
        for (size_t i = 0; i < c.n; i++) {
                _cleanup_free_ char *v = NULL;
                if (read_attr_at(rootfd, c.dirs[i], "numa_node", &v) < 0)
                        continue;
                numa = parse_numa(v);
                break;
        }
        chain_clear(&c);
        return numa;
}

int res_sysfs_serial_id(int rootfd, const char *devdir, char **ret) {
        struct chain c;
        int r = chain_build(rootfd, devdir, &c);
        if (r < 0)
                return r;
        _cleanup_free_ char *intf = NULL;
        r = -ENOENT;
        for (size_t i = 0; i < c.n && r == -ENOENT; i++) {
                _cleanup_free_ char *subsys = NULL, *v = NULL;
                int s = link_name(rootfd, c.dirs[i], "subsystem", &subsys);
                if (s == -ENOMEM) {
                        r = s;
                        break;
                }
                if (s < 0)
                        continue;
                if (strcmp(subsys, "pci") == 0) {
                        /* As the pci selector names it: "0000:3b:00.0". */
                        r = res_id_fit(base_of(c.dirs[i]), ret);
                        break;
                }
                if (strcmp(subsys, "usb") != 0)
                        continue;
                /* A multi-port adapter (FT2232, CP2105) has one serial and
                 * one interface per port: the interface tells them apart. */
                if (!intf && read_attr_at(rootfd, c.dirs[i], "bInterfaceNumber", &v) == 0) {
                        intf = TAKE_PTR(v);
                        continue;
                }
                if (read_attr_at(rootfd, c.dirs[i], "serial", &v) < 0 || !*v)
                        continue;
                _cleanup_free_ char *raw = intf ? res_strdup_printf("%s-if%s", v, intf) : strdup(v);
                r = raw ? res_id_sanitize(raw, ret) : -ENOMEM;
        }
        chain_clear(&c);
        return r;
}

/* attr of dir as up to 4 hex digits ("0403", "0x8086"): 0, or -errno
 * (-ENOENT when dir has no such attribute). */
static int read_hex16(int rootfd, const char *dir, const char *attr, uint16_t *ret) {
        _cleanup_free_ char *v = NULL;
        uint32_t x;
        int r = read_attr_at(rootfd, dir, attr, &v);
        if (r < 0)
                return r;
        if (res_parse_hex(v, 4, &x) < 0)
                return -EINVAL;
        *ret = (uint16_t)x;
        return 0;
}

/* Whether dir is a USB device or a PCI function, by the attributes the
 * usb and pci selectors match on: 1 (*id filled), 0 neither, -ENOMEM.
 * USB interfaces ("1-1.2:1.0") have no idVendor and are passed over. */
static int identity_at(int rootfd, const char *dir, struct res_identity *id) {
        int r = read_hex16(rootfd, dir, "idVendor", &id->vendor);
        if (r >= 0)
                r = read_hex16(rootfd, dir, "idProduct", &id->product);
        if (r >= 0) {
                _cleanup_free_ char *serial = NULL;
                id->bus = RES_BUS_USB;
                id->address[0] = id->serial[0] = '\0';
                r = read_attr_at(rootfd, dir, "serial", &serial);
                if (r == -ENOMEM)
                        return r;
                if (r == 0 && strlen(serial) <= RES_SERIAL_MAX)
                        memcpy(id->serial, serial, strlen(serial) + 1); /* fits: checked */
                return 1;
        }
        if (r == -ENOMEM)
                return r;
        const char *name = base_of(dir);
        if (!res_is_pci_addr(name) || strlen(name) >= sizeof(id->address))
                return 0;
        r = read_hex16(rootfd, dir, "vendor", &id->vendor);
        if (r >= 0)
                r = read_hex16(rootfd, dir, "device", &id->product);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        id->bus = RES_BUS_PCI;
        memcpy(id->address, name, strlen(name) + 1); /* fits: checked above */
        id->serial[0] = '\0';
        return 1;
}

int res_device_identity(const char *host_root, const char *node, struct res_identity *ret) {
        _cleanup_close_ int rootfd = -1;
        _cleanup_free_ char *devdir = NULL;
        struct res_identity id = { .bus = RES_BUS_NONE };
        struct chain c;
        int r = res_root_open(host_root, &rootfd);
        if (r < 0)
                return r;
        r = res_node_devdir(rootfd, node, &devdir);
        if (r < 0)
                return r;
        r = chain_build(rootfd, devdir, &c);
        if (r < 0)
                return r;
        r = 0;
        for (size_t i = 0; i < c.n && r == 0; i++)
                r = identity_at(rootfd, c.dirs[i], &id);
        chain_clear(&c);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        *ret = id;
        return 0;
}
