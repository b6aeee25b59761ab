/* SPDX-License-Identifier: Apache-2.0 */
/* Kinds, device names, qualified names and spec file names.
 *
 * The character rules follow what CDI consumers actually enforce (the
 * reference parser in container-device-interface), which is stricter than
 * SPEC.md's prose in one place: vendor and class must start with a letter.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi-internal.h"
#include "cdi.h"

static bool is_letter(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}
static bool is_alnum(char c) {
        return is_letter(c) || is_digit(c);
}

static bool vendor_class_char(char c) {
        return is_alnum(c) || c == '_' || c == '-' || c == '.';
}
static bool device_char(char c) {
        return vendor_class_char(c) || c == ':';
}

/* Vendor and class share one rule: letter first, letter or digit last,
 * [A-Za-z0-9_.-] between. At least two characters: the reference parser
 * checks the middle as name[1:len-1], which for a one-character vendor or
 * class is the slice [1:0] and panics the runtime that loads the spec
 * (every version up to now). */
static bool segment_is_valid(const char *s, size_t len, size_t max) {
        if (len < 2 || len > max)
                return false;
        if (!is_letter(s[0]) || !is_alnum(s[len - 1]))
                return false;
        for (size_t i = 1; i + 1 < len; i++)
                if (!vendor_class_char(s[i]))
                        return false;
        return true;
}

bool cdi_vendor_is_valid(const char *vendor, size_t len) {
        return segment_is_valid(vendor, len, CDI_MAX_VENDOR);
}

bool cdi_class_is_valid(const char *class_, size_t len) {
        return segment_is_valid(class_, len, CDI_MAX_CLASS);
}

bool cdi_kind_is_valid(const char *kind) {
        const char *slash;

        if (!kind)
                return false;
        slash = strchr(kind, '/');
        if (!slash)
                return false;
        /* A second '/' lands in the class and fails its character rule. */
        return cdi_vendor_is_valid(kind, (size_t)(slash - kind)) &&
               cdi_class_is_valid(slash + 1, strlen(slash + 1));
}

bool cdi_device_name_is_valid(const char *name) {
        size_t len;

        if (!name)
                return false;
        len = strlen(name);
        if (len == 0 || len > CDI_MAX_DEVICE_NAME)
                return false;
        if (!is_alnum(name[0]) || !is_alnum(name[len - 1]))
                return false;
        for (size_t i = 1; i + 1 < len; i++)
                if (!device_char(name[i]))
                        return false;
        return true;
}

/* One part of a kind from one part of a resource name; see
 * cdi_kind_from_resource in cdi.h for the rules. */
static int kind_part(const char *s, size_t len, size_t max, char *out, size_t *ret_len) {
        static const char prefix[] = "cdi-";
        char buf[CDI_MAX_VENDOR + sizeof(prefix) + 1];
        size_t n = 0;

        if (len == 0 || len > CDI_MAX_VENDOR || !is_alnum(s[len - 1]))
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (!vendor_class_char(s[i]))
                        return -EINVAL;
        if (!is_letter(s[0]) || len < 2) {
                /* buf is counted by n, never NUL-terminated. */
                memcpy(buf, prefix, sizeof(prefix) - 1);
                n = sizeof(prefix) - 1;
        }
        memcpy(buf + n, s, len);
        n += len;
        if (n > max) {
                /* Cut, and tell cut names apart by a hash of the part. */
                _cleanup_free_ char *part = strndup(s, len);
                if (!part)
                        return -ENOMEM;
                n = max - 9;
                snprintf(buf + n, sizeof(buf) - n, "-%08x", base_fnv1a32(part));
                n = max;
        }
        memcpy(out, buf, n);
        *ret_len = n;
        return 0;
}

int cdi_kind_from_resource(const char *resource, char **ret_kind) {
        const char *slash;
        char kind[CDI_MAX_VENDOR + 1 + CDI_MAX_CLASS + 1];
        size_t vlen, clen;
        int r;

        if (!resource)
                return -EINVAL;
        /* Extended resources are "domain/name" just like kinds, so a name
         * that is a valid kind carries over unchanged; only names no CDI
         * consumer would accept are rewritten. */
        if (cdi_kind_is_valid(resource)) {
                char *k = strdup(resource);
                if (!k)
                        return -ENOMEM;
                *ret_kind = k;
                return 0;
        }
        slash = strchr(resource, '/');
        if (!slash || strchr(slash + 1, '/'))
                return -EINVAL;
        r = kind_part(resource, (size_t)(slash - resource), CDI_MAX_VENDOR, kind, &vlen);
        if (r < 0)
                return r;
        kind[vlen] = '/';
        r = kind_part(slash + 1, strlen(slash + 1), CDI_MAX_CLASS, kind + vlen + 1, &clen);
        if (r < 0)
                return r;
        kind[vlen + 1 + clen] = '\0';
        if (!cdi_kind_is_valid(kind))
                return -EINVAL;
        char *k = strdup(kind);
        if (!k)
                return -ENOMEM;
        *ret_kind = k;
        return 0;
}

