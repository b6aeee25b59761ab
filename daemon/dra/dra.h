/* SPDX-License-Identifier: Apache-2.0 */
/* dra: the Dynamic Resource Allocation model, pure functions on a
 * resource's dp_plugin and on cJSON (no grpc, no network): the names a
 * resource and its devices go by in ResourceSlices, the slice devices, the
 * CDI IDs a claim's devices prepare to, the checkpoint of prepared claims
 * and the device health the kubelet is streamed. Not thread-safe: callers
 * hold the daemon lock, as for dp_plugin. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dp_plugin;
struct res_identity;

/* The API's limits (resource.k8s.io/v1): a pool name, a device name (a
 * DNS label), a string attribute value, attributes and capacities a
 * device. */
#define DRA_POOL_NAME_MAX 253
#define DRA_DEVICE_NAME_MAX 63
#define DRA_ATTR_STRING_MAX 64
#define DRA_ATTRS_MAX 32

/* The pool of resource on node: "<node>/<resource>", its '/'-separated
 * parts each a DNS subdomain. node must be one (Kubernetes node names
 * are), else -EINVAL. A part of resource that is not one (the kubelet's
 * name part allows uppercase, '_' and "..") becomes its device name
 * (dra_device_name): "example.com/Serial_Port" is "example.com" and
 * "serial-port-<8 hex>". -ENAMETOOLONG past DRA_POOL_NAME_MAX. */
int dra_pool_name(const char *node, const char *resource, char **ret);

/* The slice device name of an allocatable ID, a DNS label: lowercase;
 * every character not [a-z0-9] becomes '-'; leading and trailing '-'
 * trimmed; if that changed anything or is longer than 63, it is the first
 * up to 54 characters of it (no trailing '-'), '-' and the 32-bit FNV-1a
 * of the ID as 8 hex digits (only the hex when nothing is left). Fixed
 * forever: names outlive the process in slices and claims. -EINVAL for an
 * empty ID. Where two IDs of a resource get one name (the 32-bit hash of
 * two rewritten IDs with one start, or an ID that is another's rewritten
 * name), the first in ID order keeps it and the later is named with the
 * first up to 46 characters, '-' and the 64-bit FNV-1a of its ID as 16
 * hex digits, for as long as both are there. */
int dra_device_name(const char *id, char **ret);

/* The DRA driver's sockets (names.c): the registration socket
 * <kubelet root>/plugins_registry/<driver>[-<instance>]-reg.sock and the
 * endpoint <kubelet root>/plugins/<driver>/dra[-<instance>].sock. A
 * registration path past a unix socket's 107 bytes (a driver name of
 * 51-63 characters with an instance tag under /var/lib/kubelet) takes a
 * hashed name instead, as upstream's plugin helper does: the driver
 * name's start, '-', its 32-bit FNV-1a as 8 hex digits, then
 * [-<instance>]-reg.sock (the kubelet knows the driver by GetInfo's
 * answer, not by the file's name). -ENAMETOOLONG, with *ret_msg, when a
 * path still does not fit (a long kubelet root): what check reports and
 * serve refuses alike. */
struct dra_socket_paths {
        char *registry_dir;  /* <root>/plugins_registry */
        char *registry_name; /* the file's name there */
        char *registry_path;
        char *plugin_dir; /* <root>/plugins/<driver> */
        char *endpoint;
};
int dra_socket_paths(const char *kubelet_root, const char *driver, const char *instance,
                     struct dra_socket_paths *ret, char **ret_msg);
void dra_socket_paths_clear(struct dra_socket_paths *p);
/* Whether a file name in plugins_registry (ctx: the driver name) or in
 * the plugin dir (ctx unused) is one an instance of this driver binds:
 * for removing the sockets of instances that died. */
bool dra_registry_sock_match(const char *name, void *driver);
bool dra_endpoint_sock_match(const char *name, void *unused);

/* Why resource cannot be served under DRA (a static sentence), or NULL:
 * its name must fit the "resource" attribute that DeviceClasses select on
 * (at most DRA_ATTR_STRING_MAX bytes). */
const char *dra_resource_problem(const char *resource);

