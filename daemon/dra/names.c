/* SPDX-License-Identifier: Apache-2.0 */
/* The names a DRA resource and its devices go by in the API: pool names,
 * device names, and the table from a device name back to its ID; and the
 * names of the driver's sockets on the node. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "model-internal.h"

/* Room for the readable start of a rewritten name: 54, '-', 8 hex; of a
 * clash's second name, 46, '-', 16 hex. */
#define NAME_KEEP 54
#define ALT_KEEP 46

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool dra_is_label(const char *s, size_t len) {
        if (len == 0 || len > DRA_DEVICE_NAME_MAX || !is_lower_alnum(s[0]) ||
            !is_lower_alnum(s[len - 1]))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!is_lower_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

bool dra_is_subdomain(const char *s, size_t len) {
        size_t start = 0;

        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i <= len; i++)
                if (i == len || s[i] == '.') {
                        if (!dra_is_label(s + start, i - start))
                                return false;
                        start = i + 1;
                }
        return true;
}

static char label_char(char c) {
        if (c >= 'A' && c <= 'Z')
                return (char)(c - 'A' + 'a');
        return is_lower_alnum(c) ? c : '-';
}

size_t dra_name_into(const char *id, char out[DRA_DEVICE_NAME_MAX + 1]) {
        size_t len = strlen(id), start = 0, end = len, n = 0;
        bool changed = false;

        if (len == 0)
                return 0;
        while (start < len && label_char(id[start]) == '-')
                start++;
        while (end > start && label_char(id[end - 1]) == '-')
                end--;
        changed = start > 0 || end < len;
        for (size_t i = start; i < end && !changed; i++)
                changed = label_char(id[i]) != id[i];
        if (!changed && len <= DRA_DEVICE_NAME_MAX) {
                memcpy(out, id, len + 1);
                return len;
        }
        for (size_t i = start; i < end && n < NAME_KEEP; i++)
                out[n++] = label_char(id[i]);
        while (n > 0 && out[n - 1] == '-')
                n--;
        if (n > 0)
                out[n++] = '-';
        snprintf(out + n, 9, "%08x", base_fnv1a32(id));
        return n + 8;
}

