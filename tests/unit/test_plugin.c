/* SPDX-License-Identifier: Apache-2.0 */
/* dp_plugin: device merging, share IDs, lists, and the answers to
 * Allocate and GetPreferredAllocation, without grpc. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "config.h"
#include "plugin.h"
#include "resources.h"

static struct res_device dev(const char *id, const char *node, int numa) {
        struct res_device d = { 0 };
        d.id = (char *)id;
        d.nodes = calloc(2, sizeof(char *));
        d.nodes[0] = (char *)node;
        d.n_nodes = 1;
        d.numa_node = numa;
        return d;
}

static struct dp_plugin *plugin(struct cfg_resource *cfg, struct res_device *devs, size_t n) {
        struct dp_plugin *p;
        struct res_devlist list = { .devs = devs, .n = n };
        bool changed;
        cr_assert_eq(dp_plugin_new(cfg, &p), 0);
        cr_assert_eq(dp_plugin_update(p, &list, &changed), 0);
        cr_assert(changed);
        return p;
}

static V1beta1__ListAndWatchResponse *list_of(struct dp_plugin *p) {
        uint8_t *buf;
        size_t len;
        cr_assert_eq(dp_plugin_list(p, &buf, &len), 0);
        V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        free(buf);
        return l;
}

Test(plugin, merges_discoveries_keeping_vanished_devices_unhealthy) {
        struct cfg_resource cfg = { .name = "example.com/serial",
                                    .socket_name = "cdiplug-example.com-serial.sock",
                                    .shares = 1,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("ttyUSB0", "/dev/ttyUSB0", -1),
                                  dev("ttyUSB1", "/dev/ttyUSB1", 1) };
        struct dp_plugin *p = plugin(&cfg, a, 2);
        uint64_t gen = p->generation;
        V1beta1__ListAndWatchResponse *l = list_of(p);
        cr_assert_eq(l->n_devices, 2);
        cr_assert_null(l->devices[0]->topology, "NUMA -1: no topology");
        cr_assert_not_null(l->devices[1]->topology);
        cr_assert_eq(l->devices[1]->topology->nodes[0]->id, 1);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* ttyUSB0 vanishes: still listed, Unhealthy; the same list again is no change. */
        struct res_devlist one = { .devs = &a[1], .n = 1 };
        bool changed;
        cr_assert_eq(dp_plugin_update(p, &one, &changed), 0);
        cr_assert(changed);
        cr_assert_gt(p->generation, gen);
        l = list_of(p);
        cr_assert_eq(l->n_devices, 2);
        cr_assert_str_eq(l->devices[0]->health, "Unhealthy");
        cr_assert_str_eq(l->devices[1]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        gen = p->generation;
        cr_assert_eq(dp_plugin_update(p, &one, &changed), 0);
        cr_assert_not(changed);
        cr_assert_eq(p->generation, gen);

        /* It returns under the same ID; the spec kept it all along. */
        struct res_devlist both = { .devs = a, .n = 2 };
        cr_assert_eq(dp_plugin_update(p, &both, &changed), 0);
        cr_assert(changed);
        l = list_of(p);
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        struct cdi_spec spec;
        cr_assert_eq(dp_plugin_spec(p, &spec), 0);
        cr_assert_eq(spec.n_devices, 2);
        cr_assert_str_eq(spec.kind, "example.com/serial");
        cdi_spec_free(&spec);
        dp_plugin_free(p);
        free(a[0].nodes);
        free(a[1].nodes);
}

Test(plugin, shares_expose_ids_per_device) {
        struct cfg_resource cfg = { .name = "example.com/fuse",
                                    .socket_name = "cdiplug-example.com-fuse.sock",
                                    .shares = 3,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("fuse", "/dev/fuse", -1) };
        struct dp_plugin *p = plugin(&cfg, a, 1);
        cr_assert_eq(p->n_ids, 3);
        cr_assert_str_eq(dp_plugin_id(p, 0), "fuse-0");
        cr_assert_str_eq(dp_plugin_id(p, 2), "fuse-2");
        dp_plugin_free(p);
        free(a[0].nodes);
}

