/* SPDX-License-Identifier: Apache-2.0 */
/* Allocate and GetPreferredAllocation: validate every ID the kubelet sends,
 * then answer in the resource's configured modes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "plugin.h"
#include "log.h"

/* IDs in error messages are cut: they come from the peer. */
#define ID_FMT "\"%.80s\""
#define ID_MAX 80

/* Where a refusal goes: the message for the client, and the ID it is
 * about (device may be NULL: the caller does not want it). */
struct why {
        char **msg;
        char **device;
};

static int invalid_v(const struct why *why, const char *id, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));

static int invalid_v(const struct why *why, const char *id, const char *fmt, va_list ap) {
        char *msg;

        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        *why->msg = msg;
        if (why->device)
                *why->device = id ? strndup(id, ID_MAX) : NULL;
        return -EINVAL;
}

static int invalid(const struct why *why, const char *fmt, ...) _printf_(2, 3);

static int invalid(const struct why *why, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = invalid_v(why, NULL, fmt, ap);
        va_end(ap);
        return r;
}

/* A refusal about one device ID. */
static int invalid_id(const struct why *why, const char *id, const char *fmt, ...) _printf_(3, 4);

static int invalid_id(const struct why *why, const char *id, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = invalid_v(why, id, fmt, ap);
        va_end(ap);
        return r;
}

/* An ID -> index table for one GetPreferredAllocation answer. The kubelet
 * offers every free ID, 10,000 on a big node: a binary search for each
 * (some 14 string compares into a table too big for the cache, and each ID
 * looked up twice) took about 3 ms an answer, this table built for the call
 * a fraction of that. Slots hold index + 1; 0 is empty. */
struct id_table {
        uint32_t *slot;
        size_t mask;
};

/* Below this many IDs a binary search costs less than building a table. */
#define ID_TABLE_MIN 64

static size_t id_hash(const char *s) {
        return base_fnv1a32(s);
}

static int id_table_build(const struct dp_plugin *p, struct id_table *t) {
        size_t cap = 16;

        while (cap < p->n_ids * 2)
                cap <<= 1;
        t->slot = calloc(cap, sizeof(*t->slot));
        if (!t->slot)
                return -ENOMEM;
        t->mask = cap - 1;
        for (size_t i = 0; i < p->n_ids; i++) {
                size_t h = id_hash(dp_plugin_id(p, i)) & t->mask;
                while (t->slot[h])
                        h = (h + 1) & t->mask;
                t->slot[h] = (uint32_t)(i + 1);
        }
        return 0;
}

static int find_id(const struct dp_plugin *p, const struct id_table *t, const char *id,
                   size_t *ret) {
        if (!t || !t->slot)
                return dp_plugin_find_id(p, id, ret);
        for (size_t h = id_hash(id) & t->mask; t->slot[h]; h = (h + 1) & t->mask)
                if (strcmp(dp_plugin_id(p, t->slot[h] - 1), id) == 0) {
                        *ret = t->slot[h] - 1;
                        return 0;
                }
        return -ENOENT;
}

/* Resolve a list of IDs: each known, non-empty, and not already marked in
 * seen (shared across a request, so no ID goes to two containers). Their
 * indices go to idx when it is not NULL. */
static int resolve(const struct dp_plugin *p, const struct id_table *t, char **ids, size_t n,
                   const char *where, bool *seen, size_t *idx, const struct why *why) {
        for (size_t i = 0; i < n; i++) {
                size_t k;
                if (!ids[i][0])
                        return invalid(why, "%s: empty device ID", where);
                if (find_id(p, t, ids[i], &k) < 0)
                        return invalid_id(why, ids[i],
                                          "%s: unknown device ID " ID_FMT " for resource \"%s\"",
                                          where, ids[i], p->cfg->name);
                if (p->devs[dp_plugin_id_dev(p, k)].gone)
                        return invalid_id(why, ids[i],
                                          "%s: device ID " ID_FMT
                                          " of resource \"%s\" is no longer "
                                          "offered: the config does not name it",
                                          where, ids[i], p->cfg->name);
                /* Known but not advertised: the list holds back what the
                 * CDI spec on disk lacks, and its name would not resolve. */
                if (p->held && !p->devs[dp_plugin_id_dev(p, k)].in_spec)
                        return invalid_id(why, ids[i],
                                          "%s: device ID " ID_FMT " of resource \"%s\" is not "
                                          "advertised: its CDI spec could not be written yet",
                                          where, ids[i], p->cfg->name);
                if (seen[k])
                        return invalid_id(why, ids[i], "%s: device ID " ID_FMT " requested twice",
                                          where, ids[i]);
                seen[k] = true;
                if (idx)
                        idx[i] = k;
        }
        return 0;
}

