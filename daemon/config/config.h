/* SPDX-License-Identifier: Apache-2.0 */
/* cfg: the daemon's JSON configuration. Parsing is all-or-nothing: any
 * mistake yields -EINVAL and a base_field_error naming the JSON path of
 * the field ("resources[1].shares"; "" for the document), for the caller
 * to clear (base_field_error_clear). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

struct res_selector;
struct cJSON;

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

/* Which kubelet API serves a resource ("api"). */
enum cfg_api {
        CFG_API_DEVICE_PLUGIN, /* "device-plugin", the default */
        CFG_API_DRA,           /* "dra": Dynamic Resource Allocation, needs "dra" */
};

struct cfg_resource {
        char *name; /* kubelet extended resource, "example.com/serial" */
        /* Its identity outside the config: worked out once, by
         * dp_names_prepare (names.c), which also refuses two resources
         * sharing one, and only read everywhere else. The parser sets
         * socket_name to the full name (cfg_socket_name_full), which
         * dp_names_prepare shortens when the kubelet dir leaves no room
         * for it; kind and spec_file are NULL until dp_names_prepare. */
        char *kind;        /* CDI kind, "example.com/serial" */
        char *spec_file;   /* its CDI spec's file name, "example.com-serial.json" */
        char *socket_name; /* "cdiplug-example.com-serial.sock" */
        struct res_selector **selectors;
        size_t n_selectors;
        unsigned shares; /* allocatable IDs per device, >= 1 */
        unsigned alloc_modes;
        enum cfg_policy policy;
        enum cfg_api api;
        /* The resource's JSON without "allocate" and "policy": what decides
         * its devices, their edits and the API that serves them ("api"
         * stays in: moving between the APIs re-creates the front end). A
         * reload compares it to tell a resource to re-discover from one it
         * leaves alone. */
        char *settings_json;
        struct cfg_nodes *nodes; /* "nodes": who serves it; NULL: every node */
        size_t index;            /* its place in the file's "resources", for messages */
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
        char *dra_driver;               /* "dra": {"driver"}; NULL: no "dra" section */
        char *nfd_features_dir;         /* "nfd": {"features_dir"}, or NULL */
        bool node_labels; /* a resource selects nodes by label (set before cfg_nodes_select) */
};

#define CFG_MAX_BYTES (1024 * 1024)
#define CFG_MAX_RESOURCES 256
#define CFG_MAX_SHARES 1024
/* The API's limit on a DRA driver name (resource.DriverNameMaxLength). */
#define CFG_MAX_DRIVER 63

int cfg_parse(const char *text, size_t len, struct cfg_config **ret, struct base_field_error *err);
int cfg_load(const char *path, struct cfg_config **ret, struct base_field_error *err);
void cfg_free(struct cfg_config *cfg);
/* Free what one resource holds (a reload keeps a removed one's). */
void cfg_resource_clear(struct cfg_resource *res);

/* The kubelet's rule for extended resource names; NULL when valid, else
 * a static message saying what is wrong. */
const char *cfg_resource_name_problem(const char *name);
/* Whether s[0..len) is a DNS-1123 subdomain: lowercase labels of
 * [a-z0-9-], alphanumeric at both ends, dot-separated, at most 253
 * characters (a resource's domain, a driver, a label key's prefix). */
bool cfg_is_dns_subdomain(const char *s, size_t len);

/* The API server's rule for a DRA driver name (ValidateCSIDriverName,
 * which resource.k8s.io reuses): at most 63 characters, a DNS-1123
 * subdomain once lowercased. NULL when valid, else a static message. */
const char *cfg_driver_name_problem(const char *name);

/* A Node's name is a DNS-1123 subdomain (ValidateNodeName): NULL when
 * valid, else a static message. */
const char *cfg_node_name_problem(const char *name);

/* A resource's "nodes" (nodes.c): which nodes serve it. names: fnmatch
 * globs, one of which the node's name must match; labels: "KEY", "VALUE"
 * pairs, each of which the node must carry. Either NULL: any node. */
struct cfg_nodes {
        char **names;
        char **labels;
};
int cfg_nodes_parse(const struct cJSON *obj, const char *field, struct cfg_nodes **ret,
                    struct base_field_error *err);
void cfg_nodes_free(struct cfg_nodes *n); /* NULL ok */
/* The Kubernetes label rules: NULL when valid, else a static message. */
const char *cfg_label_key_problem(const char *key);
const char *cfg_label_value_problem(const char *value);

enum cfg_node_verdict {
        CFG_NODE_SERVES,    /* the node matches */
        CFG_NODE_SKIPS,     /* the node does not match */
        CFG_NODE_UNDECIDED, /* its name or labels, which the selector needs, are not known */
};
/* Does node (NULL: not known), with labels (a JSON object of the node's
 * labels; NULL: not known), serve a resource of these "nodes" (NULL:
 * every node)? The verdict, with *ret_why (malloc'd) saying why; or
 * -ENOMEM. */
int cfg_nodes_match(const struct cfg_nodes *n, const char *node, const struct cJSON *labels,
                    char **ret_why);
/* Keep only the resources this node serves: fn (NULL: none) hears the
 * verdict on each resource that has "nodes" (idx: its place in the file);
 * the others are removed from cfg. -EINVAL with err when the node would
 * serve two resources of one name. */
typedef void cfg_select_fn(void *ctx, const struct cfg_resource *res, size_t idx,
                           enum cfg_node_verdict v, const char *why);
int cfg_nodes_select(struct cfg_config *cfg, const char *node, const struct cJSON *labels,
                     cfg_select_fn *fn, void *ctx, struct base_field_error *err);

