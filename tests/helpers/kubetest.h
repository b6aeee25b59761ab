/* SPDX-License-Identifier: Apache-2.0 */
/* Shared set-up of the daemon/kube tests: a fake API server, a kubeconfig
 * for it (token in a file), and predicates on its slices. Header-only so
 * that only the kube tests (which link fakeapi and cdiplug_kube) see it. */
#pragma once

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fakeapi.h"
#include "faketree.h"
#include "kube.h"
#include "kube-internal.h"

#define KT_NODE "node1"
#define KT_NODE_UID "6d1b3a4e-0000-4000-8000-000000000001"
#define KT_DRIVER "cdiplug.example.com"
#define KT_POOL_A KT_NODE "/example.com/serial"
#define KT_POOL_B KT_NODE "/example.com/gpio"

struct kt {
        struct fakeapi *f;
        char *dir;
        char *kubeconfig, *token_file;
        struct kube *k;
};

static inline void kt_write(const char *path, const char *text) {
        FILE *fp = fopen(path, "w");

        cr_assert_not_null(fp, "%s", path);
        fputs(text, fp);
        cr_assert_eq(fclose(fp), 0);
}

/* A kubeconfig for f's URL trusting ca_file, with a token file. */
static inline void kt_kubeconfig(struct kt *t, const char *ca_file, const char *token) {
        char *text = NULL;

        cr_assert_geq(asprintf(&t->token_file, "%s/token", t->dir), 0);
        kt_write(t->token_file, token);
        cr_assert_geq(asprintf(&t->kubeconfig, "%s/kubeconfig", t->dir), 0);
        cr_assert_geq(asprintf(&text,
                               "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                               "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                               "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                               "    certificate-authority: %s\n"
                               "users:\n- name: u\n  user:\n    tokenFile: token\n",
                               fakeapi_url(t->f), ca_file),
                      0);
        kt_write(t->kubeconfig, text);
        free(text);
}

static inline void kt_setup(struct kt *t, bool listening) {
        memset(t, 0, sizeof(*t));
        t->dir = ft_new();
        cr_assert_not_null(t->dir);
        t->f = fakeapi_new(listening);
        fakeapi_add_node(t->f, KT_NODE, KT_NODE_UID);
        fakeapi_set_token(t->f, "token-one");
        kt_kubeconfig(t, fakeapi_ca_file(t->f), "token-one\n");
}

static inline struct kube *kt_kube(struct kt *t) {
        struct kube_settings s = { .kubeconfig = t->kubeconfig,
                                   .node_name = KT_NODE,
                                   .driver = KT_DRIVER };

        cr_assert_eq(kube_new(&s, &t->k), 0);
        return t->k;
}

static inline void kt_teardown(struct kt *t) {
        kube_free(t->k);
        fakeapi_free(t->f);
        ft_free(t->dir);
        free(t->kubeconfig);
        free(t->token_file);
}

/* n devices named <prefix>0 .. */
static inline cJSON *kt_devices(size_t n, const char *prefix) {
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; i < n; i++) {
                cJSON *d = cJSON_CreateObject();
                char name[64];

                snprintf(name, sizeof(name), "%s%zu", prefix, i);
                cJSON_AddStringToObject(d, "name", name);
                cJSON_AddItemToArray(a, d);
        }
        return a;
}

static inline const char *kt_str(const cJSON *o, const char *a, const char *b) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);

        if (b)
                x = cJSON_GetObjectItemCaseSensitive(x, b);
        return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* What a pool looks like on the server. */
struct kt_pool {
        const char *pool;
        size_t devices;     /* want this many devices in total */
        const char *prefix; /* named <prefix><i>, in order; NULL: not checked */
        uint64_t gen;       /* out: the pool's generation */
        size_t slices;      /* out */
};

/* Does the server hold exactly the slices a pool of want->devices needs:
 * ceil(n/128) slices, each with resourceSliceCount right, one generation,
 * node name and owner reference right, devices in order? */
static inline bool kt_pool_ok(const cJSON *slices, void *ctx) {
        struct kt_pool *w = ctx;
        const cJSON *s;
        size_t want_slices = (w->devices + 127) / 128, n = 0, devs = 0;
        double gen = -1;
        bool ok = true;

        for (size_t i = 0; i < want_slices && ok; i++) {
                char *name = NULL;
                const cJSON *found = NULL;

                cr_assert_eq(kube_slice_name(KT_NODE, KT_DRIVER, w->pool, i, &name), 0);
                cJSON_ArrayForEach(s, slices) {
                        if (strcmp(kt_str(s, "metadata", "name"), name) == 0)
                                found = s;
                }
                free(name);
                if (!found) {
                        ok = false;
                        break;
                }
                const cJSON *pool = cJSON_GetObjectItem(cJSON_GetObjectItem(found, "spec"), "pool");
                const cJSON *d, *owner = cJSON_GetArrayItem(
                                        cJSON_GetObjectItem(cJSON_GetObjectItem(found, "metadata"),
                                                            "ownerReferences"),
                                        0);
                size_t j = 0;
                if (gen < 0)
                        gen = cJSON_GetObjectItem(pool, "generation")->valuedouble;
                ok = cJSON_GetObjectItem(pool, "generation")->valuedouble == gen &&
                     cJSON_GetObjectItem(pool, "resourceSliceCount")->valuedouble ==
                             (double)want_slices &&
                     strcmp(kt_str(found, "spec", "nodeName"), KT_NODE) == 0 &&
                     strcmp(kt_str(found, "spec", "driver"), KT_DRIVER) == 0 && owner &&
                     strcmp(kt_str(owner, "uid", NULL), KT_NODE_UID) == 0 &&
                     strcmp(kt_str(owner, "kind", NULL), "Node") == 0;
                cJSON_ArrayForEach(
                        d, cJSON_GetObjectItem(cJSON_GetObjectItem(found, "spec"), "devices")) {
                        char dn[64];
                        if (w->prefix) {
                                snprintf(dn, sizeof(dn), "%s%zu", w->prefix, i * 128 + j);
                                ok = ok && strcmp(kt_str(d, "name", NULL), dn) == 0;
                        }
                        j++;
                }
                devs += j;
        }
        /* No other slice of this pool. */
        cJSON_ArrayForEach(s, slices) {
                const cJSON *pool = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "spec"), "pool");
                if (strcmp(kt_str(pool, "name", NULL), w->pool) == 0)
                        n++;
        }
        if (!ok || n != want_slices || devs != w->devices)
                return false;
        /* No slice (an empty or removed pool): no generation. */
        w->gen = gen < 0 ? 0 : (uint64_t)gen;
        w->slices = n;
        return true;
}

static inline bool kt_no_slices(const cJSON *slices, void *ctx) {
        (void)ctx;
        return cJSON_GetArraySize(slices) == 0;
}

/* Wait for a kube_stats condition, re-checked every 5 ms (test code: the
 * counters have no wake-up of their own). */
static inline bool kt_wait_stats(struct kube *k, bool (*pred)(const struct kube_stats *, void *),
                                 void *ctx, int timeout_ms) {
        for (int waited = 0; waited <= timeout_ms; waited += 5) {
                struct kube_stats st;
                struct timespec ts = { 0, 5000000 };

                kube_stats(k, &st);
                if (pred(&st, ctx))
                        return true;
                nanosleep(&ts, NULL);
        }
        return false;
}

static inline bool kt_errors_at_least(const struct kube_stats *st, void *ctx) {
        const unsigned *want = ctx; /* {class, n} */
        return st->api_errors[want[0]] >= want[1];
}
