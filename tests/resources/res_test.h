/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by tests/unit/test_resources*.c: build selectors from JSON text and
 * run discovery on a fake tree. Header-only so it adds nothing to the other
 * modules' test programs. */
#pragma once

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "faketree.h"
#include "resources.h"

/* Up to 8 selectors from one JSON array of match entries. */
struct sels {
        struct res_selector *v[8];
        size_t n;
};

static inline void sels_free(struct sels *s) {
        for (size_t i = 0; i < s->n; i++)
                res_selector_free(s->v[i]);
        s->n = 0;
}

static inline struct sels sels_parse(const char *json) {
        struct sels s = { .n = 0 };
        cJSON *arr = cJSON_Parse(json);
        cr_assert_not_null(arr, "bad JSON in test: %s", json);
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
                struct base_field_error err = { 0 };
                cr_assert_lt(s.n, 8);
                int r = res_selector_parse(e, &s.v[s.n], &err);
                cr_assert_eq(r, 0, "parse %s: %d field=%s msg=%s", json, r,
                             err.field ? err.field : "", err.msg ? err.msg : "");
                s.n++;
        }
        cJSON_Delete(arr);
        return s;
}

/* Discover with the selectors of json under root; asserts success. */
static inline struct res_devlist discover(const char *root, const char *json) {
        struct sels s = sels_parse(json);
        struct res_devlist l = { .devs = NULL, .n = 0 };
        int r = res_discover(root, s.v, s.n, &l);
        cr_assert_eq(r, 0, "res_discover(%s): %d (%s)", json, r, strerror(-r));
        sels_free(&s);
        return l;
}

static inline int discover_err(const char *root, const char *json) {
        struct sels s = sels_parse(json);
        struct res_devlist l = { .devs = (struct res_device *)(uintptr_t)0x1, .n = 77 };
        int r = res_discover(root, s.v, s.n, &l);
        if (r == 0)
                res_devlist_free(&l);
        else
                cr_assert(l.n == 77, "devlist written on failure");
        sels_free(&s);
        return r;
}

/* A file; with no content under dev/, a character device node (numbers
 * of its own that no driver answers, see ft_next_devnum): only char/block
 * nodes are devices. */
static inline void mk(const char *root, const char *path, const char *content) {
        const char *rel = path[0] == '/' ? path + 1 : path;
        bool node = !content && strncmp(rel, "dev/", 4) == 0;
        if (node && geteuid() != 0)
                cr_skip_test("making fake device nodes (mknod) needs root");
        unsigned major = 0, minor = 0;
        if (node)
                ft_next_devnum(&major, &minor);
        int r = node ? ft_chrdev(root, path, major, minor) : ft_file(root, path, content);
        cr_assert_eq(r, 0, "ft_file %s: %s", path, strerror(-r));
}

static inline void mkln(const char *root, const char *path, const char *target) {
        int r = ft_symlink(root, path, target);
        cr_assert_eq(r, 0, "ft_symlink %s: %s", path, strerror(-r));
}

static inline void mkd(const char *root, const char *path) {
        int r = ft_dir(root, path);
        cr_assert_eq(r, 0, "ft_dir %s: %s", path, strerror(-r));
}

static inline void assert_nodes(const struct res_device *d, const char *const *want) {
        size_t n = 0;
        while (want[n])
                n++;
        cr_assert_eq(d->n_nodes, n, "device %s: %zu nodes, want %zu", d->id, d->n_nodes, n);
        for (size_t i = 0; i < n; i++)
                cr_assert_str_eq(d->nodes[i], want[i], "device %s node %zu", d->id, i);
        cr_assert_null(d->nodes[n], "nodes not NULL-terminated");
}