static char *dup_or_null(const char *s, bool *oom) {
        char *d = strdup(s);
        if (!d)
                *oom = true;
        return d;
}

/* device-specs mode: the selectors' env and mounts, which CDI would
 * otherwise carry. A key set twice keeps its first value. */
static int plain_extras(const struct dp_plugin *p, const size_t *devs, size_t n_devs,
                        V1beta1__ContainerAllocateResponse *cr) {
        size_t n_env = 0, n_mounts = 0;
        bool oom = false;

        for (size_t k = 0; k < n_devs; k++) {
                for (char **e = dp_device_extras(p, devs[k])->env; e && *e; e++)
                        n_env++;
                n_mounts += dp_device_extras(p, devs[k])->n_mounts;
        }
        cr->envs = calloc(n_env + 1, sizeof(*cr->envs));
        cr->mounts = calloc(n_mounts + 1, sizeof(*cr->mounts));
        if (!cr->envs || !cr->mounts)
                return -ENOMEM;
        for (size_t k = 0; !oom && k < n_devs; k++) {
                const struct base_edits *d = dp_device_extras(p, devs[k]);
                for (char **e = d->env; !oom && e && *e; e++) {
                        size_t klen = strcspn(*e, "=");
                        bool dup = false;
                        for (size_t i = 0; i < cr->n_envs; i++) {
                                const char *key = cr->envs[i] ? cr->envs[i]->key : NULL;
                                dup |= key && strlen(key) == klen && strncmp(key, *e, klen) == 0;
                        }
                        if (dup)
                                continue;
                        V1beta1__ContainerAllocateResponse__EnvsEntry *en = malloc(sizeof(*en));
                        if (!en)
                                return -ENOMEM;
                        v1beta1__container_allocate_response__envs_entry__init(en);
                        cr->envs[cr->n_envs++] = en;
                        en->key = strndup(*e, klen);
                        en->value = dup_or_null((*e)[klen] ? *e + klen + 1 : "", &oom);
                        oom |= !en->key;
                }
                for (size_t i = 0; !oom && i < d->n_mounts; i++) {
                        V1beta1__Mount *m = malloc(sizeof(*m));
                        if (!m)
                                return -ENOMEM;
                        v1beta1__mount__init(m);
                        cr->mounts[cr->n_mounts++] = m;
                        m->host_path = dup_or_null(d->mounts[i].host_path, &oom);
                        m->container_path = dup_or_null(d->mounts[i].container_path, &oom);
                        m->read_only = d->mounts[i].read_only;
                }
        }
        return oom ? -ENOMEM : 0;
}

/* The distinct devices behind a container's IDs: shares of one device map
 * to one CDI device, named once. */
static size_t request_devices(const struct dp_plugin *p,
                              const V1beta1__ContainerAllocateRequest *creq, size_t *devs) {
        size_t n = 0;

        for (size_t i = 0; i < creq->n_devices_ids; i++) {
                size_t id = 0, d, k;
                dp_plugin_find_id(p, creq->devices_ids[i], &id); /* resolved before */
                d = dp_plugin_id_dev(p, id);
                for (k = 0; k < n && devs[k] != d; k++)
                        ;
                if (k == n)
                        devs[n++] = d;
        }
        return n;
}

