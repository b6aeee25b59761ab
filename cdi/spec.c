/* SPDX-License-Identifier: Apache-2.0 */
/* The spec model: validation, minimum cdiVersion and JSON rendering. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cdi-internal.h"
#include "cdi.h"

static bool str_set(const char *s) {
        return s && *s;
}

/* A hostPath equal to path says nothing the runtime would not assume, and
 * emitting it would raise the spec to 0.5.0 for no gain. */
static const char *node_host_path(const struct cdi_node *n) {
        if (!str_set(n->host_path) || strcmp(n->host_path, n->path) == 0)
                return NULL;
        return n->host_path;
}

static bool edits_empty(const struct cdi_edits *e) {
        return base_strv_length(e->env) == 0 && e->n_nodes == 0 && e->n_mounts == 0;
}

static int validate_permissions(const char *p) {
        if (!p)
                return 0;
        for (; *p; p++)
                if (*p != 'r' && *p != 'w' && *p != 'm')
                        return -EINVAL;
        return 0;
}

static int validate_edits(const struct cdi_edits *e) {
        if ((e->n_nodes && !e->nodes) || (e->n_mounts && !e->mounts))
                return -EINVAL;
        for (char **v = e->env; v && *v; v++) {
                const char *eq = strchr(*v, '=');
                /* Runtimes reject "=x" and "x": a name is required. */
                if (!eq || eq == *v)
                        return -EINVAL;
        }
        for (size_t i = 0; i < e->n_nodes; i++) {
                const struct cdi_node *n = &e->nodes[i];
                if (!n->path || n->path[0] != '/')
                        return -EINVAL;
                if (str_set(n->host_path) && n->host_path[0] != '/')
                        return -EINVAL;
                if (validate_permissions(n->access.permissions) < 0)
                        return -EINVAL;
        }
        for (size_t i = 0; i < e->n_mounts; i++) {
                const struct cdi_mount *m = &e->mounts[i];
                if (!str_set(m->host_path) || !str_set(m->container_path))
                        return -EINVAL;
        }
        return 0;
}

int cdi_spec_validate(const struct cdi_spec *spec) {
        int r;

        if (!spec || !cdi_kind_is_valid(spec->kind))
                return -EINVAL;
        /* A spec without devices fails to load: the whole file is dropped. */
        if (spec->n_devices == 0 || !spec->devices)
                return -EINVAL;
        r = validate_edits(&spec->edits);
        if (r < 0)
                return r;
        for (size_t i = 0; i < spec->n_devices; i++) {
                const struct cdi_device *d = &spec->devices[i];
                if (!cdi_device_name_is_valid(d->name))
                        return -EINVAL;
                /* Consumers refuse devices with nothing to apply. */
                if (edits_empty(&d->edits))
                        return -EINVAL;
                r = validate_edits(&d->edits);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(spec->devices[j].name, d->name) == 0)
                                return -EEXIST;
        }
        return 0;
}

/* ---- minimum version ---------------------------------------------------- */

static bool any_edits(const struct cdi_spec *spec, bool (*pred)(const struct cdi_edits *)) {
        if (pred(&spec->edits))
                return true;
        for (size_t i = 0; i < spec->n_devices; i++)
                if (pred(&spec->devices[i].edits))
                        return true;
        return false;
}

static bool edits_mount_type(const struct cdi_edits *e) {
        for (size_t i = 0; i < e->n_mounts; i++)
                if (str_set(e->mounts[i].type))
                        return true;
        return false;
}

static bool edits_node_host_path(const struct cdi_edits *e) {
        for (size_t i = 0; i < e->n_nodes; i++)
                if (e->nodes[i].path && node_host_path(&e->nodes[i]))
                        return true;
        return false;
}

static bool needs_mount_type(const struct cdi_spec *s) {
        return any_edits(s, edits_mount_type);
}
static bool needs_node_host_path(const struct cdi_spec *s) {
        return any_edits(s, edits_node_host_path);
}