static V1beta1__PreferredAllocationResponse *prefer(struct dp_plugin *p, char **avail, size_t n,
                                                    char **must, size_t n_must, int size) {
        V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest c =
                V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest *cs[] = { &c };
        V1beta1__PreferredAllocationResponse *resp = NULL;
        char *msg = NULL;
        c.available_deviceids = avail;
        c.n_available_deviceids = n;
        c.must_include_deviceids = must;
        c.n_must_include_deviceids = n_must;
        c.allocation_size = size;
        req.container_requests = cs;
        req.n_container_requests = 1;
        cr_assert_eq(dp_preferred(p, &req, &resp, &msg, NULL), 0, "%s", msg);
        return resp;
}

static void expect(V1beta1__PreferredAllocationResponse *r, const char *want) {
        char got[256] = "";
        for (size_t i = 0; i < r->container_responses[0]->n_deviceids; i++) {
                strncat(got, r->container_responses[0]->deviceids[i],
                        sizeof(got) - strlen(got) - 2);
                if (i + 1 < r->container_responses[0]->n_deviceids)
                        strcat(got, ",");
        }
        cr_assert_str_eq(got, want);
        dp_preferred_response_free(r);
}

/* Four devices on two NUMA nodes, two shares each:
 * a (node 0), b (node 1), c (node 0), d (node 1). */
static struct dp_plugin *numa_plugin(struct cfg_resource *cfg, enum cfg_policy policy,
                                     struct res_device *a) {
        *cfg = (struct cfg_resource){ .name = "example.com/acc",
                                      .socket_name = "cdiplug-example.com-acc.sock",
                                      .shares = 2,
                                      .alloc_modes = CFG_ALLOC_CDI_CRI,
                                      .policy = policy };
        a[0] = dev("a", "/dev/a", 0);
        a[1] = dev("b", "/dev/b", 1);
        a[2] = dev("c", "/dev/c", 0);
        a[3] = dev("d", "/dev/d", 1);
        return plugin(cfg, a, 4);
}

static char *all[] = { "a-0", "b-0", "c-0", "d-0", "a-1", "b-1", "c-1", "d-1" };

Test(plugin, packed_fills_a_numa_node_then_a_device) {
        struct cfg_resource cfg;
        struct res_device a[4];
        struct dp_plugin *p = numa_plugin(&cfg, CFG_POLICY_PACKED, a);
        char *must[] = { "b-0" };
        /* With b-0 required: its node 1 first, its own second share next. */
        expect(prefer(p, all, 8, must, 1, 3), "b-0,b-1,d-0");
        expect(prefer(p, all, 8, NULL, 0, 4), "a-0,a-1,c-0,c-1");
        /* Node 1 has more room among these: start there. */
        char *some[] = { "a-0", "b-0", "d-0", "d-1" };
        expect(prefer(p, some, 4, NULL, 0, 2), "b-0,d-0");
        dp_plugin_free(p);
        for (int i = 0; i < 4; i++)
                free(a[i].nodes);
}

Test(plugin, spread_balances_numa_nodes_and_devices) {
        struct cfg_resource cfg;
        struct res_device a[4];
        struct dp_plugin *p = numa_plugin(&cfg, CFG_POLICY_SPREAD, a);
        /* Offered node by node and share by share, where "none" would
         * answer a-0,a-1,c-0,c-1: spread alternates the nodes. */
        char *grouped[] = { "a-0", "a-1", "c-0", "c-1", "b-0", "b-1", "d-0", "d-1" };
        expect(prefer(p, grouped, 8, NULL, 0, 4), "a-0,b-0,c-0,d-0");
        char *must[] = { "a-0" };
        expect(prefer(p, grouped, 8, must, 1, 2), "a-0,b-0");
        /* One node only: one share of each physical device first. */
        expect(prefer(p, grouped, 4, NULL, 0, 2), "a-0,c-0");
        dp_plugin_free(p);
        for (int i = 0; i < 4; i++)
                free(a[i].nodes);
}

