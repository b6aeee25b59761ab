/* SPDX-License-Identifier: Apache-2.0 */
/* What the API server last told us about this node's slices of our
 * driver (the list, the watch, the answers to our writes), kept bounded
 * whatever it sends: at most KUBE_SLICES_MAX slices besides our own,
 * and whole only for the names we write ourselves (a slice of a wanted
 * pool at a wanted index); any other slice is kept as a light record (name,
 * resourceVersion, pool, generation), which is all a delete needs.
 * Tombstones (a deletion's resourceVersion) exist only for the names we
 * write, the only ones an answer to our own write can bring back. So a
 * watch streaming ADDED or DELETED events under ever new names costs the
 * same memory and CPU per event at its ten-thousandth as at its first.
 * Also who wrote them (managedFields, our own writes' resourceVersions):
 * another writer's change is repaired with back-off, and a newer cdiplug
 * instance's write makes this one stop writing (docs/design.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "kube-internal.h"
#include "log.h"
#include "loop.h"

const cJSON *kube_member(const cJSON *o, const char *a, const char *b) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
        return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

const char *kube_str_member(const cJSON *o, const char *a, const char *b) {
        const cJSON *x = kube_member(o, a, b);
        return cJSON_IsString(x) ? x->valuestring : NULL;
}

const char *kube_slice_pool(const cJSON *s) {
        return kube_str_member(kube_member(s, "spec", "pool"), "name", NULL);
}

uint64_t kube_slice_gen(const cJSON *s) {
        const cJSON *g = kube_member(kube_member(s, "spec", "pool"), "generation", NULL);
        return cJSON_IsNumber(g) && g->valuedouble > 0 ? (uint64_t)g->valuedouble : 0;
}

bool kube_rv_older(const char *a, const char *b) {
        char *ea, *eb;
        unsigned long long x, y;

        if (!a || !b)
                return false;
        x = strtoull(a, &ea, 10);
        y = strtoull(b, &eb, 10);
        return !*ea && !*eb && x < y;
}

bool kube_ours(const struct kube *k, const cJSON *s) {
        const char *d = kube_str_member(s, "spec", "driver");
        const char *n = kube_str_member(s, "spec", "nodeName");
        return d && n && strcmp(d, k->driver) == 0 && strcmp(n, k->node) == 0;
}

void kube_set_rv(struct kube *k, const char *rv) {
        char *c;

        if (!rv || !*rv || !(c = strdup(rv)))
                return;
        free(k->rv);
        k->rv = c;
}

bool kube_wanted_name(const struct kube *k, const char *pool, const char *name) {
        const struct kube_pool *p;
        size_t n, count;

        if (!pool || !name)
                return false;
        for (p = k->pools; p && strcmp(p->name, pool) != 0; p = p->next)
                ;
        if (!p || !p->want)
                return false;
        n = (size_t)cJSON_GetArraySize(p->want);
        count = (n + KUBE_SLICE_DEVICES - 1) / KUBE_SLICE_DEVICES;
        for (size_t i = 0; i < count; i++) {
                _cleanup_free_ char *want = NULL;
                if (kube_slice_name(k->node, k->driver, pool, i, &want) == 0 &&
                    strcmp(want, name) == 0)
                        return true;
        }
        return false;
}

/* The managers and times of s's managedFields, for kube_slice_writer. */
static bool keep_writers(cJSON *md, const cJSON *s) {
        const cJSON *e;
        cJSON *mf = NULL;
        unsigned n = 0;

        cJSON_ArrayForEach(e, kube_member(s, "metadata", "managedFields")) {
                const char *m = kube_str_member(e, "manager", NULL);
                const char *t = kube_str_member(e, "time", NULL);
                cJSON *c;

                /* A few: a light record stays light whatever a server sends. */
                if (!m || ++n > 8)
                        continue;
                if ((!mf && !(mf = cJSON_AddArrayToObject(md, "managedFields"))) ||
                    !(c = cJSON_CreateObject()) || !cJSON_AddItemToArray(mf, c) ||
                    !cJSON_AddStringToObject(c, "manager", m) ||
                    (t && !cJSON_AddStringToObject(c, "time", t)))
                        return false;
        }
        return true;
}

/* name, resourceVersion, pool, generation and writers of s: what deleting
 * it, or choosing the pool's next generation, needs. */