/* The ResourceSlice spec.devices[] array (v1: name and attributes, no
 * "basic" wrapper) for p: one entry per allocatable ID that dp_plugin_list
 * lists Healthy (an unhealthy device leaves the slice, so the scheduler
 * stops picking it; it comes back when healthy), in ID order. Attributes
 * (in the driver's domain): "resource" (string), "path" (string, the first
 * node, when at most 64 bytes), "numaNode" (int, when known) and, with
 * shares > 1, "device" (string, the physical device's ID, so a selector
 * can pick shares of one device). When two IDs get one device name, the
 * later gets its second name (see dra_device_name); when that clashes too
 * (never seen: it takes a 64-bit hash collision or a hostile ID) it is
 * left out of the slice and the answer is how many were (for the caller
 * to log, dra_name_clashes says which); else 0. -ENAMETOOLONG when
 * resource fails dra_resource_problem. */
int dra_devices_json(const struct dp_plugin *p, const char *resource, cJSON **ret);
/* The same, each device also carrying its hardware identity, when
 * idents (one per device of p, p->devs order; NULL: none known) has one:
 * a PCI function "pciVendorID" and "pciDeviceID" ("0x8086") and
 * "resource.kubernetes.io/pciBusID" (its address, "0000:00:1f.0", when in
 * that form), a USB device "usbVendorID" and "usbProductID" ("0x0403") and
 * "usbSerial" (when it has one of at most 64 bytes). */
int dra_devices_json_ids(const struct dp_plugin *p, const char *resource,
                         const struct res_identity *idents, cJSON **ret);

/* The allocatable ID index of slice device name in p: 0 or -ENOENT (also
 * for an ID left out for a clash, which is never published).
 * O(log n) for a name that is its ID unchanged, O(n) hashing for a
 * rewritten one, the whole name table for a clash's second name: for
 * many lookups, dra_index_find. */
int dra_device_find(const struct dp_plugin *p, const char *name, size_t *ret_id);

/* The same through a name table built for p and kept in *cache (NULL at
 * first), rebuilt when p's IDs changed: O(log n) a lookup. Free the
 * cache with dra_index_free. 0, -ENOENT or -ENOMEM. */
struct dra_index;
int dra_index_find(struct dra_index **cache, const struct dp_plugin *p, const char *name,
                   size_t *ret_id);
void dra_index_free(struct dra_index *idx);

/* An ID of p left out for a device name clash, and the ID that has the
 * name (indices of allocatable IDs). *ret is malloc'd, NULL when none.
 * 0 or -ENOMEM. */
struct dra_clash {
        size_t dropped, kept;
};
int dra_name_clashes(const struct dp_plugin *p, struct dra_clash **ret, size_t *ret_n);

/* Device health, for both health services (v1alpha1 and v1
 * DRAResourceHealth): one entry per allocatable ID the slices publish
 * while it is healthy (dp_plugin_list lists it, Healthy or Unhealthy), in
 * ID order; an ID the config no longer names, one the spec on disk lacks
 * and one whose name is another ID's have none, so the list never names a
 * device the slices do not offer. The pool is the resource's
 * (dra_pool_name). */
struct dra_health {
        char name[DRA_DEVICE_NAME_MAX + 1]; /* the slice device name */
        size_t id;                          /* allocatable ID index in p */
        bool healthy;                       /* what the slice offers now */
        char *message; /* malloc'd: why not healthy, naming the node; NULL when healthy */
};
/* The kubelet marks a device Unknown once its last report is older than
 * this (1.34-1.36 always use 30 s, newer ones the timeout each device
 * carries): the list goes out again every DRA_HEALTH_RESEND_S. */
#define DRA_HEALTH_TIMEOUT_S 30
#define DRA_HEALTH_RESEND_S 10
/* *ret is malloc'd (dra_health_list_free). 0 or -ENOMEM/-E2BIG. */
int dra_health(const struct dp_plugin *p, struct dra_health **ret, size_t *ret_n);
void dra_health_list_free(struct dra_health *h, size_t n);

/* Prepare: the CDI device IDs a claim's devices resolve to. */

/* At most this many devices a claim (the API allows 32 allocation
 * results; room is left for it to grow). */
#define DRA_MAX_RESULTS 128

/* One DRA resource of the daemon, as Prepare sees it: its pool, its
 * plugin (read under the daemon lock) and the caller's name table cache
 * for that plugin (NULL at first; dra_index_free when the resource goes). */
