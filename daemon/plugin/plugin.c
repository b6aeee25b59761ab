/* SPDX-License-Identifier: Apache-2.0 */
#include "plugin.h"

#include <stdio.h>
#include <string.h>

#include "cdi.h"
#include "config.h"
#include "resources.h"
#include "log.h"

/* get_preferred_allocation_available: we know the topology and the shares,
 * the kubelet does not. No PreStartContainer work is needed. */
const V1beta1__DevicePluginOptions dp_plugin_options = {
        PROTOBUF_C_MESSAGE_INIT(&v1beta1__device_plugin_options__descriptor),
        .pre_start_required = 0,
        .get_preferred_allocation_available = 1,
};

void dp_plugin_free(struct dp_plugin *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_extras; i++)
                base_edits_clear(&p->extras[i]);
        free(p->extras);
        free(p->devs);
        free(p->strs);
        free(p->shares);
        free(p->share_strs);
        free(p->kind);
        free(p->spec_file);
        free(p->annotation_key);
        free(p);
}

int dp_plugin_new(const struct cfg_resource *cfg, struct dp_plugin **ret) {
        struct dp_plugin *p = calloc(1, sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        p->cfg = cfg;
        /* The names the resource goes by in CDI, worked out once here:
         * everything that writes, keeps or retires its spec reads them. */
        r = cdi_kind_from_resource(cfg->name, &p->kind);
        if (r >= 0)
                r = cdi_spec_file_name(p->kind, &p->spec_file);
        if (r >= 0)
                r = cdi_annotation_key(cfg->name, &p->annotation_key);
        if (r < 0) {
                dp_plugin_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

/* The length of a plugin's string block: it ends with the strings of the
 * device stored last. */
static size_t strs_len(const struct dp_plugin *p) {
        size_t len = 0;

        for (size_t i = 0; i < p->n_devs; i++) {
                const char *end = dp_device_id(p, i);
                for (size_t k = 0; k <= p->devs[i].n_nodes; k++)
                        end = dp_str_next(end);
                if ((size_t)(end - p->strs) > len)
                        len = (size_t)(end - p->strs);
        }
        return len;
}

/* Only the extras some device uses are copied, so a table that a series
 * of reloads with new edits grew does not grow for ever. */
int dp_plugin_clone(const struct dp_plugin *old, const struct cfg_resource *cfg,
                    struct dp_plugin **ret) {
        _cleanup_free_ uint32_t *map =
                calloc(old->n_extras + 1, sizeof(*map)); /* index + 1, 0: none yet */
        struct dp_plugin *p = NULL;
        size_t len = strs_len(old);
        int r = map ? dp_plugin_new(cfg, &p) : -ENOMEM;

        if (r < 0)
                return r;
        p->devs = malloc((old->n_devs + 1) * sizeof(*p->devs));
        p->strs = len ? malloc(len) : NULL;
        p->extras = calloc(old->n_extras + 1, sizeof(*p->extras));
        if (!p->devs || (len && !p->strs) || !p->extras) {
                dp_plugin_free(p);
                return -ENOMEM;
        }
        if (old->n_devs)
                memcpy(p->devs, old->devs, old->n_devs * sizeof(*p->devs));
        if (len)
                memcpy(p->strs, old->strs, len);
        p->n_devs = old->n_devs;
        for (size_t i = 0; i < p->n_devs; i++) {
                uint16_t x = old->devs[i].extras;
                if (!map[x]) {
                        r = base_edits_copy(&old->extras[x], &p->extras[p->n_extras]);
                        p->n_extras++;
                        if (r < 0) {
                                dp_plugin_free(p);
                                return r;
                        }
                        map[x] = (uint32_t)p->n_extras;
                }
                p->devs[i].extras = (uint16_t)(map[x] - 1);
        }
        /* No share table: the next dp_plugin_update builds it for the new
         * shares; the same devices get the same share IDs. */
        p->n_ids = cfg->shares == 1 ? p->n_devs : 0;
        p->generation = old->generation;
        p->held = old->held;
        memcpy(p->events, old->events, sizeof(p->events));
        *ret = p;
        return 0;
}

/* A string block under construction; offsets must fit a uint32_t. */
struct strbuf {
        char *s;
        size_t len, cap;
};

static int strbuf_add(struct strbuf *b, const char *s, size_t len, uint32_t *ret_off) {
        if (b->len + len + 1 > UINT32_MAX)
                return -E2BIG;
        if (!b->s || b->len + len + 1 > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 256;
                while (cap < b->len + len + 1)
                        cap *= 2;
                char *n = realloc(b->s, cap);
                if (!n)
                        return -ENOMEM;
                b->s = n;
                b->cap = cap;
        }
        if (ret_off)
                *ret_off = (uint32_t)b->len;
        memcpy(b->s + b->len, s, len);
        b->s[b->len + len] = '\0';
        b->len += len + 1;
        return 0;
}

/* The block, shrunk to fit: it lives as long as the list does. */
static char *strbuf_take(struct strbuf *b) {
        char *s = b->len ? realloc(b->s, b->len) : NULL;
        if (!s)
                s = b->s;
        *b = (struct strbuf){ 0 };
        return s;
}

/* The index of src's extras in the plugin's table, added if new. */
static int intern_extras(struct dp_plugin *p, const struct res_device *src, uint16_t *ret) {
        struct base_edits *x;
        int r;

        for (size_t i = 0; i < p->n_extras; i++)
                if (base_edits_equal(&p->extras[i], &src->edits)) {
                        *ret = (uint16_t)i;
                        return 0;
                }
        if (p->n_extras > UINT16_MAX)
                return -E2BIG;
        x = realloc(p->extras, (p->n_extras + 1) * sizeof(*x));
        if (!x)
                return -ENOMEM;
        p->extras = x;
        r = base_edits_copy(&src->edits, &p->extras[p->n_extras]);
        if (r < 0)
                return r;
        *ret = (uint16_t)p->n_extras++;
        return 0;
}

/* NUMA nodes beyond int16_t do not exist; read one as no affinity. */
static int16_t numa_of(int node) {
        return node >= 0 && node <= INT16_MAX ? (int16_t)node : -1;
}

/* Whether src has exactly the nodes of device dev. */
static bool same_nodes(const struct dp_plugin *p, size_t dev, const struct res_device *src) {
        const char *node = dp_device_id(p, dev);

        if (p->devs[dev].n_nodes != src->n_nodes)
                return false;
        for (size_t i = 0; i < src->n_nodes; i++) {
                node = dp_str_next(node);
                if (strcmp(node, src->nodes[i]) != 0)
                        return false;
        }
        return true;
}

static bool same_device(const struct dp_plugin *p, size_t dev, const struct res_device *src,
                        uint16_t extras) {
        const struct dp_device *d = &p->devs[dev];

        return d->numa_node == numa_of(src->numa_node) && d->extras == extras &&
               same_nodes(p, dev, src);
}

/* Device dev of p, strings and all, into the new block. */
static int keep_device(const struct dp_plugin *p, size_t dev, struct dp_device *d,
                       struct strbuf *b) {
        const char *id = dp_device_id(p, dev), *end = id;

        for (size_t i = 0; i <= p->devs[dev].n_nodes; i++)
                end = dp_str_next(end);
        *d = p->devs[dev];
        return strbuf_add(b, id, (size_t)(end - id) - 1, &d->str);
}

static int new_device(const struct res_device *src, uint16_t extras, struct dp_device *d,
                      struct strbuf *b) {
        int r;

        if (src->n_nodes > UINT16_MAX)
                return -E2BIG;
        *d = (struct dp_device){ .numa_node = numa_of(src->numa_node),
                                 .n_nodes = (uint16_t)src->n_nodes,
                                 .extras = extras,
                                 .healthy = true,
                                 .spec_stale = true };
        r = strbuf_add(b, src->id, strlen(src->id), &d->str);
        for (size_t i = 0; r >= 0 && i < src->n_nodes; i++)
                r = strbuf_add(b, src->nodes[i], strlen(src->nodes[i]), NULL);
        return r;
}

const char *dp_plugin_id(const struct dp_plugin *p, size_t i) {
        return p->shares ? p->share_strs + p->shares[i].str : dp_device_id(p, i);
}

size_t dp_plugin_id_dev(const struct dp_plugin *p, size_t i) {
        return p->shares ? p->shares[i].dev : i;
}

/* The index of id among n IDs sorted by strcmp, name(p, i) the i-th. */
static int find_sorted(const struct dp_plugin *p, size_t n,
                       const char *(*name)(const struct dp_plugin *, size_t), const char *id,
                       size_t *ret) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(name(p, mid), id);
                if (c == 0) {
                        *ret = mid;
                        return 0;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -ENOENT;
}

int dp_plugin_find_id(const struct dp_plugin *p, const char *id, size_t *ret) {
        return find_sorted(p, p->n_ids, dp_plugin_id, id, ret);
}

int dp_plugin_qualified(const struct dp_plugin *p, size_t dev, char **ret) {
        _cleanup_free_ char *name = NULL;
        int r = cdi_device_name(dp_device_id(p, dev), &name);
        return r < 0 ? r : cdi_qualified_name(p->kind, name, ret);
}

static int cmp_share(const void *a, const void *b, void *strs) {
        return strcmp((const char *)strs + ((const struct dp_share *)a)->str,
                      (const char *)strs + ((const struct dp_share *)b)->str);
}

/* The share IDs of devs, sorted. Only called with shares > 1. */
static int build_shares(const struct dp_plugin *p, const struct dp_device *devs, size_t n_devs,
                        const char *strs, struct dp_share **ret, char **ret_strs, size_t *ret_n) {
        unsigned shares = p->cfg->shares;
        _cleanup_free_ struct dp_share *ids = calloc(n_devs * shares + 1, sizeof(*ids));
        struct strbuf b = { 0 };
        size_t n = 0, w = 0;
        int r = ids ? 0 : -ENOMEM;

        for (size_t i = 0; r >= 0 && i < n_devs; i++)
                for (unsigned k = 0; r >= 0 && k < shares; k++) {
                        _cleanup_free_ char *id = NULL;
                        r = res_share_id(strs + devs[i].str, k, shares, &id);
                        if (r >= 0)
                                r = strbuf_add(&b, id, strlen(id), &ids[n].str);
                        ids[n++].dev = (uint32_t)i;
                }
        if (r < 0) {
                free(b.s);
                return r;
        }
        qsort_r(ids, n, sizeof(*ids), cmp_share, b.s);
        /* A share ID can spell another device's ID ("fuse-1" vs share 1 of
         * "fuse"); the first wins and the clash is dropped, never served
         * twice. */
        for (size_t i = 0; i < n; i++) {
                if (w > 0 && cmp_share(&ids[w - 1], &ids[i], b.s) == 0) {
                        log_with(
                                LOG_WARN,
                                &(struct log_fields){ .resource = p->cfg->name,
                                                      .device = b.s + ids[i].str },
                                "resource \"%s\": device ID \"%s\" is ambiguous, dropped one of its devices",
                                p->cfg->name, b.s + ids[i].str);
                        continue;
                }
                ids[w++] = ids[i];
        }
        *ret = TAKE_PTR(ids);
        *ret_strs = strbuf_take(&b);
        *ret_n = w;
        return 0;
}

int dp_plugin_list(const struct dp_plugin *p, uint8_t **ret, size_t *ret_len) {
        V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
        V1beta1__Device *devs = calloc(p->n_ids + 1, sizeof(*devs));
        V1beta1__Device **ptrs = calloc(p->n_ids + 1, sizeof(*ptrs));
        V1beta1__TopologyInfo *topo = calloc(p->n_devs + 1, sizeof(*topo));
        V1beta1__NUMANode *nodes = calloc(p->n_devs + 1, sizeof(*nodes));
        V1beta1__NUMANode **node_ptrs = calloc(p->n_devs + 1, sizeof(*node_ptrs));
        uint8_t *buf = NULL;
        int r = -ENOMEM;

        if (!devs || !ptrs || !topo || !nodes || !node_ptrs)
                goto out;
        for (size_t i = 0; i < p->n_devs; i++) {
                v1beta1__numanode__init(&nodes[i]);
                nodes[i].id = p->devs[i].numa_node;
                node_ptrs[i] = &nodes[i];
                v1beta1__topology_info__init(&topo[i]);
                topo[i].n_nodes = 1;
                topo[i].nodes = &node_ptrs[i];
        }
        size_t n = 0;
        for (size_t i = 0; i < p->n_ids; i++) {
                size_t dev = dp_plugin_id_dev(p, i);
                const struct dp_device *d = &p->devs[dev];
                /* An ID the spec on disk lacks would fail in the runtime
                 * once allocated: not offered until the spec is written. */
                if ((p->held && !d->in_spec) || d->gone)
                        continue;
                v1beta1__device__init(&devs[n]);
                devs[n].id = (char *)dp_plugin_id(p, i);
                devs[n].health =
                        d->healthy && !(p->held && d->spec_stale) ? "Healthy" : "Unhealthy";
                /* No topology at all for devices without NUMA affinity:
                 * an empty list would read as "fits no NUMA node". */
                if (d->numa_node >= 0)
                        devs[n].topology = &topo[dev];
                ptrs[n] = &devs[n];
                n++;
        }
        resp.n_devices = n;
        resp.devices = ptrs;
        size_t len = v1beta1__list_and_watch_response__get_packed_size(&resp);
        if (!ret) {
                *ret_len = len;
                r = 0;
                goto out;
        }
        if (len > (size_t)DP_MAX_MESSAGE) {
                r = -EMSGSIZE;
                goto out;
        }
        buf = malloc(len + 1);
        if (!buf)
                goto out;
        v1beta1__list_and_watch_response__pack(&resp, buf);
        *ret = buf;
        *ret_len = len;
        r = 0;
out:
        free(devs);
        free(ptrs);
        free(topo);
        free(nodes);
        free(node_ptrs);
        return r;
}

void dp_plugin_hold(struct dp_plugin *p) {
        if (p->held)
                return;
        p->held = true;
        for (size_t i = 0; i < p->n_devs; i++)
                if (p->devs[i].spec_stale) {
                        p->generation++;
                        return;
                }
}

void dp_plugin_spec_on_disk(struct dp_plugin *p, const bool *defined, const bool *same) {
        bool changed = false;

        for (size_t i = 0; i < p->n_devs; i++) {
                struct dp_device *d = &p->devs[i];
                bool stale = !same[i];
                changed |= d->in_spec != defined[i] || d->spec_stale != stale;
                d->in_spec = defined[i];
                d->spec_stale = stale;
        }
        if (changed && p->held)
                p->generation++;
}

void dp_plugin_spec_written(struct dp_plugin *p) {
        bool was_held = p->held;

        p->held = false;
        for (size_t i = 0; i < p->n_devs; i++) {
                p->devs[i].in_spec = true;
                p->devs[i].spec_stale = false;
        }
        if (was_held)
                p->generation++;
}

/* Both lists are sorted by ID, so one merge pass builds the new device
 * table and string block; the plugin changes only once all of it worked. */
static int cmp_src(const void *a, const void *b) {
        return strcmp((*(const struct res_device *const *)a)->id,
                      (*(const struct res_device *const *)b)->id);
}

/* The devices to merge, sorted by ID: everything found, plus, of devices
 * refused for sharing an ID, the one this plugin already serves under it.
 * An ID keeps meaning the same device; a newcomer that clashes waits. */
static int merge_sources(const struct dp_plugin *p, const struct res_devlist *found,
                         const struct res_device ***ret, size_t *ret_n) {
        const struct res_device **v = calloc(found->n + found->n_clashes + 1, sizeof(*v));
        size_t n = 0, kept = 0;

        if (!v)
                return -ENOMEM;
        for (size_t j = 0; j < found->n; j++)
                v[n++] = &found->devs[j];
        for (size_t k = 0; k < found->n_clashes; k++) {
                size_t dev;
                const struct res_device *c = &found->clashes[k];
                if (dp_plugin_find_dev(p, c->id, &dev) == 0 && same_nodes(p, dev, c)) {
                        v[n++] = c;
                        kept++;
                }
        }
        if (kept)
                qsort(v, n, sizeof(*v), cmp_src);
        *ret = v;
        *ret_n = n;
        return 0;
}

bool dp_plugin_id_taken(const struct dp_plugin *p, size_t dev, const struct res_device *src) {
        return src->id_is_path && src->n_nodes > 0 && p->devs[dev].n_nodes > 0 &&
               strcmp(dp_str_next(dp_device_id(p, dev)), src->nodes[0]) != 0;
}

int dp_plugin_find_dev(const struct dp_plugin *p, const char *id, size_t *ret) {
        return find_sorted(p, p->n_devs, dp_device_id, id, ret);
}

/* The new device table replaces the old one, which it was built from. */
static void install_table(struct dp_plugin *p, struct dp_device *devs, size_t n, struct strbuf *b,
                          struct dp_share *shares, char *share_strs, size_t n_ids) {
        free(p->devs);
        free(p->strs);
        free(p->shares);
        free(p->share_strs);
        p->devs = devs;
        p->n_devs = n;
        p->strs = strbuf_take(b);
        p->shares = shares;
        p->share_strs = share_strs;
        p->n_ids = n_ids;
}

/* The merged table (*devs, n devices, their strings in b) in place of the
 * old one, taking *devs and b's block on success: shares are built again
 * when a device was added (or none were made yet), else kept. */
static int install_merged(struct dp_plugin *p, struct dp_device **devs, size_t n, struct strbuf *b,
                          bool added) {
        struct dp_share *shares = NULL;
        char *share_strs = NULL;
        size_t n_ids = 0;

        if ((added || !p->shares) && p->cfg->shares > 1) {
                int r = build_shares(p, *devs, n, b->s, &shares, &share_strs, &n_ids);
                if (r < 0)
                        return r;
        }
        if (p->cfg->shares == 1)
                n_ids = n;
        else if (!shares) { /* same devices in the same places: keep the IDs */
                shares = TAKE_PTR(p->shares);
                share_strs = TAKE_PTR(p->share_strs);
                n_ids = p->n_ids;
        }
        /* Room was made for every old and every found device. */
        struct dp_device *fit = realloc(*devs, (n + 1) * sizeof(**devs));
        if (fit)
                *devs = fit;
        install_table(p, TAKE_PTR(*devs), n, b, shares, share_strs, n_ids);
        return 0;
}

int dp_plugin_update(struct dp_plugin *p, const struct res_devlist *found, bool *ret_changed) {
        _cleanup_free_ struct dp_device *devs =
                calloc(p->n_devs + found->n + found->n_clashes + 1, sizeof(*devs));
        _cleanup_free_ const struct res_device **srcs = NULL;
        struct strbuf b = { 0 };
        bool changed = p->generation == 0, added = false;
        size_t i = 0, j = 0, n = 0, n_srcs = 0;
        int r = devs ? merge_sources(p, found, &srcs, &n_srcs) : -ENOMEM;
        uint64_t appeared = 0, vanished = 0, recovered = 0;

        while (r >= 0 && (i < p->n_devs || j < n_srcs)) {
                const struct res_device *src = j < n_srcs ? srcs[j] : NULL;
                int c = !src ? -1 : i == p->n_devs ? 1 : strcmp(dp_device_id(p, i), src->id);
                struct dp_device *d = &devs[n++];
                uint16_t extras;

                /* Listed before and gone now, or its ID wanted by another
                 * device (refused: the ID keeps its device): it stays,
                 * Unhealthy. */
                if (c < 0 || (c == 0 && dp_plugin_id_taken(p, i, src))) {
                        r = keep_device(p, i, d, &b);
                        changed |= d->healthy;
                        vanished += d->healthy;
                        d->healthy = false;
                        i++;
                        j += c == 0;
                        continue;
                }
                r = intern_extras(p, src, &extras);
                if (r < 0)
                        break;
                if (c == 0 && same_device(p, i, src, extras)) {
                        r = keep_device(p, i, d, &b);
                        changed |= !d->healthy;
                        recovered += !d->healthy;
                        d->healthy = true;
                        d->gone = false; /* named again */
                } else {
                        /* A device whose nodes changed keeps its ID in the
                         * spec on disk, with the old nodes. */
                        bool in_spec = c == 0 && p->devs[i].in_spec;
                        if (c == 0)
                                recovered += !p->devs[i].healthy;
                        else
                                appeared++;
                        r = new_device(src, extras, d, &b);
                        d->in_spec = in_spec;
                        changed = true;
                        added |= c > 0;
                }
                i += c == 0;
                j++;
        }
        if (r >= 0)
                r = install_merged(p, &devs, n, &b, added);
        if (r < 0) {
                free(b.s);
                return r;
        }
        if (changed)
                p->generation++;
        p->events[0] += appeared;
        p->events[1] += vanished;
        p->events[2] += recovered;
        *ret_changed = changed;
        return 0;
}

void dp_plugin_retire(struct dp_plugin *p, const struct res_devlist *named_before, size_t *ret_n) {
        size_t n = 0, dev;

        for (size_t j = 0; j < named_before->n; j++) {
                /* The same device, not another one wanting its ID. */
                if (dp_plugin_find_dev(p, named_before->devs[j].id, &dev) < 0 ||
                    !same_nodes(p, dev, &named_before->devs[j]))
                        continue;
                struct dp_device *d = &p->devs[dev];
                /* Healthy: the new selectors found it too. */
                if (d->healthy || d->gone)
                        continue;
                d->gone = true;
                n++;
        }
        if (n)
                p->generation++;
        *ret_n = n;
}

bool dp_plugin_has_gone(const struct dp_plugin *p) {
        for (size_t i = 0; i < p->n_devs; i++)
                if (p->devs[i].gone)
                        return true;
        return false;
}

int dp_plugin_forget(struct dp_plugin *p, const bool *forget) {
        _cleanup_free_ struct dp_device *devs = calloc(p->n_devs + 1, sizeof(*devs));
        struct dp_share *shares = NULL;
        char *share_strs = NULL;
        struct strbuf b = { 0 };
        size_t n = 0, n_ids = 0;
        int r = devs ? 0 : -ENOMEM;

        for (size_t i = 0; r >= 0 && i < p->n_devs; i++)
                if (!(forget[i] && p->devs[i].gone))
                        r = keep_device(p, i, &devs[n++], &b);
        if (r >= 0 && p->cfg->shares > 1)
                r = build_shares(p, devs, n, b.s, &shares, &share_strs, &n_ids);
        if (r < 0) {
                free(b.s);
                return r;
        }
        if (p->cfg->shares == 1)
                n_ids = n;
        install_table(p, TAKE_PTR(devs), n, &b, shares, share_strs, n_ids);
        return 0;
}

/* Bind mounts from the selector: read-only ones stay read-only, and none
 * may carry set-uid binaries or device nodes in. */
static int spec_extras(const struct base_edits *d, struct cdi_edits *edits) {
        int r = base_strv_copy(d->env, &edits->env);
        if (r < 0)
                return r;
        if (!d->n_mounts)
                return 0;
        edits->mounts = calloc(d->n_mounts, sizeof(*edits->mounts));
        if (!edits->mounts)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_mounts; i++) {
                struct cdi_mount *m = &edits->mounts[i];
                struct base_strvec opts = { 0 };
                edits->n_mounts = i + 1;
                m->host_path = strdup(d->mounts[i].host_path);
                m->container_path = strdup(d->mounts[i].container_path);
                if (!m->host_path || !m->container_path)
                        return -ENOMEM;
                const char *o[] = { "rbind", "nosuid", "nodev",
                                    d->mounts[i].read_only ? "ro" : "rw" };
                for (size_t j = 0; j < ELEMENTSOF(o); j++) {
                        r = base_strvec_push_dup(&opts, o[j]);
                        if (r < 0) {
                                base_strvec_clear(&opts);
                                return r;
                        }
                }
                m->options = base_strvec_take(&opts);
        }
        return 0;
}

int dp_plugin_spec(const struct dp_plugin *p, struct cdi_spec *ret) {
        struct cdi_spec spec = { 0 };
        int r = -ENOMEM;

        spec.kind = strdup(p->kind);
        spec.devices = calloc(p->n_devs + 1, sizeof(*spec.devices));
        if (!spec.kind || !spec.devices)
                goto fail;
        for (size_t i = 0; i < p->n_devs; i++) {
                const struct base_edits *x = dp_device_extras(p, i);
                struct cdi_device *cd = &spec.devices[i];
                const char *node = dp_device_id(p, i);
                spec.n_devices = i + 1;
                r = cdi_device_name(node, &cd->name);
                if (r < 0)
                        goto fail;
                r = -ENOMEM;
                cd->edits.nodes = calloc(p->devs[i].n_nodes + 1, sizeof(*cd->edits.nodes));
                if (!cd->edits.nodes)
                        goto fail;
                for (size_t j = 0; j < p->devs[i].n_nodes; j++) {
                        node = dp_str_next(node);
                        cd->edits.n_nodes = j + 1;
                        cd->edits.nodes[j].path = strdup(node);
                        if (!cd->edits.nodes[j].path ||
                            base_node_access_copy(&x->node, &cd->edits.nodes[j].access) < 0)
                                goto fail;
                }
                if (spec_extras(x, &cd->edits) < 0)
                        goto fail;
        }
        *ret = spec;
        return 0;
fail:
        cdi_spec_free(&spec);
        return r;
}
