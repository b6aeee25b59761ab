/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing of one "match" entry. Every error names the key it is about, so
 * the daemon can point the operator at the exact spot in the config. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "res-internal.h"

#define fail base_field_error_set

void res_selector_free(struct res_selector *sel) {
        if (!sel)
                return;
        for (size_t i = 0; i < sel->n_globs; i++)
                free(sel->globs[i]);
        free(sel->globs);
        free(sel->usb_serial);
        free(sel->pci_driver);
        base_edits_clear(&sel->edits);
        for (size_t i = 0; i < sel->n_attrs; i++) {
                free(sel->attrs[i].name);
                free(sel->attrs[i].glob);
        }
        free(sel->attrs);
        free(sel->subsystem);
        free(sel->driver);
        free(sel->kernel);
        free(sel);
}

static void selector_freep(struct res_selector **p) {
        res_selector_free(*p);
}

/* A path the config names must be absolute and clean: "." and ".." would
 * make IDs and watch directories ambiguous, and ".." could leave /dev. */
static const char *path_problem(const char *s) {
        if (!*s)
                return "must not be empty";
        if (s[0] != '/')
                return "must be an absolute path";
        if (strlen(s) >= PATH_MAX)
                return "is too long";
        if (s[strlen(s) - 1] == '/')
                return "must name a node, not end in '/'";
        for (const char *p = s; (p = strchr(p, '/')); p++) {
                const char *c = p + 1;
                size_t len = strcspn(c, "/");
                if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return "must not contain \".\" or \"..\" components";
        }
        return NULL;
}

static int parse_glob(const cJSON *item, const char *field, char **ret,
                      struct base_field_error *e) {
        if (!cJSON_IsString(item))
                return fail(e, field, "must be a string (a path glob)");
        const char *problem = path_problem(item->valuestring);
        if (problem)
                return fail(e, field, "%s", problem);
        char *s = strdup(item->valuestring);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int parse_path(struct res_selector *sel, const cJSON *item, const char *key,
                      struct base_field_error *e) {
        sel->globs = calloc(1, sizeof(char *));
        if (!sel->globs)
                return -ENOMEM;
        int r = parse_glob(item, key, &sel->globs[0], e);
        if (r < 0)
                return r;
        sel->n_globs = 1;
        return 0;
}

static int parse_paths(struct res_selector *sel, const cJSON *item, const char *key,
                       struct base_field_error *e) {
        if (!cJSON_IsArray(item))
                return fail(e, key, "must be an array of path globs");
        int n = cJSON_GetArraySize(item);
        if (n == 0)
                return fail(e, key, "must not be empty");
        if (n > RES_MAX_PATHS)
                return fail(e, key, "has more than %d globs", RES_MAX_PATHS);
        sel->globs = calloc((size_t)n, sizeof(char *));
        if (!sel->globs)
                return -ENOMEM;
        const cJSON *g;
        cJSON_ArrayForEach(g, item) {
                _cleanup_free_ char *field = res_strdup_printf("%s[%zu]", key, sel->n_globs);
                if (!field)
                        return -ENOMEM;
                int r = parse_glob(g, field, &sel->globs[sel->n_globs], e);
                if (r < 0)
                        return r;
                sel->n_globs++;
        }
        return 0;
}

static int parse_hex_field(const cJSON *item, const char *field, unsigned digits, uint32_t *ret,
                           struct base_field_error *e) {
        if (!cJSON_IsString(item))
                return fail(e, field, "must be a string of up to %u hex digits", digits);
        if (res_parse_hex(item->valuestring, digits, ret) < 0)
                return fail(e, field, "\"%s\" is not up to %u hex digits", item->valuestring,
                            digits);
        return 0;
}

static int parse_name(const cJSON *item, const char *field, char **ret,
                      struct base_field_error *e) {
        if (!cJSON_IsString(item))
                return fail(e, field, "must be a string");
        if (!*item->valuestring)
                return fail(e, field, "must not be empty");
        char *s = strdup(item->valuestring);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* cJSON keeps both of {"a":1,"a":2}; a document that says a thing twice
 * is a mistake, not a choice of the last one. The one check, for the
 * config's objects and the selectors' alike. */
const cJSON *res_json_duplicate_key(const cJSON *obj) {
        for (const cJSON *a = obj->child; a; a = a->next)
                for (const cJSON *b = a->next; b; b = b->next)
                        if (strcmp(a->string, b->string) == 0)
                                return b;
        return NULL;
}

/* A duplicate key of obj, as an error on the field prefix.KEY (KEY alone
 * when prefix is ""). */
static int refuse_duplicate(const cJSON *obj, const char *prefix, struct base_field_error *e) {
        const cJSON *dup = res_json_duplicate_key(obj);

        if (!dup)
                return 0;
        _cleanup_free_ char *field =
                res_strdup_printf("%s%s%s", prefix, *prefix ? "." : "", dup->string);
        return field ? fail(e, field, "duplicate key") : -ENOMEM;
}

/* A key of a selector object and what reads its value: field is its
 * JSON path within the entry ("usb.vendor"). */
struct key_parser {
        const char *key;
        int (*parse)(struct res_selector *sel, const cJSON *item, const char *field,
                     struct base_field_error *e);
};

static const struct key_parser *find_key(const struct key_parser *keys, size_t n, const char *key) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(keys[i].key, key) == 0)
                        return &keys[i];
        return NULL;
}

