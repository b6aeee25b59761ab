/* SPDX-License-Identifier: Apache-2.0 */
/* podresources/v1 on the wire: every message the daemon uses (and the
 * rest of the API) encoded and decoded against bytes computed by hand
 * from the field numbers and wire types of the kubelet's api.proto:
 * tag = field << 3 | wire type (0 varint, 2 length-delimited), repeated
 * int64 packed as proto3 does. */
#include <criterion/criterion.h>
#include <string.h>

#include "podresources.pb-c.h"

static void same(const ProtobufCMessage *m, const uint8_t *want, size_t len) {
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t buf[256];
        cr_assert_eq(n, len, "%s packs to %zu bytes, want %zu", m->descriptor->name, n, len);
        cr_assert_eq(protobuf_c_message_pack(m, buf), len);
        for (size_t i = 0; i < len; i++)
                cr_assert_eq(buf[i], want[i], "%s byte %zu: %02x, want %02x", m->descriptor->name,
                             i, buf[i], want[i]);
}

/* ContainerDevices{resource_name "a/b", device_ids ["x", "y-1"], topology{nodes [{ID 1}]}} */
#define CONTAINER_DEVICES                                                                          \
        0x0a, 0x03, 'a', '/', 'b', 0x12, 0x01, 'x', 0x12, 0x03, 'y', '-', '1', 0x1a, 0x04, 0x0a,   \
                0x02, 0x08, 0x01
/* DynamicResource{class "k", claim "c", namespace "n", claim_resources [{cdi_devices [{name "v/d=x"}]}]} */
#define DYNAMIC                                                                                    \
        0x0a, 0x01, 'k', 0x12, 0x01, 'c', 0x1a, 0x01, 'n', 0x22, 0x09, 0x0a, 0x07, 0x0a, 0x05,     \
                'v', '/', 'd', '=', 'x'
/* ContainerResources{name "c", devices [CONTAINER_DEVICES], cpu_ids [2, 3], dynamic [DYNAMIC]} */
#define CONTAINER                                                                                  \
        0x0a, 0x01, 'c', 0x12, 0x13, CONTAINER_DEVICES, 0x1a, 0x02, 0x02, 0x03, 0x2a, 0x14, DYNAMIC
/* PodResources{name "p", namespace "n", containers [CONTAINER]} */
#define POD 0x0a, 0x01, 'p', 0x12, 0x01, 'n', 0x1a, 0x32, CONTAINER

static const uint8_t list_resp[] = { 0x0a, 0x3a, POD };

static V1__NUMANode numa = V1__NUMANODE__INIT;
static V1__NUMANode *numas[] = { &numa };
static V1__TopologyInfo topo = V1__TOPOLOGY_INFO__INIT;
static V1__ContainerDevices cdev = V1__CONTAINER_DEVICES__INIT;
static V1__ContainerDevices *cdevs[] = { &cdev };
static char *ids[] = { "x", "y-1" };
static V1__CDIDevice cdi = V1__CDIDEVICE__INIT;
static V1__CDIDevice *cdis[] = { &cdi };
static V1__ClaimResource claim = V1__CLAIM_RESOURCE__INIT;
static V1__ClaimResource *claims[] = { &claim };
static V1__DynamicResource dyn = V1__DYNAMIC_RESOURCE__INIT;
static V1__DynamicResource *dyns[] = { &dyn };
static int64_t cpus[] = { 2, 3 };
static V1__ContainerResources ctr = V1__CONTAINER_RESOURCES__INIT;
static V1__ContainerResources *ctrs[] = { &ctr };
static V1__PodResources pod = V1__POD_RESOURCES__INIT;
static V1__PodResources *pods[] = { &pod };

static void build(void) {
        numa.id = 1;
        topo.n_nodes = 1;
        topo.nodes = numas;
        cdev.resource_name = "a/b";
        cdev.n_device_ids = 2;
        cdev.device_ids = ids;
        cdev.topology = &topo;
        cdi.name = "v/d=x";
        claim.n_cdi_devices = 1;
        claim.cdi_devices = cdis;
        dyn.class_name = "k";
        dyn.claim_name = "c";
        dyn.claim_namespace = "n";
        dyn.n_claim_resources = 1;
        dyn.claim_resources = claims;
        ctr.name = "c";
        ctr.n_devices = 1;
        ctr.devices = cdevs;
        ctr.n_cpu_ids = 2;
        ctr.cpu_ids = cpus;
        ctr.n_dynamic_resources = 1;
        ctr.dynamic_resources = dyns;
        pod.name = "p";
        pod.namespace_ = "n";
        pod.n_containers = 1;
        pod.containers = ctrs;
}

TestSuite(podresources_proto, .init = build);

Test(podresources_proto, list_request_is_empty) {
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        cr_assert_eq(protobuf_c_message_get_packed_size(&req.base), 0);
        V1__AllocatableResourcesRequest areq = V1__ALLOCATABLE_RESOURCES_REQUEST__INIT;
        cr_assert_eq(protobuf_c_message_get_packed_size(&areq.base), 0);
}

