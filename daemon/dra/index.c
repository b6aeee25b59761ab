/* SPDX-License-Identifier: Apache-2.0 */
/* A device name -> ID table kept across lookups: a claim request may name
 * 1,000 devices of a plugin with 10,000, and most IDs (anything with an
 * uppercase letter, '_' or '.') get rewritten names, which only a table
 * finds without hashing every ID. */
#include <string.h>

#include "model-internal.h"

/* What the table was built from. Adding an ID bumps the generation
 * (dp_plugin_update); dp_plugin_forget removes gone IDs without a bump but
 * installs new arrays; a reload's clone is another plugin. Every hit is
 * checked against p besides, so a stale table can only miss. */
struct dra_index {
        const struct dp_plugin *p;
        uint64_t generation;
        size_t n_ids;
        const void *devs, *shares;
        struct dra_names names;
};

void dra_index_free(struct dra_index *idx) {
        if (!idx)
                return;
        dra_names_clear(&idx->names);
        free(idx);
}

static bool index_fresh(const struct dra_index *idx, const struct dp_plugin *p) {
        return idx && idx->p == p && idx->generation == p->generation && idx->n_ids == p->n_ids &&
               idx->devs == (const void *)p->devs && idx->shares == (const void *)p->shares;
}

static int index_build(const struct dp_plugin *p, struct dra_index **ret) {
        struct dra_index *idx = calloc(1, sizeof(*idx));
        int r;

        if (!idx)
                return -ENOMEM;
        r = dra_names_build(p, &idx->names);
        if (r < 0) {
                free(idx);
                return r;
        }
        idx->p = p;
        idx->generation = p->generation;
        idx->n_ids = p->n_ids;
        idx->devs = p->devs;
        idx->shares = p->shares;
        *ret = idx;
        return 0;
}

/* Whether id's name, or its second name after a clash, is name. */
static bool names_to(const char *id, const char *name, char again[DRA_DEVICE_NAME_MAX + 1]) {
        if (dra_name_into(id, again) > 0 && strcmp(again, name) == 0)
                return true;
        return dra_alt_name_into(id, again) > 0 && strcmp(again, name) == 0;
}

int dra_index_find(struct dra_index **cache, const struct dp_plugin *p, const char *name,
                   size_t *ret_id) {
        const struct dra_names *n;
        char again[DRA_DEVICE_NAME_MAX + 1];
        size_t lo = 0, hi;

        if (!index_fresh(*cache, p)) {
                struct dra_index *idx;
                int r = index_build(p, &idx);
                if (r < 0)
                        return r;
                dra_index_free(*cache);
                *cache = idx;
        }
        n = &(*cache)->names;
        hi = n->n_kept;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2, id = n->by_name[mid];
                int c = strcmp(dra_names_get(n, id), name);
                if (c == 0) {
                        if (id >= p->n_ids || !names_to(dp_plugin_id(p, id), name, again))
                                return -ENOENT;
                        *ret_id = id;
                        return 0;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -ENOENT;
}