/* Each of obj's members read by its key's parser, under the field
 * prefix.KEY; a key not in keys is refused with the list expected. */
static int parse_keys(struct res_selector *sel, const cJSON *obj, const char *prefix,
                      const struct key_parser *keys, size_t n, const char *expected,
                      struct base_field_error *e) {
        const cJSON *item;
        int r = refuse_duplicate(obj, prefix, e);

        if (r < 0)
                return r;
        cJSON_ArrayForEach(item, obj) {
                _cleanup_free_ char *field = res_strdup_printf("%s.%s", prefix, item->string);
                if (!field)
                        return -ENOMEM;
                const struct key_parser *k = find_key(keys, n, item->string);
                r = k ? k->parse(sel, item, field, e)
                      : fail(e, field, "unknown key (expected %s)", expected);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int usb_vendor(struct res_selector *sel, const cJSON *item, const char *field,
                      struct base_field_error *e) {
        uint32_t v = 0; /* the analyzer cannot tell it is set on success */
        int r = parse_hex_field(item, field, 4, &v, e);

        if (r < 0)
                return r;
        sel->usb_vendor = (uint16_t)v;
        sel->has_usb_vendor = true;
        return 0;
}

static int usb_product(struct res_selector *sel, const cJSON *item, const char *field,
                       struct base_field_error *e) {
        uint32_t v = 0; /* the analyzer cannot tell it is set on success */
        int r = parse_hex_field(item, field, 4, &v, e);

        if (r < 0)
                return r;
        sel->usb_product = (uint16_t)v;
        sel->has_usb_product = true;
        return 0;
}

static int usb_serial(struct res_selector *sel, const cJSON *item, const char *field,
                      struct base_field_error *e) {
        return parse_name(item, field, &sel->usb_serial, e);
}

static const struct key_parser usb_keys[] = {
        { "vendor", usb_vendor },
        { "product", usb_product },
        { "serial", usb_serial },
};

static int parse_usb(struct res_selector *sel, const cJSON *obj, const char *key,
                     struct base_field_error *e) {
        if (!cJSON_IsObject(obj))
                return fail(e, key, "must be an object like {\"vendor\": \"046d\"}");
        int r = parse_keys(sel, obj, key, usb_keys, ELEMENTSOF(usb_keys), "vendor, product, serial",
                           e);
        if (r < 0)
                return r;
        if (!sel->has_usb_vendor)
                return fail(e, "usb.vendor", "is required");
        return 0;
}

static int pci_vendor(struct res_selector *sel, const cJSON *item, const char *field,
                      struct base_field_error *e) {
        uint32_t v = 0; /* the analyzer cannot tell it is set on success */
        int r = parse_hex_field(item, field, 4, &v, e);

        if (r < 0)
                return r;
        sel->pci_vendor = (uint16_t)v;
        sel->has_pci_vendor = true;
        return 0;
}

static int pci_device(struct res_selector *sel, const cJSON *item, const char *field,
                      struct base_field_error *e) {
        uint32_t v = 0; /* the analyzer cannot tell it is set on success */
        int r = parse_hex_field(item, field, 4, &v, e);

        if (r < 0)
                return r;
        sel->pci_device = (uint16_t)v;
        sel->has_pci_device = true;
        return 0;
}

static int pci_class(struct res_selector *sel, const cJSON *item, const char *field,
                     struct base_field_error *e) {
        int r = parse_hex_field(item, field, 6, &sel->pci_class, e);

        sel->has_pci_class = r >= 0;
        return r;
}

static int pci_class_mask(struct res_selector *sel, const cJSON *item, const char *field,
                          struct base_field_error *e) {
        int r = parse_hex_field(item, field, 6, &sel->pci_class_mask, e);

        sel->has_pci_class_mask = r >= 0;
        return r;
}

static int pci_driver(struct res_selector *sel, const cJSON *item, const char *field,
                      struct base_field_error *e) {
        int r = parse_name(item, field, &sel->pci_driver, e);

        if (r < 0)
                return r;
        /* parse_name sets it when it returns 0; the analyzer does not
         * follow fail(), a variadic, to see that it always returns a
         * negative errno.
         * NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
        if (strchr(sel->pci_driver, '/'))
                return fail(e, field, "must be a driver name, not a path");
        return 0;
}

static const struct key_parser pci_keys[] = {
        { "vendor", pci_vendor },         { "device", pci_device }, { "class", pci_class },
        { "class_mask", pci_class_mask }, { "driver", pci_driver },
};

static int parse_pci(struct res_selector *sel, const cJSON *obj, const char *key,
                     struct base_field_error *e) {
        if (!cJSON_IsObject(obj))
                return fail(e, key, "must be an object like {\"vendor\": \"10de\"}");
        int r = parse_keys(sel, obj, key, pci_keys, ELEMENTSOF(pci_keys),
                           "vendor, device, class, class_mask, driver", e);
        if (r < 0)
                return r;
        if (sel->has_pci_class_mask && !sel->has_pci_class)
                return fail(e, "pci.class_mask", "needs \"class\"");
        if (!sel->has_pci_vendor && !sel->has_pci_device && !sel->has_pci_class && !sel->pci_driver)
                return fail(e, key, "needs at least one of vendor, device, class, driver");
        if (!sel->has_pci_class_mask)
                sel->pci_class_mask = 0xffffff;
        sel->pci_class &= sel->pci_class_mask;
        return 0;
}

static int parse_env(struct res_selector *sel, const cJSON *obj, const char *key,
                     struct base_field_error *e) {
        if (!cJSON_IsObject(obj))
                return fail(e, key, "must be an object of strings");
        int r = refuse_duplicate(obj, key, e);
        if (r < 0)
                return r;
        struct base_strvec sv = { 0 };
        const cJSON *item;
        cJSON_ArrayForEach(item, obj) {
                _cleanup_free_ char *field = res_strdup_printf("%s.%s", key, item->string);
                if (!field) {
                        r = -ENOMEM;
                        break;
                }
                if (!*item->string || strchr(item->string, '=')) {
                        r = fail(e, field, "is not a valid variable name");
                        break;
                }
                if (!cJSON_IsString(item)) {
                        r = fail(e, field, "must be a string");
                        break;
                }
                r = base_strvec_push(&sv,
                                     res_strdup_printf("%s=%s", item->string, item->valuestring));
                if (r < 0)
                        break;
        }
        if (r < 0) {
                base_strvec_clear(&sv);
                return r;
        }
        sel->edits.env = sv.v ? sv.v : calloc(1, sizeof(char *));
        return sel->edits.env ? 0 : -ENOMEM;
}

/* A mount's keys: where each path goes, and readOnly, its one flag. */
#define MOUNT_FLAG SIZE_MAX
static const struct {
        const char *key;
        size_t path; /* offset of its char * in base_mount, or MOUNT_FLAG */
} mount_keys[] = {
        { "hostPath", offsetof(struct base_mount, host_path) },
        { "containerPath", offsetof(struct base_mount, container_path) },
        { "readOnly", MOUNT_FLAG },
};

static int parse_mount(struct base_mount *m, const cJSON *obj, size_t idx,
                       struct base_field_error *e) {
        _cleanup_free_ char *base = res_strdup_printf("mounts[%zu]", idx);
        if (!base)
                return -ENOMEM;
        if (!cJSON_IsObject(obj))
                return fail(e, base, "must be an object with hostPath and containerPath");
        int r = refuse_duplicate(obj, base, e);
        if (r < 0)
                return r;
        const cJSON *item;
        cJSON_ArrayForEach(item, obj) {
                _cleanup_free_ char *field = res_strdup_printf("%s.%s", base, item->string);
                if (!field)
                        return -ENOMEM;
                size_t k = 0;
                while (k < ELEMENTSOF(mount_keys) && strcmp(item->string, mount_keys[k].key) != 0)
                        k++;
                if (k == ELEMENTSOF(mount_keys))
                        return fail(e, field,
                                    "unknown key (expected hostPath, containerPath, readOnly)");
                if (mount_keys[k].path == MOUNT_FLAG) {
                        if (!cJSON_IsBool(item))
                                return fail(e, field, "must be true or false");
                        m->read_only = cJSON_IsTrue(item);
                        continue;
                }
                char **dst = (char **)((char *)m + mount_keys[k].path);
                if (!cJSON_IsString(item))
                        return fail(e, field, "must be a string (an absolute path)");
                const char *problem = path_problem(item->valuestring);
                if (problem)
                        return fail(e, field, "%s", problem);
                *dst = strdup(item->valuestring);
                if (!*dst)
                        return -ENOMEM;
        }
        if (!m->host_path)
                return fail(e, base, "needs hostPath");
        if (!m->container_path)
                return fail(e, base, "needs containerPath");
        return 0;
}

static int parse_mounts(struct res_selector *sel, const cJSON *arr, const char *key,
                        struct base_field_error *e) {
        if (!cJSON_IsArray(arr))
                return fail(e, key, "must be an array of objects");
        int n = cJSON_GetArraySize(arr);
        if (n == 0)
                return 0;
        sel->edits.mounts = calloc((size_t)n, sizeof(*sel->edits.mounts));
        if (!sel->edits.mounts)
                return -ENOMEM;
        const cJSON *item;
        cJSON_ArrayForEach(item, arr) {
                /* Counted first so a half-parsed mount is freed too. */
                size_t idx = sel->edits.n_mounts++;
                int r = parse_mount(&sel->edits.mounts[idx], item, idx, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_permissions(struct res_selector *sel, const cJSON *item, const char *key,
                             struct base_field_error *e) {
        if (!cJSON_IsString(item))
                return fail(e, key, "must be a string like \"rw\"");
        const char *s = item->valuestring;
        if (!*s)
                return fail(e, key, "must not be empty");
        for (const char *p = s; *p; p++)
                if (!strchr("rwm", *p) || strchr(p + 1, *p))
                        return fail(e, key, "\"%s\" is not a subset of \"rwm\"", s);
        sel->edits.node.permissions = strdup(s);
        return sel->edits.node.permissions ? 0 : -ENOMEM;
}

/* An attribute name is a path relative to the device dir, as udev's
 * ATTRS{power/control}: no "..", nothing absolute, nothing odd. */
static const char *attr_name_problem(const char *s) {
        if (!*s)
                return "attribute name must not be empty";
        if (strlen(s) > 255)
                return "attribute name is too long";
        if (s[0] == '/' || s[strlen(s) - 1] == '/' || strstr(s, "//"))
                return "attribute name must be relative, like \"idVendor\" or \"power/control\"";
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || strchr("_-./:", *p)))
                        return "attribute name has a character outside [A-Za-z0-9_.:/-]";
        for (const char *c = s; c; c = strchr(c, '/')) {
                if (*c == '/')
                        c++;
                size_t len = strcspn(c, "/");
                if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return "attribute name must not contain \".\" or \"..\"";
        }
        return NULL;
}

/* A value glob: fnmatch syntax, one sysfs line (no newline). */
static int parse_value_glob(const cJSON *item, const char *field, char **ret,
                            struct base_field_error *e) {
        if (!cJSON_IsString(item))
                return fail(e, field, "must be a string (a value or glob such as \"A12*\")");
        const char *v = item->valuestring;
        if (!*v)
                return fail(e, field, "must not be empty");
        if (strlen(v) > RES_ATTR_MAX)
                return fail(e, field, "is longer than %d bytes", RES_ATTR_MAX);
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return fail(e, field, "must not contain control characters");
        if (strchr(v, '[') && !strchr(strchr(v, '['), ']'))
                return fail(e, field, "\"%s\" has an unclosed '['", v);
        char *s = strdup(v);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int parse_attrs(struct res_selector *sel, const cJSON *obj, const char *key,
                       struct base_field_error *e) {
        if (!cJSON_IsObject(obj))
                return fail(e, key, "must be an object like {\"idVendor\": \"0403\"}");
        int n = cJSON_GetArraySize(obj);
        if (n == 0)
                return fail(e, key, "must not be empty");
        if (n > RES_MAX_ATTRS)
                return fail(e, key, "has more than %d attributes", RES_MAX_ATTRS);
        int r = refuse_duplicate(obj, key, e);
        if (r < 0)
                return r;
        sel->attrs = calloc((size_t)n, sizeof(*sel->attrs));
        if (!sel->attrs)
                return -ENOMEM;
        const cJSON *item;
        cJSON_ArrayForEach(item, obj) {
                _cleanup_free_ char *field = res_strdup_printf("%s.%s", key, item->string);
                if (!field)
                        return -ENOMEM;
                const char *problem = attr_name_problem(item->string);
                if (problem)
                        return fail(e, field, "%s", problem);
                struct res_attr *a = &sel->attrs[sel->n_attrs++];
                a->name = strdup(item->string);
                if (!a->name)
                        return -ENOMEM;
                r = parse_value_glob(item, field, &a->glob, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_id_mode(struct res_selector *sel, const cJSON *item, const char *key,
                         struct base_field_error *e) {
        static const struct {
                const char *name;
                enum res_id_mode mode;
        } modes[] = {
                { "name", RES_ID_NAME },
                { "serial", RES_ID_SERIAL },
                { "link", RES_ID_LINK },
        };
        for (size_t i = 0; cJSON_IsString(item) && i < sizeof(modes) / sizeof(modes[0]); i++)
                if (strcmp(item->valuestring, modes[i].name) == 0) {
                        sel->id_mode = modes[i].mode;
                        return 0;
                }
        return fail(e, key, "must be \"name\", \"serial\" or \"link\"");
}

/* "0660": an octal string, as chmod takes it; JSON has no octal numbers
 * and a decimal 660 would silently mean 01224. */
static int parse_mode(struct res_selector *sel, const cJSON *item, const char *key,
                      struct base_field_error *e) {
        if (!cJSON_IsString(item))
                return fail(e, key, "must be an octal string like \"0660\"");
        const char *s = item->valuestring;
        size_t len = strlen(s);
        if (len == 0 || len > 5 || strspn(s, "01234567") != len)
                return fail(e, key, "\"%s\" is not an octal mode like \"0660\"", s);
        unsigned long v = strtoul(s, NULL, 8);
        /* Set-id and sticky bits mean nothing on a device node, and Go's
         * os.FileMode (what fileMode is) spells them differently. */
        if (v > 0777)
                return fail(e, key, "\"%s\" is out of range (\"0001\" to \"0777\")", s);
        if (v == 0)
                return fail(e, key, "\"%s\" would make the node unusable", s);
        sel->edits.node.file_mode = (unsigned)v;
        return 0;
}

static int parse_id_number(const cJSON *item, const char *field, unsigned *ret,
                           struct base_field_error *e) {
        if (!cJSON_IsNumber(item))
                return fail(e, field, "must be a number (a numeric %s ID)",
                            strcmp(field, "owner") == 0 ? "user" : "group");
        double d = item->valuedouble;
        /* Range-check the double before converting: (unsigned)1e300 is
         * undefined. 4294967295 is (uid_t)-1, "no change" to the kernel. */
        if (!(d >= 0 && d < 4294967295.0) || d != (double)(unsigned)d)
                return fail(e, field, "must be an integer from 0 to 4294967294");
        *ret = (unsigned)d;
        return 0;
}

static int parse_bool(const cJSON *item, const char *field, bool *ret, struct base_field_error *e) {
        if (!cJSON_IsBool(item))
                return fail(e, field, "must be true or false");
        *ret = cJSON_IsTrue(item);
        return 0;
}

static int parse_subsystem(struct res_selector *sel, const cJSON *item, const char *key,
                           struct base_field_error *e) {
        return parse_value_glob(item, key, &sel->subsystem, e);
}

static int parse_driver(struct res_selector *sel, const cJSON *item, const char *key,
                        struct base_field_error *e) {
        return parse_value_glob(item, key, &sel->driver, e);
}

static int parse_kernel(struct res_selector *sel, const cJSON *item, const char *key,
                        struct base_field_error *e) {
        return parse_value_glob(item, key, &sel->kernel, e);
}

static int parse_optional(struct res_selector *sel, const cJSON *item, const char *key,
                          struct base_field_error *e) {
        return parse_bool(item, key, &sel->optional, e);
}

static int parse_owner(struct res_selector *sel, const cJSON *item, const char *key,
                       struct base_field_error *e) {
        sel->edits.node.has_uid = true;
        return parse_id_number(item, key, &sel->edits.node.uid, e);
}

static int parse_group(struct res_selector *sel, const cJSON *item, const char *key,
                       struct base_field_error *e) {
        sel->edits.node.has_gid = true;
        return parse_id_number(item, key, &sel->edits.node.gid, e);
}

/* An entry's keys: the first four say what it finds (one per entry),
 * the rest filter what they find or edit it. */
static const struct entry_key {
        struct key_parser p;
        bool is_kind;
        enum res_sel_kind kind;
} entry_keys[] = {
        { { "path", parse_path }, true, RES_SEL_PATH },
        { { "paths", parse_paths }, true, RES_SEL_PATHS },
        { { "usb", parse_usb }, true, RES_SEL_USB },
        { { "pci", parse_pci }, true, RES_SEL_PCI },
        { { "env", parse_env }, false, 0 },
        { { "mounts", parse_mounts }, false, 0 },
        { { "permissions", parse_permissions }, false, 0 },
        { { "attrs", parse_attrs }, false, 0 },
        { { "subsystem", parse_subsystem }, false, 0 },
        { { "driver", parse_driver }, false, 0 },
        { { "kernel", parse_kernel }, false, 0 },
        { { "id", parse_id_mode }, false, 0 },
        { { "optional", parse_optional }, false, 0 },
        { { "mode", parse_mode }, false, 0 },
        { { "owner", parse_owner }, false, 0 },
        { { "group", parse_group }, false, 0 },
};

static int parse_entry(struct res_selector *sel, const cJSON *entry, struct base_field_error *e) {
        if (!cJSON_IsObject(entry))
                return fail(e, "", "must be an object like {\"path\": \"/dev/ttyUSB*\"}");
        const char *kind_key = NULL;
        const cJSON *item;
        int r = refuse_duplicate(entry, "", e);
        if (r < 0)
                return r;
        cJSON_ArrayForEach(item, entry) {
                const char *k = item->string;
                const struct entry_key *ek = NULL;
                for (size_t i = 0; i < ELEMENTSOF(entry_keys) && !ek; i++)
                        if (strcmp(entry_keys[i].p.key, k) == 0)
                                ek = &entry_keys[i];
                if (!ek)
                        return fail(
                                e, k,
                                "unknown key (expected path, paths, usb, pci, attrs, subsystem, driver, "
                                "kernel, id, optional, env, mounts, permissions, mode, owner, group)");
                if (ek->is_kind && kind_key)
                        return fail(
                                e, k,
                                "only one of path, paths, usb, pci per entry (\"%s\" is already set)",
                                kind_key);
                if (ek->is_kind) {
                        kind_key = k;
                        sel->kind = ek->kind;
                }
                r = ek->p.parse(sel, item, k, e);
                if (r < 0)
                        return r;
        }
        if (!kind_key)
                return fail(e, "", "needs one of path, paths, usb, pci");
        if (sel->id_mode == RES_ID_LINK && sel->kind != RES_SEL_PATH && sel->kind != RES_SEL_PATHS)
                return fail(e, "id", "\"link\" needs a \"path\" or \"paths\" glob of links");
        return 0;
}

int res_selector_parse(const cJSON *entry, struct res_selector **ret,
                       struct base_field_error *err) {
        _cleanup_(selector_freep) struct res_selector *sel = calloc(1, sizeof(*sel));
        struct base_field_error e = { 0 };
        if (!sel)
                return -ENOMEM;
        int r = parse_entry(sel, entry, &e);
        if (r < 0) {
                if (r == -EINVAL && err) {
                        base_field_error_clear(err);
                        *err = e;
                } else
                        base_field_error_clear(&e);
                return r;
        }
        *ret = TAKE_PTR(sel);
        return 0;
}
const char *res_selector_warning(const struct res_selector *sel, const char **ret_field) {
        if (!sel->edits.node.has_uid && !sel->edits.node.has_gid)
                return NULL;
        if (ret_field)
                *ret_field = sel->edits.node.has_uid ? "owner" : "group";
        return "an owner/group override replaces the container user's own uid/gid on the "
               "node: a pod running as another user may not open it (leave both unset "
               "unless every pod shares that group)";
}
