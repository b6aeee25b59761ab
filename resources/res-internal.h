/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the files of the resources module; not part of its API.
 *
 * Same conventions as resources.h: 0 or a negative errno, ret_* written only
 * on success, nothing logs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base.h"
#include "resources.h"

struct stat;

/* Devices one res_discover() call may return; a glob matching all of /dev on a
 * busy host is a configuration mistake, not something to page through. */
#define RES_MAX_DEVICES 65536
/* sysfs attributes are at most a page; anything longer is not sysfs. */
#define RES_ATTR_MAX 4096
/* Globs in one "paths" selector. */
#define RES_MAX_PATHS 16

enum res_sel_kind { RES_SEL_PATH, RES_SEL_PATHS, RES_SEL_USB, RES_SEL_PCI };
/* How a selector forms device IDs. */
enum res_id_mode { RES_ID_NAME, RES_ID_SERIAL, RES_ID_LINK };

/* Attributes in one "attrs" object; udev rules rarely need more than 3. */
#define RES_MAX_ATTRS 16
/* sysfs parents walked from a device towards /sys/devices. */
#define RES_MAX_SYSFS_DEPTH 32

struct res_attr {
        char *name; /* "idVendor", "power/control": relative, no ".." */
        char *glob; /* fnmatch pattern for the value */
};

struct res_selector {
        enum res_sel_kind kind;
        char **globs; /* path: one; paths: one or more */
        size_t n_globs;
        /* usb */
        uint16_t usb_vendor, usb_product;
        bool has_usb_vendor, has_usb_product;
        char *usb_serial; /* NULL: any */
        /* pci */
        uint16_t pci_vendor, pci_device;
        bool has_pci_vendor, has_pci_device, has_pci_class, has_pci_class_mask;
        uint32_t pci_class, pci_class_mask;
        char *pci_driver;        /* NULL: any */
        struct base_edits edits; /* for every device of this selector */
        /* sysfs filters (NULL / 0: none); globs */
        struct res_attr *attrs;
        size_t n_attrs;
        char *subsystem, *driver, *kernel;
        enum res_id_mode id_mode;
        bool optional; /* finding nothing is fine, and silent */
};

static inline bool res_sel_has_filters(const struct res_selector *sel) {
        return sel->n_attrs || sel->subsystem || sel->driver || sel->kernel;
}

/* A growable array of devices, grown geometrically so 10k matches cost
 * a handful of reallocs. */
struct res_devvec {
        struct res_device *devs;
        size_t n, cap;
};
/* Append *dev (taking its contents, zeroing *dev). -E2BIG past
 * RES_MAX_DEVICES. */
int res_devvec_push(struct res_devvec *v, struct res_device *dev);
void res_device_clear(struct res_device *dev);

char *res_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Host root handling. rel paths never start with '/'. */
int res_root_open(const char *host_root, int *ret_fd);
/* Open host-absolute or root-relative path under rootfd; absolute symlinks
 * and ".." stay inside the root (openat2 RESOLVE_IN_ROOT, or the same
 * resolution in user space on kernels without it). Returns the fd or a
 * negative errno. */
int res_open_in_root(int rootfd, const char *path, int flags);
/* The same without openat2, in user space (inroot.c), for older kernels. */
int res_open_in_root_compat(int rootfd, const char *path, int flags);
/* Read a sysfs attribute (at most RES_ATTR_MAX bytes), trailing newline
 * stripped. */
int res_read_attr(int rootfd, const char *path, char **ret);
/* Last component of the symlink at path (e.g. the driver name behind
 * .../driver). */
int res_readlink_base(int rootfd, const char *path, char **ret);
/* fstat of what path names under the root, links followed; flags adds to
 * O_PATH (O_DIRECTORY). */
int res_stat_in_root(int rootfd, const char *path, int flags, struct stat *ret);
/* What path names under the root, links followed: 1 a char/block device
 * node, 0 anything else but a directory (a regular file is no device: the
 * runtime refuses it), -EISDIR, or a negative errno. */
int res_node_kind(int rootfd, const char *path);
/* Whether path names a char/block device node under the root. */
bool res_node_exists(int rootfd, const char *path);

/* Hex parsing shared by the selector parser and the sysfs readers: optional
 * "0x", 1..max_digits hex digits, nothing else. */
int res_parse_hex(const char *s, unsigned max_digits, uint32_t *ret);

/* "dddd:bb:dd.f", domain 4 to 8 hex digits (VMD domains are 5): a PCI
 * function's sysfs name. */
bool res_is_pci_addr(const char *s);

/* Shorten an over-long ID to RES_ID_MAX with a hash of the full string. */
int res_id_fit(const char *full, char **ret);

/* glob.c: every match of pattern (host-absolute) that is a char/block
 * device node (links followed), host-absolute, sorted. Matches that exist
 * but are no device node (regular files, fifos, sockets; not directories)
 * are appended to *ret_skipped unless it is NULL. */
int res_glob(int rootfd, const char *pattern, struct base_strvec *ret,
             struct base_strvec *ret_skipped);
/* Directories (host-absolute) whose entries decide what pattern matches. */
int res_glob_watch_dirs(int rootfd, const char *pattern, struct base_strvec *out);

/* What a selector's rules said about a candidate they refused: the first
 * rule it fails, in the order the rules are checked. Discovery keeps the
 * hits and, when asked, hands these to explain.c, which prints them: the
 * explanation is the verdict the scan reached, not a second opinion. */
