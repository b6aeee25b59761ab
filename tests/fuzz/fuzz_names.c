/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the name derivations: CDI kind, spec file name and qualified name
 * from a resource name; CDI device name from a device ID; device and share
 * IDs from a node path. Whatever is derived must pass the matching grammar
 * check (what CDI consumers and the kubelet enforce), come out the same
 * twice, and stay within its length limit. The input is one name; a NUL
 * ends it. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cdi.h"
#include "config.h"
#include "fuzz.h"
#include "resources.h"

static void resource_names(const char *s) {
        char *kind = NULL, *again = NULL;
        (void)cfg_resource_name_problem(s);
        if (cdi_kind_from_resource(s, &kind) < 0)
                return;
        FUZZ_CHECK(cdi_kind_is_valid(kind));
        FUZZ_CHECK(cdi_kind_from_resource(s, &again) == 0 && strcmp(kind, again) == 0);
        char *file = NULL;
        int r = cdi_spec_file_name(kind, &file);
        FUZZ_CHECK(r == 0 || r == -ENAMETOOLONG);
        if (r == 0)
                FUZZ_CHECK(file[0] != '.' && !strchr(file, '/'));
        free(file);
        char *q = NULL;
        FUZZ_CHECK(cdi_qualified_name(kind, "dev0", &q) == 0);
        free(q);
        free(again);
        free(kind);
}

static void device_names(const char *s) {
        char *name = NULL, *again = NULL;
        int r = cdi_device_name(s, &name);
        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL || r == -ENAMETOOLONG);
                return;
        }
        FUZZ_CHECK(cdi_device_name_is_valid(name));
        FUZZ_CHECK(cdi_device_name(s, &again) == 0 && strcmp(name, again) == 0);
        /* Rule 1: a valid name is kept as it is. */
        if (cdi_device_name_is_valid(s))
                FUZZ_CHECK(strcmp(s, name) == 0);
        free(again);
        free(name);
}

static bool id_ok(const char *id) {
        size_t n = strlen(id);
        if (n == 0 || n > RES_ID_MAX)
                return false;
        for (const char *c = id; *c; c++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
                            *c))
                        return false;
        return true;
}

static void device_ids(const char *s) {
        char *id = NULL;
        int r = res_id_from_path(s, &id);
        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL || r == -ENOMEM);
                return;
        }
        FUZZ_CHECK(id_ok(id));
        for (unsigned k = 0; k < 3; k++) {
                char *share = NULL;
                FUZZ_CHECK(res_share_id(id, k, 1024, &share) == 0);
                FUZZ_CHECK(strlen(share) <= RES_ID_MAX);
                free(share);
        }
        free(id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        resource_names(s);
        device_names(s);
        device_ids(s);
        free(s);
        return 0;
}
