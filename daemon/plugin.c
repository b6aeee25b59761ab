#include "plugin.h"

#include <stdio.h>
#include <string.h>

#include "cdi.h"
#include "config.h"
#include "resources.h"
#include "util.h"

/* get_preferred_allocation_available: we know the topology and the shares,
 * the kubelet does not. No PreStartContainer work is needed. */
const V1beta1__DevicePluginOptions dp_plugin_options = {
        PROTOBUF_C_MESSAGE_INIT(&v1beta1__device_plugin_options__descriptor),
        .pre_start_required = 0,
        .get_preferred_allocation_available = 1,
};

static void device_clear(struct dp_device *d) {
        free(d->id);
        strv_free(d->nodes);
        strv_free(d->env);
        for (size_t i = 0; i < d->n_mounts; i++) {
                free(d->mounts[i].host_path);
                free(d->mounts[i].container_path);
        }
        free(d->mounts);
        free(d->permissions);
        free(d->cdi_name);
        free(d->qualified);
        memset(d, 0, sizeof(*d));
}

static void ids_clear(struct dp_plugin *p) {
        for (size_t i = 0; i < p->n_ids; i++)
                free(p->ids[i].id);
        free(p->ids);
        p->ids = NULL;
        p->n_ids = 0;
}

void dp_plugin_free(struct dp_plugin *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_devs; i++)
                device_clear(&p->devs[i]);
        free(p->devs);
        ids_clear(p);
        free(p->kind);
        free(p->annotation_key);
        free(p->list);
        free(p);
}

/* SPEC.md: "cdi.k8s.io/" then at most 63 characters of a label name,
 * by convention "<plugin>_<device>". Resource names can be longer (a
 * 253-character domain), so a long one keeps its start and gets a hash
 * of the whole name, which keeps keys distinct and ending alphanumeric. */
static int annotation_key(const char *resource, char **ret) {
        char name[64];
        uint32_t h = 2166136261u;
        int n = snprintf(name, sizeof(name), "cdiplug_%s", resource);

        for (const char *c = resource; *c; c++)
                h = (h ^ (uint8_t)*c) * 16777619u;
        if (n < 0)
                return -EINVAL;
        if ((size_t)n >= sizeof(name))
                snprintf(name + 54, sizeof(name) - 54, "-%08x", h);
        for (char *c = name; *c; c++)
                if (*c == '/')
                        *c = '-';
        return xasprintf(ret, "cdi.k8s.io/%s", name);
}

