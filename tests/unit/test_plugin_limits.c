/* SPDX-License-Identifier: Apache-2.0 */
/* dp_plugin at the kubelet's scale: GetPreferredAllocation with thousands
 * of offered IDs (the hashed lookup), and lists over the 4 MiB limit. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "plugin.h"
#include "resources.h"
#include "rpc.h"

#define N 3000

static char ids[N][32], nodes[N][40]; /* room for any size_t */
static char *node_ptrs[N][2];

static struct dp_plugin *many(struct cfg_resource *cfg, size_t n) {
        static struct res_device devs[N];
        struct res_devlist list = { .devs = devs, .n = n };
        struct dp_plugin *p;
        bool changed;

        for (size_t i = 0; i < n; i++) {
                snprintf(ids[i], sizeof(ids[i]), "d%05zu", i);
                snprintf(nodes[i], sizeof(nodes[i]), "/dev/d%05zu", i);
                node_ptrs[i][0] = nodes[i];
                devs[i] = (struct res_device){
                        .id = ids[i], .nodes = node_ptrs[i], .n_nodes = 1, .numa_node = (int)(i % 2)
                };
        }
        cr_assert_eq(dp_plugin_new(cfg, &p), 0);
        cr_assert_eq(dp_plugin_update(p, &list, &changed), 0);
        return p;
}

static int preferred(struct dp_plugin *p, char **avail, size_t n_avail, char **must, size_t n_must,
                     int size, V1beta1__PreferredAllocationResponse **ret, char **msg) {
        V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest c =
                V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest *cs[] = { &c };
        c.n_available_deviceids = n_avail;
        c.available_deviceids = avail;
        c.n_must_include_deviceids = n_must;
        c.must_include_deviceids = must;
        c.allocation_size = size;
        req.n_container_requests = 1;
        req.container_requests = cs;
        return dp_preferred(p, &req, ret, msg, NULL);
}