static int cdi_answer(const struct dp_plugin *p, const size_t *devs, size_t n_devs,
                      V1beta1__ContainerAllocateResponse *cr) {
        unsigned modes = p->cfg->alloc_modes;
        _cleanup_free_ char *value = NULL;
        size_t vlen = 0;
        int r = 0;

        if (modes & CFG_ALLOC_CDI_CRI) {
                cr->cdi_devices = calloc(n_devs + 1, sizeof(*cr->cdi_devices));
                if (!cr->cdi_devices)
                        return -ENOMEM;
        }
        for (size_t k = 0; r >= 0 && k < n_devs; k++) {
                _cleanup_free_ char *q = NULL;
                r = dp_plugin_qualified(p, devs[k], &q);
                if (r < 0)
                        break;
                if (modes & CFG_ALLOC_CDI_ANNOTATIONS) {
                        /* SPEC.md: the value is a comma-separated list of
                         * fully-qualified names. */
                        size_t l = strlen(q);
                        char *v = realloc(value, vlen + l + 2);
                        if (!v)
                                return -ENOMEM;
                        value = v;
                        if (vlen)
                                value[vlen++] = ',';
                        memcpy(value + vlen, q, l + 1);
                        vlen += l;
                }
                if (modes & CFG_ALLOC_CDI_CRI) {
                        V1beta1__CDIDevice *c = malloc(sizeof(*c));
                        if (!c)
                                return -ENOMEM;
                        v1beta1__cdidevice__init(c);
                        cr->cdi_devices[cr->n_cdi_devices++] = c;
                        c->name = TAKE_PTR(q);
                }
        }
        if (r < 0 || !(modes & CFG_ALLOC_CDI_ANNOTATIONS) || !n_devs)
                return r;
        V1beta1__ContainerAllocateResponse__AnnotationsEntry *e = malloc(sizeof(*e));
        cr->annotations = calloc(2, sizeof(*cr->annotations));
        if (!e || !cr->annotations) {
                free(e);
                return -ENOMEM;
        }
        v1beta1__container_allocate_response__annotations_entry__init(e);
        cr->annotations[cr->n_annotations++] = e;
        e->value = TAKE_PTR(value);
        e->key = strdup(p->annotation_key);
        return e->key ? 0 : -ENOMEM;
}

static int container_answer(const struct dp_plugin *p,
                            const V1beta1__ContainerAllocateRequest *creq,
                            V1beta1__ContainerAllocateResponse *cr) {
        _cleanup_free_ size_t *devs = calloc(creq->n_devices_ids + 1, sizeof(*devs));
        size_t n_devs, n_nodes = 0;
        bool oom = false;
        int r;

        if (!devs)
                return -ENOMEM;
        n_devs = request_devices(p, creq, devs);
        r = cdi_answer(p, devs, n_devs, cr);
        if (r < 0)
                return r;
        if (!(p->cfg->alloc_modes & CFG_ALLOC_DEVICE_SPECS))
                return 0;
        for (size_t k = 0; k < n_devs; k++)
                n_nodes += p->devs[devs[k]].n_nodes;
        cr->devices = calloc(n_nodes + 1, sizeof(*cr->devices));
        oom = !cr->devices;
        for (size_t k = 0; !oom && k < n_devs; k++) {
                const char *node = dp_device_id(p, devs[k]);
                const char *perm = dp_device_extras(p, devs[k])->node.permissions;
                for (size_t j = 0; !oom && j < p->devs[devs[k]].n_nodes; j++) {
                        V1beta1__DeviceSpec *s = malloc(sizeof(*s));
                        if (!s) {
                                oom = true;
                                break;
                        }
                        node = dp_str_next(node);
                        v1beta1__device_spec__init(s);
                        cr->devices[cr->n_devices++] = s;
                        s->host_path = dup_or_null(node, &oom);
                        s->container_path = dup_or_null(node, &oom);
                        s->permissions = dup_or_null(perm ? perm : "rw", &oom);
                }
        }
        if (!oom)
                oom = plain_extras(p, devs, n_devs, cr) < 0;
        return oom ? -ENOMEM : 0;
}