Test(podresources_proto, list_response_encodes) {
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        resp.n_pod_resources = 1;
        resp.pod_resources = pods;
        same(&resp.base, list_resp, sizeof(list_resp));
}

Test(podresources_proto, list_response_decodes) {
        V1__ListPodResourcesResponse *m =
                v1__list_pod_resources_response__unpack(NULL, sizeof(list_resp), list_resp);
        cr_assert_not_null(m);
        cr_assert_eq(m->n_pod_resources, 1);
        V1__PodResources *p = m->pod_resources[0];
        cr_assert_str_eq(p->name, "p");
        cr_assert_str_eq(p->namespace_, "n");
        cr_assert_eq(p->n_containers, 1);
        V1__ContainerResources *c = p->containers[0];
        cr_assert_str_eq(c->name, "c");
        cr_assert_eq(c->n_devices, 1);
        cr_assert_str_eq(c->devices[0]->resource_name, "a/b");
        cr_assert_eq(c->devices[0]->n_device_ids, 2);
        cr_assert_str_eq(c->devices[0]->device_ids[1], "y-1");
        cr_assert_eq(c->devices[0]->topology->nodes[0]->id, 1);
        cr_assert_eq(c->n_cpu_ids, 2);
        cr_assert_eq(c->cpu_ids[1], 3);
        cr_assert_eq(c->n_dynamic_resources, 1);
        cr_assert_str_eq(c->dynamic_resources[0]->claim_resources[0]->cdi_devices[0]->name,
                         "v/d=x");
        v1__list_pod_resources_response__free_unpacked(m, NULL);
}

Test(podresources_proto, unpacked_cpu_ids_and_unknown_fields_decode) {
        /* An older encoder's unpacked repeated int64 (tag 0x18 per value)
         * and a field added after our copy (99, varint) are both fine. */
        static const uint8_t ctr_bytes[] = { 0x0a, 0x01, 'c',  0x18, 0x02,
                                             0x18, 0x03, 0x98, 0x06, 0x01 };
        V1__ContainerResources *c =
                v1__container_resources__unpack(NULL, sizeof(ctr_bytes), ctr_bytes);
        cr_assert_not_null(c);
        cr_assert_eq(c->n_cpu_ids, 2);
        cr_assert_eq(c->cpu_ids[0], 2);
        v1__container_resources__free_unpacked(c, NULL);
}

Test(podresources_proto, get_request_and_response) {
        static const uint8_t get_req[] = { 0x0a, 0x01, 'p', 0x12, 0x01, 'n' };
        V1__GetPodResourcesRequest req = V1__GET_POD_RESOURCES_REQUEST__INIT;
        req.pod_name = "p";
        req.pod_namespace = "n";
        same(&req.base, get_req, sizeof(get_req));
        static const uint8_t get_resp[] = { 0x0a, 0x3a, POD };
        V1__GetPodResourcesResponse resp = V1__GET_POD_RESOURCES_RESPONSE__INIT;
        resp.pod_resources = &pod;
        same(&resp.base, get_resp, sizeof(get_resp));
}

Test(podresources_proto, allocatable_response) {
        /* ContainerMemory{memory_type "m", size 256, topology{nodes [{ID 1}]}} */
        static const uint8_t want[] = { 0x0a, 0x13, CONTAINER_DEVICES,
                                        0x12, 0x02, 0x02,
                                        0x03, 0x1a, 0x0c,
                                        0x0a, 0x01, 'm',
                                        0x10, 0x80, 0x02,
                                        0x1a, 0x04, 0x0a,
                                        0x02, 0x08, 0x01 };
        V1__ContainerMemory mem = V1__CONTAINER_MEMORY__INIT;
        V1__ContainerMemory *mems[] = { &mem };
        mem.memory_type = "m";
        mem.size = 256;
        mem.topology = &topo;
        V1__AllocatableResourcesResponse resp = V1__ALLOCATABLE_RESOURCES_RESPONSE__INIT;
        resp.n_devices = 1;
        resp.devices = cdevs;
        resp.n_cpu_ids = 2;
        resp.cpu_ids = cpus;
        resp.n_memory = 1;
        resp.memory = mems;
        same(&resp.base, want, sizeof(want));
        V1__AllocatableResourcesResponse *m =
                v1__allocatable_resources_response__unpack(NULL, sizeof(want), want);
        cr_assert_not_null(m);
        cr_assert_eq(m->memory[0]->size, 256);
        v1__allocatable_resources_response__free_unpacked(m, NULL);
}

Test(podresources_proto, garbage_is_refused) {
        static const uint8_t bad[] = { 0x0a, 0x7f, 0x0a };
        cr_assert_null(v1__list_pod_resources_response__unpack(NULL, sizeof(bad), bad));
}
