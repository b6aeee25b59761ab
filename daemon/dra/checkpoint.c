/* SPDX-License-Identifier: Apache-2.0 */
/* The checkpoint of prepared claims: Unprepare may come after a restart
 * and after the claim is gone from the API, so what Prepare answered is
 * kept on disk. Decoding is strict: the file is ours, and one that does
 * not read back exactly is a bug or damage to report, not to guess at. */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "model-internal.h"

/* What each string field must be. The API's rules where it has them; the
 * rest bounded. */
enum kind {
        K_UID,       /* a UID: 1 to 128 printable bytes */
        K_NAMESPACE, /* a DNS label */
        K_NAME,      /* a DNS subdomain */
        K_REQUEST,   /* a DNS label, or "<request>/<subrequest>" */
        K_POOL,      /* '/'-separated DNS subdomains, at most 253 */
        K_DEVICE,    /* a DNS label */
        K_CDI,       /* a CDI device ID: 1 to 512 printable bytes */
};

#define UID_MAX 128
#define CDI_ID_MAX 512
#define CDI_IDS_MAX 16

static bool printable(const char *s, size_t len, size_t max) {
        if (len == 0 || len > max)
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

/* Whether s is parts separated by '/', at most max_parts, each a label
 * (or subdomain), len at most max. */
static bool parts_ok(const char *s, size_t len, size_t max, size_t max_parts, bool subdomain) {
        size_t start = 0, parts = 0;

        if (len == 0 || len > max)
                return false;
        for (size_t i = 0; i <= len; i++)
                if (i == len || s[i] == '/') {
                        if (++parts > max_parts ||
                            !(subdomain ? dra_is_subdomain(s + start, i - start)
                                        : dra_is_label(s + start, i - start)))
                                return false;
                        start = i + 1;
                }
        return true;
}

/* NULL when s is a valid value of kind, else what is wrong. */
static const char *problem(enum kind kind, const char *s) {
        size_t len = strlen(s);

        switch (kind) {
        case K_UID:
                return printable(s, len, UID_MAX) ? NULL : "must be 1 to 128 printable bytes";
        case K_NAMESPACE:
        case K_DEVICE:
                return dra_is_label(s, len) ? NULL : "must be a DNS label";
        case K_NAME:
                return dra_is_subdomain(s, len) ? NULL : "must be a DNS subdomain";
        case K_REQUEST:
                return parts_ok(s, len, 2 * DRA_DEVICE_NAME_MAX + 1, 2, false)
                               ? NULL
                               : "must be a DNS label, or two joined by '/'";
        case K_POOL:
                return parts_ok(s, len, DRA_POOL_NAME_MAX, SIZE_MAX, true)
                               ? NULL
                               : "must be DNS subdomains joined by '/', at most 253 bytes";
        case K_CDI:
                return printable(s, len, CDI_ID_MAX) ? NULL : "must be 1 to 512 printable bytes";
        }
        return "unknown field";
}

static int fail(char **ret_msg, const char *fmt, ...) _printf_(2, 3);

static int fail(char **ret_msg, const char *fmt, ...) {
        va_list ap;
        char *msg;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        *ret_msg = msg;
        return -EINVAL;
}

/* A claim's fields, checked alike before encoding and after decoding, so
 * what is written always reads back. where names the claim. */
static int check_device(const struct dra_device *d, const char *where, size_t i, char **ret_msg) {
        const struct {
                const char *key;
                enum kind kind;
                const char *value;
        } f[] = { { "request", K_REQUEST, d->request },
                  { "pool", K_POOL, d->pool },
                  { "device", K_DEVICE, d->device } };
        size_t n = base_strv_length(d->cdi_ids);

        for (size_t k = 0; k < ELEMENTSOF(f); k++) {
                const char *why = f[k].value ? problem(f[k].kind, f[k].value) : "is missing";
                if (why)
                        return fail(ret_msg, "%s.devices[%zu].%s: %s", where, i, f[k].key, why);
        }
        if (n == 0 || n > CDI_IDS_MAX)
                return fail(ret_msg, "%s.devices[%zu].cdiDevices: must hold 1 to %d IDs", where, i,
                            CDI_IDS_MAX);
        for (size_t k = 0; k < n; k++) {
                const char *why = problem(K_CDI, d->cdi_ids[k]);
                if (why)
                        return fail(ret_msg, "%s.devices[%zu].cdiDevices[%zu]: %s", where, i, k,
                                    why);
        }
        return 0;
}

static int check_claim(const struct dra_claim *c, char **ret_msg) {
        _cleanup_free_ char *where = NULL;
        const char *why;
        int r;

        why = c->uid ? problem(K_UID, c->uid) : "is missing";
        if (why)
                return fail(ret_msg, "claims: a uid %s", why);
        if (xasprintf(&where, "claims." DRA_STR_FMT, c->uid) < 0)
                return -ENOMEM;
        why = c->ns ? problem(K_NAMESPACE, c->ns) : "is missing";
        if (why)
                return fail(ret_msg, "%s.namespace: %s", where, why);
        why = c->name ? problem(K_NAME, c->name) : "is missing";
        if (why)
                return fail(ret_msg, "%s.name: %s", where, why);
        if (c->n_devices > DRA_MAX_RESULTS)
                return fail(ret_msg, "%s.devices: more than %d", where, DRA_MAX_RESULTS);
        for (size_t i = 0; i < c->n_devices; i++) {
                r = check_device(&c->devices[i], where, i, ret_msg);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A uid two claims have, found in O(n log n) (uids is sorted), or NULL. */
static const char *repeated_uid(const char **uids, size_t n) {
        qsort(uids, n, sizeof(*uids), cmp_str);
        for (size_t i = 1; i < n; i++)
                if (strcmp(uids[i - 1], uids[i]) == 0)
                        return uids[i];
        return NULL;
}

static cJSON *device_json(const struct dra_device *d) {
        cJSON *o = cJSON_CreateObject(), *ids;

        if (!o || !cJSON_AddStringToObject(o, "request", d->request) ||
            !cJSON_AddStringToObject(o, "pool", d->pool) ||
            !cJSON_AddStringToObject(o, "device", d->device) ||
            !(ids = cJSON_AddArrayToObject(o, "cdiDevices"))) {
                cJSON_Delete(o);
                return NULL;
        }
        for (char **s = d->cdi_ids; *s; s++) {
                cJSON *v = cJSON_CreateString(*s);
                if (!v || !cJSON_AddItemToArray(ids, v)) {
                        cJSON_Delete(v);
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return o;
}

static cJSON *claim_json(const struct dra_claim *c) {
        cJSON *o = cJSON_CreateObject(), *devs;

        if (!o || !cJSON_AddStringToObject(o, "namespace", c->ns) ||
            !cJSON_AddStringToObject(o, "name", c->name) ||
            !(devs = cJSON_AddArrayToObject(o, "devices"))) {
                cJSON_Delete(o);
                return NULL;
        }
        for (size_t i = 0; i < c->n_devices; i++) {
                cJSON *d = device_json(&c->devices[i]);
                if (!d || !cJSON_AddItemToArray(devs, d)) {
                        cJSON_Delete(d);
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return o;
}

int dra_checkpoint_check_claim(const struct dra_claim *c, char **ret_msg) {
        return check_claim(c, ret_msg);
}

static int check_claims(const struct dra_claim *claims, size_t n, char **ret_msg) {
        _cleanup_free_ const char **uids = NULL;
        const char *dup;
        int r;

        if (n > DRA_CHECKPOINT_MAX_CLAIMS)
                return fail(ret_msg, "claims: %zu, more than %d", n, DRA_CHECKPOINT_MAX_CLAIMS);
        for (size_t i = 0; i < n; i++) {
                r = check_claim(&claims[i], ret_msg);
                if (r < 0)
                        return r;
        }
        uids = calloc(n + 1, sizeof(*uids));
        if (!uids)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                uids[i] = claims[i].uid;
        dup = repeated_uid(uids, n);
        return dup ? fail(ret_msg, "claims: uid " DRA_STR_FMT " twice", dup) : 0;
}

int dra_checkpoint_encode(const struct dra_claim *claims, size_t n, char **ret, size_t *ret_len,
                          char **ret_msg) {
        cJSON *root, *obj;
        char *text;
        size_t len;
        int r = check_claims(claims, n, ret_msg);

        if (r < 0)
                return r;
        root = cJSON_CreateObject();
        obj = root && cJSON_AddNumberToObject(root, "version", DRA_CHECKPOINT_VERSION)
                      ? cJSON_AddObjectToObject(root, "claims")
                      : NULL;
        for (size_t i = 0; obj && i < n; i++) {
                cJSON *c = claim_json(&claims[i]);
                if (!c || !cJSON_AddItemToObject(obj, claims[i].uid, c)) {
                        cJSON_Delete(c);
                        obj = NULL;
                }
        }
        text = obj ? cJSON_PrintUnformatted(root) : NULL;
        cJSON_Delete(root);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        if (len > DRA_CHECKPOINT_MAX_BYTES ||
            base_json_values(text, len) > DRA_CHECKPOINT_MAX_VALUES) {
                free(text);
                return -EFBIG;
        }
        *ret = text;
        *ret_len = len;
        return 0;
}

/* Each key of obj must be one of keys[0..n), once: got[k] is its value.
 * Every key is required. */
static int members(const cJSON *obj, const char *where, const char *const *keys, size_t n,
                   const cJSON **got, char **ret_msg) {
        const cJSON *m;

        if (!cJSON_IsObject(obj))
                return fail(ret_msg, "%s: must be an object", where);
        cJSON_ArrayForEach(m, obj) {
                size_t k = 0;
                while (k < n && strcmp(keys[k], m->string) != 0)
                        k++;
                if (k == n)
                        return fail(ret_msg, "%s: unknown key " DRA_STR_FMT, where, m->string);
                if (got[k])
                        return fail(ret_msg, "%s.%s: given twice", where, keys[k]);
                got[k] = m;
        }
        for (size_t k = 0; k < n; k++)
                if (!got[k])
                        return fail(ret_msg, "%s.%s: is missing", where, keys[k]);
        return 0;
}

static int take_string(const cJSON *v, const char *where, const char *key, char **ret,
                       char **ret_msg) {
        if (!cJSON_IsString(v))
                return fail(ret_msg, "%s.%s: must be a string", where, key);
        *ret = strdup(v->valuestring);
        return *ret ? 0 : -ENOMEM;
}

static int decode_device(const cJSON *v, const char *where, struct dra_device *d, char **ret_msg) {
        static const char *const keys[] = { "request", "pool", "device", "cdiDevices" };
        const cJSON *got[ELEMENTSOF(keys)] = { 0 }, *id;
        size_t n = 0;
        int r = members(v, where, keys, ELEMENTSOF(keys), got, ret_msg);

        if (r >= 0)
                r = take_string(got[0], where, keys[0], &d->request, ret_msg);
        if (r >= 0)
                r = take_string(got[1], where, keys[1], &d->pool, ret_msg);
        if (r >= 0)
                r = take_string(got[2], where, keys[2], &d->device, ret_msg);
        if (r < 0)
                return r;
        if (!cJSON_IsArray(got[3]) || cJSON_GetArraySize(got[3]) < 1 ||
            cJSON_GetArraySize(got[3]) > CDI_IDS_MAX)
                return fail(ret_msg, "%s.cdiDevices: must be an array of 1 to %d strings", where,
                            CDI_IDS_MAX);
        d->cdi_ids = calloc((size_t)cJSON_GetArraySize(got[3]) + 1, sizeof(*d->cdi_ids));
        if (!d->cdi_ids)
                return -ENOMEM;
        cJSON_ArrayForEach(id, got[3]) {
                if (!cJSON_IsString(id))
                        return fail(ret_msg, "%s.cdiDevices[%zu]: must be a string", where, n);
                d->cdi_ids[n] = strdup(id->valuestring);
                if (!d->cdi_ids[n++])
                        return -ENOMEM;
        }
        return 0;
}

static int decode_claim(const cJSON *v, struct dra_claim *c, char **ret_msg) {
        static const char *const keys[] = { "namespace", "name", "devices" };
        const cJSON *got[ELEMENTSOF(keys)] = { 0 }, *d;
        _cleanup_free_ char *where = NULL;
        int r;

        c->uid = strdup(v->string);
        if (!c->uid || xasprintf(&where, "claims." DRA_STR_FMT, v->string) < 0)
                return -ENOMEM;
        r = members(v, where, keys, ELEMENTSOF(keys), got, ret_msg);
        if (r >= 0)
                r = take_string(got[0], where, keys[0], &c->ns, ret_msg);
        if (r >= 0)
                r = take_string(got[1], where, keys[1], &c->name, ret_msg);
        if (r < 0)
                return r;
        if (!cJSON_IsArray(got[2]) || cJSON_GetArraySize(got[2]) > DRA_MAX_RESULTS)
                return fail(ret_msg, "%s.devices: must be an array of at most %d", where,
                            DRA_MAX_RESULTS);
        c->devices = calloc((size_t)cJSON_GetArraySize(got[2]) + 1, sizeof(*c->devices));
        if (!c->devices)
                return -ENOMEM;
        cJSON_ArrayForEach(d, got[2]) {
                _cleanup_free_ char *dw = NULL;
                if (xasprintf(&dw, "%s.devices[%zu]", where, c->n_devices) < 0)
                        return -ENOMEM;
                r = decode_device(d, dw, &c->devices[c->n_devices++], ret_msg);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The document around the claims: an object with the version we read
 * (checked first: another version may have other keys) and the claims. */
static int decode_root(const cJSON *root, const cJSON **ret_claims, char **ret_msg) {
        static const char *const keys[] = { "version", "claims" };
        const cJSON *got[ELEMENTSOF(keys)] = { 0 };
        const cJSON *v =
                cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "version") : NULL;
        int r;

        if (!cJSON_IsObject(root))
                return fail(ret_msg, "checkpoint: must be a JSON object");
        if (!v || !cJSON_IsNumber(v))
                return fail(ret_msg, "version: must be a number");
        if (v->valuedouble != DRA_CHECKPOINT_VERSION)
                return fail(ret_msg, "version: %g is not supported (this cdiplug reads version %d)",
                            v->valuedouble, DRA_CHECKPOINT_VERSION);
        r = members(root, "checkpoint", keys, ELEMENTSOF(keys), got, ret_msg);
        if (r < 0)
                return r;
        if (!cJSON_IsObject(got[1]))
                return fail(ret_msg, "claims: must be an object");
        if (cJSON_GetArraySize(got[1]) > DRA_CHECKPOINT_MAX_CLAIMS)
                return fail(ret_msg, "claims: more than %d", DRA_CHECKPOINT_MAX_CLAIMS);
        *ret_claims = got[1];
        return 0;
}

static int parse(const char *text, size_t len, cJSON **ret, char **ret_msg) {
        const char *end = NULL;
        cJSON *root;

        if (len > DRA_CHECKPOINT_MAX_BYTES)
                return fail(ret_msg, "checkpoint: %zu bytes, more than %d", len,
                            DRA_CHECKPOINT_MAX_BYTES);
        if (base_json_values(text, len) > DRA_CHECKPOINT_MAX_VALUES)
                return fail(ret_msg, "checkpoint: more than %d JSON values",
                            DRA_CHECKPOINT_MAX_VALUES);
        if (memchr(text, '\0', len))
                return fail(ret_msg, "checkpoint: holds a NUL byte");
        root = cJSON_ParseWithLengthOpts(text, len, &end, false);
        if (!root)
                return fail(ret_msg, "checkpoint: not JSON (at byte %zu)",
                            end && end >= text ? (size_t)(end - text) : (size_t)0);
        while (end < text + len && strchr(" \t\r\n", *end))
                end++;
        if (end != text + len) {
                cJSON_Delete(root);
                return fail(ret_msg, "checkpoint: text after the JSON (at byte %zu)",
                            (size_t)(end - text));
        }
        *ret = root;
        return 0;
}

int dra_checkpoint_decode(const char *text, size_t len, struct dra_claim **ret, size_t *ret_n,
                          char **ret_msg) {
        cJSON *root = NULL;
        const cJSON *obj = NULL, *v;
        struct dra_claim *claims = NULL;
        size_t n = 0;
        int r = parse(text, len, &root, ret_msg);

        if (r >= 0)
                r = decode_root(root, &obj, ret_msg);
        if (r >= 0) {
                claims = calloc((size_t)cJSON_GetArraySize(obj) + 1, sizeof(*claims));
                r = claims ? 0 : -ENOMEM;
        }
        if (r >= 0)
                cJSON_ArrayForEach(v, obj) {
                        r = decode_claim(v, &claims[n++], ret_msg);
                        if (r < 0)
                                break;
                }
        cJSON_Delete(root);
        /* The values, and no uid twice (cJSON keeps both of a repeated key). */
        if (r >= 0)
                r = check_claims(claims, n, ret_msg);
        if (r < 0) {
                dra_claims_free(claims, n);
                return r;
        }
        *ret = claims;
        *ret_n = n;
        return 0;
}