static cJSON *light(const cJSON *s) {
        const char *name = kube_str_member(s, "metadata", "name");
        const char *rv = kube_str_member(s, "metadata", "resourceVersion");
        const char *pool = kube_slice_pool(s);
        cJSON *o = cJSON_CreateObject(), *md, *spec, *p;

        md = cJSON_AddObjectToObject(o, "metadata");
        spec = cJSON_AddObjectToObject(o, "spec");
        p = cJSON_AddObjectToObject(spec, "pool");
        if (!md || !p || !cJSON_AddStringToObject(md, "name", name) ||
            (rv && !cJSON_AddStringToObject(md, "resourceVersion", rv)) ||
            (pool && !cJSON_AddStringToObject(p, "name", pool)) ||
            !cJSON_AddNumberToObject(p, "generation", (double)kube_slice_gen(s)) ||
            !keep_writers(md, s)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

int kube_seen_put(struct kube *k, cJSON *seen, cJSON *s) {
        _cleanup_(kube_cjson_deletep) cJSON *owned = s;
        const char *name = kube_str_member(s, "metadata", "name");
        const char *rv = kube_str_member(s, "metadata", "resourceVersion");
        const cJSON *tomb;
        cJSON *old, *keep;
        bool wanted;

        if (!name)
                return 0;
        kube_check_newer(k, s);
        old = cJSON_GetObjectItemCaseSensitive(seen, name);
        /* An answer to our write can come after the watch told us the
         * slice was deleted since (the kubelet's wipe): the tombstone
         * keeps the older answer from bringing it back. */
        tomb = cJSON_GetObjectItemCaseSensitive(k->gone, name);
        if ((old && kube_rv_older(rv, kube_str_member(old, "metadata", "resourceVersion"))) ||
            (cJSON_IsString(tomb) && kube_rv_older(rv, tomb->valuestring)))
                return 0;
        wanted = kube_wanted_name(k, kube_slice_pool(s), name);
        /* Our own names always: they are as many as our pools make, and
         * one left out would be created again, refused, listed again. */
        if (!old && !wanted && cJSON_GetArraySize(seen) >= KUBE_SLICES_MAX) {
                k->slices_over = true;
                return -E2BIG;
        }
        keep = wanted ? TAKE_PTR(owned) : light(s);
        if (!keep)
                return -ENOMEM;
        cJSON_DeleteItemFromObjectCaseSensitive(k->gone, name);
        if (old)
                cJSON_ReplaceItemInObjectCaseSensitive(seen, name, keep);
        else
                cJSON_AddItemToObject(seen, name, keep);
        return 0;
}

void kube_seen_drop(struct kube *k, const char *name, const char *rv, const char *pool) {
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(k->seen, name);
        _cleanup_free_ char *copy = NULL;

        /* A copy: the record it comes from may be deleted below. */
        if (old && !pool && kube_slice_pool(old))
                pool = copy = strdup(kube_slice_pool(old));
        /* A DELETED event older than our re-creation is history. */
        if (old && !kube_rv_older(rv, kube_str_member(old, "metadata", "resourceVersion")))
                cJSON_DeleteItemFromObjectCaseSensitive(k->seen, name);
        cJSON_DeleteItemFromObjectCaseSensitive(k->gone, name);
        if (!rv || cJSON_GetObjectItemCaseSensitive(k->seen, name) ||
            !kube_wanted_name(k, pool, name))
                return;
        /* The oldest goes first; we write at most one slice at a time, so
         * a full list of tombstones holds every one that still matters. */
        if (cJSON_GetArraySize(k->gone) >= KUBE_SLICES_MAX)
                cJSON_Delete(cJSON_DetachItemViaPointer(k->gone, k->gone->child));
        cJSON_AddStringToObject(k->gone, name, rv);
}

void kube_gone_clear(struct kube *k) {
        while (k->gone->child)
                cJSON_Delete(cJSON_DetachItemViaPointer(k->gone, k->gone->child));
}

/* ---- other writers (issue 34): who wrote a slice, and are they newer ---- */

const char *kube_slice_writer(const struct kube *k, const cJSON *s) {
        const cJSON *mf = kube_member(s, "metadata", "managedFields"), *e;
        const char *best = NULL, *best_time = "";

        cJSON_ArrayForEach(e, mf) {
                const char *m = kube_str_member(e, "manager", NULL);
                const char *t = kube_str_member(e, "time", NULL);

                if (!m || (k->manager && strcmp(m, k->manager) == 0))
                        continue;
                /* RFC 3339 in UTC: compared as text. */
                if (!best || (t && strcmp(t, best_time) >= 0)) {
                        best = m;
                        best_time = t ? t : "";
                }
        }
        return best;
}

bool kube_slice_mine(const struct kube *k, const cJSON *s) {
        const char *name = kube_str_member(s, "metadata", "name");
        const char *rv = kube_str_member(s, "metadata", "resourceVersion");
        const cJSON *m = name ? cJSON_GetObjectItemCaseSensitive(k->mine, name) : NULL;

        return rv && m && cJSON_IsString(m) && strcmp(m->valuestring, rv) == 0;
}

void kube_mine_set(struct kube *k, const char *name, const char *rv) {
        cJSON_DeleteItemFromObjectCaseSensitive(k->mine, name);
        /* The names we write and those we deleted (""), bounded like what
         * is kept in view: the oldest goes first. */
        if (cJSON_GetArraySize(k->mine) >= 2 * KUBE_SLICES_MAX)
                cJSON_Delete(cJSON_DetachItemViaPointer(k->mine, k->mine->child));
        if (rv)
                cJSON_AddStringToObject(k->mine, name, rv);
}

uint64_t kube_manager_start(const char *m) {
        char *end;
        unsigned long long ms;

        if (strncmp(m, KUBE_MANAGER_PREFIX, strlen(KUBE_MANAGER_PREFIX)) != 0)
                return 0;
        ms = strtoull(m + strlen(KUBE_MANAGER_PREFIX), &end, 10);
        return *end == '-' ? ms : 0;
}

void kube_check_newer(struct kube *k, const cJSON *s) {
        const cJSON *mf = kube_member(s, "metadata", "managedFields"), *e;

        if (k->yielded_to || !k->manager)
                return;
        cJSON_ArrayForEach(e, mf) {
                const char *m = kube_str_member(e, "manager", NULL);
                uint64_t start = m ? kube_manager_start(m) : 0;

                if (!start || strcmp(m, k->manager) == 0 || start < k->start_ms ||
                    (start == k->start_ms && strcmp(m, k->manager) < 0))
                        continue;
                k->yielded_to = strdup(m);
                log_with(
                        LOG_WARN, &(struct log_fields){ 0 },
                        "kube: a newer cdiplug instance (field manager \"%s\") writes this node's "
                        "ResourceSlices of driver \"%s\" (ResourceSlice \"%s\"); this one (\"%s\") "
                        "stops writing them, as in a rolling update",
                        m, k->driver, kube_str_member(s, "metadata", "name"), k->manager);
                return;
        }
}

/* The other writer whose change a write (kind) of name would undo, or NULL: none, or an
 * older cdiplug instance (it yields to us as soon as it sees our write). */
static const char *rival_of(struct kube *k, enum kube_wop kind, const char *name) {
        const cJSON *have = cJSON_GetObjectItemCaseSensitive(k->seen, name);
        const char *w;

        if (kind == KW_CREATE || !have || kube_slice_mine(k, have))
                return NULL;
        /* A delete leaves no trace of who made it: a leftover is deleted
         * at once, but one that came back after we deleted it is a war
         * (an older instance that wants that pool), whoever wrote it. */
        if (kind == KW_DELETE) {
                const cJSON *m = cJSON_GetObjectItemCaseSensitive(k->mine, name);
                if (!cJSON_IsString(m) || *m->valuestring)
                        return NULL;
                w = kube_slice_writer(k, have);
                return w ? w : "unknown";
        }
        if (!(w = kube_slice_writer(k, have)))
                return NULL;
        if (kube_manager_start(w) && kube_manager_start(w) <= k->start_ms)
                return NULL;
        return w;
}

/* See kube-internal.h. */
bool kube_repair_allowed(struct kube *k, enum kube_wop kind, const char *name, uint64_t now) {
        const char *w = rival_of(k, kind, name);
        uint64_t wait;

        if (!w)
                return true;
        if (k->repairs && now - k->repair_last_ms >= KUBE_REPAIR_QUIET_MS) {
                k->repairs = 0;
                k->repair_said = false;
        }
        if (k->repairs && now < k->repair_due_ms)
                return false;
        k->repairs++;
        k->repair_last_ms = now;
        wait = dp_backoff_jitter_ms(KUBE_REPAIR_MIN_MS, KUBE_REPAIR_MAX_MS, k->repairs - 1,
                                    dp_random(&k->rng));
        k->repair_due_ms = now + wait;
        log_with(k->repairs == 2 && !k->repair_said ? LOG_WARN : LOG_DEBUG,
                 &(struct log_fields){ 0 },
                 "kube: ResourceSlice \"%s\" was changed by another writer (field manager "
                 "\"%s\"); repairing it (repair %u of this run; the next waits at least %llu ms)",
                 name, w, k->repairs, (unsigned long long)wait);
        k->repair_said |= k->repairs == 2;
        return true;
}