struct dra_pool {
        const char *name;
        const struct dp_plugin *p;
        struct dra_index *index;
};

/* One allocated device of a claim for our driver, from
 * status.allocation.devices.results. */
struct dra_result {
        const char *request;
        const char *pool;
        const char *device;
};

/* One prepared device: what the kubelet is answered and what Unprepare
 * must still know after a restart. */
struct dra_device {
        char *request;
        char *pool;
        char *device;
        char **cdi_ids; /* NULL-terminated, at least one */
};

/* One prepared claim: the checkpoint holds these by uid. */
struct dra_claim {
        char *uid;
        char *ns;
        char *name;
        struct dra_device *devices;
        size_t n_devices;
};
void dra_device_clear(struct dra_device *d);
void dra_claim_clear(struct dra_claim *c); /* frees what c holds, leaves it zeroed */
void dra_claims_free(struct dra_claim *claims, size_t n);

/* The prepared devices for results (n_results <= DRA_MAX_RESULTS), in
 * their order: each result's pool must be one of pools, its device an
 * allocatable ID of that pool's plugin that the config still names and the
 * CDI spec on disk defines; its CDI ID is the one Allocate answers
 * (dp_plugin_qualified), and that the slice still publishes (listed
 * Healthy): one that left it since the scheduler chose it is refused, since
 * the container would start without it; a repeated Prepare of a prepared
 * claim never gets here (the checkpoint answers it). -EINVAL with *ret_msg (malloc'd: the claim's
 * error, naming the device and why) when one cannot, -ENOMEM. Updates the
 * pools' index caches. */
int dra_prepare_devices(struct dra_pool *pools, size_t n_pools, const struct dra_result *results,
                        size_t n_results, struct dra_device **ret, size_t *ret_n, char **ret_msg);

/* The checkpoint of prepared claims, as JSON text:
 * {"version": 1, "claims": {"<uid>": {"namespace": "...", "name": "...",
 *   "devices": [{"request": "...", "pool": "...", "device": "...",
 *                "cdiDevices": ["kind=name"]}]}}}.
 * The caller writes it atomically and reads it back whole. */
#define DRA_CHECKPOINT_VERSION 1
/* Its name in <kubelet root>/plugins/<driver>. */
#define DRA_CHECKPOINT_FILE "checkpoint.json"
#define DRA_CHECKPOINT_MAX_CLAIMS 8192
/* What is read back is bounded in bytes and in JSON values (tree nodes,
 * counted before parsing: "[0,0,...]" is 40 times its size as a tree),
 * so loading it stays within the daemon's memory budget (64 MiB as
 * shipped): room for all 8192 claims with a device each, or 145 of 128
 * devices, far past what the pods of one node hold. Encoding refuses what
 * would not load. */
#define DRA_CHECKPOINT_MAX_BYTES (8 * 1024 * 1024)
#define DRA_CHECKPOINT_MAX_VALUES 131072

/* claims[0..n) as checkpoint text, malloc'd, NUL-terminated (*ret_len
 * without it). -EINVAL (with *ret_msg) when a claim would not decode (two
 * with one uid, a field out of bounds), -EFBIG past the size limit,
 * -ENOMEM. */
int dra_checkpoint_encode(const struct dra_claim *claims, size_t n, char **ret, size_t *ret_len,
                          char **ret_msg);
/* Checkpoint text (len bytes, no NUL needed) back to claims (*ret
 * malloc'd: dra_claims_free). Strict: an unknown version, an unknown or
 * repeated key, a missing field, a string out of bounds, more than
 * DRA_CHECKPOINT_MAX_CLAIMS claims or DRA_MAX_RESULTS devices a claim, or
 * text past DRA_CHECKPOINT_MAX_BYTES is -EINVAL with *ret_msg (malloc'd)
 * naming the field and what is wrong; -ENOMEM. */
int dra_checkpoint_decode(const char *text, size_t len, struct dra_claim **ret, size_t *ret_n,
                          char **ret_msg);
/* Would claim c encode and read back (its uid, names and devices within
 * the checkpoint's bounds)? 0, or -EINVAL with *ret_msg naming the field:
 * checked before a claim is recorded, so one bad claim fails alone
 * instead of every later write of the checkpoint. */
int dra_checkpoint_check_claim(const struct dra_claim *c, char **ret_msg);