Test(plugin, none_keeps_the_kubelet_order) {
        struct cfg_resource cfg;
        struct res_device a[4];
        struct dp_plugin *p = numa_plugin(&cfg, CFG_POLICY_NONE, a);
        char *must[] = { "d-1" };
        expect(prefer(p, all, 8, must, 1, 3), "d-1,a-0,b-0");
        dp_plugin_free(p);
        for (int i = 0; i < 4; i++)
                free(a[i].nodes);
}

Test(plugin, device_specs_carry_selector_env_mounts_and_permissions) {
        struct cfg_resource cfg = { .name = "example.com/cam",
                                    .socket_name = "cdiplug-example.com-cam.sock",
                                    .shares = 1,
                                    .alloc_modes =
                                            CFG_ALLOC_DEVICE_SPECS | CFG_ALLOC_CDI_ANNOTATIONS };
        struct res_device a = dev("video0", "/dev/video0", -1);
        char *env[] = { "CAMERA=1", "LANG=C.UTF-8", NULL };
        struct base_mount m = { .host_path = "/usr/lib/cam",
                                .container_path = "/opt/cam",
                                .read_only = true };
        a.edits.env = env;
        a.edits.mounts = &m;
        a.edits.n_mounts = 1;
        a.edits.node.permissions = "r";
        struct dp_plugin *p = plugin(&cfg, &a, 1);
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *cs[] = { &c };
        char *ids[] = { "video0" };
        c.devices_ids = ids;
        c.n_devices_ids = 1;
        req.container_requests = cs;
        req.n_container_requests = 1;
        V1beta1__AllocateResponse *r = NULL;
        char *msg = NULL;
        cr_assert_eq(dp_allocate(p, &req, &r, &msg, NULL), 0);
        V1beta1__ContainerAllocateResponse *cr = r->container_responses[0];
        cr_assert_eq(cr->n_cdi_devices, 0, "cdi-cri is not among the modes");
        cr_assert_eq(cr->n_devices, 1);
        cr_assert_str_eq(cr->devices[0]->permissions, "r");
        cr_assert_eq(cr->n_envs, 2);
        cr_assert_str_eq(cr->envs[0]->key, "CAMERA");
        cr_assert_str_eq(cr->envs[0]->value, "1");
        cr_assert_eq(cr->n_mounts, 1);
        cr_assert_str_eq(cr->mounts[0]->container_path, "/opt/cam");
        cr_assert(cr->mounts[0]->read_only);
        cr_assert_eq(cr->n_annotations, 1);
        cr_assert_str_eq(cr->annotations[0]->value, "example.com/cam=video0");
        dp_allocate_response_free(r);

        /* The same extras land in the CDI spec. */
        struct cdi_spec spec;
        char *json = NULL;
        cr_assert_eq(dp_plugin_spec(p, &spec), 0);
        cr_assert_eq(cdi_spec_to_json(&spec, &json), 0);
        cr_assert_not_null(strstr(json, "CAMERA=1"), "%s", json);
        cr_assert_not_null(strstr(json, "/opt/cam"), "%s", json);
        cr_assert_not_null(strstr(json, "\"ro\""), "%s", json);
        cr_assert_not_null(strstr(json, "\"permissions\""), "%s", json);
        free(json);
        cdi_spec_free(&spec);
        dp_plugin_free(p);
        free(a.nodes);
}