int dra_device_name(const char *id, char **ret) {
        char name[DRA_DEVICE_NAME_MAX + 1];
        char *s;

        if (dra_name_into(id, name) == 0)
                return -EINVAL;
        s = strdup(name);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* Appends '/' (unless at the start) and s[0..len) to buf (n used). */
static int append_part(char *buf, size_t *n, const char *s, size_t len) {
        size_t sep = *n > 0;

        if (*n + sep + len > DRA_POOL_NAME_MAX)
                return -ENAMETOOLONG;
        if (sep)
                buf[(*n)++] = '/';
        memcpy(buf + *n, s, len);
        *n += len;
        buf[*n] = '\0';
        return 0;
}

int dra_pool_name(const char *node, const char *resource, char **ret) {
        char buf[DRA_POOL_NAME_MAX + 1];
        size_t n = 0;
        char *s;
        int r;

        if (!dra_is_subdomain(node, strlen(node)) || !*resource)
                return -EINVAL;
        r = append_part(buf, &n, node, strlen(node));
        for (const char *part = resource; r >= 0; part++) {
                const char *slash = strchr(part, '/');
                size_t len = slash ? (size_t)(slash - part) : strlen(part);
                if (len == 0)
                        return -EINVAL;
                if (dra_is_subdomain(part, len)) {
                        r = append_part(buf, &n, part, len);
                } else {
                        char seg[DRA_DEVICE_NAME_MAX + 1];
                        _cleanup_free_ char *copy = strndup(part, len);
                        if (!copy)
                                return -ENOMEM;
                        r = append_part(buf, &n, seg, dra_name_into(copy, seg));
                }
                if (!slash)
                        break;
                part = slash;
        }
        if (r < 0)
                return r;
        s = strdup(buf);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

const char *dra_resource_problem(const char *resource) {
        if (strlen(resource) > DRA_ATTR_STRING_MAX)
                return "a resource served by DRA has a name of at most 64 bytes: DeviceClasses "
                       "select its devices by the \"resource\" attribute, and an attribute "
                       "string holds at most 64";
        return NULL;
}

static int cmp_by_name(const void *a, const void *b, void *arg) {
        const struct dra_names *n = arg;
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        int c = strcmp(dra_names_get(n, x), dra_names_get(n, y));

        return c ? c : (x > y) - (x < y);
}

void dra_names_clear(struct dra_names *n) {
        free(n->block);
        free(n->off);
        free(n->dropped);
        free(n->by_name);
        free(n->ids);
        free(n->clashes);
        *n = (struct dra_names){ 0 };
}

/* Of each run of one name in by_name (sorted by name, then ID), the first
 * stays; the others are marked (record: and recorded as clashes, dropped
 * for good). */
static int mark_clashes(struct dra_names *n, bool record) {
        size_t w = 0;

        for (size_t i = 0; i < n->n_ids; i++) {
                uint32_t id = n->by_name[i];
                if (w > 0 &&
                    strcmp(dra_names_get(n, n->by_name[w - 1]), dra_names_get(n, id)) == 0) {
                        if (record) {
                                struct dra_clash *c =
                                        realloc(n->clashes, (n->n_clashes + 1) * sizeof(*c));
                                if (!c)
                                        return -ENOMEM;
                                n->clashes = c;
                                c[n->n_clashes++] = (struct dra_clash){ .dropped = id,
                                                                        .kept = n->by_name[w - 1] };
                        }
                        n->dropped[id] = true;
                        continue;
                }
                n->by_name[w++] = id;
        }
        n->n_kept = w;
        return 0;
}

size_t dra_alt_name_into(const char *id, char out[DRA_DEVICE_NAME_MAX + 1]) {
        size_t n = 0;

        for (size_t i = 0; id[i] && n < ALT_KEEP; i++) {
                char c = label_char(id[i]);
                if (c != '-' || n > 0)
                        out[n++] = c;
        }
        while (n > 0 && out[n - 1] == '-')
                n--;
        if (n > 0)
                out[n++] = '-';
        snprintf(out + n, 17, "%016" PRIx64, base_fnv1a64(id));
        return n + 16;
}

/* The later IDs of a clash (two IDs whose names are one, which takes two
 * IDs whose rewritten names share their start and their 32-bit hash, or
 * an ID that is another's rewritten name) are named again with the 64-bit
 * hash, so both are published; only a clash that leaves too is a drop. */
static int rename_clashes(struct dra_names *n, size_t *used) {
        size_t n_renamed = 0;

        for (size_t i = 0; i < n->n_ids; i++)
                n_renamed += n->dropped[i];
        if (n_renamed == 0)
                return 0;
        char *more = realloc(n->block, *used + n_renamed * (DRA_DEVICE_NAME_MAX + 1) + 1);
        if (!more)
                return -ENOMEM;
        n->block = more;
        for (size_t i = 0; i < n->n_ids; i++) {
                if (!n->dropped[i])
                        continue;
                n->dropped[i] = false;
                n->off[i] = (uint32_t)*used;
                *used += dra_alt_name_into(n->ids[i], n->block + *used) + 1;
        }
        for (size_t i = 0; i < n->n_ids; i++)
                n->by_name[i] = (uint32_t)i;
        qsort_r(n->by_name, n->n_ids, sizeof(*n->by_name), cmp_by_name, n);
        return mark_clashes(n, true);
}

int dra_names_build(const struct dp_plugin *p, struct dra_names *ret) {
        struct dra_names n = { .n_ids = p->n_ids };
        size_t used = 0;
        int r;

        if (p->n_ids > UINT32_MAX / (2 * (DRA_DEVICE_NAME_MAX + 1)))
                return -E2BIG;
        n.block = malloc(p->n_ids * (DRA_DEVICE_NAME_MAX + 1) + 1);
        n.off = calloc(p->n_ids + 1, sizeof(*n.off));
        n.dropped = calloc(p->n_ids + 1, sizeof(*n.dropped));
        n.by_name = calloc(p->n_ids + 1, sizeof(*n.by_name));
        n.ids = calloc(p->n_ids + 1, sizeof(*n.ids));
        if (!n.block || !n.off || !n.dropped || !n.by_name || !n.ids) {
                dra_names_clear(&n);
                return -ENOMEM;
        }
        for (size_t i = 0; i < p->n_ids; i++) {
                n.ids[i] = dp_plugin_id(p, i);
                n.off[i] = (uint32_t)used;
                used += dra_name_into(n.ids[i], n.block + used) + 1;
                n.by_name[i] = (uint32_t)i;
        }
        qsort_r(n.by_name, n.n_ids, sizeof(*n.by_name), cmp_by_name, &n);
        r = mark_clashes(&n, false);
        if (r >= 0)
                r = rename_clashes(&n, &used);
        if (r < 0) {
                dra_names_clear(&n);
                return r;
        }
        /* Room was made for the longest names; most are shorter, and an
         * index keeps its table for as long as the plugin's IDs stay. */
        char *fit = realloc(n.block, used + 1);
        if (fit)
                n.block = fit;
        free(n.ids);
        n.ids = NULL;
        *ret = n;
        return 0;
}

int dra_name_clashes(const struct dp_plugin *p, struct dra_clash **ret, size_t *ret_n) {
        struct dra_names n;
        int r = dra_names_build(p, &n);

        if (r < 0)
                return r;
        *ret = TAKE_PTR(n.clashes);
        *ret_n = n.n_clashes;
        dra_names_clear(&n);
        return 0;
}

/* A rewritten name ends in the ID's hash: "-" and 8 lowercase hex, or is
 * only the hash. */
static bool hashed_shape(const char *name, size_t len, uint32_t *ret_hash) {
        uint32_t h = 0;

        if (len < 8 || (len > 8 && name[len - 9] != '-'))
                return false;
        for (size_t i = len - 8; i < len; i++) {
                char c = name[i];
                if (!is_lower_alnum(c) || c > 'f')
                        return false;
                h = h << 4 | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        *ret_hash = h;
        return true;
}

static bool names_to(const char *id, const char *name) {
        char buf[DRA_DEVICE_NAME_MAX + 1];

        return dra_name_into(id, buf) > 0 && strcmp(buf, name) == 0;
}

/* A clash's second name ends in "-" and 16 lowercase hex, or is only
 * those. */
static bool alt_shape(const char *name, size_t len) {
        if (len < 16 || (len > 16 && name[len - 17] != '-'))
                return false;
        for (size_t i = len - 16; i < len; i++)
                if (!is_lower_alnum(name[i]) || name[i] > 'f')
                        return false;
        return true;
}

/* Rare (a clash's second name): through the whole table. */
static int find_renamed(const struct dp_plugin *p, const char *name, size_t *ret_id) {
        struct dra_names n;
        int r = dra_names_build(p, &n);

        if (r < 0)
                return r;
        r = -ENOENT;
        for (size_t i = 0; i < n.n_ids && r < 0; i++)
                if (!n.dropped[i] && strcmp(dra_names_get(&n, i), name) == 0) {
                        *ret_id = i;
                        r = 0;
                }
        dra_names_clear(&n);
        return r;
}

int dra_device_find(const struct dp_plugin *p, const char *name, size_t *ret_id) {
        size_t len = strlen(name), best = SIZE_MAX, i;
        uint32_t h;

        if (!dra_is_label(name, len))
                return -ENOENT;
        /* A name that is its ID unchanged has only that ID; a rewritten one
         * may be any ID's whose hash it ends in. Of several, the first. */
        if (dp_plugin_find_id(p, name, &i) == 0 && names_to(dp_plugin_id(p, i), name))
                best = i;
        if (hashed_shape(name, len, &h))
                for (i = 0; i < best && i < p->n_ids; i++)
                        if (base_fnv1a32(dp_plugin_id(p, i)) == h &&
                            names_to(dp_plugin_id(p, i), name)) {
                                best = i;
                                break;
                        }
        if (best == SIZE_MAX && alt_shape(name, len))
                return find_renamed(p, name, ret_id);
        if (best == SIZE_MAX)
                return -ENOENT;
        *ret_id = best;
        return 0;
}

/* The longest path a unix socket binds: sun_path less its NUL. */
#define SOCK_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

void dra_socket_paths_clear(struct dra_socket_paths *p) {
        free(p->registry_dir);
        free(p->registry_name);
        free(p->registry_path);
        free(p->plugin_dir);
        free(p->endpoint);
        *p = (struct dra_socket_paths){ 0 };
}

/* The registration socket's name in dir: the plain one when it fits,
 * else the hashed one. */
static int registry_name(const char *dir, const char *driver, const char *instance, char **ret) {
        char suffix[64];
        size_t room, keep = strlen(driver);

        if (asprintf(ret, "%s%s%s-reg.sock", driver, instance ? "-" : "",
                     instance ? instance : "") < 0)
                return -ENOMEM;
        if (strlen(dir) + 1 + strlen(*ret) <= SOCK_PATH_MAX)
                return 0;
        free(*ret);
        *ret = NULL;
        snprintf(suffix, sizeof(suffix), "-%08x%s%s-reg.sock", base_fnv1a32(driver),
                 instance ? "-" : "", instance ? instance : "");
        if (strlen(dir) + 1 + strlen(suffix) + 1 > SOCK_PATH_MAX)
                return -ENAMETOOLONG;
        room = SOCK_PATH_MAX - strlen(dir) - 1 - strlen(suffix);
        if (keep > room)
                keep = room;
        while (keep > 1 && (driver[keep - 1] == '.' || driver[keep - 1] == '-'))
                keep--;
        return asprintf(ret, "%.*s%s", (int)keep, driver, suffix) < 0 ? -ENOMEM : 0;
}

static int too_long(char **ret_msg, const char *what, const char *path) {
        if (asprintf(ret_msg,
                     "the DRA %s %s is %zu bytes, more than a unix socket path's %zu: use a "
                     "shorter kubelet root (--kubelet-root) or driver name",
                     what, path, strlen(path), SOCK_PATH_MAX) < 0)
                *ret_msg = NULL;
        return -ENAMETOOLONG;
}

int dra_socket_paths(const char *kubelet_root, const char *driver, const char *instance,
                     struct dra_socket_paths *ret, char **ret_msg) {
        struct dra_socket_paths p = { 0 };
        int r = asprintf(&p.registry_dir, "%s/plugins_registry", kubelet_root) < 0 ? -ENOMEM : 0;

        *ret_msg = NULL;
        if (r >= 0)
                r = registry_name(p.registry_dir, driver, instance, &p.registry_name);
        if (r == -ENAMETOOLONG)
                r = too_long(ret_msg, "registration dir", p.registry_dir);
        if (r >= 0 && (asprintf(&p.registry_path, "%s/%s", p.registry_dir, p.registry_name) < 0 ||
                       asprintf(&p.plugin_dir, "%s/plugins/%s", kubelet_root, driver) < 0 ||
                       asprintf(&p.endpoint, "%s/dra%s%s.sock", p.plugin_dir, instance ? "-" : "",
                                instance ? instance : "") < 0))
                r = -ENOMEM;
        if (r >= 0 && strlen(p.endpoint) > SOCK_PATH_MAX)
                r = too_long(ret_msg, "socket", p.endpoint);
        if (r < 0) {
                dra_socket_paths_clear(&p);
                return r;
        }
        *ret = p;
        return 0;
}

static bool is_hex8(const char *s, size_t len) {
        if (len != 8)
                return false;
        for (size_t i = 0; i < 8; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* base is <driver>, or <start of driver>-<hash of driver>. */
static bool driver_base(const char *base, size_t len, const char *driver) {
        char hash[9];

        if (len == strlen(driver) && strncmp(base, driver, len) == 0)
                return true;
        snprintf(hash, sizeof(hash), "%08x", base_fnv1a32(driver));
        return len > 9 && base[len - 9] == '-' && strncmp(base + len - 8, hash, 8) == 0 &&
               strncmp(base, driver, len - 9) == 0;
}

bool dra_registry_sock_match(const char *name, void *driver) {
        static const char end[] = "-reg.sock";
        size_t len = strlen(name);

        if (len <= sizeof(end) - 1 || strcmp(name + len - (sizeof(end) - 1), end) != 0)
                return false;
        len -= sizeof(end) - 1;
        if (driver_base(name, len, driver))
                return true;
        /* With an instance tag. */
        return len > 9 && name[len - 9] == '-' && is_hex8(name + len - 8, 8) &&
               driver_base(name, len - 9, driver);
}

bool dra_endpoint_sock_match(const char *name, void *unused) {
        size_t len = strlen(name);

        (void)unused;
        return strcmp(name, "dra.sock") == 0 ||
               (len == 17 && strncmp(name, "dra-", 4) == 0 && is_hex8(name + 4, 8) &&
                strcmp(name + 12, ".sock") == 0);
}
