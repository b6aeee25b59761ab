/* SPDX-License-Identifier: Apache-2.0 */
/* What cdiplug's own spec file on disk defines, compared device by device
 * with a spec it could not write. While a CDI dir is full or read-only,
 * the file there is what runtimes resolve names through: a device it
 * defines exactly as now may still be offered, one it defines with other
 * nodes or edits resolves to the old ones, and one it lacks cannot
 * start. Compared as JSON, as cdi_spec_to_json writes it, so "the same"
 * means what a runtime would read is the same. */
#include <fcntl.h>
#include <string.h>

#include "cdi-internal.h"
#include "cdi.h"

static const char *name_of(const cJSON *dev) {
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dev, "name"));
}

static int cmp_dev(const void *a, const void *b) {
        const char *x = name_of(*(const cJSON *const *)a), *y = name_of(*(const cJSON *const *)b);
        return strcmp(x ? x : "", y ? y : "");
}

/* The file's devices with a name, sorted by name, for bsearch. */
/* bsearch's: a device name against a (named) device. */
static int cmp_name(const void *key, const void *dev) {
        return strcmp(key, name_of(*(const cJSON *const *)dev));
}

static int sorted_devices(const cJSON *devices, const cJSON ***ret, size_t *ret_n) {
        size_t n = 0, cap = (size_t)cJSON_GetArraySize(devices);
        const cJSON **v = calloc(cap + 1, sizeof(*v));
        const cJSON *dev;

        if (!v)
                return -ENOMEM;
        cJSON_ArrayForEach(dev, devices) {
                if (n < cap && name_of(dev))
                        v[n++] = dev;
        }
        if (n > 1)
                qsort(v, n, sizeof(*v), cmp_dev);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* Marks defined/same from the parsed file `disk` against `want`. */
static int compare(const cJSON *disk, const cJSON *want, const char *kind, bool *defined,
                   bool *same, size_t n) {
        const cJSON *dk = cJSON_GetObjectItemCaseSensitive(disk, "kind");
        _cleanup_free_ const cJSON **devs = NULL;
        size_t n_devs = 0;
        const cJSON *wd;
        size_t i = 0;

        if (!cJSON_IsString(dk) || strcmp(dk->valuestring, kind) != 0)
                return 0;
        int r = sorted_devices(cJSON_GetObjectItemCaseSensitive(disk, "devices"), &devs, &n_devs);
        if (r < 0)
                return r;
        /* Edits for every device: if they differ, no device is the same. */
        const cJSON *de = cJSON_GetObjectItemCaseSensitive(disk, "containerEdits");
        const cJSON *we = cJSON_GetObjectItemCaseSensitive(want, "containerEdits");
        bool edits_same = (!de && !we) || (de && we && cJSON_Compare(de, we, true));
        cJSON_ArrayForEach(wd, cJSON_GetObjectItemCaseSensitive(want, "devices")) {
                if (i >= n)
                        break;
                const char *name = name_of(wd);
                const cJSON **hit = name && n_devs
                                            ? bsearch(name, devs, n_devs, sizeof(*devs), cmp_name)
                                            : NULL;
                defined[i] = hit != NULL;
                same[i] = hit && edits_same && cJSON_Compare(*hit, wd, true);
                i++;
        }
        return 0;
}

int cdi_spec_compare(const char *dir, const struct cdi_spec *spec, bool **ret_defined,
                     bool **ret_same) {
        _cleanup_free_ bool *defined = calloc(spec->n_devices + 1, sizeof(bool));
        _cleanup_free_ bool *same = calloc(spec->n_devices + 1, sizeof(bool));
        _cleanup_free_ char *json = NULL, *name = NULL, *text = NULL;
        _cleanup_json_ cJSON *want = NULL, *disk = NULL;
        _cleanup_close_ int dfd = -1;
        bool owned = false;
        size_t len;
        int r;

        if (!defined || !same)
                return -ENOMEM;
        r = cdi_spec_to_json(spec, &json);
        if (r >= 0)
                r = cdi_spec_file_name(spec->kind, &name);
        if (r < 0)
                return r;
        /* Anything unreadable defines nothing: offering less is safe. */
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0 && cdi_spec_is_owned_at(dfd, name, &owned) >= 0 && owned &&
            cdi_read_file_at(dfd, name, true, &text, &len) >= 0 && strlen(text) == len) {
                want = cJSON_Parse(json);
                disk = cJSON_Parse(text);
                if (!want)
                        return -ENOMEM;
                if (disk) {
                        r = compare(disk, want, spec->kind, defined, same, spec->n_devices);
                        if (r < 0)
                                return r;
                }
        }
        *ret_defined = TAKE_PTR(defined);
        *ret_same = TAKE_PTR(same);
        return 0;
}