struct res_miss {
        /* The candidate: as the bus names it ("1-1.2", "0000:3b:00.0"), or
         * the path a glob matched. */
        char *device;
        /* The selector key whose rule failed: "usb.product", "pci.driver",
         * "driver", "attrs.idVendor"; "attrs" when no single device of the
         * sysfs chain has all of them; "node" when every rule holds but the
         * device node does not exist; "sysfs" when a node has no sysfs
         * device for the filters to hold on. */
        char *field;
        /* What the rule asks, as the selector spells it; for "node" the
         * node looked for (NULL: none could be named). */
        char *want;
        /* What the device has; NULL when it has none or it cannot be read.
         * For "node", the driver the function is bound to (pci). */
        char *got;
        char *on; /* the device of the sysfs chain got was read on (attrs) */
};
/* Sets every field (each may be NULL) from copies; -ENOMEM. */
int res_miss_make(struct res_miss *ret, const char *device, const char *field, const char *want,
                  const char *got, const char *on);
void res_miss_clear(struct res_miss *m);

/* Distinct fields a selector can fail on: 7 usb/pci keys, 3 filters,
 * "attrs" and one per attribute, "node", "sysfs". */
#define RES_MAX_MISSES (RES_MAX_ATTRS + 16)

/* The first miss of each field, in the order the scan met them, so the
 * earliest miss on any set of fields is the first entry kept whose field
 * is in the set. */
struct res_misses {
        struct res_miss v[RES_MAX_MISSES];
        size_t n;
        size_t candidates; /* devices of the bus, or matches of the first glob */
        int list_err;      /* the bus directory could not be listed: -errno */
};
/* Keeps *m (taking its strings, zeroing it) if no miss of its field is
 * kept yet, else clears it. */
void res_misses_add(struct res_misses *misses, struct res_miss *m);
void res_misses_clear(struct res_misses *misses);

/* sysfs.c: usb and pci selectors. misses (may be NULL) gets why each
 * candidate of the bus was refused. */
int res_discover_usb(int rootfd, const struct res_selector *sel, size_t idx, struct res_devvec *out,
                     struct base_strvec *notes, struct res_misses *misses);
int res_discover_pci(int rootfd, const struct res_selector *sel, size_t idx, struct res_devvec *out,
                     struct base_strvec *notes, struct res_misses *misses);
/* Identity of the hardware device behind a device node, via
 * /sys/dev/{char,block}/MAJ:MIN/device; -ENOENT when it has none. */
int res_node_parent(int rootfd, const char *node, uint64_t *ret_dev, uint64_t *ret_ino);

/* scan.c: the devices one selector (number idx) finds, appended to out;
 * notes gets what the operator should hear ("match[<idx>]: ..."), misses
 * (may be NULL) why candidates were refused. */
int res_discover_one(int rootfd, const struct res_selector *sel, size_t idx, struct res_devvec *out,
                     struct base_strvec *notes, struct res_misses *misses);
/* explain.c: res_selector_explain on an open host root. */
int res_explain_at(int rootfd, const struct res_selector *sel, char **ret_msg, size_t *ret_found);

/* paths.c; notes (may be NULL) gets "match[<idx>]: ..." sentences about
 * matches that are not devices, misses (may be NULL) why the first match
 * of the first glob fails the sysfs filters. */
int res_discover_paths(int rootfd, const struct res_selector *sel, size_t idx,
                       struct res_devvec *out, struct base_strvec *notes,
                       struct res_misses *misses);

/* devpath.c: a device's place in sysfs.
 * The canonical sysfs dir of a device node: /sys/dev/{char,block}/MAJ:MIN
 * with its symlink resolved, "/sys/devices/.../ttyUSB0". -ENOENT for a
 * node without one (fake trees, virtual nodes). */
int res_node_devdir(int rootfd, const char *node, char **ret);
/* The same for a node already stat'ed (st_mode, st_rdev). */
int res_devdir_of(int rootfd, unsigned mode, uint64_t rdev, char **ret);
/* "/sys/dev/{char,block}/MAJ:MIN" plus suffix for a node's st_mode and
 * st_rdev; -ENOENT for anything but a char/block node. */
int res_sys_dev_path(unsigned mode, uint64_t rdev, const char *suffix, char **ret);
/* The canonical form of a sysfs dir that may be a symlink (bus/class
 * links): its target, made absolute and without "..". */
int res_sysfs_canon(int rootfd, const char *path, char **ret);
/* Whether the device at devdir (canonical) or its parents pass sel's
 * attrs/subsystem/driver/kernel: 1 yes, 0 no (then *ret_miss, if not
 * NULL, gets the first filter that fails; its device is NULL), or
 * -ENOMEM. Unreadable or binary attributes are a mismatch. */
int res_sysfs_filter(int rootfd, const char *devdir, const struct res_selector *sel,
                     struct res_miss *ret_miss);
/* NUMA node of the nearest device at or above devdir with a numa_node
 * attribute; -1 when none has one. */
int res_sysfs_numa(int rootfd, const char *devdir);
/* "id": "serial": the USB serial (plus "-if<N>" below an interface) or the
 * PCI address of devdir or its nearest parent with one, made an ID.
 * -ENOENT when there is none. */
int res_sysfs_serial_id(int rootfd, const char *devdir, char **ret);

/* Symlinks in path resolved the way RESOLVE_IN_ROOT does ("/" and ".."
 * stop at the host root), host-absolute; at most 40 links. */
int res_resolve(int rootfd, const char *path, char **ret);
/* An ID from any string: characters outside [A-Za-z0-9_.-] become '_',
 * over-long ones are shortened with a hash (as res_id_from_path). */
int res_id_sanitize(const char *raw, char **ret);
