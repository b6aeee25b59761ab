/* SPDX-License-Identifier: Apache-2.0 */
/* resources: find the host devices behind a resource's "match" selectors.
 *
 * Every read of /dev and /sys happens under a host root (default "/"), and
 * every path handed out is host-absolute, so the daemon works in a container
 * that mounts the host at /host and tests run on fake trees.
 *
 * Functions return 0 or a negative errno; ret_* outputs are written only on
 * success. Nothing here logs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

struct cJSON;

/* Kubelet limit on device IDs. */
#define RES_ID_MAX 63

struct res_device {
        char *id;     /* stable across restarts, at most RES_ID_MAX */
        char **nodes; /* host-absolute device nodes, NULL-terminated */
        size_t n_nodes;
        int numa_node; /* -1 when the device has no NUMA affinity */
        /* Copied from the selector that found the device, for the daemon
         * to put into the CDI spec. */
        struct base_edits edits;
        /* The ID names nodes[0]'s own path ("id": "name", no link): a
         * device at another path is another device, even if its ID is the
         * same (/dev/a/b and /dev/a-b are both "a-b"). */
        bool id_is_path;
        /* The path the selector matched when that is not nodes[0] (a
         * link such as /dev/serial/by-id/...), else NULL. */
        char *matched;
};

struct res_devlist {
        struct res_device *devs; /* sorted by id, ids unique */
        size_t n;
        /* Distinct devices that would share an ID, sorted by ID (then by
         * node); none of them is in devs. The daemon may keep the one it
         * already serves under that ID: an ID never changes meaning. */
        struct res_device *clashes;
        size_t n_clashes;
        /* What the operator should hear about, one sentence each, sorted,
         * unique, each starting "match[<i>]: ": matches that are no device
         * node, devices a selector cannot give an ID, and (unless the
         * selector is "optional") selectors that find nothing, with the
         * reason res_selector_explain gives. NULL-terminated; NULL if none. */
        char **notes;
};

struct res_selector;

/* Parse one entry of a resource's "match" list. On -EINVAL, err (when not
 * NULL) holds the offending key relative to the entry ("" for the entry
 * itself) and what is wrong, for the caller to clear. Field names nest with '.' and '[i]': "usb.vendor", "paths[1]",
 * "mounts[0].hostPath", "env.NAME".
 *
 * An entry is an object with exactly one of:
 *   "path":  "/dev/ttyUSB*"  a glob (fnmatch; '*' skips dotfiles); every
 *            match that is a char/block node (links followed) is one
 *            device, its ID from res_id_from_path of the match. A match
 *            that is a symlink (/dev/serial/by-id/...) is resolved inside
 *            the host root: the node it leads to is injected. Other
 *            matches are skipped, with a note.
 *   "paths": [glob, ...]     1..16 globs; one device per match of the
 *            first. Each further glob adds, per device, its matches with
 *            the same sysfs parent (/sys/dev/{char,block}/MAJ:MIN/device,
 *            e.g. a GPU's card and render node); failing that, its single
 *            match if it has exactly one and that node has no sysfs parent
 *            (control nodes like /dev/nvidiactl, shared by every device);
 *            failing that the first match is not a device. ID and NUMA node
 *            come from the first node.
 *   "usb":   {"vendor": "046d", "product"?: "0825", "serial"?: "..."}
 *            hex as lsusb prints it (1-4 digits, "0x" allowed). One device
 *            per /sys/bus/usb/devices/<port> entry, node /dev/bus/usb/BBB/DDD,
 *            ID "usb-<port>" ("usb-1-1.2": stable per physical port).
 *   "pci":   any of "vendor", "device" (up to 4 hex digits), "class",
 *            "class_mask" (up to 6; mask defaults to ffffff), "driver" (name
 *            of the bound driver). ID is the PCI address ("0000:3b:00.0").
 *            A function bound to vfio-pci has /dev/vfio/<iommu group> and
 *            /dev/vfio/vfio; any other function has the card<N> and renderD<N> nodes
 *            under its sysfs drm/ dir as /dev/dri/<name>, and a function
 *            with neither is not listed. Functions sharing an IOMMU group
 *            are separate devices with the same group node.
 * and optionally, narrowing what it finds by sysfs (the device's dir, from
 * /sys/dev/{char,block}/MAJ:MIN for nodes, then its parents up to
 * /sys/devices; globs in every value):
 *   "attrs": {"idVendor": "0403", "serial": "A12*"}  all on one device of
 *            that chain, like udev's ATTRS{}; names relative, no "..";
 *   "subsystem", "driver", "kernel": each on any device of the chain;
 * how IDs are formed, "id": "name" (default, as above; usb "usb-<port>",
 * pci the address), "serial" (USB serial, "-if<N>" below an interface, or
 * PCI address, of the nearest device of the chain with one) or "link"
 * (the matched link's name; path/paths only); "optional": true (finding
 * nothing is not worth a note); and for every device it finds:
 *   "env": {"NAME": "value"}, "permissions": subset of "rwm",
 *   "mounts": [{"hostPath": "/abs", "containerPath": "/abs", "readOnly"?: bool}],
 *   "mode": "0660" (octal, 0001..0777), "owner"/"group": numeric IDs.
 * Paths must be absolute, without "." or ".." components or a trailing '/'.
 * Unknown keys, duplicate keys and wrong types are errors. */
int res_selector_parse(const struct cJSON *entry, struct res_selector **ret,
                       struct base_field_error *err);
/* The second of the first two members of JSON object obj sharing a key,
 * or NULL: cJSON keeps both, so every reader of a document (the config,
 * its selectors) refuses one through this. */
const struct cJSON *res_json_duplicate_key(const struct cJSON *obj);
void res_selector_free(struct res_selector *sel);