int dp_plugin_new(const struct cfg_resource *cfg, struct dp_plugin **ret) {
        struct dp_plugin *p = calloc(1, sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        p->cfg = cfg;
        r = cdi_kind_from_resource(cfg->name, &p->kind);
        if (r >= 0)
                r = annotation_key(cfg->name, &p->annotation_key);
        if (r < 0) {
                dp_plugin_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

static int find_dev(const struct dp_plugin *p, const char *id, size_t *ret) {
        size_t lo = 0, hi = p->n_devs;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcmp(p->devs[mid].id, id);
                if (c == 0) {
                        *ret = mid;
                        return 0;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret = lo;
        return -ENOENT;
}

static int device_fill(struct dp_plugin *p, struct dp_device *d, const struct res_device *src) {
        size_t n = 0;
        int r;

        d->id = strdup(src->id);
        if (!d->id)
                return -ENOMEM;
        for (size_t i = 0; i < src->n_nodes; i++) {
                char *s = strdup(src->nodes[i]);
                if (!s || strv_push(&d->nodes, &n, s) < 0) {
                        free(s);
                        return -ENOMEM;
                }
        }
        d->n_nodes = n;
        n = 0;
        for (char **e = src->env; e && *e; e++) {
                char *s = strdup(*e);
                if (!s || strv_push(&d->env, &n, s) < 0) {
                        free(s);
                        return -ENOMEM;
                }
        }
        if (src->n_mounts) {
                d->mounts = calloc(src->n_mounts, sizeof(*d->mounts));
                if (!d->mounts)
                        return -ENOMEM;
                for (size_t i = 0; i < src->n_mounts; i++) {
                        d->n_mounts = i + 1;
                        d->mounts[i].host_path = strdup(src->mounts[i].host_path);
                        d->mounts[i].container_path = strdup(src->mounts[i].container_path);
                        d->mounts[i].read_only = src->mounts[i].read_only;
                        if (!d->mounts[i].host_path || !d->mounts[i].container_path)
                                return -ENOMEM;
                }
        }
        if (src->permissions && !(d->permissions = strdup(src->permissions)))
                return -ENOMEM;
        d->numa_node = src->numa_node;
        d->healthy = true;
        r = cdi_device_name(src->id, &d->cdi_name);
        if (r < 0)
                return r;
        return cdi_qualified_name(p->kind, d->cdi_name, &d->qualified);
}

static bool same_nodes(const struct dp_device *d, const struct res_device *src) {
        if (d->n_nodes != src->n_nodes || d->numa_node != src->numa_node)
                return false;
        for (size_t i = 0; i < d->n_nodes; i++)
                if (strcmp(d->nodes[i], src->nodes[i]) != 0)
                        return false;
        return true;
}

static int cmp_alloc_id(const void *a, const void *b) {
        return strcmp(((const struct dp_alloc_id *)a)->id, ((const struct dp_alloc_id *)b)->id);
}

const struct dp_alloc_id *dp_plugin_find_id(const struct dp_plugin *p, const char *id) {
        const struct dp_alloc_id key = {.id = (char *)id};
        return p->n_ids ? bsearch(&key, p->ids, p->n_ids, sizeof(*p->ids), cmp_alloc_id) : NULL;
}

static int rebuild_ids(struct dp_plugin *p) {
        unsigned shares = p->cfg->shares;
        struct dp_alloc_id *ids = calloc(p->n_devs * shares + 1, sizeof(*ids));
        size_t n = 0;

        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_devs; i++)
                for (unsigned k = 0; k < shares; k++) {
                        int r = res_share_id(p->devs[i].id, k, shares, &ids[n].id);
                        if (r < 0) {
                                for (size_t j = 0; j < n; j++)
                                        free(ids[j].id);
                                free(ids);
                                return r;
                        }
                        ids[n++].dev = i;
                }
        qsort(ids, n, sizeof(*ids), cmp_alloc_id);
        /* A share ID can spell another device's ID ("fuse-1" vs share 1 of
         * "fuse"); the first wins and the clash is dropped, never served
         * twice. */
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
                if (w > 0 && strcmp(ids[w - 1].id, ids[i].id) == 0) {
                        log_warn("resource \"%s\": device ID \"%s\" is ambiguous, dropped one of its devices",
                                 p->cfg->name, ids[i].id);
                        free(ids[i].id);
                        continue;
                }
                ids[w++] = ids[i];
        }
        ids_clear(p);
        p->ids = ids;
        p->n_ids = w;
        return 0;
}

static int pack_list(struct dp_plugin *p) {
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
        for (size_t i = 0; i < p->n_ids; i++) {
                const struct dp_device *d = &p->devs[p->ids[i].dev];
                v1beta1__device__init(&devs[i]);
                devs[i].id = p->ids[i].id;
                devs[i].health = d->healthy ? "Healthy" : "Unhealthy";
                /* No topology at all for devices without NUMA affinity:
                 * an empty list would read as "fits no NUMA node". */
                if (d->numa_node >= 0)
                        devs[i].topology = &topo[p->ids[i].dev];
                ptrs[i] = &devs[i];
        }
        resp.n_devices = p->n_ids;
        resp.devices = ptrs;
        size_t len = v1beta1__list_and_watch_response__get_packed_size(&resp);
        buf = malloc(len + 1);
        if (!buf)
                goto out;
        v1beta1__list_and_watch_response__pack(&resp, buf);
        free(p->list);
        p->list = buf;
        p->list_len = len;
        r = 0;
out:
        free(devs);
        free(ptrs);
        free(topo);
        free(nodes);
        free(node_ptrs);
        return r;
}

int dp_plugin_update(struct dp_plugin *p, const struct res_devlist *found, bool *ret_changed) {
        bool changed = p->generation == 0;
        size_t idx;
        int r;

        for (size_t i = 0; i < p->n_devs; i++)
                p->devs[i].healthy = false;
        for (size_t i = 0; i < found->n; i++) {
                const struct res_device *src = &found->devs[i];
                struct dp_device fresh = {0};

                if (find_dev(p, src->id, &idx) == 0) {
                        struct dp_device *d = &p->devs[idx];
                        if (same_nodes(d, src)) {
                                d->healthy = true;
                                continue;
                        }
                        r = device_fill(p, &fresh, src);
                        if (r < 0) {
                                device_clear(&fresh);
                                return r;
                        }
                        device_clear(d);
                        *d = fresh;
                        changed = true;
                        continue;
                }
                r = device_fill(p, &fresh, src);
                if (r < 0) {
                        device_clear(&fresh);
                        return r;
                }
                struct dp_device *devs = realloc(p->devs, (p->n_devs + 1) * sizeof(*devs));
                if (!devs) {
                        device_clear(&fresh);
                        return -ENOMEM;
                }
                memmove(&devs[idx + 1], &devs[idx], (p->n_devs - idx) * sizeof(*devs));
                devs[idx] = fresh;
                p->devs = devs;
                p->n_devs++;
                changed = true;
        }
        /* Health flips count as changes too; compare with the last list. */
        if (!changed) {
                _cleanup_free_ uint8_t *old = TAKE_PTR(p->list);
                size_t old_len = p->list_len;
                r = pack_list(p);
                if (r < 0) {
                        p->list = TAKE_PTR(old);
                        return r;
                }
                changed = old_len != p->list_len || memcmp(old, p->list, old_len) != 0;
        } else {
                r = rebuild_ids(p);
                if (r >= 0)
                        r = pack_list(p);
                if (r < 0)
                        return r;
        }
        if (changed)
                p->generation++;
        *ret_changed = changed;
        return 0;
}

/* Bind mounts from the selector: read-only ones stay read-only, and none
 * may carry set-uid binaries or device nodes in. */
static int spec_extras(const struct dp_device *d, struct cdi_edits *edits) {
        size_t n = 0;

        for (char **e = d->env; e && *e; e++) {
                char *s = strdup(*e);
                if (!s || strv_push(&edits->env, &n, s) < 0) {
                        free(s);
                        return -ENOMEM;
                }
        }
        if (!d->n_mounts)
                return 0;
        edits->mounts = calloc(d->n_mounts, sizeof(*edits->mounts));
        if (!edits->mounts)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_mounts; i++) {
                struct cdi_mount *m = &edits->mounts[i];
                size_t k = 0;
                edits->n_mounts = i + 1;
                m->host_path = strdup(d->mounts[i].host_path);
                m->container_path = strdup(d->mounts[i].container_path);
                if (!m->host_path || !m->container_path)
                        return -ENOMEM;
                const char *opts[] = {"rbind", "nosuid", "nodev", d->mounts[i].read_only ? "ro" : "rw"};
                for (size_t j = 0; j < ELEMENTSOF(opts); j++) {
                        char *s = strdup(opts[j]);
                        if (!s || strv_push(&m->options, &k, s) < 0) {
                                free(s);
                                return -ENOMEM;
                        }
                }
        }
        return 0;
}

int dp_plugin_spec(const struct dp_plugin *p, struct cdi_spec *ret) {
        struct cdi_spec spec = {0};
        int r = -ENOMEM;

        spec.kind = strdup(p->kind);
        spec.devices = calloc(p->n_devs + 1, sizeof(*spec.devices));
        if (!spec.kind || !spec.devices)
                goto fail;
        for (size_t i = 0; i < p->n_devs; i++) {
                const struct dp_device *d = &p->devs[i];
                struct cdi_device *cd = &spec.devices[i];
                spec.n_devices = i + 1;
                cd->name = strdup(d->cdi_name);
                cd->edits.nodes = calloc(d->n_nodes + 1, sizeof(*cd->edits.nodes));
                if (!cd->name || !cd->edits.nodes)
                        goto fail;
                for (size_t j = 0; j < d->n_nodes; j++) {
                        cd->edits.n_nodes = j + 1;
                        cd->edits.nodes[j].path = strdup(d->nodes[j]);
                        if (!cd->edits.nodes[j].path ||
                            (d->permissions && !(cd->edits.nodes[j].permissions = strdup(d->permissions))))
                                goto fail;
                }
                if (spec_extras(d, &cd->edits) < 0)
                        goto fail;
        }
        *ret = spec;
        return 0;
fail:
        cdi_spec_free(&spec);
        return r;
}