/* "nfd": {"features_dir": "/ABS/DIR"} (nodes.c): where the Node Feature
 * Discovery feature file goes. */
int cfg_nfd_parse(const struct cJSON *obj, char **ret_dir, struct base_field_error *err);

/* "device-plugin" or "dra". */
const char *cfg_api_name(enum cfg_api api);

/* The names a resource goes by outside the config: its CDI kind, spec file
 * and socket file. Every valid kubelet resource name gets names that CDI
 * consumers and unix sockets accept; where that takes a rewrite, or a
 * configuration cannot be served, check, generate and serve say so alike. */

struct cfg_config;

/* The socket file name for a resource under kubelet_dir:
 * "cdiplug-<resource with '/' as '-'>.sock" when "<kubelet_dir>/<that>"
 * fits sun_path (107 bytes and the NUL). Otherwise, since the name is ours
 * to choose: "cdiplug-", the first up to 32 characters of the name part
 * (after the '/'; fewer if the dir leaves less room) and "-", then the
 * 32-bit FNV-1a hash of the whole resource name as 8 hex digits, ".sock".
 * Stable for a given dir. -ENAMETOOLONG when not even
 * "cdiplug-<8 hex>.sock" fits. */
int dp_socket_name(const char *kubelet_dir, const char *resource, char **ret_name);
/* The same with an instance tag (cfg_instance_tag; NULL: none) before
 * ".sock": "cdiplug-example.com-serial-1a2b3c4d.sock", so two instances on
 * one node (a rolling update's old and new pod) never share a socket. */
int dp_socket_name_instance(const char *kubelet_dir, const char *resource, const char *instance,
                            char **ret_name);
/* A pod UID (POD_UID, from the downward API) is at most this long. */
#define CFG_POD_UID_MAX 128
/* Why uid cannot name an instance, or NULL when it can. */
const char *cfg_pod_uid_problem(const char *uid);
/* The instance tag of pod UID uid: its 32-bit FNV-1a hash as 8 hex
 * digits (short enough for every socket path; two pods on one node
 * sharing one is a 1 in 2^32 chance, and even then the inode check on
 * removal keeps each from removing the other's socket). */
void cfg_instance_tag(const char *uid, char ret[static 9]);
/* The full socket file name, "cdiplug-<resource with '/' as '-'>.sock",
 * whatever the dir: what the parser sets and checks for duplicates. */
int cfg_socket_name_full(const char *resource, char **ret_name);

/* The CDI kind and spec file name (when ret_spec_file) of resource
 * (cdi.h's rules): for a name not in the config, such as a removed
 * resource's or one PodResources reports. 0 or a negative errno. */
int cfg_names_of(const char *resource, char **ret_kind, char **ret_spec_file);

/* Work out and check every resource's names before anything is written:
 * its CDI kind (logging, as a warning, a kind that differs from the
 * resource name or needs a cdiVersion newer than 0.5.0) and its spec file
 * name, stored in its kind and spec_file, and when sockets (serve, check)
 * also its socket name under kubelet_dir, which replaces its socket_name.
 * Two resources with one kind, one spec file or one socket are refused.
 * -EINVAL (logged, naming the resources and what to rename) when the
 * configuration cannot be served as it is; the resources after the one
 * refused still get the kind and spec file they have (doctor goes on). */
int dp_names_prepare(struct cfg_config *cfg, const char *kubelet_dir, bool sockets);
/* The same, socket names carrying the instance tag (NULL: none). */
int dp_names_prepare_instance(struct cfg_config *cfg, const char *kubelet_dir, const char *instance,
                              bool sockets);

/* Command-line values, in one place: main.c fills them, the daemon's
 * files read them through d->opts. */

struct dp_options {
        const char *config_path;
        const char *kubelet_dir;  /* --kubelet-dir, else /var/lib/kubelet/device-plugins */
        const char *kubelet_root; /* --kubelet-root, default /var/lib/kubelet */
        const char *kubeconfig;   /* --kubeconfig, or NULL: the in-cluster credentials */
        const char *node_name;    /* --node-name, else $NODE_NAME, or NULL */
        /* $POD_UID (the downward API's metadata.uid), or NULL, and its tag
         * (cfg_instance_tag) that every socket name of this instance
         * carries; NULL: the single-instance names. */
        const char *pod_uid;
        const char *instance;
        bool node_name_from_env; /* node_name is $NODE_NAME's, for messages */
        const char *cdi_dir;
        const char *host_root;
        const char *user;                 /* --user, overrides the config's "user" */
        const char *metrics_address;      /* --metrics-address, overrides "metrics" */
        const char *pod_resources_socket; /* --pod-resources-socket */
        enum cfg_log_format log_format;   /* --log-format, overrides the config's */
        const char *namespace_name;       /* manifests --namespace */
        const char *image;                /* manifests --image */
        bool no_sandbox;
        bool to_stdout;               /* generate --stdout */
        bool json;                    /* doctor --json */
        const char *node_labels;      /* check, generate, doctor --node-labels K=V,... */
        const char *nfd_features_dir; /* serve --nfd-features-dir, overrides "nfd" */
        bool nfd;                     /* manifests --nfd */
};

/* "HOST:PORT" or "[V6]:PORT", numeric host (address.c), for the
 * metrics endpoint; -EINVAL with a static message in *err_msg (written
 * only then, as ret_* only on success). */
int dp_http_parse_address(const char *address, void *ret_sockaddr, unsigned *ret_len,
                          const char **err_msg);