int cdi_annotation_key(const char *resource, char **ret_key) {
        static const char prefix[] = "cdi.k8s.io/";
        char name[CDI_MAX_ANNOTATION_NAME + 1];
        size_t n;
        int r;

        if (!resource || !*resource)
                return -EINVAL;
        r = snprintf(name, sizeof(name), "cdiplug_%s", resource);
        if (r < 0)
                return -EINVAL;
        /* A long one keeps its start and gets a hash of the whole name,
         * which keeps keys distinct and ending alphanumeric. */
        if ((size_t)r >= sizeof(name))
                snprintf(name + CDI_MAX_ANNOTATION_NAME - 9, 10, "-%08x", base_fnv1a32(resource));
        for (char *c = name; *c; c++)
                if (*c == '/')
                        *c = '-';
        if (!cdi_annotation_name_is_valid(name))
                return -EINVAL;
        n = strlen(prefix) + strlen(name) + 1;
        char *key = malloc(n);
        if (!key)
                return -ENOMEM;
        snprintf(key, n, "%s%s", prefix, name);
        *ret_key = key;
        return 0;
}

bool cdi_annotation_name_is_valid(const char *name) {
        size_t len;

        if (!name)
                return false;
        len = strlen(name);
        if (len == 0 || len > CDI_MAX_ANNOTATION_NAME || !is_alnum(name[0]) ||
            !is_alnum(name[len - 1]))
                return false;
        for (size_t i = 1; i + 1 < len; i++)
                if (!vendor_class_char(name[i]))
                        return false;
        return true;
}

int cdi_device_name(const char *id, char **ret_name) {
        _cleanup_free_ char *name = NULL;
        size_t len, start = 0, n = 0, cap;
        int r;

        if (!id || !*id)
                return -EINVAL;
        len = strlen(id);
        if (len > CDI_MAX_DEVICE_ID)
                return -ENAMETOOLONG;

        if (cdi_device_name_is_valid(id)) {
                name = strdup(id);
                if (!name)
                        return -ENOMEM;
                *ret_name = TAKE_PTR(name);
                return 0;
        }

        /* The rules are spelled out at cdi_device_name in cdi.h. Dropping
         * the leading punctuation keeps "/dev/ttyS0" readable as
         * "dev_ttyS0-..." rather than inventing a prefix. */
        while (start < len && !is_alnum(id[start]))
                start++;

        /* "dev-" + kept chars + "-" + 8 hex + NUL */
        cap = 4 + (len - start) + 1 + 8 + 1;
        name = malloc(cap);
        if (!name)
                return -ENOMEM;
        if (start == len) {
                memcpy(name, "dev", 3);
                n = 3;
        }
        for (size_t i = start; i < len; i++)
                name[n++] = device_char(id[i]) ? id[i] : '_';
        r = snprintf(name + n, cap - n, "-%08x", base_fnv1a32(id));
        if (r < 0 || (size_t)r >= cap - n)
                return -EOVERFLOW;

        *ret_name = TAKE_PTR(name);
        return 0;
}

int cdi_qualified_name(const char *kind, const char *name, char **ret) {
        size_t klen, nlen;
        char *q;

        if (!cdi_kind_is_valid(kind) || !cdi_device_name_is_valid(name))
                return -EINVAL;
        klen = strlen(kind);
        nlen = strlen(name);
        q = malloc(klen + 1 + nlen + 1);
        if (!q)
                return -ENOMEM;
        memcpy(q, kind, klen);
        q[klen] = '=';
        memcpy(q + klen + 1, name, nlen + 1);
        *ret = q;
        return 0;
}

int cdi_spec_file_name(const char *kind, char **ret_name) {
        static const char ext[] = ".json";
        size_t klen, keep;
        char *name, *slash;

        /* A valid kind holds only [A-Za-z0-9_.-] besides its one '/', and
         * starts with a letter: replacing the '/' yields a plain, visible
         * file name with no further sanitising. */
        if (!cdi_kind_is_valid(kind))
                return -EINVAL;
        klen = strlen(kind);
        /* The file name is ours to choose (consumers load every *.json),
         * so a kind too long for one keeps its start and gets a hash of
         * the whole kind. */
        keep = klen + strlen(ext) <= NAME_MAX ? klen : NAME_MAX - strlen(ext) - 9;
        name = malloc(NAME_MAX + 1);
        if (!name)
                return -ENOMEM;
        memcpy(name, kind, keep);
        if (keep < klen)
                keep += (size_t)snprintf(name + keep, NAME_MAX + 1 - keep, "-%08x",
                                         base_fnv1a32(kind));
        memcpy(name + keep, ext, sizeof(ext));
        slash = strchr(name, '/');
        if (slash)
                *slash = '-';
        *ret_name = name;
        return 0;
}