/* Why sel finds what it finds under host_root (NULL means "/"), as one
 * sentence for an operator, malloc'd into *ret_msg. When sel finds no
 * device, the sentence names the first reason found, e.g. "directory
 * /dev/serial/by-id does not exist", "USB device 1-1.2 has vendor 0403 but
 * product 6015, not 6001", "PCI function 0000:3b:00.0 is bound to nvidia,
 * not vfio-pci", "/dev/ttyUSB0 matches the glob but no device in its sysfs
 * path has idVendor=0403". Otherwise it says how many devices it finds
 * ("finds 2 devices: /dev/ttyUSB0, /dev/ttyUSB1"). *ret_found (may be
 * NULL) gets the number of devices found. Reads only; 0 or a negative
 * errno (an unreadable host root, out of memory). */
int res_selector_explain(const char *host_root, const struct res_selector *sel, char **ret_msg,
                         size_t *ret_found);

/* A warning about a valid selector that check should print (NULL if none):
 * a static sentence, e.g. that an owner/group override defeats the
 * runtime giving the node to the container's user. *ret_field gets the key
 * it is about ("owner"). */
const char *res_selector_warning(const struct res_selector *sel, const char **ret_field);

/* All devices the selectors match now, under host_root (NULL means "/").
 * Only nodes that exist are handed out. At most 65536 devices (-E2BIG).
 * numa_node: that of the nearest device in the sysfs chain (the device,
 * then its parents) that has a numa_node attribute: a tty behind a PCI USB
 * controller, a DRM node under its GPU; -1 when none has one.
 * One device node is one device: devices whose first nodes are the same
 * node (same type and st_rdev, stat'ed inside host_root), reached by one
 * path or by several (a link caught by the glob, /dev/ttyUSB* plus
 * /dev/serial/by-id/ *), are listed once, as the first selector in the
 * match list found it (its path, ID and edits); when the paths differ,
 * notes gets one sentence naming them. Devices of "pci" selectors are
 * told apart by their PCI address: functions sharing an IOMMU group share
 * its node. Distinct devices that would share
 * an ID are all left out of devs and listed in clashes: nothing is renamed.
 * Symlinks resolve inside host_root (openat2 RESOLVE_IN_ROOT; on kernels
 * without it, plain openat). */
int res_discover(const char *host_root, struct res_selector *const *sels, size_t n_sels,
                 struct res_devlist *ret);
void res_devlist_free(struct res_devlist *list);

/* Host-root-prefixed directories whose entries can change what res_discover
 * finds, for inotify; NULL-terminated (possibly empty), sorted, unique, free
 * with base_strv_free (base.h).
 * For a glob: the directory above its first glob component (for a literal
 * path, the node's directory), or the nearest existing ancestor if that is
 * missing; plus every existing directory matching the pattern's deeper
 * directory levels (/dev/bus/usb/ * / * gives /dev/bus/usb, /dev/bus/usb/001,
 * ...). The set changes as directories come and go: call again after every
 * event and update the watches. usb watches as /dev/bus/usb/ * / *, pci as
 * /dev/vfio/ * and /dev/dri/ *: sysfs sends no inotify events, the node
 * appearing in devtmpfs is the signal (rebinding a driver without a node
 * change is not seen). */
int res_watch_dirs(const char *host_root, struct res_selector *const *sels, size_t n_sels,
                   char ***ret_dirs);

/* Open dir, one of the directories res_watch_dirs gave for host_root, as
 * an O_PATH descriptor resolved inside host_root: symlinks in it (absolute,
 * relative, "..") never lead out of the root. For the inotify watch on
 * /proc/self/fd/<fd>, which watches what the descriptor resolved to. */
int res_open_watch_dir(const char *host_root, const char *dir, int *ret_fd);

/* The hardware identity of a device node: the nearest device at or above
 * its sysfs dir (/sys/dev/{char,block}/MAJ:MIN, from the node's st_rdev
 * read inside the host root) that is a USB device (idVendor and idProduct)
 * or a PCI function (vendor and device, named by its address). */
enum res_bus { RES_BUS_NONE, RES_BUS_USB, RES_BUS_PCI };
/* Longest USB serial kept; a longer one is left out (serial[0] == 0). */
#define RES_SERIAL_MAX 64
struct res_identity {
        enum res_bus bus;
        uint16_t vendor;                 /* idVendor, or the PCI vendor */
        uint16_t product;                /* idProduct, or the PCI device */
        char address[17];                /* PCI: "0000:00:1f.0" (domain 4 to 8 digits); USB: "" */
        char serial[RES_SERIAL_MAX + 1]; /* USB: the serial if any and printable */
};
/* The identity of node (host-absolute) under host_root (NULL means "/").
 * -ENOENT when neither kind of device is found within 32 sysfs
 * levels (a virtual node, a platform device): no identity, not an error.
 * Reads only, bounded as every sysfs read here. */
int res_device_identity(const char *host_root, const char *node, struct res_identity *ret);

/* Device ID derived from a device node path below /dev: the path relative
 * to /dev with '/' turned into '-', characters outside [A-Za-z0-9_.-]
 * turned into '_', and names too long for the kubelet shortened with a
 * hash so they stay unique and stable: the first 46 characters, '-', and 16
 * hex digits of FNV-1a-64 of the unsanitised relative path (63 in all).
 * A path outside /dev is taken relative to "/" ("/tmp/x" -> "tmp-x").
 * -EINVAL for a relative path or one naming no file ("/dev/"). */
int res_id_from_path(const char *host_path, char **ret_id);

/* ID of share k (0-based) of a device shared "shares" times: the device ID
 * itself when shares is 1, else "<id>-<k>" (shortened as above if needed). */
int res_share_id(const char *dev_id, unsigned k, unsigned shares, char **ret_id);
