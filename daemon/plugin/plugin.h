/* SPDX-License-Identifier: Apache-2.0 */
/* dp_plugin: one resource's devices and the answers to its RPCs, as pure
 * functions on protobuf-c messages (the gRPC plumbing lives in server.c).
 * Not thread-safe: callers hold the daemon lock. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base.h"
#include "deviceplugin.pb-c.h"

/* Largest message either side of a gRPC call accepts (rpc.h enforces it
 * on the wire; the answers here are sized against it); matches grpc's
 * default receive limit, stated here so the bound is ours and visible. */
#define DP_MAX_MESSAGE (4 * 1024 * 1024)

struct cfg_resource;
struct res_device;
struct res_devlist;
struct cdi_spec;

/* Twelve bytes a device: its strings live in the plugin's string block
 * at offset str, the ID then each host-absolute node, NUL-terminated. */
struct dp_device {
        uint32_t str;
        int16_t numa_node; /* -1: no NUMA affinity */
        uint16_t n_nodes;
        uint16_t extras; /* index into the plugin's extras */
        bool healthy : 1;
        /* Against the CDI spec last written: in_spec, the ID is defined
         * there; spec_stale, with other nodes or edits than now. Only
         * read while the plugin holds its list (a spec write failed). */
        bool in_spec : 1;
        bool spec_stale : 1;
        /* No longer named by the config (a reload narrowed a selector):
         * never listed or allocated again, kept only in the CDI spec
         * until no pod holds it (dp_plugin_forget), or back if a later
         * config names it again. */
        bool gone : 1;
};

/* With shares > 1: an allocatable ID, one share of device dev. */
struct dp_share {
        uint32_t dev;
        uint32_t str; /* offset in share_strs */
};

struct dp_plugin {
        const struct cfg_resource *cfg;
        /* Its CDI kind and spec file are cfg's (names.c worked them out). */
        char *annotation_key;   /* "cdi.k8s.io/cdiplug_<resource>" */
        struct dp_device *devs; /* sorted by ID */
        size_t n_devs;
        char *strs;
        /* What the selectors add to their devices. Devices point at one
         * shared copy: a resource has few selectors and may have 10,000
         * devices. */
        struct base_edits *extras;
        size_t n_extras;
        /* The allocatable IDs: with one share, the devices' own IDs. */
        size_t n_ids;
        struct dp_share *shares; /* sorted by ID; NULL with one share */
        char *share_strs;
        uint64_t generation; /* bumped on every change of the list */
        bool held;           /* the spec could not be written: list only what it defines */
        uint64_t events[3];  /* devices appeared, vanished, recovered (DP_EV_*) */
};

static inline const char *dp_device_id(const struct dp_plugin *p, size_t dev) {
        return p->strs + p->devs[dev].str;
}

/* The string after s in a block: a device's first node follows its ID. */
static inline const char *dp_str_next(const char *s) {
        return s + strlen(s) + 1;
}

static inline const struct base_edits *dp_device_extras(const struct dp_plugin *p, size_t dev) {
        return &p->extras[p->devs[dev].extras];
}

/* cfg's names prepared (dp_names_prepare), or -EINVAL. */
int dp_plugin_new(const struct cfg_resource *cfg, struct dp_plugin **ret);
void dp_plugin_free(struct dp_plugin *p);
/* A copy of old's devices under new settings cfg (same name), to update
 * with a fresh discovery: every device old ever listed stays known under
 * its ID, so a reload keeps what each ID means. */
int dp_plugin_clone(const struct dp_plugin *old, const struct cfg_resource *cfg,
                    struct dp_plugin **ret);

/* Merge a fresh discovery: devices found are Healthy (new ones are added),
 * known devices not found stay listed as Unhealthy, so capacity does not
 * jump and a returning device comes back under the same ID. Of devices
 * refused for sharing an ID (found->clashes), the one already listed under
 * that ID with the same nodes stays: an ID never changes meaning. */
int dp_plugin_update(struct dp_plugin *p, const struct res_devlist *found, bool *ret_changed);
/* After a reload's dp_plugin_update: devices named_before (what the old
 * selectors find now) that the new ones no longer find are gone: out of
 * the list, in the spec. A device found by neither (unplugged) stays
 * listed Unhealthy, as on a hotplug. *ret_n: how many went. Bumps the
 * generation when the list changes. */
void dp_plugin_retire(struct dp_plugin *p, const struct res_devlist *named_before, size_t *ret_n);
/* Whether any device is gone (so kept in the spec for a pod). */
bool dp_plugin_has_gone(const struct dp_plugin *p);
/* Drop gone device dev for good when forget[dev] (no pod holds it): its
 * spec entry goes with the next spec write. 0 or -ENOMEM (nothing
 * changed). */
int dp_plugin_forget(struct dp_plugin *p, const bool *forget);
/* Whether src wants the ID of listed device dev but is another device:
 * its ID names its path (res_device.id_is_path) and dev is at another
 * path. Such a device is refused while dev stays listed. */
bool dp_plugin_id_taken(const struct dp_plugin *p, size_t dev, const struct res_device *src);
/* The index of the device (not share) with this ID; -ENOENT if none. */
int dp_plugin_find_dev(const struct dp_plugin *p, const char *id, size_t *ret);

