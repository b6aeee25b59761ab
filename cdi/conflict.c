/* SPDX-License-Identifier: Apache-2.0 */
/* Finding other spec files that define our kinds or devices.
 *
 * Runtimes merge all spec directories: the same qualified device in two
 * files of one directory makes both unusable, and across directories the
 * later directory silently wins. Either way a user's pod may get a device
 * other than the one cdiplug allocated, which only a warning can explain.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi-internal.h"
#include "cdi.h"

struct conflict_list {
        struct cdi_conflict *v;
        size_t n, cap;
};

static char *path_join(const char *dir, const char *file) {
        size_t sz = strlen(dir) + 1 + strlen(file) + 1;
        char *p = malloc(sz);
        int r;

        if (!p)
                return NULL;
        r = snprintf(p, sz, "%s/%s", dir, file);
        if (r < 0 || (size_t)r >= sz) {
                free(p);
                return NULL;
        }
        return p;
}

static int list_add(struct conflict_list *l, enum cdi_conflict_type type, const char *dir,
                    const char *file, const char *kind, const char *device, int error) {
        struct cdi_conflict c = { .type = type, .error = error };

        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 8;
                struct cdi_conflict *v;
                if (cap > SIZE_MAX / sizeof(*v))
                        return -ENOMEM;
                v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        c.path = file ? path_join(dir, file) : strdup(dir);
        if (!c.path)
                goto oom;
        if (kind && !(c.kind = strdup(kind)))
                goto oom;
        if (device && cdi_qualified_name(kind, device, &c.device) < 0)
                goto oom;
        l->v[l->n++] = c;
        return 0;
oom:
        free(c.path);
        free(c.kind);
        return -ENOMEM;
}

static int check_devices(struct conflict_list *l, const char *dir, const char *file,
                         const struct cdi_spec *ours, const cJSON *devices) {
        const cJSON *dev;
        int r;

        cJSON_ArrayForEach(dev, devices) {
                const char *name =
                        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dev, "name"));
                if (!name)
                        continue;
                for (size_t i = 0; i < ours->n_devices; i++) {
                        if (strcmp(ours->devices[i].name, name) != 0)
                                continue;
                        r = list_add(l, CDI_CONFLICT_DEVICE, dir, file, ours->kind,
                                     ours->devices[i].name, 0);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int check_json(struct conflict_list *l, const char *dir, const char *file,
                      const struct cdi_spec *specs, size_t n_specs, const char *buf, size_t len) {
        _cleanup_json_ cJSON *root = cJSON_ParseWithLength(buf, len);
        const char *kind;
        int r;

        if (!cJSON_IsObject(root))
                return list_add(l, CDI_CONFLICT_UNCHECKED, dir, file, NULL, NULL, -EBADMSG);
        /* Without a string kind consumers reject the file: no clash. */
        kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "kind"));
        if (!kind)
                return 0;
        for (size_t i = 0; i < n_specs; i++) {
                if (strcmp(specs[i].kind, kind) != 0)
                        continue;
                r = list_add(l, CDI_CONFLICT_KIND, dir, file, specs[i].kind, NULL, 0);
                if (r < 0)
                        return r;
                r = check_devices(l, dir, file, &specs[i],
                                  cJSON_GetObjectItemCaseSensitive(root, "devices"));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The value of a top-level "kind:" line, quotes and comments removed.
 * Deliberately not a YAML parser: kind is a plain scalar in every spec we
 * know of, and a miss only costs a warning. */
static bool yaml_kind_line(char *line, const char **ret_kind) {
        char *v, *end;

        if (strncmp(line, "kind:", 5) != 0)
                return false;
        v = line + 5;
        v += strspn(v, " \t");
        if (*v == '"' || *v == '\'') {
                end = strchr(v + 1, *v);
                if (!end)
                        return false;
                v++;
        } else {
                end = v + strcspn(v, " \t#\r");
        }
        *end = '\0';
        *ret_kind = v;
        return true;
}

static int check_yaml(struct conflict_list *l, const char *dir, const char *file,
                      const struct cdi_spec *specs, size_t n_specs, char *buf, size_t len) {
        size_t skip = strspn(buf, " \t\r\n");
        int r;

        /* JSON is valid YAML, and some tools write it under .yaml. */
        if (skip < len && buf[skip] == '{')
                return check_json(l, dir, file, specs, n_specs, buf, len);

        for (char *line = buf, *end; line < buf + len; line = end + 1) {
                const char *kind;
                end = strchr(line, '\n');
                if (!end)
                        end = buf + len;
                *end = '\0';
                if (!yaml_kind_line(line, &kind))
                        continue;
                for (size_t i = 0; i < n_specs; i++) {
                        if (strcmp(specs[i].kind, kind) != 0)
                                continue;
                        r = list_add(l, CDI_CONFLICT_KIND, dir, file, specs[i].kind, NULL, 0);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static bool has_suffix(const char *s, const char *suffix) {
        size_t ls = strlen(s), lx = strlen(suffix);

        return ls > lx && strcmp(s + ls - lx, suffix) == 0;
}

static int check_text(struct conflict_list *l, const char *dir, const char *file,
                      const struct cdi_spec *specs, size_t n_specs, char *buf, size_t len) {
        if (has_suffix(file ? file : dir, ".json"))
                return check_json(l, dir, file, specs, n_specs, buf, len);
        return check_yaml(l, dir, file, specs, n_specs, buf, len);
}

static int check_file(struct conflict_list *l, int dfd, const char *dir, const char *file,
                      const struct cdi_spec *specs, size_t n_specs) {
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len;
        int r;

        /* Consumers skip subdirectories; symlinks to files they follow. */
        if (fstatat(dfd, file, &st, 0) == 0 && S_ISDIR(st.st_mode))
                return 0;
        r = cdi_read_file_at(dfd, file, false, &buf, &len);
        if (r == -ENOENT)
                return 0; /* removed while we looked */
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return list_add(l, CDI_CONFLICT_UNCHECKED, dir, file, NULL, NULL, r);
        return check_text(l, dir, file, specs, n_specs, buf, len);
}

static int check_dir(struct conflict_list *l, const char *dir, const struct cdi_spec *specs,
                     size_t n_specs) {
        _cleanup_close_ int dfd = -1;
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_strvec_ struct base_strvec owned = { 0 };
        struct dirent *de;
        int fd, r;

        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 && errno == ENOENT)
                return 0;
        if (dfd < 0)
                return list_add(l, CDI_CONFLICT_UNCHECKED, dir, NULL, NULL, NULL, -errno);

        r = cdi_owned_load(dfd, &owned);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                /* Our own specs may now show up as clashes; say why. */
                r = list_add(l, CDI_CONFLICT_UNCHECKED, dir, CDI_OWNER_RECORD, NULL, NULL, r);
                if (r < 0)
                        return r;
        }

        fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return list_add(l, CDI_CONFLICT_UNCHECKED, dir, NULL, NULL, NULL, -errno);
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                close(fd);
                return r;
        }
        while ((errno = 0, de = readdir(d))) {
                if (!has_suffix(de->d_name, ".json") && !has_suffix(de->d_name, ".yaml"))
                        continue;
                if (base_strv_contains(owned.v, de->d_name))
                        continue;
                r = check_file(l, dfd, dir, de->d_name, specs, n_specs);
                if (r < 0)
                        return r;
        }
        if (errno)
                return list_add(l, CDI_CONFLICT_UNCHECKED, dir, NULL, NULL, NULL, -errno);
        return 0;
}

void cdi_conflicts_free(struct cdi_conflict *conflicts, size_t n) {
        if (!conflicts)
                return;
        for (size_t i = 0; i < n; i++) {
                free(conflicts[i].path);
                free(conflicts[i].kind);
                free(conflicts[i].device);
        }
        free(conflicts);
}

static int check_specs(const struct cdi_spec *specs, size_t n_specs) {
        if (n_specs && !specs)
                return -EINVAL;
        for (size_t i = 0; i < n_specs; i++) {
                if (!cdi_kind_is_valid(specs[i].kind))
                        return -EINVAL;
                for (size_t j = 0; j < specs[i].n_devices; j++)
                        if (!cdi_device_name_is_valid(specs[i].devices[j].name))
                                return -EINVAL;
        }
        return 0;
}

int cdi_find_conflicts_in_text(const char *path, const struct cdi_spec *specs, size_t n_specs,
                               char *text, size_t len, struct cdi_conflict **ret, size_t *ret_n) {
        struct conflict_list l = { 0 };
        int r = check_specs(specs, n_specs);

        if (r < 0)
                return r;
        r = check_text(&l, path, NULL, specs, n_specs, text, len);
        if (r < 0) {
                cdi_conflicts_free(l.v, l.n);
                return r;
        }
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}

int cdi_find_conflicts(const char *const *dirs, const struct cdi_spec *specs, size_t n_specs,
                       struct cdi_conflict **ret, size_t *ret_n) {
        struct conflict_list l = { 0 };
        int r = check_specs(specs, n_specs);

        if (r < 0)
                return r;
        for (; dirs && *dirs; dirs++) {
                r = check_dir(&l, *dirs, specs, n_specs);
                if (r < 0) {
                        cdi_conflicts_free(l.v, l.n);
                        return r;
                }
        }
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}
