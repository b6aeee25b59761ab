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
 * empty ID. */
int dra_device_name(const char *id, char **ret);

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
 * can pick shares of one device). When two IDs get one device name (see
 * dra_device_name), the later ID is left out of the slice and the answer is
 * how many were (for the caller to log, dra_name_clashes says which);
 * else 0. -ENAMETOOLONG when resource fails dra_resource_problem. */
int dra_devices_json(const struct dp_plugin *p, const char *resource, cJSON **ret);

/* The allocatable ID index of slice device name in p: 0 or -ENOENT (also
 * for the later of two clashing IDs, which is never published).
 * O(log n) for a name that is its ID unchanged, O(n) hashing for a
 * rewritten one: for many lookups, dra_index_find. */
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
