/* SPDX-License-Identifier: Apache-2.0 */
/* Device IDs: what the kubelet checkpoints and hands back in Allocate, so
 * they must come out the same after a restart and never exceed its limit. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "res-internal.h"

/* 16 hex digits of hash after a '-': an over-long ID keeps its first
 * RES_ID_MAX - 17 characters, so a human still recognises it. */
#define HASH_HEX 16
#define KEEP_PREFIX (RES_ID_MAX - 1 - HASH_HEX)

/* shown: the sanitised ID; hash_of: what makes it unique (the raw path,
 * before sanitising folded distinct characters together). */
static int shorten(const char *shown, const char *hash_of, char **ret) {
        size_t len = strlen(shown);
        if (len <= RES_ID_MAX) {
                char *s = strdup(shown);
                if (!s)
                        return -ENOMEM;
                *ret = s;
                return 0;
        }
        char *s = malloc(RES_ID_MAX + 1);
        if (!s)
                return -ENOMEM;
        int n = snprintf(s, RES_ID_MAX + 1, "%.*s-%016llx", KEEP_PREFIX, shown,
                         (unsigned long long)base_fnv1a64(hash_of));
        if (n != RES_ID_MAX) {
                free(s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

int res_id_fit(const char *full, char **ret) {
        return shorten(full, full, ret);
}

static bool id_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
}

int res_id_from_path(const char *host_path, char **ret_id) {
        if (!host_path || host_path[0] != '/')
                return -EINVAL;
        const char *rel = host_path;
        if (strncmp(rel, "/dev/", 5) == 0)
                rel += 5;
        while (*rel == '/')
                rel++;
        if (!*rel)
                return -EINVAL;

        _cleanup_free_ char *s = strdup(rel);
        if (!s)
                return -ENOMEM;
        for (char *p = s; *p; p++) {
                if (*p == '/')
                        *p = '-';
                else if (!id_char_ok(*p))
                        *p = '_';
        }
        return shorten(s, rel, ret_id);
}

int res_id_sanitize(const char *raw, char **ret) {
        if (!raw || !*raw)
                return -EINVAL;
        _cleanup_free_ char *s = strdup(raw);
        if (!s)
                return -ENOMEM;
        for (char *p = s; *p; p++)
                if (!id_char_ok(*p))
                        *p = '_';
        return shorten(s, raw, ret);
}

int res_share_id(const char *dev_id, unsigned k, unsigned shares, char **ret_id) {
        if (!dev_id || !*dev_id || shares == 0 || k >= shares)
                return -EINVAL;
        if (shares == 1)
                return res_id_fit(dev_id, ret_id);
        _cleanup_free_ char *full = res_strdup_printf("%s-%u", dev_id, k);
        if (!full)
                return -ENOMEM;
        return res_id_fit(full, ret_id);
}
