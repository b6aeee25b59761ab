/* SPDX-License-Identifier: Apache-2.0 */
#include "cdigrammar.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool letter(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
static bool alnum(char c) {
        return letter(c) || (c >= '0' && c <= '9');
}

/* validateVendorOrClassName: the first byte must be a letter, then the
 * slice name[1:len-1] is ranged over (Go panics when len is 1: [1:0]),
 * then the last byte must be a letter or digit. */
static const char *vendor_or_class(const char *s, const char *extra) {
        size_t len = strlen(s);

        if (len == 0)
                return "empty name";
        if (!letter(s[0]))
                return "should start with letter";
        if (len == 1)
                return "panic: slice bounds out of range [1:0]";
        for (size_t i = 1; i + 1 < len; i++)
                if (!alnum(s[i]) && !strchr(extra, s[i]))
                        return "invalid character";
        if (!alnum(s[len - 1]))
                return "should end with a letter or digit";
        return NULL;
}

const char *cdig_vendor(const char *s) {
        return vendor_or_class(s, "_-.");
}

const char *cdig_class(const char *s, enum cdig_lib lib) {
        return vendor_or_class(s, lib == CDIG_LIB_05 ? "_-" : "_-.");
}

const char *cdig_device_name(const char *s) {
        size_t len = strlen(s);

        if (len == 0)
                return "invalid (empty) device name";
        if (!alnum(s[0]))
                return "should start with a letter or digit";
        if (len == 1)
                return NULL;
        for (size_t i = 1; i + 1 < len; i++)
                if (!alnum(s[i]) && !strchr("_-.:", s[i]))
                        return "invalid character in device name";
        if (!alnum(s[len - 1]))
                return "should end with a letter or digit";
        return NULL;
}

const char *cdig_annotation_name(const char *s) {
        size_t len = strlen(s);

        if (len == 0)
                return "empty";
        if (len > 63)
                return "too long";
        if (!alnum(s[0]))
                return "first should be alphanumeric";
        for (size_t i = 1; len > 2 && i + 1 < len; i++)
                if (!alnum(s[i]) && !strchr("_-.", s[i]))
                        return "invalid character";
        if (!alnum(s[len - 1]))
                return "last should be alphanumeric";
        return NULL;
}

/* "0.M.0" -> M, -1 for anything else. */
static int minor_of(const char *v) {
        int major, minor, patch, n = 0;

        /* Only the spec's own version strings, a handful of digits; the
         * count and %n refuse anything else. NOLINTNEXTLINE(cert-err34-c) */
        if (sscanf(v, "%d.%d.%d%n", &major, &minor, &patch, &n) != 3 || v[n] || major != 0 ||
            patch != 0)
                return -1;
        return minor;
}

static bool any_host_path(const cJSON *edits) {
        const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(edits, "deviceNodes"), *n;

        cJSON_ArrayForEach(n, nodes) if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(
                                                 n, "hostPath"))) return true;
        return false;
}

unsigned cdig_spec_readers(const char *json, const char **ret_why) {
        cJSON *doc = cJSON_Parse(json);
        const cJSON *ver, *kind, *devs, *d;
        const char *why = NULL, *slash;
        char vendor[512] = "", class_[512] = "";
        int minor, need = 3;
        unsigned readers = CDIG_LIB_05 | CDIG_LIB_06;

        ver = cJSON_GetObjectItemCaseSensitive(doc, "cdiVersion");
        kind = cJSON_GetObjectItemCaseSensitive(doc, "kind");
        devs = cJSON_GetObjectItemCaseSensitive(doc, "devices");
        if (!doc || !cJSON_IsString(ver) || !cJSON_IsString(kind) || !cJSON_IsArray(devs) ||
            cJSON_GetArraySize(devs) == 0) {
                why = "not a spec";
                readers = 0;
                goto out;
        }
        minor = minor_of(ver->valuestring);
        /* ParseQualifier: split at the first '/'. */
        slash = strchr(kind->valuestring, '/');
        if (!slash || slash == kind->valuestring || !slash[1] ||
            (size_t)(slash - kind->valuestring) >= sizeof(vendor) ||
            strlen(slash + 1) >= sizeof(class_)) {
                why = "kind is not vendor/class";
                readers = 0;
                goto out;
        }
        memcpy(vendor, kind->valuestring, (size_t)(slash - kind->valuestring));
        strcpy(class_, slash + 1);
        if ((why = cdig_vendor(vendor)) || (why = cdig_class(class_, CDIG_LIB_06))) {
                readers = 0;
                goto out;
        }
        if (cdig_class(class_, CDIG_LIB_05))
                readers &= ~(unsigned)CDIG_LIB_05;
        if (strchr(class_, '.'))
                need = 6;
        if (any_host_path(cJSON_GetObjectItemCaseSensitive(doc, "containerEdits")) && need < 5)
                need = 5;
        cJSON_ArrayForEach(d, devs) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(d, "name");
                if (!cJSON_IsString(name) || (why = cdig_device_name(name->valuestring))) {
                        why = why ? why : "device without a name";
                        readers = 0;
                        goto out;
                }
                if (!letter(name->valuestring[0]) && need < 5)
                        need = 5;
                if (any_host_path(cJSON_GetObjectItemCaseSensitive(d, "containerEdits")) &&
                    need < 5)
                        need = 5;
        }
        if (minor < 3 || minor > 8 || minor < need) {
                why = "cdiVersion lower than the content needs";
                readers = 0;
                goto out;
        }
        /* The 0.5.x library knows versions up to 0.5.0 only. */
        if (minor > 5)
                readers &= ~(unsigned)CDIG_LIB_05;
out:
        cJSON_Delete(doc);
        if (ret_why)
                *ret_why = why;
        return readers;
}