int dp_allocate(const struct dp_plugin *p, const V1beta1__AllocateRequest *req,
                V1beta1__AllocateResponse **ret, char **ret_msg, char **ret_device) {
        const struct why w = { ret_msg, ret_device }, *why = &w;
        _cleanup_free_ bool *seen = NULL;
        V1beta1__AllocateResponse *resp;
        size_t total = 0;
        int r = 0;

        if (req->n_container_requests == 0)
                return invalid(why, "no container_requests");
        for (size_t c = 0; c < req->n_container_requests; c++)
                total += req->container_requests[c]->n_devices_ids;
        if (total > p->n_ids)
                return invalid(why, "request names %zu device IDs, resource \"%s\" has %zu", total,
                               p->cfg->name, p->n_ids);
        seen = calloc(p->n_ids + 1, sizeof(*seen));
        if (!seen)
                return -ENOMEM;
        for (size_t c = 0; c < req->n_container_requests; c++) {
                const V1beta1__ContainerAllocateRequest *creq = req->container_requests[c];
                char where[64];
                snprintf(where, sizeof(where), "container_requests[%zu]", c);
                if (creq->n_devices_ids == 0)
                        return invalid(why, "%s: no device IDs", where);
                r = resolve(p, NULL, creq->devices_ids, creq->n_devices_ids, where, seen, NULL,
                            why);
                if (r < 0)
                        return r;
        }

        resp = malloc(sizeof(*resp));
        if (!resp)
                return -ENOMEM;
        v1beta1__allocate_response__init(resp);
        resp->container_responses =
                calloc(req->n_container_requests, sizeof(*resp->container_responses));
        if (!resp->container_responses)
                r = -ENOMEM;
        for (size_t c = 0; r >= 0 && c < req->n_container_requests; c++) {
                V1beta1__ContainerAllocateResponse *cr = malloc(sizeof(*cr));
                if (!cr) {
                        r = -ENOMEM;
                        break;
                }
                v1beta1__container_allocate_response__init(cr);
                resp->container_responses[resp->n_container_responses++] = cr;
                r = container_answer(p, req->container_requests[c], cr);
        }
        if (r < 0) {
                dp_allocate_response_free(resp);
                return r;
        }
        *ret = resp;
        return 0;
}

/* How close candidate a is to the IDs chosen so far: how many share its
 * NUMA node, then its physical device; and, to break ties, how many other
 * candidates share its node (so "packed" starts on the fullest node). */
struct closeness {
        size_t numa, dev, room;
};

/* Counts kept up to date as IDs are chosen, so weighing a candidate is a
 * lookup, not a pass over every ID: with 10,000 IDs that pass made one
 * answer take seconds under the daemon lock. Per NUMA node (index node + 1,
 * 0 for none): IDs chosen, and available IDs not chosen; per device: IDs
 * chosen. */
struct tally {
        size_t *numa_chosen, *numa_room, *dev_chosen;
};

static void tally_free(struct tally *t) {
        free(t->numa_chosen);
        free(t->numa_room);
        free(t->dev_chosen);
}

static size_t dev_slot(const struct dp_plugin *p, size_t dev) {
        return (size_t)(p->devs[dev].numa_node + 1);
}

static size_t numa_slot(const struct dp_plugin *p, size_t id) {
        return dev_slot(p, dp_plugin_id_dev(p, id));
}

static int tally_init(const struct dp_plugin *p, const bool *chosen, const bool *avail,
                      struct tally *t) {
        size_t slots = 1;

        for (size_t i = 0; i < p->n_devs; i++)
                if (dev_slot(p, i) >= slots)
                        slots = dev_slot(p, i) + 1;
        t->numa_chosen = calloc(slots, sizeof(size_t));
        t->numa_room = calloc(slots, sizeof(size_t));
        t->dev_chosen = calloc(p->n_devs + 1, sizeof(size_t));
        if (!t->numa_chosen || !t->numa_room || !t->dev_chosen)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_ids; i++) {
                if (chosen[i]) {
                        t->numa_chosen[numa_slot(p, i)]++;
                        t->dev_chosen[dp_plugin_id_dev(p, i)]++;
                } else if (avail[i])
                        t->numa_room[numa_slot(p, i)]++;
        }
        return 0;
}

static void tally_choose(const struct dp_plugin *p, struct tally *t, size_t a) {
        size_t n = numa_slot(p, a);

        t->numa_chosen[n]++;
        t->dev_chosen[dp_plugin_id_dev(p, a)]++;
        if (t->numa_room[n] > 0)
                t->numa_room[n]--;
}

