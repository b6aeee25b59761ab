/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi's rules for ResourceSlices: field selectors and the API
 * server's validation, as far as a client can get it wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeapi_http.h"

const char *fa_jstr(const cJSON *o, const char *a, const char *b) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);

        if (b)
                x = cJSON_GetObjectItemCaseSensitive(x, b);
        return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* "spec.nodeName=X,spec.driver=Y": does obj match every term? -EINVAL on
 * a field the server does not index. */
int fa_selector_match(const char *sel, const cJSON *obj) {
        char *copy, *term, *save = NULL;
        int r = 1;

        if (!sel || !*sel)
                return 1;
        copy = strdup(sel);
        MUST(copy);
        for (term = strtok_r(copy, ",", &save); term; term = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(term, '=');
                const char *have;

                if (!eq) {
                        r = -EINVAL;
                        break;
                }
                *eq++ = '\0';
                if (*eq == '=')
                        eq++;
                if (strcmp(term, "spec.nodeName") == 0)
                        have = fa_jstr(obj, "spec", "nodeName");
                else if (strcmp(term, "spec.driver") == 0)
                        have = fa_jstr(obj, "spec", "driver");
                else if (strcmp(term, "metadata.name") == 0)
                        have = fa_jstr(obj, "metadata", "name");
                else {
                        r = -EINVAL;
                        break;
                }
                if (!have || strcmp(have, eq) != 0)
                        r = 0;
        }
        free(copy);
        return r;
}

static bool dns_label(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

static bool dns_subdomain(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
                      s[i] == '.'))
                        return false;
        return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

/* The API server's validation of a ResourceSlice, as far as our client
 * can get it wrong; NULL when valid, else the message. */
const char *fa_slice_invalid(const cJSON *s) {
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(s, "spec");
        const cJSON *pool = cJSON_GetObjectItemCaseSensitive(spec, "pool");
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(spec, "devices");
        const cJSON *gen = cJSON_GetObjectItemCaseSensitive(pool, "generation");
        const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(pool, "resourceSliceCount");
        const cJSON *d;
        const char *name = fa_jstr(s, "metadata", "name");

        if (!name || !dns_subdomain(name))
                return "metadata.name: Invalid value";
        if (!fa_jstr(spec, "driver", NULL) || !dns_subdomain(fa_jstr(spec, "driver", NULL)))
                return "spec.driver: Invalid value";
        if (!fa_jstr(pool, "name", NULL) || strlen(fa_jstr(pool, "name", NULL)) > 253)
                return "spec.pool.name: Invalid value";
        if (!cJSON_IsNumber(gen) || gen->valuedouble < 0)
                return "spec.pool.generation: Invalid value";
        if (!cJSON_IsNumber(cnt) || cnt->valuedouble < 1)
                return "spec.pool.resourceSliceCount: Invalid value";
        if (!fa_jstr(spec, "nodeName", NULL))
                return "spec.nodeName: Required value";
        if (!cJSON_IsArray(devs) || cJSON_GetArraySize(devs) > 128)
                return "spec.devices: Too many: must have at most 128 items";
        cJSON_ArrayForEach(d, devs) {
                const char *dn = fa_jstr(d, "name", NULL);
                const cJSON *e;

                if (!dn || !dns_label(dn))
                        return "spec.devices[].name: Invalid value";
                cJSON_ArrayForEach(e, devs) {
                        if (e == d)
                                break;
                        if (strcmp(fa_jstr(e, "name", NULL), dn) == 0)
                                return "spec.devices[].name: Duplicate value";
                }
        }
        return NULL;
}
