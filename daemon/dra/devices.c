/* SPDX-License-Identifier: Apache-2.0 */
/* The ResourceSlice devices of a resource (resource.k8s.io/v1 Device:
 * name and attributes, with no "basic" wrapper as v1beta1 had). */
#include <stdio.h>
#include <string.h>

#include "model-internal.h"
#include "resources.h"

/* The qualified name Kubernetes defines for a PCI address in extended
 * BDF notation (k8s.io/dynamic-resource-allocation/deviceattribute,
 * StandardDeviceAttributePCIBusID): one name across drivers, so a claim
 * can match a device of ours with another driver's by address. */
#define DRA_ATTR_PCI_BUS_ID "resource.kubernetes.io/pciBusID"

/* Attribute names, unqualified (the driver's domain) but for the PCI
 * address. At most seven a device, well under the API's limit. */
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

static int add_hex(cJSON *attrs, const char *key, uint16_t value) {
        char s[8];

        snprintf(s, sizeof(s), "0x%04x", value);
        return add_string(attrs, key, s);
}

/* Upstream's format for pciBusID is "dddd:bb:dd.f" exactly: an address
 * in a wider (VMD) domain is left out rather than published in a form
 * consumers refuse. */
static bool is_bdf(const char *a) {
        return strlen(a) == 12 && a[4] == ':' && a[7] == ':' && a[10] == '.';
}

static int add_identity(cJSON *attrs, const struct res_identity *id) {
        int r = 0;

        if (id->bus == RES_BUS_PCI) {
                r = add_hex(attrs, "pciVendorID", id->vendor);
                if (r >= 0)
                        r = add_hex(attrs, "pciDeviceID", id->product);
                if (r >= 0 && is_bdf(id->address))
                        r = add_string(attrs, DRA_ATTR_PCI_BUS_ID, id->address);
        } else if (id->bus == RES_BUS_USB) {
                r = add_hex(attrs, "usbVendorID", id->vendor);
                if (r >= 0)
                        r = add_hex(attrs, "usbProductID", id->product);
                if (r >= 0 && id->serial[0])
                        r = add_string(attrs, "usbSerial", id->serial);
        }
        return r;
}

static int device_json(const struct dp_plugin *p, size_t i, const char *name, const char *resource,
                       const struct res_identity *idents, cJSON *arr) {
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
        if (r >= 0 && idents)
                r = add_identity(attrs, &idents[dev]);
        return r;
}

int dra_devices_json(const struct dp_plugin *p, const char *resource, cJSON **ret) {
        return dra_devices_json_ids(p, resource, NULL, ret);
}

int dra_devices_json_ids(const struct dp_plugin *p, const char *resource,
                         const struct res_identity *idents, cJSON **ret) {
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
                        r = device_json(p, i, dra_names_get(&names, i), resource, idents, arr);
        clashes = names.n_clashes;
        dra_names_clear(&names);
        if (r < 0) {
                cJSON_Delete(arr);
                return r;
        }
        *ret = arr;
        return clashes > INT32_MAX ? INT32_MAX : (int)clashes;
}
