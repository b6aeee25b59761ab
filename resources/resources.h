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

struct cJSON;

/* Kubelet limit on device IDs. */
#define RES_ID_MAX 63

/* A bind mount a selector asks for, copied verbatim from the config. */
struct res_mount {
        char *host_path;      /* host-absolute */
        char *container_path; /* absolute */
        bool read_only;
};

struct res_device {
        char *id;          /* stable across restarts, at most RES_ID_MAX */
        char **nodes;      /* host-absolute device nodes, NULL-terminated */
        size_t n_nodes;
        int numa_node;     /* -1 when the device has no NUMA affinity */
        /* Added after the first version; copied from the selector that
         * found the device, for the daemon to put into the CDI spec. */
        char **env;        /* "KEY=VALUE", NULL-terminated; NULL when none */
        struct res_mount *mounts; /* NULL when n_mounts is 0 */
        size_t n_mounts;
        char *permissions; /* subset of "rwm" for every node; NULL: default */
};

struct res_devlist {
        struct res_device *devs; /* sorted by id, ids unique */
        size_t n;
};

struct res_selector;

/* Parse one entry of a resource's "match" list. On -EINVAL, *ret_field is
 * the offending key relative to the entry ("" for the entry itself) and
 * *ret_msg says what is wrong; both are malloc'd, for the caller to free. */
int res_selector_parse(const struct cJSON *entry, struct res_selector **ret,
                       char **ret_field, char **ret_msg);
void res_selector_free(struct res_selector *sel);

/* All devices the selectors match now, under host_root. */
int res_discover(const char *host_root, struct res_selector *const *sels,
                 size_t n_sels, struct res_devlist *ret);
void res_devlist_free(struct res_devlist *list);

/* Host-root-prefixed directories whose entries can change what res_discover
 * finds, for inotify; NULL-terminated, free with res_strv_free. */
int res_watch_dirs(const char *host_root, struct res_selector *const *sels,
                   size_t n_sels, char ***ret_dirs);
void res_strv_free(char **strv);

/* Device ID derived from a device node path below /dev: the path relative
 * to /dev with '/' turned into '-', characters outside [A-Za-z0-9_.-]
 * turned into '_', and names too long for the kubelet shortened with a
 * hash so they stay unique and stable. */
int res_id_from_path(const char *host_path, char **ret_id);

/* ID of share k (0-based) of a device shared "shares" times: the device ID
 * itself when shares is 1, else "<id>-<k>" (shortened as above if needed). */
int res_share_id(const char *dev_id, unsigned k, unsigned shares, char **ret_id);