/* > 0 when x is closer than y. */
static int closer(struct closeness x, struct closeness y) {
        if (x.numa != y.numa)
                return x.numa > y.numa ? 1 : -1;
        if (x.dev != y.dev)
                return x.dev > y.dev ? 1 : -1;
        return 0;
}

/* The candidates of one device: alike to every policy, so a round weighs
 * a device's first remaining ID (the kubelet's order breaks ties), not
 * every ID. Per NUMA slot a heap keeps the best device on top: a round
 * then costs a look at each slot and a heap step, not a pass over 10,000
 * IDs (which made 1,000 of 10,000 take 17 ms). */
struct group {
        size_t dev, slot;
        size_t head; /* its first unchosen candidate (index into offered), or SIZE_MAX */
};

struct picker {
        enum cfg_policy policy;
        const struct tally *t;
        struct group *g;
        size_t *next; /* next candidate of the same device, in the kubelet's order */
        size_t *heap; /* group indices, slot s at heap[start[s]] .. + len[s] */
        size_t *start, *len;
};

/* Within a slot: packed wants the device with most chosen, spread the
 * least; then the kubelet's order. */
static bool group_before(const struct picker *k, size_t a, size_t b) {
        size_t ca = k->t->dev_chosen[k->g[a].dev], cb = k->t->dev_chosen[k->g[b].dev];

        if (ca != cb)
                return k->policy == CFG_POLICY_SPREAD ? ca < cb : ca > cb;
        return k->g[a].head < k->g[b].head;
}

static void sift_down(const struct picker *k, size_t s, size_t i) {
        size_t *h = k->heap + k->start[s], n = k->len[s];

        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i, tmp;
                if (l < n && group_before(k, h[l], h[m]))
                        m = l;
                if (r < n && group_before(k, h[r], h[m]))
                        m = r;
                if (m == i)
                        return;
                tmp = h[i];
                h[i] = h[m];
                h[m] = tmp;
                i = m;
        }
}

/* Group the unchosen candidates by device and heap them per slot. */
static int picker_init(const struct dp_plugin *p, const size_t *offered, size_t n,
                       const bool *chosen, const struct tally *t, size_t slots, struct picker *k) {
        _cleanup_free_ size_t *group_of = malloc((p->n_devs + 1) * sizeof(size_t));
        _cleanup_free_ size_t *tail = NULL;
        size_t n_groups = 0;

        k->g = calloc(n + 1, sizeof(*k->g));
        k->next = malloc((n + 1) * sizeof(size_t));
        k->heap = calloc(n + 1, sizeof(size_t));
        k->start = calloc(slots + 1, sizeof(size_t));
        k->len = calloc(slots + 1, sizeof(size_t));
        tail = malloc((n + 1) * sizeof(size_t));
        if (!group_of || !k->g || !k->next || !k->heap || !k->start || !k->len || !tail)
                return -ENOMEM;
        memset(group_of, 0xff, (p->n_devs + 1) * sizeof(size_t));
        for (size_t i = 0; i < n; i++) {
                size_t dev, gi;
                k->next[i] = SIZE_MAX;
                if (chosen[offered[i]])
                        continue;
                dev = dp_plugin_id_dev(p, offered[i]);
                gi = group_of[dev];
                if (gi == SIZE_MAX) {
                        gi = group_of[dev] = n_groups++;
                        k->g[gi] =
                                (struct group){ .dev = dev, .slot = dev_slot(p, dev), .head = i };
                        k->len[k->g[gi].slot]++;
                } else
                        k->next[tail[gi]] = i;
                tail[gi] = i;
        }
        for (size_t s = 1; s < slots; s++)
                k->start[s] = k->start[s - 1] + k->len[s - 1];
        memset(k->len, 0, (slots + 1) * sizeof(size_t));
        for (size_t gi = 0; gi < n_groups; gi++) {
                size_t s = k->g[gi].slot;
                k->heap[k->start[s] + k->len[s]++] = gi;
        }
        k->policy = p->cfg->policy;
        k->t = t;
        for (size_t s = 0; s < slots; s++)
                for (size_t i = k->len[s] / 2; i-- > 0;)
                        sift_down(k, s, i);
        return 0;
}

