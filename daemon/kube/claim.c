/* SPDX-License-Identifier: Apache-2.0 */
/* A ResourceClaim answer, reduced to what Prepare needs: the uid check
 * (a claim deleted and re-created under the same name is another claim)
 * and the allocation results of our driver only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"
#include "log.h"

void kube_claim_clear(struct kube_claim *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n_results; i++) {
                free(c->results[i].request);
                free(c->results[i].pool);
                free(c->results[i].device);
        }
        free(c->results);
        free(c->msg);
        memset(c, 0, sizeof(*c));
}

static const char *str_at(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int fail(struct kube_claim *c, int err, const char *msg) {
        c->err = err;
        c->msg = strdup(msg);
        return err;
}

/* An opaque configuration addressed to our driver (from the claim or its
 * DeviceClass, status.allocation.devices.config[]) asks for something
 * cdiplug has no parameter for: preparing the devices without it would
 * hand the pod something else than it asked for, so the claim fails,
 * naming the entry. */
static int refuse_opaque(const cJSON *alloc, const char *driver, struct kube_claim *ret) {
        const cJSON *config = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(alloc, "devices"), "config");
        const cJSON *e;
        size_t i = 0;

        if (!cJSON_IsArray(config))
                return 0;
        cJSON_ArrayForEach(e, config) {
                const char *d = str_at(cJSON_GetObjectItemCaseSensitive(e, "opaque"), "driver");
                const char *src = str_at(e, "source");
                char msg[256];

                if (d && strcmp(d, driver) == 0) {
                        snprintf(msg, sizeof(msg),
                                 "status.allocation.devices.config[%zu]: an opaque configuration "
                                 "for driver %s (%s): cdiplug takes no parameters; remove it "
                                 "there",
                                 i, driver,
                                 src && strcmp(src, "FromClass") == 0 ? "from the DeviceClass"
                                                                      : "from the claim");
                        return fail(ret, -EINVAL, msg);
                }
                i++;
        }
        return 0;
}

/* cJSON turns "\u0000" into a NUL that ends the C string: "simdev0\u0000x"
 * would read as "simdev0". No name of the API may hold one, so an answer
 * with one is refused whole. */
static bool holds_nul(const char *body) {
        for (const char *p = body; (p = strstr(p, "\\u")); p += 2)
                if (strncmp(p + 2, "0000", 4) == 0)
                        return true;
        return false;
}

int kube_claim_parse(const char *body, const char *driver, const char *uid,
                     struct kube_claim *ret) {
        _cleanup_(kube_cjson_deletep) cJSON *o = NULL;
        const cJSON *alloc, *results, *r;
        struct kube_claim c = { 0 };
        const char *have_uid;
        size_t n = 0;
        int e;

        memset(ret, 0, sizeof(*ret));
        e = kube_parse(body, strlen(body), &o);
        if (e == -E2BIG)
                return fail(ret, -EBADMSG, "the API server's answer has too many values to parse");
        if (e < 0 || !cJSON_IsObject(o))
                return fail(ret, -EBADMSG, "the API server's answer is not a JSON object");
        if (holds_nul(body))
                return fail(ret, -EBADMSG, "the API server's answer holds a NUL character");
        have_uid = str_at(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "uid");
        if (uid && (!have_uid || strcmp(have_uid, uid) != 0)) {
                char msg[600], have[260], want[260];
                base_quote(have_uid ? have_uid : "(none)", 64, have, sizeof(have));
                base_quote(uid, 64, want, sizeof(want));
                snprintf(msg, sizeof(msg), "claim uid is %s, not %s: it was deleted and re-created",
                         have, want);
                return fail(ret, -ESTALE, msg);
        }
        alloc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "status"),
                                                 "allocation");
        if (!cJSON_IsObject(alloc))
                return fail(ret, -ENODATA, "claim is not allocated (no status.allocation)");
        results = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(alloc, "devices"), "results");
        if (results && !cJSON_IsArray(results))
                return fail(ret, -EBADMSG, "status.allocation.devices.results is not a list");
        if (refuse_opaque(alloc, driver, ret) < 0)
                return ret->err;
        cJSON_ArrayForEach(r, results) {
                const char *d = str_at(r, "driver");
                if (d && strcmp(d, driver) == 0)
                        n++;
        }
        if (n > 0) {
                c.results = calloc(n, sizeof(*c.results));
                if (!c.results)
                        return fail(ret, -ENOMEM, "out of memory");
        }
        cJSON_ArrayForEach(r, results) {
                const char *d = str_at(r, "driver"), *req = str_at(r, "request"),
                           *pool = str_at(r, "pool"), *dev = str_at(r, "device");
                struct kube_result *kr;

                if (!d || strcmp(d, driver) != 0 || c.n_results >= n || !c.results)
                        continue;
                if (!req || !pool || !dev) {
                        kube_claim_clear(&c);
                        return fail(
                                ret, -EBADMSG,
                                "an allocation result of our driver lacks request, pool or device");
                }
                kr = &c.results[c.n_results++];
                kr->request = strdup(req);
                kr->pool = strdup(pool);
                kr->device = strdup(dev);
                if (!kr->request || !kr->pool || !kr->device) {
                        kube_claim_clear(&c);
                        return fail(ret, -ENOMEM, "out of memory");
                }
        }
        *ret = c;
        return 0;
}