Test(plugin, annotation_keys_fit_the_cdi_limit) {
        char name[300];
        snprintf(name, sizeof(name), "%s.example.com/%s",
                 "a-very-long-subdomain-label-that-goes-on-and-on",
                 "a-name-part-that-is-sixty-three-characters-long-xxxxxxxxxxxxxxx");
        struct cfg_resource cfg = { .name = name, .socket_name = "x.sock", .shares = 1 };
        struct dp_plugin *p;
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        const char *key = p->annotation_key + strlen("cdi.k8s.io/");
        cr_assert_eq(strncmp(p->annotation_key, "cdi.k8s.io/cdiplug_", 19), 0);
        cr_assert_leq(strlen(key), 63, "%s", key);
        cr_assert_null(strchr(key, '/'));
        char last = key[strlen(key) - 1];
        cr_assert((last >= '0' && last <= '9') || (last >= 'a' && last <= 'z'));
        char *first = strdup(p->annotation_key);
        dp_plugin_free(p);
        /* A name differing only past the cut gets a different key. */
        name[strlen(name) - 1] = 'y';
        cr_assert_eq(dp_plugin_new(&cfg, &p), 0);
        cr_assert_str_neq(p->annotation_key, first);
        free(first);
        dp_plugin_free(p);

        struct cfg_resource shortc = { .name = "example.com/serial",
                                       .socket_name = "x.sock",
                                       .shares = 1 };
        cr_assert_eq(dp_plugin_new(&shortc, &p), 0);
        cr_assert_str_eq(p->annotation_key, "cdi.k8s.io/cdiplug_example.com-serial");
        dp_plugin_free(p);
}

static char *allocate_one(struct dp_plugin *p, char *id) {
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *cs[] = { &c };
        V1beta1__AllocateResponse *r = NULL;
        char *ids[] = { id }, *msg = NULL, *name;
        c.devices_ids = ids;
        c.n_devices_ids = 1;
        req.container_requests = cs;
        req.n_container_requests = 1;
        cr_assert_eq(dp_allocate(p, &req, &r, &msg, NULL), 0, "%s", msg);
        cr_assert_eq(r->container_responses[0]->n_cdi_devices, 1);
        name = strdup(r->container_responses[0]->cdi_devices[0]->name);
        dp_allocate_response_free(r);
        return name;
}

Test(plugin, a_device_appearing_between_others_keeps_every_id_on_its_device) {
        struct cfg_resource cfg = { .name = "example.com/acc",
                                    .socket_name = "cdiplug-example.com-acc.sock",
                                    .shares = 2,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("a", "/dev/a", -1), dev("b", "/dev/b", -1),
                                  dev("c", "/dev/c", -1) };
        struct res_device ac[] = { a[0], a[2] };
        struct dp_plugin *p = plugin(&cfg, ac, 2);
        char *name = allocate_one(p, "c-1");
        cr_assert_str_eq(name, "example.com/acc=c");
        free(name);

        struct res_devlist all3 = { .devs = a, .n = 3 };
        bool changed;
        cr_assert_eq(dp_plugin_update(p, &all3, &changed), 0);
        cr_assert(changed);
        cr_assert_eq(p->n_ids, 6);
        const char *want[] = { "a", "a", "b", "b", "c", "c" };
        for (size_t i = 0; i < 6; i++)
                cr_assert_str_eq(dp_device_id(p, dp_plugin_id_dev(p, i)), want[i], "ID %s",
                                 dp_plugin_id(p, i));
        name = allocate_one(p, "c-1");
        cr_assert_str_eq(name, "example.com/acc=c");
        free(name);
        name = allocate_one(p, "b-0");
        cr_assert_str_eq(name, "example.com/acc=b");
        free(name);
        dp_plugin_free(p);
        for (int i = 0; i < 3; i++)
                free(a[i].nodes);
}

