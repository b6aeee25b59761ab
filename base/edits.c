/* SPDX-License-Identifier: Apache-2.0 */
/* The per-device edits a selector asks for, defined once: the selector,
 * the devices discovery finds, the plugin's shared copies and the CDI
 * spec's nodes all hold them in these types. */
#include <string.h>

#include "base.h"

void base_node_access_clear(struct base_node_access *a) {
        free(a->permissions);
        *a = (struct base_node_access){ 0 };
}

int base_node_access_copy(const struct base_node_access *src, struct base_node_access *ret) {
        struct base_node_access a = *src;

        if (src->permissions && !(a.permissions = strdup(src->permissions)))
                return -ENOMEM;
        *ret = a;
        return 0;
}

static bool str_equal(const char *a, const char *b) {
        return a == b || (a && b && strcmp(a, b) == 0);
}

static bool strv_equal(char *const *a, char *const *b) {
        for (; a && *a && b && *b; a++, b++)
                if (strcmp(*a, *b) != 0)
                        return false;
        return !(a && *a) && !(b && *b);
}

void base_edits_clear(struct base_edits *e) {
        base_strv_free(e->env);
        for (size_t i = 0; i < e->n_mounts; i++) {
                free(e->mounts[i].host_path);
                free(e->mounts[i].container_path);
        }
        free(e->mounts);
        base_node_access_clear(&e->node);
        *e = (struct base_edits){ 0 };
}

int base_edits_copy(const struct base_edits *src, struct base_edits *ret) {
        _cleanup_(base_edits_clear) struct base_edits e = { 0 };
        int r;

        r = base_strv_copy(src->env, &e.env);
        if (r < 0)
                return r;
        r = base_node_access_copy(&src->node, &e.node);
        if (r < 0)
                return r;
        if (src->n_mounts) {
                e.mounts = calloc(src->n_mounts, sizeof(*e.mounts));
                if (!e.mounts)
                        return -ENOMEM;
                for (size_t i = 0; i < src->n_mounts; i++) {
                        struct base_mount *m = &e.mounts[i];

                        e.n_mounts = i + 1;
                        m->host_path = strdup(src->mounts[i].host_path);
                        m->container_path = strdup(src->mounts[i].container_path);
                        m->read_only = src->mounts[i].read_only;
                        if (!m->host_path || !m->container_path)
                                return -ENOMEM;
                }
        }
        *ret = e;
        e = (struct base_edits){ 0 };
        return 0;
}

bool base_edits_equal(const struct base_edits *a, const struct base_edits *b) {
        if (a->n_mounts != b->n_mounts || !str_equal(a->node.permissions, b->node.permissions) ||
            !strv_equal(a->env, b->env) || a->node.file_mode != b->node.file_mode ||
            a->node.has_uid != b->node.has_uid || a->node.has_gid != b->node.has_gid ||
            a->node.uid != b->node.uid || a->node.gid != b->node.gid)
                return false;
        for (size_t i = 0; i < a->n_mounts; i++)
                if (strcmp(a->mounts[i].host_path, b->mounts[i].host_path) != 0 ||
                    strcmp(a->mounts[i].container_path, b->mounts[i].container_path) != 0 ||
                    a->mounts[i].read_only != b->mounts[i].read_only)
                        return false;
        return true;
}