Test(plugin_limits, preferred_with_thousands_of_offered_ids) {
        struct cfg_resource cfg = { .name = "example.com/many",
                                    .shares = 4,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct dp_plugin *p = many(&cfg, N / 4);
        char **avail = calloc(p->n_ids, sizeof(char *));
        V1beta1__PreferredAllocationResponse *resp = NULL;
        char *msg = NULL;

        cr_assert_eq(p->n_ids, N);
        /* Offered in reverse, as a kubelet's map order might give them. */
        for (size_t i = 0; i < p->n_ids; i++)
                avail[i] = (char *)dp_plugin_id(p, p->n_ids - 1 - i);
        char *must[] = { (char *)dp_plugin_id(p, 1234) };
        cr_assert_eq(preferred(p, avail, p->n_ids, must, 1, 4, &resp, &msg), 0, "%s", msg);
        V1beta1__ContainerPreferredAllocationResponse *cr = resp->container_responses[0];
        cr_assert_eq(cr->n_deviceids, 4);
        cr_expect_str_eq(cr->deviceids[0], must[0]);
        /* packed: the other three are the same device's shares. */
        size_t dev0 = 0, k;
        cr_assert_eq(dp_plugin_find_id(p, must[0], &k), 0);
        dev0 = dp_plugin_id_dev(p, k);
        for (size_t i = 1; i < 4; i++) {
                cr_assert_eq(dp_plugin_find_id(p, cr->deviceids[i], &k), 0, "%s", cr->deviceids[i]);
                cr_expect_eq(dp_plugin_id_dev(p, k), dev0, "%s", cr->deviceids[i]);
        }
        dp_preferred_response_free(resp);

        /* Unknown and repeated IDs are still refused by the hashed lookup. */
        char *saved = avail[2000];
        avail[2000] = "nosuch";
        cr_expect_eq(preferred(p, avail, p->n_ids, NULL, 0, 1, &resp, &msg), -EINVAL);
        cr_expect_not_null(strstr(msg, "unknown device ID \"nosuch\""), "%s", msg);
        free(msg);
        avail[2000] = avail[10];
        cr_expect_eq(preferred(p, avail, p->n_ids, NULL, 0, 1, &resp, &msg), -EINVAL);
        cr_expect_not_null(strstr(msg, "requested twice"), "%s", msg);
        free(msg);
        avail[2000] = saved;
        char *gone[] = { "d99999-0" };
        cr_expect_eq(preferred(p, avail, 100, gone, 1, 2, &resp, &msg), -EINVAL);
        free(msg);
        free(avail);
        dp_plugin_free(p);
}

Test(plugin_limits, a_list_over_4_MiB_is_refused_and_its_size_told) {
        struct cfg_resource cfg = { .name = "example.com/big",
                                    .shares = 1024,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct dp_plugin *p = many(&cfg, 200);
        uint8_t *buf = (uint8_t *)0x1;
        size_t len = 0;

        cr_assert_eq(p->n_ids, 200 * 1024);
        cr_expect_eq(dp_plugin_list(p, &buf, &len), -EMSGSIZE);
        cr_expect_eq(buf, (uint8_t *)0x1, "nothing handed out");
        cr_assert_eq(dp_plugin_list(p, NULL, &len), 0);
        cr_expect_gt(len, (size_t)DP_MAX_MESSAGE);
        dp_plugin_free(p);

        struct cfg_resource small = { .name = "example.com/small",
                                      .shares = 1024,
                                      .alloc_modes = CFG_ALLOC_CDI_CRI };
        p = many(&small, 100);
        cr_expect_eq(dp_plugin_list(p, &buf, &len), 0);
        cr_expect_leq(len, (size_t)DP_MAX_MESSAGE);
        free(buf);
        dp_plugin_free(p);
}

/* The greedy rule spelled out the slow way, one pass over every candidate
 * per round, as the answers are defined in allocate.c; the daemon's
 * grouped version must give the same IDs in the same order. */
static void reference(const struct dp_plugin *p, char **avail, size_t n, char **must, size_t n_must,
                      size_t size, enum cfg_policy policy, char **out) {
        bool *chosen = calloc(p->n_ids, sizeof(bool));
        size_t *numa_chosen = calloc(64, sizeof(size_t)), *room = calloc(64, sizeof(size_t));
        size_t *dev_chosen = calloc(p->n_devs, sizeof(size_t)), *idx = calloc(n, sizeof(size_t)), k,
               m = 0;

        for (size_t i = 0; i < n; i++)
                cr_assert_eq(dp_plugin_find_id(p, avail[i], &idx[i]), 0);
        for (size_t i = 0; i < n_must; i++) {
                cr_assert_eq(dp_plugin_find_id(p, must[i], &k), 0);
                chosen[k] = true;
                out[m++] = must[i];
        }
        for (size_t i = 0; i < p->n_ids; i++) {
                size_t d = dp_plugin_id_dev(p, i), s = (size_t)(p->devs[d].numa_node + 1);
                if (chosen[i]) {
                        numa_chosen[s]++;
                        dev_chosen[d]++;
                }
        }
        for (size_t i = 0; i < n; i++)
                if (!chosen[idx[i]])
                        room[p->devs[dp_plugin_id_dev(p, idx[i])].numa_node + 1]++;
        while (m < size) {
                size_t best = SIZE_MAX;
                long long bkey[3] = { 0 };
                for (size_t i = 0; i < n; i++) {
                        if (chosen[idx[i]])
                                continue;
                        size_t d = dp_plugin_id_dev(p, idx[i]),
                               s = (size_t)(p->devs[d].numa_node + 1);
                        long long key[3] = { (long long)numa_chosen[s], (long long)dev_chosen[d],
                                             (long long)room[s] };
                        if (policy == CFG_POLICY_SPREAD) {
                                key[0] = -key[0];
                                key[1] = -key[1];
                                key[2] = 0;
                        }
                        if (policy == CFG_POLICY_NONE)
                                key[0] = key[1] = key[2] = 0;
                        if (best == SIZE_MAX || key[0] > bkey[0] ||
                            (key[0] == bkey[0] && key[1] > bkey[1]) ||
                            (key[0] == bkey[0] && key[1] == bkey[1] && key[2] > bkey[2])) {
                                best = i;
                                memcpy(bkey, key, sizeof(key));
                        }
                }
                size_t d = dp_plugin_id_dev(p, idx[best]), s = (size_t)(p->devs[d].numa_node + 1);
                chosen[idx[best]] = true;
                numa_chosen[s]++;
                dev_chosen[d]++;
                room[s]--;
                out[m++] = avail[best];
        }
        free(chosen);
        free(numa_chosen);
        free(room);
        free(dev_chosen);
        free(idx);
}

Test(plugin_limits, grouped_picking_answers_as_the_plain_greedy_rule) {
        static const enum cfg_policy policies[] = { CFG_POLICY_PACKED, CFG_POLICY_SPREAD,
                                                    CFG_POLICY_NONE };
        static struct res_device devs[64];
        uint64_t rng = 12345;
#define RND(n)                                                                                     \
        ((rng = rng * 6364136223846793005u + 1442695040888963407u), (size_t)((rng >> 33) % (n)))

        for (int round = 0; round < 300; round++) {
                size_t n_dev = 1 + RND(40);
                unsigned shares = 1 + (unsigned)RND(4);
                struct cfg_resource cfg = { .name = "example.com/r",
                                            .shares = shares,
                                            .alloc_modes = CFG_ALLOC_CDI_CRI,
                                            .policy = policies[round % 3] };
                for (size_t i = 0; i < n_dev; i++) {
                        snprintf(ids[i], sizeof(ids[i]), "d%02zu", i);
                        snprintf(nodes[i], sizeof(nodes[i]), "/dev/d%02zu", i);
                        node_ptrs[i][0] = nodes[i];
                        devs[i] = (struct res_device){ .id = ids[i],
                                                       .nodes = node_ptrs[i],
                                                       .n_nodes = 1,
                                                       .numa_node = (int)RND(4) - 1 };
                }
                struct res_devlist list = { .devs = devs, .n = n_dev };
                struct dp_plugin *p;
                bool changed;
                cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
                cr_assert_eq(dp_plugin_update(p, &list, &changed), 0);

                /* A random subset in a random order, some of it must-include. */
                char **avail = calloc(p->n_ids, sizeof(char *)),
                     **must = calloc(p->n_ids, sizeof(char *));
                size_t n = 0, n_must = 0;
                for (size_t i = 0; i < p->n_ids; i++)
                        if (RND(4))
                                avail[n++] = (char *)dp_plugin_id(p, i);
                if (n == 0)
                        avail[n++] = (char *)dp_plugin_id(p, 0);
                for (size_t i = n; i > 1; i--) {
                        size_t j = RND(i);
                        char *tmp = avail[i - 1];
                        avail[i - 1] = avail[j];
                        avail[j] = tmp;
                }
                size_t size = 1 + RND(n);
                for (size_t i = 0; i < n && n_must < size && RND(3) == 0; i++)
                        must[n_must++] = avail[RND(n)];
                /* must-include IDs must be distinct */
                for (size_t i = 0; i < n_must; i++)
                        for (size_t j = 0; j < i; j++)
                                if (must[i] == must[j])
                                        must[i--] = must[--n_must];

                V1beta1__PreferredAllocationResponse *resp = NULL;
                char *msg = NULL, **want = calloc(size, sizeof(char *));
                cr_assert_eq(preferred(p, avail, n, must, n_must, (int)size, &resp, &msg), 0, "%s",
                             msg);
                reference(p, avail, n, must, n_must, size, cfg.policy, want);
                V1beta1__ContainerPreferredAllocationResponse *cr = resp->container_responses[0];
                cr_assert_eq(cr->n_deviceids, size);
                for (size_t i = 0; i < size; i++)
                        cr_assert_str_eq(cr->deviceids[i], want[i],
                                         "round %d (policy %d, %zu devices x %u), ID %zu", round,
                                         (int)cfg.policy, n_dev, shares, i);
                dp_preferred_response_free(resp);
                free(want);
                free(avail);
                free(must);
                dp_plugin_free(p);
        }
#undef RND
}
