/* SPDX-License-Identifier: Apache-2.0 */
/* cfg: the daemon's JSON configuration. Parsing is all-or-nothing: any
 * mistake yields -EINVAL and a cfg_error naming the JSON path of the field. */
#pragma once

#include <stddef.h>

struct res_selector;

/* Allocate answer modes, combinable per resource. */
enum {
        CFG_ALLOC_CDI_CRI = 1 << 0,         /* names in cdi_devices */
        CFG_ALLOC_CDI_ANNOTATIONS = 1 << 1, /* names in a cdi.k8s.io/ annotation */
        CFG_ALLOC_DEVICE_SPECS = 1 << 2,    /* plain DeviceSpecs, envs, mounts */
};

/* GetPreferredAllocation: which of the kubelet's available IDs to pick. */
enum cfg_policy {
        CFG_POLICY_PACKED, /* fill one NUMA node (and one shared device) first */
        CFG_POLICY_SPREAD, /* balance across NUMA nodes and shared devices */
        CFG_POLICY_NONE,   /* the kubelet's own order */
};

struct cfg_resource {
        char *name;        /* kubelet extended resource, "example.com/serial" */
        char *socket_name; /* "cdiplug-example.com-serial.sock" */
        struct res_selector **selectors;
        size_t n_selectors;
        unsigned shares; /* allocatable IDs per device, >= 1 */
        unsigned alloc_modes;
        enum cfg_policy policy;
        /* The resource's JSON without "allocate" and "policy": what decides
         * its devices and their edits. A reload compares it to tell a
         * resource to re-discover from one it leaves alone. */
        char *settings_json;
};

enum cfg_log_format { CFG_LOG_UNSET, CFG_LOG_TEXT, CFG_LOG_JSON };
/* "text" or "json"; CFG_LOG_UNSET for anything else. */
enum cfg_log_format cfg_log_format_parse(const char *s);

struct cfg_config {
        struct cfg_resource *resources;
        size_t n_resources;
        char *user;                     /* "NAME|UID[:GID]" or NULL */
        char *metrics_address;          /* "metrics.address": NULL unset, "" off */
        char *pod_resources_socket;     /* "metrics.pod_resources_socket", or NULL */
        enum cfg_log_format log_format; /* "log_format" */
};

struct cfg_error {
        char *field; /* JSON path, e.g. "resources[1].shares"; "" for the document */
        char *msg;
};

#define CFG_MAX_BYTES (1024 * 1024)
#define CFG_MAX_RESOURCES 256
#define CFG_MAX_SHARES 1024

int cfg_parse(const char *text, size_t len, struct cfg_config **ret, struct cfg_error *err);
int cfg_load(const char *path, struct cfg_config **ret, struct cfg_error *err);
void cfg_free(struct cfg_config *cfg);
/* Free what one resource holds (a reload keeps a removed one's). */
void cfg_resource_clear(struct cfg_resource *res);
void cfg_error_clear(struct cfg_error *err);

/* The kubelet's rule for extended resource names; NULL when valid, else
 * a static message saying what is wrong. */
const char *cfg_resource_name_problem(const char *name);