static bool needs_digit_device_name(const struct cdi_spec *s) {
        for (size_t i = 0; i < s->n_devices; i++) {
                const char *n = s->devices[i].name;
                if (n && n[0] >= '0' && n[0] <= '9')
                        return true;
        }
        return false;
}

static bool needs_dot_in_class(const struct cdi_spec *s) {
        const char *slash = s->kind ? strchr(s->kind, '/') : NULL;

        return slash && strchr(slash + 1, '.');
}

/* SPEC.md's version history, restricted to what struct cdi_spec can hold.
 * Sorted by version: the answer is the last rule that matches, else the
 * floor. Not modelled, hence never emitted: annotations (0.6.0),
 * additionalGids and intelRdt (0.7.0); 0.8.0 changed only the Go API. */
static const char cdi_version_floor[] = "0.3.0"; /* first tagged release */
static const struct {
        const char *version;
        bool (*needs)(const struct cdi_spec *);
} version_rules[] = {
        { "0.4.0", needs_mount_type },        /* mounts[].type added */
        { "0.5.0", needs_node_host_path },    /* deviceNodes[].hostPath added */
        { "0.5.0", needs_digit_device_name }, /* names may start with a digit */
        { "0.6.0", needs_dot_in_class },      /* '.' allowed in the class */
};

const char *cdi_spec_min_version(const struct cdi_spec *spec) {
        const char *v = cdi_version_floor;

        if (!spec)
                return v;
        for (size_t i = 0; i < sizeof(version_rules) / sizeof(version_rules[0]); i++)
                if (version_rules[i].needs(spec))
                        v = version_rules[i].version;
        return v;
}

/* ---- JSON --------------------------------------------------------------- */

static int add_str(cJSON *obj, const char *key, const char *val) {
        return cJSON_AddStringToObject(obj, key, val) ? 0 : -ENOMEM;
}

