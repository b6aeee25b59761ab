/* dp_plugin: one resource's devices and the answers to its RPCs, as pure
 * functions on protobuf-c messages (the gRPC plumbing lives in server.c).
 * Not thread-safe: callers hold the daemon lock. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deviceplugin.pb-c.h"

struct cfg_resource;
struct res_devlist;
struct cdi_spec;

struct dp_mount {
        char *host_path;
        char *container_path;
        bool read_only;
};

struct dp_device {
        char *id;          /* physical device ID */
        char **nodes;      /* host-absolute device nodes, NULL-terminated */
        size_t n_nodes;
        char **env;        /* "KEY=VALUE" from the selector, NULL-terminated or NULL */
        struct dp_mount *mounts;
        size_t n_mounts;
        char *permissions; /* "rwm" subset from the selector, or NULL */
        int numa_node;
        bool healthy;
        char *cdi_name;    /* CDI device name */
        char *qualified;   /* "kind=name" */
};

/* An allocatable kubelet ID: a device, or one share of it. */
struct dp_alloc_id {
        char *id;
        size_t dev;        /* index into devs */
};

struct dp_plugin {
        const struct cfg_resource *cfg;
        char *kind;            /* CDI kind */
        char *annotation_key;  /* "cdi.k8s.io/cdiplug_<resource>" */
        struct dp_device *devs;  /* sorted by id */
        size_t n_devs;
        struct dp_alloc_id *ids; /* sorted by id */
        size_t n_ids;
        uint64_t generation;   /* bumped on every change of the list */
        uint8_t *list;         /* packed ListAndWatchResponse */
        size_t list_len;
};

int dp_plugin_new(const struct cfg_resource *cfg, struct dp_plugin **ret);
void dp_plugin_free(struct dp_plugin *p);

/* Merge a fresh discovery: devices found are Healthy (new ones are added),
 * known devices not found stay listed as Unhealthy, so capacity does not
 * jump and a returning device comes back under the same ID. */
int dp_plugin_update(struct dp_plugin *p, const struct res_devlist *found, bool *ret_changed);

/* The allocatable ID named id, or NULL. */
const struct dp_alloc_id *dp_plugin_find_id(const struct dp_plugin *p, const char *id);

/* The CDI spec for every device the plugin has ever listed. */
int dp_plugin_spec(const struct dp_plugin *p, struct cdi_spec *ret);

/* The answers. On -EINVAL, *ret_msg (malloc'd) says which ID or field is
 * wrong; it goes to the client as the gRPC status message. */
int dp_allocate(const struct dp_plugin *p, const V1beta1__AllocateRequest *req,
                V1beta1__AllocateResponse **ret, char **ret_msg);
int dp_preferred(const struct dp_plugin *p, const V1beta1__PreferredAllocationRequest *req,
                 V1beta1__PreferredAllocationResponse **ret, char **ret_msg);
void dp_allocate_response_free(V1beta1__AllocateResponse *resp);
void dp_preferred_response_free(V1beta1__PreferredAllocationResponse *resp);

/* Options we send in Register and answer in GetDevicePluginOptions. */
extern const V1beta1__DevicePluginOptions dp_plugin_options;
