/* SPDX-License-Identifier: Apache-2.0 */
/* The ResourceSlice devices of a resource (resource.k8s.io/v1 Device:
 * name and attributes, with no "basic" wrapper as v1beta1 had). */
#include <string.h>

#include "model-internal.h"

/* Attribute names, unqualified: the driver's domain. At most four a
 * device, well under the API's limit. */
static int add_string(cJSON *attrs, const char *key, const char *value) {
        cJSON *a;

        /* The API refuses longer strings, and with them the whole slice. */
        if (strlen(value) > DRA_ATTR_STRING_MAX)
                return 0;
        a = cJSON_AddObjectToObject(attrs, key);
        return a && cJSON_AddStringToObject(a, "string", value) ? 0 : -ENOMEM;
}

static int add_int(cJSON *attrs, const char *key, int64_t value) {
        cJSON *a = cJSON_AddObjectToObject(attrs, key);

        return a && cJSON_AddNumberToObject(a, "int", (double)value) ? 0 : -ENOMEM;
}

static int device_json(const struct dp_plugin *p, size_t i, const char *name, const char *resource,
                       cJSON *arr) {
        size_t dev = dp_plugin_id_dev(p, i);
        const struct dp_device *d = &p->devs[dev];
        cJSON *o = cJSON_CreateObject(), *attrs;
        int r;

        if (!o || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        attrs = cJSON_AddStringToObject(o, "name", name) ? cJSON_AddObjectToObject(o, "attributes")
                                                         : NULL;
        if (!attrs)
                return -ENOMEM;
        r = add_string(attrs, "resource", resource);
        if (r >= 0 && d->n_nodes > 0)
                r = add_string(attrs, "path", dp_str_next(dp_device_id(p, dev)));
        if (r >= 0 && d->numa_node >= 0)
                r = add_int(attrs, "numaNode", d->numa_node);
        /* Shares of one device: the device they are shares of, so a
         * selector can ask for (or avoid) shares of the same device. */
        if (r >= 0 && p->shares)
                r = add_string(attrs, "device", dp_device_id(p, dev));
        return r;
}

int dra_devices_json(const struct dp_plugin *p, const char *resource, cJSON **ret) {
        struct dra_names names;
        cJSON *arr;
        size_t clashes;
        int r;

        if (dra_resource_problem(resource))
                return -ENAMETOOLONG;
        r = dra_names_build(p, &names);
        if (r < 0)
                return r;
        arr = cJSON_CreateArray();
        r = arr ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < p->n_ids; i++)
                if (!names.dropped[i] && dra_listing(p, i) == DRA_HEALTHY)
                        r = device_json(p, i, dra_names_get(&names, i), resource, arr);
        clashes = names.n_clashes;
        dra_names_clear(&names);
        if (r < 0) {
                cJSON_Delete(arr);
                return r;
        }
        *ret = arr;
        return clashes > INT32_MAX ? INT32_MAX : (int)clashes;
}