Test(plugin, a_device_whose_node_changes_is_listed_with_the_new_node) {
        struct cfg_resource cfg = { .name = "example.com/serial",
                                    .socket_name = "cdiplug-example.com-serial.sock",
                                    .shares = 1,
                                    .alloc_modes = CFG_ALLOC_DEVICE_SPECS };
        struct res_device a[] = { dev("s0", "/dev/ttyS0", -1), dev("s1", "/dev/ttyS1", -1) };
        struct dp_plugin *p = plugin(&cfg, a, 2);
        struct res_device moved[] = { a[0], dev("s1", "/dev/ttyS9", 3) };
        struct res_devlist l = { .devs = moved, .n = 2 };
        bool changed;
        uint64_t gen = p->generation;

        cr_assert_eq(dp_plugin_update(p, &l, &changed), 0);
        cr_assert(changed);
        cr_assert_gt(p->generation, gen);
        cr_assert_eq(p->n_devs, 2);
        cr_assert_str_eq(dp_str_next(dp_device_id(p, 1)), "/dev/ttyS9");
        cr_assert_eq(p->devs[1].numa_node, 3);
        cr_assert_str_eq(dp_str_next(dp_device_id(p, 0)), "/dev/ttyS0",
                         "the other device is untouched");
        struct cdi_spec spec;
        cr_assert_eq(dp_plugin_spec(p, &spec), 0);
        cr_assert_str_eq(spec.devices[1].edits.nodes[0].path, "/dev/ttyS9");
        cdi_spec_free(&spec);
        dp_plugin_free(p);
        free(a[0].nodes);
        free(a[1].nodes);
        free(moved[1].nodes);
}

Test(plugin, devices_of_different_selectors_keep_their_own_extras) {
        struct cfg_resource cfg = { .name = "example.com/cam",
                                    .socket_name = "cdiplug-example.com-cam.sock",
                                    .shares = 1,
                                    .alloc_modes = CFG_ALLOC_DEVICE_SPECS };
        struct res_device a[] = { dev("v0", "/dev/video0", -1), dev("v1", "/dev/video1", -1),
                                  dev("v2", "/dev/video2", -1) };
        char *env_a[] = { "CAM=a", NULL }, *env_b[] = { "CAM=b", NULL };
        a[0].edits.env = env_a;
        a[1].edits.env = env_b;
        a[1].edits.node.permissions = "r";
        a[2].edits.env = env_a;
        struct dp_plugin *p = plugin(&cfg, a, 3);
        cr_assert_eq(p->n_extras, 2, "v0 and v2 share one copy");
        cr_assert_eq(p->devs[0].extras, p->devs[2].extras);
        cr_assert_str_eq(dp_device_extras(p, 1)->env[0], "CAM=b");
        cr_assert_str_eq(dp_device_extras(p, 1)->node.permissions, "r");
        cr_assert_null(dp_device_extras(p, 2)->node.permissions);
        cr_assert_str_eq(dp_device_extras(p, 2)->env[0], "CAM=a");
        dp_plugin_free(p);
        for (int i = 0; i < 3; i++)
                free(a[i].nodes);
}

/* A reload that changes a resource starts from a clone of its running
 * devices: what each ID means survives, new shares give new share IDs,
 * and changed edits leave no unused extras behind in the next clone. */