static int add_strv(cJSON *obj, const char *key, char *const *strv) {
        cJSON *arr;

        if (base_strv_length(strv) == 0)
                return 0;
        arr = cJSON_AddArrayToObject(obj, key);
        if (!arr)
                return -ENOMEM;
        for (; *strv; strv++) {
                cJSON *s = cJSON_CreateString(*strv);
                if (!s || !cJSON_AddItemToArray(arr, s)) {
                        cJSON_Delete(s);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int node_to_json(cJSON *arr, const struct cdi_node *n) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        if (add_str(o, "path", n->path) < 0)
                return -ENOMEM;
        if (node_host_path(n) && add_str(o, "hostPath", n->host_path) < 0)
                return -ENOMEM;
        if (str_set(n->access.permissions) && add_str(o, "permissions", n->access.permissions) < 0)
                return -ENOMEM;
        /* fileMode is Go's os.FileMode: the bits as a plain number. */
        if (n->access.file_mode &&
            !cJSON_AddNumberToObject(o, "fileMode", (double)(n->access.file_mode & 07777)))
                return -ENOMEM;
        if (n->access.has_uid && !cJSON_AddNumberToObject(o, "uid", (double)n->access.uid))
                return -ENOMEM;
        if (n->access.has_gid && !cJSON_AddNumberToObject(o, "gid", (double)n->access.gid))
                return -ENOMEM;
        return 0;
}

static int mount_to_json(cJSON *arr, const struct cdi_mount *m) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        if (add_str(o, "hostPath", m->host_path) < 0 ||
            add_str(o, "containerPath", m->container_path) < 0)
                return -ENOMEM;
        if (str_set(m->type) && add_str(o, "type", m->type) < 0)
                return -ENOMEM;
        return add_strv(o, "options", m->options);
}

/* Empty lists are left out rather than written as []: nothing is lost and
 * the output stays the same across consumer versions. */
static int edits_to_json(cJSON *parent, const struct cdi_edits *e) {
        cJSON *o = cJSON_AddObjectToObject(parent, "containerEdits"), *arr;
        int r;

        if (!o)
                return -ENOMEM;
        r = add_strv(o, "env", e->env);
        if (r < 0)
                return r;
        if (e->n_nodes) {
                arr = cJSON_AddArrayToObject(o, "deviceNodes");
                if (!arr)
                        return -ENOMEM;
                for (size_t i = 0; i < e->n_nodes; i++)
                        if (node_to_json(arr, &e->nodes[i]) < 0)
                                return -ENOMEM;
        }
        if (e->n_mounts) {
                arr = cJSON_AddArrayToObject(o, "mounts");
                if (!arr)
                        return -ENOMEM;
                for (size_t i = 0; i < e->n_mounts; i++)
                        if (mount_to_json(arr, &e->mounts[i]) < 0)
                                return -ENOMEM;
        }
        return 0;
}

static int spec_to_cjson(const struct cdi_spec *spec, cJSON *root) {
        cJSON *devs;
        int r;

        if (add_str(root, "cdiVersion", cdi_spec_min_version(spec)) < 0 ||
            add_str(root, "kind", spec->kind) < 0)
                return -ENOMEM;
        devs = cJSON_AddArrayToObject(root, "devices");
        if (!devs)
                return -ENOMEM;
        for (size_t i = 0; i < spec->n_devices; i++) {
                cJSON *d = cJSON_CreateObject();
                if (!d || !cJSON_AddItemToArray(devs, d)) {
                        cJSON_Delete(d);
                        return -ENOMEM;
                }
                if (add_str(d, "name", spec->devices[i].name) < 0)
                        return -ENOMEM;
                /* Required per device by the schema, even though a device
                 * always has edits (cdi_spec_validate). */
                r = edits_to_json(d, &spec->devices[i].edits);
                if (r < 0)
                        return r;
        }
        if (!edits_empty(&spec->edits))
                return edits_to_json(root, &spec->edits);
        return 0;
}

int cdi_spec_to_json(const struct cdi_spec *spec, char **ret_json) {
        _cleanup_json_ cJSON *root = NULL;
        char *text, *out;
        size_t len;
        int r;

        r = cdi_spec_validate(spec);
        if (r < 0)
                return r;
        root = cJSON_CreateObject();
        if (!root)
                return -ENOMEM;
        r = spec_to_cjson(spec, root);
        if (r < 0)
                return r;
        text = cJSON_Print(root);
        if (!text)
                return -ENOMEM;
        /* Our own copy, newline-terminated, so callers free() it. */
        len = strlen(text);
        out = malloc(len + 2);
        if (!out) {
                cJSON_free(text);
                return -ENOMEM;
        }
        memcpy(out, text, len);
        out[len] = '\n';
        out[len + 1] = '\0';
        cJSON_free(text);
        *ret_json = out;
        return 0;
}

/* ---- freeing ------------------------------------------------------------ */

static void edits_free(struct cdi_edits *e) {
        base_strv_free(e->env);
        for (size_t i = 0; e->nodes && i < e->n_nodes; i++) {
                free(e->nodes[i].path);
                free(e->nodes[i].host_path);
                base_node_access_clear(&e->nodes[i].access);
        }
        free(e->nodes);
        for (size_t i = 0; e->mounts && i < e->n_mounts; i++) {
                free(e->mounts[i].host_path);
                free(e->mounts[i].container_path);
                free(e->mounts[i].type);
                base_strv_free(e->mounts[i].options);
        }
        free(e->mounts);
        memset(e, 0, sizeof(*e));
}

void cdi_spec_free(struct cdi_spec *spec) {
        if (!spec)
                return;
        free(spec->kind);
        for (size_t i = 0; spec->devices && i < spec->n_devices; i++) {
                free(spec->devices[i].name);
                edits_free(&spec->devices[i].edits);
        }
        free(spec->devices);
        edits_free(&spec->edits);
        memset(spec, 0, sizeof(*spec));
}
