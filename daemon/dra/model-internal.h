/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the files of the DRA model (names.c, devices.c, health.c,
 * claims.c, checkpoint.c); not for the servers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dra.h"
#include "plugin.h"

/* Strings from the peer (the API server, the kubelet) are cut in
 * messages. */
#define DRA_STR_FMT "\"%.80s\""

/* The device name of id into out; its length, 0 for an empty ID. */
size_t dra_name_into(const char *id, char out[DRA_DEVICE_NAME_MAX + 1]);

/* The second name of an ID whose name is another's: its start as in
 * dra_name_into (up to 46 characters), '-' and the 64-bit FNV-1a of the
 * ID as 16 hex digits; its length. */
size_t dra_alt_name_into(const char *id, char out[DRA_DEVICE_NAME_MAX + 1]);

/* Whether s[0..len) is a DNS-1123 subdomain, or label. */
bool dra_is_subdomain(const char *s, size_t len);
bool dra_is_label(const char *s, size_t len);

/* Every allocatable ID's device name, and which IDs a clash leaves out:
 * of IDs with one name, the first in ID order keeps it, so a name means
 * the same ID whatever the devices' health; the others are named
 * dra_alt_name_into, and only an ID whose second name clashes too is
 * left out. */
struct dra_names {
        char *block;
        uint32_t *off;     /* per ID: its name in block */
        bool *dropped;     /* per ID */
        const char **ids;  /* per ID, while building */
        uint32_t *by_name; /* the kept IDs, sorted by name */
        size_t n_ids, n_kept;
        struct dra_clash *clashes;
        size_t n_clashes;
};
int dra_names_build(const struct dp_plugin *p, struct dra_names *ret);
void dra_names_clear(struct dra_names *n);
static inline const char *dra_names_get(const struct dra_names *n, size_t id) {
        return n->block + n->off[id];
}

/* How dp_plugin_list lists allocatable ID i: not at all (held back
 * because the spec on disk lacks it, or no longer named by the config),
 * Unhealthy, or Healthy. */
enum dra_listing { DRA_UNLISTED, DRA_UNHEALTHY, DRA_HEALTHY };
static inline enum dra_listing dra_listing(const struct dp_plugin *p, size_t i) {
        const struct dp_device *d = &p->devs[dp_plugin_id_dev(p, i)];

        if ((p->held && !d->in_spec) || d->gone)
                return DRA_UNLISTED;
        return d->healthy && !(p->held && d->spec_stale) ? DRA_HEALTHY : DRA_UNHEALTHY;
}
