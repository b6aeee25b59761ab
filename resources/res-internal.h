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

/* Devices one res_discover() call may return; a glob matching all of /dev on a
 * busy host is a configuration mistake, not something to page through. */
#define RES_MAX_DEVICES 65536
/* sysfs attributes are at most a page; anything longer is not sysfs. */
#define RES_ATTR_MAX 4096
/* Globs in one "paths" selector. */
#define RES_MAX_PATHS 16

static inline void res_strvp(char ***p) {
        res_strv_free(*p);
}
#define _cleanup_strv_ _cleanup_(res_strvp)

enum res_sel_kind { RES_SEL_PATH, RES_SEL_PATHS, RES_SEL_USB, RES_SEL_PCI };

struct res_selector {
        enum res_sel_kind kind;
        char **globs;         /* path: one; paths: one or more */
        size_t n_globs;
        /* usb */
        uint16_t usb_vendor, usb_product;
        bool has_usb_product;
        char *usb_serial;     /* NULL: any */
        /* pci */
        uint16_t pci_vendor, pci_device;
        bool has_pci_vendor, has_pci_device, has_pci_class;
        uint32_t pci_class, pci_class_mask;
        char *pci_driver;     /* NULL: any */
        /* edits for every device of this selector */
        char **env;           /* "KEY=VALUE", NULL-terminated, may be NULL */
        struct res_mount *mounts;
        size_t n_mounts;
        char *permissions;    /* NULL: runtime default */
};

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

/* Growable NULL-terminated string vector. */
struct res_strvec {
        char **v;
        size_t n, cap;
};
int res_strvec_push(struct res_strvec *sv, char *s); /* takes s, even on error */
int res_strvec_push_dup(struct res_strvec *sv, const char *s);
void res_strvec_clear(struct res_strvec *sv);

char *res_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Host root handling. rel paths never start with '/'. */
int res_root_open(const char *host_root, int *ret_fd);
/* Open host-absolute or root-relative path under rootfd; absolute symlinks
 * and ".." stay inside the root where the kernel supports openat2. Returns
 * the fd or a negative errno. */
int res_open_in_root(int rootfd, const char *path, int flags);
/* Read a sysfs attribute (at most RES_ATTR_MAX bytes), trailing newline
 * stripped. */
int res_read_attr(int rootfd, const char *path, char **ret);
/* Last component of the symlink at path (e.g. the driver name behind
 * .../driver). */
int res_readlink_base(int rootfd, const char *path, char **ret);
/* Whether path names a device node or regular file under the root. */
bool res_node_exists(int rootfd, const char *path);

/* Hex parsing shared by the selector parser and the sysfs readers: optional
 * "0x", 1..max_digits hex digits, nothing else. */
int res_parse_hex(const char *s, unsigned max_digits, uint32_t *ret);

uint64_t res_hash64(const char *s);
/* Shorten an over-long ID to RES_ID_MAX with a hash of the full string. */
int res_id_fit(const char *full, char **ret);

/* glob.c: every match of pattern (host-absolute) that is a device node or
 * regular file, host-absolute, sorted. */
int res_glob(int rootfd, const char *pattern, struct res_strvec *ret);
/* Directories (host-absolute) whose entries decide what pattern matches. */
int res_glob_watch_dirs(int rootfd, const char *pattern, struct res_strvec *out);

/* sysfs.c */
int res_discover_usb(int rootfd, const struct res_selector *sel, struct res_devvec *out);
int res_discover_pci(int rootfd, const struct res_selector *sel, struct res_devvec *out);
/* Identity of the hardware device behind a device node, via
 * /sys/dev/{char,block}/MAJ:MIN/device; -ENOENT when it has none. */
int res_node_parent(int rootfd, const char *node, uint64_t *ret_dev, uint64_t *ret_ino);
int res_node_numa(int rootfd, const char *node);

/* paths.c */
int res_discover_paths(int rootfd, const struct res_selector *sel, struct res_devvec *out);

/* Copy the selector's env/mounts/permissions into dev. */
int res_device_apply_edits(struct res_device *dev, const struct res_selector *sel);