static void picker_free(struct picker *k) {
        free(k->g);
        free(k->next);
        free(k->heap);
        free(k->start);
        free(k->len);
}

/* The best slot's top device: packed wants the NUMA node with most chosen,
 * then the device with most chosen, then the node with most room; spread
 * the least of the first two; ties go to the kubelet's order. */
static size_t picker_best(const struct picker *k, size_t slots) {
        size_t best = SIZE_MAX;
        struct closeness best_c = { 0 };

        for (size_t s = 0; s < slots; s++) {
                if (k->len[s] == 0)
                        continue;
                size_t gi = k->heap[k->start[s]];
                struct closeness c = { .numa = k->t->numa_chosen[s],
                                       .dev = k->t->dev_chosen[k->g[gi].dev],
                                       .room = k->t->numa_room[s] };
                int cmp = best == SIZE_MAX ? 1 : closer(c, best_c);
                if (k->policy == CFG_POLICY_SPREAD && best != SIZE_MAX)
                        cmp = -cmp;
                if (k->policy == CFG_POLICY_PACKED && best != SIZE_MAX && cmp == 0)
                        cmp = c.room > best_c.room ? 1 : c.room < best_c.room ? -1 : 0;
                if (cmp == 0 && k->g[gi].head < k->g[best].head)
                        cmp = 1;
                if (cmp > 0) {
                        best = gi;
                        best_c = c;
                }
        }
        return best;
}

/* Fill the answer up to size from the available IDs, greedily: "packed"
 * takes the candidate closest to what is chosen (same NUMA node, then the
 * same shared device), "spread" the farthest, "none" the kubelet's order.
 * Ties keep the kubelet's order, which already reflects its own hints. */
static int pick(const struct dp_plugin *p, const V1beta1__ContainerPreferredAllocationRequest *creq,
                bool *chosen, const bool *avail, const size_t *offered, size_t size,
                V1beta1__ContainerPreferredAllocationResponse *cr) {
        size_t n = creq->n_available_deviceids, slots = 1, i;
        struct picker k = { 0 };
        struct tally t = { 0 };
        int r;

        for (size_t d = 0; d < p->n_devs; d++)
                if (dev_slot(p, d) >= slots)
                        slots = dev_slot(p, d) + 1;
        r = tally_init(p, chosen, avail, &t);
        if (r >= 0 && p->cfg->policy != CFG_POLICY_NONE)
                r = picker_init(p, offered, n, chosen, &t, slots, &k);
        for (size_t cursor = 0; r >= 0 && cr->n_deviceids < size;) {
                if (p->cfg->policy == CFG_POLICY_NONE) {
                        while (chosen[offered[cursor]])
                                cursor++;
                        i = cursor;
                } else {
                        size_t gi = picker_best(&k, slots), s = k.g[gi].slot;
                        i = k.g[gi].head;
                        chosen[offered[i]] = true;
                        tally_choose(p, &t, offered[i]);
                        k.g[gi].head = k.next[i];
                        if (k.g[gi].head == SIZE_MAX) /* the device has no more: off its heap */
                                k.heap[k.start[s]] = k.heap[k.start[s] + --k.len[s]];
                        sift_down(&k, s, 0);
                }
                chosen[offered[i]] = true;
                if (p->cfg->policy == CFG_POLICY_NONE)
                        tally_choose(p, &t, offered[i]);
                if (!(cr->deviceids[cr->n_deviceids++] = strdup(creq->available_deviceids[i])))
                        r = -ENOMEM;
        }
        picker_free(&k);
        tally_free(&t);
        return r;
}