Test(plugin, a_clone_keeps_ids_and_takes_the_new_settings) {
        struct cfg_resource cfg = { .name = "example.com/cam",
                                    .socket_name = "cdiplug-example.com-cam.sock",
                                    .shares = 1,
                                    .alloc_modes = CFG_ALLOC_CDI_CRI };
        struct res_device a[] = { dev("v-0", "/dev/v-0", -1), dev("v1", "/dev/v1", 0) };
        char *env_a[] = { "CAM=a", NULL }, *env_b[] = { "CAM=b", NULL };
        a[0].edits.env = env_a;
        a[0].id_is_path = true;
        a[1].edits.env = env_a;
        struct dp_plugin *p = plugin(&cfg, a, 2);

        /* Two shares, new edits, v-0 gone and another node wanting its ID. */
        struct cfg_resource cfg2 = cfg;
        cfg2.shares = 2;
        struct dp_plugin *c;
        cr_assert_eq(dp_plugin_clone(p, &cfg2, &c), 0);
        struct res_device b[] = { dev("v-0", "/dev/v/0", -1), dev("v1", "/dev/v1", 0) };
        b[0].id_is_path = true;
        b[1].edits.env = env_b;
        struct res_devlist found = { .devs = b, .n = 2 };
        bool changed;
        cr_assert_eq(dp_plugin_update(c, &found, &changed), 0);
        cr_assert(changed);
        cr_assert_eq(c->n_devs, 2);
        cr_assert_eq(c->n_ids, 4);
        cr_assert_str_eq(dp_plugin_id(c, 0), "v-0-0");
        cr_assert_str_eq(dp_plugin_id(c, 3), "v1-1");
        size_t i;
        cr_assert_eq(dp_plugin_find_dev(c, "v-0", &i), 0);
        cr_assert_str_eq(dp_str_next(dp_device_id(c, i)), "/dev/v-0", "the newcomer took the ID");
        cr_assert_not(c->devs[i].healthy);
        cr_assert_eq(dp_plugin_find_dev(c, "v1", &i), 0);
        cr_assert(c->devs[i].healthy);
        cr_assert_str_eq(dp_device_extras(c, i)->env[0], "CAM=b");
        cr_assert_eq(c->n_extras, 2, "the old extras and the new");
        /* The running plugin is untouched. */
        cr_assert_eq(p->n_ids, 2);
        cr_assert_str_eq(dp_device_extras(p, 1)->env[0], "CAM=a");
        dp_plugin_free(p);

        /* The next clone copies only the extras in use. */
        struct cfg_resource cfg3 = cfg2;
        struct dp_plugin *c2;
        cr_assert_eq(dp_plugin_clone(c, &cfg3, &c2), 0);
        struct res_device only[] = { dev("v1", "/dev/v1", 0) };
        only[0].edits.env = env_b;
        found = (struct res_devlist){ .devs = only, .n = 1 };
        cr_assert_eq(dp_plugin_update(c2, &found, &changed), 0);
        cr_assert_eq(c2->n_devs, 2);
        cr_assert_eq(c2->n_ids, 4);
        cr_assert_eq(c2->n_extras, 2);
        cfg3.shares = 1;
        struct dp_plugin *c3;
        cr_assert_eq(dp_plugin_clone(c2, &cfg3, &c3), 0);
        cr_assert_eq(dp_plugin_update(c3, &found, &changed), 0);
        cr_assert_eq(c3->n_ids, 2);
        cr_assert_str_eq(dp_plugin_id(c3, 0), "v-0");
        V1beta1__ListAndWatchResponse *l = list_of(c3);
        cr_assert_eq(l->n_devices, 2);
        cr_assert_str_eq(l->devices[0]->health, "Unhealthy");
        cr_assert_str_eq(l->devices[1]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        dp_plugin_free(c);
        dp_plugin_free(c2);
        dp_plugin_free(c3);

        /* Edits changed twice: the first set, used by nothing, is not copied on. */
        struct res_device v1a[] = { dev("v1", "/dev/v1", 0) };
        v1a[0].edits.env = env_a;
        struct dp_plugin *q = plugin(&cfg, v1a, 1), *q2, *q3;
        cr_assert_eq(dp_plugin_clone(q, &cfg, &q2), 0);
        cr_assert_eq(dp_plugin_update(q2, &found, &changed), 0);
        cr_assert_eq(q2->n_extras, 2);
        cr_assert_eq(dp_plugin_clone(q2, &cfg, &q3), 0);
        cr_assert_eq(q3->n_extras, 1);
        cr_assert_str_eq(dp_device_extras(q3, 0)->env[0], "CAM=b");
        dp_plugin_free(q);
        dp_plugin_free(q2);
        dp_plugin_free(q3);
        free(v1a[0].nodes);
        for (int k = 0; k < 2; k++) {
                free(a[k].nodes);
                free(b[k].nodes);
        }
        free(only[0].nodes);
}