/* Allocatable ID i (0 <= i < n_ids, sorted) and the index of its device. */
const char *dp_plugin_id(const struct dp_plugin *p, size_t i);
size_t dp_plugin_id_dev(const struct dp_plugin *p, size_t i);
/* The index of the allocatable ID named id: 0, or -ENOENT. */
int dp_plugin_find_id(const struct dp_plugin *p, const char *id, size_t *ret);

/* The fully-qualified CDI name of device dev ("kind=name"), malloc'd. */
int dp_plugin_qualified(const struct dp_plugin *p, size_t dev, char **ret);

/* After the CDI spec failed to be written, the list holds back what the
 * file on disk lacks: devices it does not define are left out, devices it
 * defines with other nodes or edits are listed Unhealthy. Once a spec is
 * written, everything is listed again. Both bump the generation when the
 * list changes. */
void dp_plugin_hold(struct dp_plugin *p);
/* What the spec on disk defines, read back (cdi_spec_compare on
 * dp_plugin_spec's devices, which are devs in order): defined[i] and
 * same[i] for devs[i]. For a spec this run never wrote (a full disk at
 * start-up), so the held list offers what that file defines, not nothing.
 * Bumps the generation when the held list changes. */
void dp_plugin_spec_on_disk(struct dp_plugin *p, const bool *defined, const bool *same);
void dp_plugin_spec_written(struct dp_plugin *p);

/* The ListAndWatchResponse of the current generation, packed, malloc'd;
 * -EMSGSIZE when it would pass DP_MAX_MESSAGE (the kubelet reads
 * with gRPC's default 4 MiB limit and fails the stream on a bigger one). With ret NULL, only
 * *ret_len is set: the packed size, whatever it is. */
int dp_plugin_list(const struct dp_plugin *p, uint8_t **ret, size_t *ret_len);

/* The CDI spec for every device the plugin has ever listed. */
int dp_plugin_spec(const struct dp_plugin *p, struct cdi_spec *ret);

/* The answers. On -EINVAL, err names the request's field that is wrong
 * ("container_requests[1]"; "" for the request as a whole) and what is
 * wrong with it, for the caller to clear; "FIELD: MESSAGE" goes to the
 * client as the gRPC status message (dp_answer_error_text). With
 * err_device not NULL, *err_device is then the device ID it is about
 * (malloc'd, cut like the message), or NULL when it is about none, for the
 * log line. */
int dp_allocate(const struct dp_plugin *p, const V1beta1__AllocateRequest *req,
                V1beta1__AllocateResponse **ret, struct base_field_error *err, char **err_device);
int dp_preferred(const struct dp_plugin *p, const V1beta1__PreferredAllocationRequest *req,
                 V1beta1__PreferredAllocationResponse **ret, struct base_field_error *err,
                 char **err_device);
/* "FIELD: MESSAGE", or MESSAGE for the request as a whole, malloc'd; NULL
 * when err holds nothing or memory is short. */
char *dp_answer_error_text(const struct base_field_error *err);
void dp_allocate_response_free(V1beta1__AllocateResponse *resp);
void dp_preferred_response_free(V1beta1__PreferredAllocationResponse *resp);

/* Options we send in Register and answer in GetDevicePluginOptions. */
extern const V1beta1__DevicePluginOptions dp_plugin_options;

/* Logging discovery's notes once (daemon/notes.c). */

struct base_strvec;
struct dp_plugin;
struct res_devlist;

/* What found has to say, one sentence each, appended to lines: its notes,
 * then one line per group of devices that want one ID, then (with p) the
 * devices refused because p already serves their ID for another device.
 * 0 or -ENOMEM (lines cleared). */
int dp_notes_lines(const struct res_devlist *found, const struct dp_plugin *p,
                   struct base_strvec *lines);

/* Log each of found's notes and ID clashes (as warnings, prefixed with the
 * resource name) that is not in *logged, then make *logged the current
 * set (free with base_strv_free). p (may be NULL) tells which clashing device
 * the plugin kept. 0 or -ENOMEM. */
int dp_notes_log(char ***logged, const char *resource, const struct res_devlist *found,
                 const struct dp_plugin *p);

/* Warnings about what the devices found would do, for check and serve:
 * devices two resources both offer, and lists near the kubelet's limit. */

struct cfg_config;
struct dp_plugin;

/* Log a warning for each device (by its first node) that more than one
 * of the plugins lists, naming both resources and the node: the first 10,
 * then how many more. Returns how many such devices there are. */
size_t dp_warn_overlaps(struct dp_plugin *const *plugins, size_t n);

/* Log a warning when the plugin's list reaches the kubelet's message
 * limit, or half of it (hotplug could then push it over). Returns 1 when
 * it warned, else 0. */
int dp_warn_list_size(const struct dp_plugin *p);

/* check: discover every resource's devices under host_root and warn as
 * above. 0, or a negative errno when discovery failed (logged as a
 * warning: check's verdict is about the config). */
int dp_check_devices(const char *host_root, const struct cfg_config *cfg);

/* Node Feature Discovery (nfd.c). The devices a node counts as having:
 * healthy and not gone. */
size_t dp_nfd_count(const struct dp_plugin *p);
/* The feature file for these plugins (in order): "<resource>.present=true
 * or false" and "<resource>.count=N" lines, malloc'd in *ret; a resource
 * whose name would make too long a label gets a comment instead. */
int dp_nfd_render(const struct dp_plugin *const *plugins, size_t n, char **ret);