static int preferred_one(const struct dp_plugin *p,
                         const V1beta1__ContainerPreferredAllocationRequest *creq,
                         const char *where, V1beta1__ContainerPreferredAllocationResponse *cr,
                         const struct why *why) {
        _cleanup_free_ bool *avail = calloc(p->n_ids + 1, sizeof(bool));
        _cleanup_free_ bool *must = calloc(p->n_ids + 1, sizeof(bool));
        /* The offered and must-include IDs' indices, looked up once. */
        _cleanup_free_ size_t *offered = calloc(creq->n_available_deviceids + 1, sizeof(size_t));
        _cleanup_free_ size_t *musts = calloc(creq->n_must_include_deviceids + 1, sizeof(size_t));
        struct id_table t = { 0 };
        size_t size;
        int r;

        if (!avail || !must || !offered || !musts)
                return -ENOMEM;
        if (creq->n_available_deviceids > p->n_ids)
                return invalid(why, "%s: %zu available IDs, resource \"%s\" has %zu", where,
                               creq->n_available_deviceids, p->cfg->name, p->n_ids);
        if (creq->n_available_deviceids >= ID_TABLE_MIN && id_table_build(p, &t) < 0)
                return -ENOMEM;
        r = resolve(p, &t, creq->available_deviceids, creq->n_available_deviceids, where, avail,
                    offered, why);
        if (r >= 0)
                r = resolve(p, &t, creq->must_include_deviceids, creq->n_must_include_deviceids,
                            where, must, musts, why);
        free(t.slot);
        if (r < 0)
                return r;
        for (size_t i = 0; i < creq->n_must_include_deviceids; i++)
                if (!avail[musts[i]])
                        return invalid_id(why, creq->must_include_deviceids[i],
                                          "%s: must-include ID " ID_FMT " is not available", where,
                                          creq->must_include_deviceids[i]);
        if (creq->allocation_size < 1 ||
            (size_t)creq->allocation_size > creq->n_available_deviceids)
                return invalid(why,
                               "%s: allocation_size %d is not between 1 and the %zu available IDs",
                               where, creq->allocation_size, creq->n_available_deviceids);
        size = (size_t)creq->allocation_size;
        if (creq->n_must_include_deviceids > size)
                return invalid(why, "%s: %zu must-include IDs exceed allocation_size %zu", where,
                               creq->n_must_include_deviceids, size);

        cr->deviceids = calloc(size, sizeof(char *));
        if (!cr->deviceids)
                return -ENOMEM;
        for (size_t i = 0; i < creq->n_must_include_deviceids; i++)
                if (!(cr->deviceids[cr->n_deviceids++] = strdup(creq->must_include_deviceids[i])))
                        return -ENOMEM;
        return pick(p, creq, must, avail, offered, size, cr);
}

int dp_preferred(const struct dp_plugin *p, const V1beta1__PreferredAllocationRequest *req,
                 V1beta1__PreferredAllocationResponse **ret, char **ret_msg, char **ret_device) {
        const struct why w = { ret_msg, ret_device }, *why = &w;
        V1beta1__PreferredAllocationResponse *resp;
        int r = 0;

        if (req->n_container_requests == 0)
                return invalid(why, "no container_requests");
        resp = malloc(sizeof(*resp));
        if (!resp)
                return -ENOMEM;
        v1beta1__preferred_allocation_response__init(resp);
        resp->container_responses =
                calloc(req->n_container_requests, sizeof(*resp->container_responses));
        if (!resp->container_responses)
                r = -ENOMEM;
        for (size_t c = 0; r >= 0 && c < req->n_container_requests; c++) {
                V1beta1__ContainerPreferredAllocationResponse *cr = malloc(sizeof(*cr));
                char where[64];
                if (!cr) {
                        r = -ENOMEM;
                        break;
                }
                v1beta1__container_preferred_allocation_response__init(cr);
                resp->container_responses[resp->n_container_responses++] = cr;
                snprintf(where, sizeof(where), "container_requests[%zu]", c);
                r = preferred_one(p, req->container_requests[c], where, cr, why);
        }
        if (r < 0) {
                dp_preferred_response_free(resp);
                return r;
        }
        *ret = resp;
        return 0;
}

/* Every member was malloc'd, so protobuf-c's own destructor frees it all. */
void dp_allocate_response_free(V1beta1__AllocateResponse *resp) {
        if (resp)
                v1beta1__allocate_response__free_unpacked(resp, NULL);
}

void dp_preferred_response_free(V1beta1__PreferredAllocationResponse *resp) {
        if (resp)
                v1beta1__preferred_allocation_response__free_unpacked(resp, NULL);
}
