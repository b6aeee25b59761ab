/* SPDX-License-Identifier: Apache-2.0 */
/* ResourceSlice names and bodies. Names are deterministic (not
 * metadata.generateName): a create whose answer was lost cannot leave a
 * duplicate behind (the retry gets 409 AlreadyExists and relists), and a
 * restarted daemon finds its own slices by name.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"
#include "log.h"

/* Room for "-<8 hex>-<index>" after the readable part, under 253. */
#define NAME_READABLE_MAX 200

static uint32_t fnv1a(uint32_t h, const char *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char)s[i];
                h *= 16777619u;
        }
        return h;
}

int kube_slice_name(const char *node, const char *driver, const char *pool, size_t index,
                    char **ret) {
        const char *res = strchr(pool, '/');
        _cleanup_free_ char *base = NULL;
        size_t n = 0, start = 0;
        uint32_t h = 2166136261u;

        if (xasprintf(&base, "%s-%s", node, res ? res + 1 : pool) < 0)
                return -ENOMEM;
        /* A DNS-1123 subdomain of [a-z0-9-] only, starting and ending
         * alphanumeric; the hash keeps names of different pools apart
         * however they were folded or cut. */
        for (size_t i = 0; base[i] && n < NAME_READABLE_MAX; i++) {
                char c = base[i];
                if (c >= 'A' && c <= 'Z')
                        c = (char)(c - 'A' + 'a');
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
                        c = '-';
                base[n++] = c;
        }
        base[n] = '\0';
        while (base[start] == '-')
                start++;
        while (n > start && base[n - 1] == '-')
                base[--n] = '\0';
        h = fnv1a(h, driver, strlen(driver) + 1);
        h = fnv1a(h, pool, strlen(pool));
        if (start == n)
                return xasprintf(ret, "slice-%08x-%zu", h, index);
        return xasprintf(ret, "%s-%08x-%zu", base + start, h, index);
}

/* NOLINTNEXTLINE(misc-no-recursion): cJSON_Parse stops at CJSON_NESTING_LIMIT (1000) levels */
bool kube_json_subset(const cJSON *want, const cJSON *have) {
        const cJSON *w, *h;

        if (!want || !have)
                return want == have;
        if (cJSON_IsObject(want)) {
                if (!cJSON_IsObject(have))
                        return false;
                cJSON_ArrayForEach(w, want) {
                        h = cJSON_GetObjectItemCaseSensitive(have, w->string);
                        if (!kube_json_subset(w, h))
                                return false;
                }
                return true;
        }
        if (cJSON_IsArray(want)) {
                if (!cJSON_IsArray(have) || cJSON_GetArraySize(want) != cJSON_GetArraySize(have))
                        return false;
                h = have->child;
                cJSON_ArrayForEach(w, want) {
                        if (!kube_json_subset(w, h))
                                return false;
                        h = h->next;
                }
                return true;
        }
        if (cJSON_IsNumber(want))
                return cJSON_IsNumber(have) && fabs(want->valuedouble - have->valuedouble) < 0.5;
        return cJSON_Compare(want, have, true);
}

int kube_slice_json(const struct kube_slice_args *a, cJSON **ret) {
        cJSON *s = cJSON_CreateObject(), *md, *refs, *ref, *spec, *pool, *devs;
        size_t total = (size_t)cJSON_GetArraySize(a->devices);
        size_t from = a->index * KUBE_SLICE_DEVICES;
        const cJSON *d;
        size_t i = 0;

        if (!s)
                return -ENOMEM;
        cJSON_AddStringToObject(s, "apiVersion", "resource.k8s.io/v1");
        cJSON_AddStringToObject(s, "kind", "ResourceSlice");
        md = cJSON_AddObjectToObject(s, "metadata");
        cJSON_AddStringToObject(md, "name", a->name);
        /* Owned by the Node: when the node object goes, so do its slices. */
        refs = cJSON_AddArrayToObject(md, "ownerReferences");
        ref = cJSON_CreateObject();
        cJSON_AddItemToArray(refs, ref);
        cJSON_AddStringToObject(ref, "apiVersion", "v1");
        cJSON_AddStringToObject(ref, "kind", "Node");
        cJSON_AddStringToObject(ref, "name", a->node);
        cJSON_AddStringToObject(ref, "uid", a->node_uid);
        cJSON_AddBoolToObject(ref, "controller", true);
        spec = cJSON_AddObjectToObject(s, "spec");
        cJSON_AddStringToObject(spec, "driver", a->driver);
        pool = cJSON_AddObjectToObject(spec, "pool");
        cJSON_AddStringToObject(pool, "name", a->pool);
        cJSON_AddNumberToObject(pool, "generation", (double)a->generation);
        cJSON_AddNumberToObject(pool, "resourceSliceCount", (double)a->count);
        cJSON_AddStringToObject(spec, "nodeName", a->node);
        devs = cJSON_AddArrayToObject(spec, "devices");
        cJSON_ArrayForEach(d, a->devices) {
                if (i >= from && i < from + KUBE_SLICE_DEVICES && i < total)
                        cJSON_AddItemToArray(devs, cJSON_Duplicate(d, true));
                i++;
        }
        /* cJSON reports allocation failures only as missing members. */
        if (!devs ||
            cJSON_GetArraySize(devs) !=
                    (int)(total - from < KUBE_SLICE_DEVICES ? total - from : KUBE_SLICE_DEVICES) ||
            !cJSON_GetObjectItemCaseSensitive(spec, "nodeName")) {
                cJSON_Delete(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}
