/* SPDX-License-Identifier: Apache-2.0 */
/* proto/deviceplugin.proto against upstream-encoded fixtures: every field
 * decoded and checked, and re-encoding gives the upstream bytes, so a wrong
 * field number or type cannot pass. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"

static uint8_t *fixture(const char *name, size_t *len) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", FIXTURE_DIR, name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "fixture %s missing", path);
        uint8_t *buf = malloc(1 << 16);
        *len = fread(buf, 1, 1 << 16, f);
        fclose(f);
        return buf;
}

static ProtobufCMessage *decode(const char *name, const ProtobufCMessageDescriptor *desc) {
        size_t len;
        uint8_t *buf = fixture(name, &len);
        ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, buf);
        free(buf);
        cr_assert_not_null(m, "%s does not decode as %s", name, desc->name);
        return m;
}

/* Re-encoding must give the upstream bytes exactly. */
static void same_bytes(const char *name, const ProtobufCMessage *m) {
        size_t len, plen = protobuf_c_message_get_packed_size(m);
        uint8_t *want = fixture(name, &len);
        uint8_t *got = malloc(plen + 1);
        protobuf_c_message_pack(m, got);
        cr_assert_eq(plen, len, "%s: %zu bytes encoded, upstream has %zu", name, plen, len);
        cr_assert(memcmp(got, want, len) == 0, "%s: encoding differs from upstream", name);
        free(want);
        free(got);
}

Test(proto, register_request) {
        V1beta1__RegisterRequest *m = (V1beta1__RegisterRequest *)decode(
                "register_request.bin", &v1beta1__register_request__descriptor);
        cr_assert_str_eq(m->version, "v1beta1");
        cr_assert_str_eq(m->endpoint, "cdiplug-example.com-fuse.sock");
        cr_assert_str_eq(m->resource_name, "example.com/fuse");
        cr_assert_not_null(m->options);
        cr_assert_eq(m->options->pre_start_required, 0);
        cr_assert_eq(m->options->get_preferred_allocation_available, 1);
        same_bytes("register_request.bin", &m->base);
        protobuf_c_message_free_unpacked(&m->base, NULL);
}

Test(proto, device_plugin_options_and_empty) {
        V1beta1__DevicePluginOptions *o = (V1beta1__DevicePluginOptions *)decode(
                "device_plugin_options.bin", &v1beta1__device_plugin_options__descriptor);
        cr_assert_eq(o->pre_start_required, 1);
        cr_assert_eq(o->get_preferred_allocation_available, 1);
        same_bytes("device_plugin_options.bin", &o->base);
        protobuf_c_message_free_unpacked(&o->base, NULL);
        ProtobufCMessage *e = decode("empty.bin", &v1beta1__empty__descriptor);
        same_bytes("empty.bin", e);
        protobuf_c_message_free_unpacked(e, NULL);
}

Test(proto, list_and_watch_response) {
        V1beta1__ListAndWatchResponse *m = (V1beta1__ListAndWatchResponse *)decode(
                "list_and_watch_response.bin", &v1beta1__list_and_watch_response__descriptor);
        cr_assert_eq(m->n_devices, 3);
        cr_assert_str_eq(m->devices[0]->id, "ttyUSB0");
        cr_assert_str_eq(m->devices[0]->health, "Healthy");
        cr_assert_not_null(m->devices[0]->topology);
        cr_assert_eq(m->devices[0]->topology->n_nodes, 1);
        cr_assert_eq(m->devices[0]->topology->nodes[0]->id, 0);
        cr_assert_str_eq(m->devices[1]->id, "ttyUSB1");
        cr_assert_str_eq(m->devices[1]->health, "Unhealthy");
        cr_assert_eq(m->devices[1]->topology->n_nodes, 2);
        cr_assert_eq(m->devices[1]->topology->nodes[0]->id, 1);
        cr_assert_eq(m->devices[1]->topology->nodes[1]->id, 3);
        cr_assert_str_eq(m->devices[2]->id, "fuse-7");
        cr_assert_str_eq(m->devices[2]->health, "Healthy");
        cr_assert_null(m->devices[2]->topology, "no topology must decode as unset, not empty");
        same_bytes("list_and_watch_response.bin", &m->base);
        protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void check_allocate_request(const V1beta1__AllocateRequest *m) {
        cr_assert_eq(m->n_container_requests, 2);
        cr_assert_eq(m->container_requests[0]->n_devices_ids, 2);
        cr_assert_str_eq(m->container_requests[0]->devices_ids[0], "ttyUSB0");
        cr_assert_str_eq(m->container_requests[0]->devices_ids[1], "ttyUSB1");
        cr_assert_eq(m->container_requests[1]->n_devices_ids, 1);
        cr_assert_str_eq(m->container_requests[1]->devices_ids[0], "fuse-7");
}

Test(proto, allocate_request) {
        V1beta1__AllocateRequest *m = (V1beta1__AllocateRequest *)decode(
                "allocate_request.bin", &v1beta1__allocate_request__descriptor);
        check_allocate_request(m);
        same_bytes("allocate_request.bin", &m->base);
        protobuf_c_message_free_unpacked(&m->base, NULL);
}

Test(proto, allocate_request_from_a_newer_kubelet) {
        /* Field 15 is unknown to v1beta1: accepted and ignored. */
        V1beta1__AllocateRequest *m = (V1beta1__AllocateRequest *)decode(
                "allocate_request_unknown_field.bin", &v1beta1__allocate_request__descriptor);
        check_allocate_request(m);
        protobuf_c_message_free_unpacked(&m->base, NULL);
}

static const char *map_get(size_t n, V1beta1__ContainerAllocateResponse__EnvsEntry **e,
                           const char *key) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(e[i]->key, key) == 0)
                        return e[i]->value;
        return NULL;
}

Test(proto, allocate_response) {
        V1beta1__AllocateResponse *m = (V1beta1__AllocateResponse *)decode(
                "allocate_response.bin", &v1beta1__allocate_response__descriptor);
        cr_assert_eq(m->n_container_responses, 2);
        V1beta1__ContainerAllocateResponse *c = m->container_responses[0];
        cr_assert_eq(c->n_envs, 2);
        cr_assert_str_eq(map_get(c->n_envs, c->envs, "CDIPLUG_DEVICES"), "ttyUSB0,ttyUSB1");
        cr_assert_str_eq(map_get(c->n_envs, c->envs, "LANG"), "C.UTF-8");
        cr_assert_eq(c->n_mounts, 1);
        cr_assert_str_eq(c->mounts[0]->container_path, "/opt/lib");
        cr_assert_str_eq(c->mounts[0]->host_path, "/usr/lib/vendor");
        cr_assert_eq(c->mounts[0]->read_only, 1);
        cr_assert_eq(c->n_devices, 1);
        cr_assert_str_eq(c->devices[0]->container_path, "/dev/ttyUSB0");
        cr_assert_str_eq(c->devices[0]->host_path, "/dev/ttyUSB0");
        cr_assert_str_eq(c->devices[0]->permissions, "rw");
        cr_assert_eq(c->n_annotations, 1);
        cr_assert_str_eq(c->annotations[0]->key, "cdi.k8s.io/cdiplug_example.com-serial");
        cr_assert_str_eq(c->annotations[0]->value,
                         "example.com/serial=ttyUSB0,example.com/serial=ttyUSB1");
        cr_assert_eq(c->n_cdi_devices, 2);
        cr_assert_str_eq(c->cdi_devices[0]->name, "example.com/serial=ttyUSB0");
        cr_assert_str_eq(c->cdi_devices[1]->name, "example.com/serial=ttyUSB1");
        c = m->container_responses[1];
        cr_assert_eq(c->n_envs + c->n_mounts + c->n_devices + c->n_annotations, 0);
        cr_assert_eq(c->n_cdi_devices, 1);
        cr_assert_str_eq(c->cdi_devices[0]->name, "example.com/fuse=fuse");
        /* Maps may be re-ordered: compare the round trip decoded. */
        size_t len = v1beta1__allocate_response__get_packed_size(m);
        uint8_t *buf = malloc(len);
        v1beta1__allocate_response__pack(m, buf);
        V1beta1__AllocateResponse *again = v1beta1__allocate_response__unpack(NULL, len, buf);
        cr_assert_not_null(again);
        cr_assert_str_eq(again->container_responses[0]->cdi_devices[1]->name,
                         "example.com/serial=ttyUSB1");
        cr_assert_str_eq(map_get(again->container_responses[0]->n_envs,
                                 again->container_responses[0]->envs, "LANG"),
                         "C.UTF-8");
        free(buf);
        v1beta1__allocate_response__free_unpacked(again, NULL);
        protobuf_c_message_free_unpacked(&m->base, NULL);
}

Test(proto, preferred_allocation) {
        V1beta1__PreferredAllocationRequest *m = (V1beta1__PreferredAllocationRequest *)decode(
                "preferred_allocation_request.bin",
                &v1beta1__preferred_allocation_request__descriptor);
        cr_assert_eq(m->n_container_requests, 1);
        V1beta1__ContainerPreferredAllocationRequest *c = m->container_requests[0];
        cr_assert_eq(c->n_available_deviceids, 4);
        for (size_t i = 0; i < 4; i++) {
                char want[8];
                snprintf(want, sizeof(want), "dev%zu", i);
                cr_assert_str_eq(c->available_deviceids[i], want);
        }
        cr_assert_eq(c->n_must_include_deviceids, 1);
        cr_assert_str_eq(c->must_include_deviceids[0], "dev2");
        cr_assert_eq(c->allocation_size, 2);
        same_bytes("preferred_allocation_request.bin", &m->base);
        protobuf_c_message_free_unpacked(&m->base, NULL);

        V1beta1__PreferredAllocationResponse *r = (V1beta1__PreferredAllocationResponse *)decode(
                "preferred_allocation_response.bin",
                &v1beta1__preferred_allocation_response__descriptor);
        cr_assert_eq(r->n_container_responses, 1);
        cr_assert_eq(r->container_responses[0]->n_deviceids, 2);
        cr_assert_str_eq(r->container_responses[0]->deviceids[0], "dev2");
        cr_assert_str_eq(r->container_responses[0]->deviceids[1], "dev3");
        same_bytes("preferred_allocation_response.bin", &r->base);
        protobuf_c_message_free_unpacked(&r->base, NULL);
}

Test(proto, prestart_request) {
        V1beta1__PreStartContainerRequest *m = (V1beta1__PreStartContainerRequest *)decode(
                "prestart_request.bin", &v1beta1__pre_start_container_request__descriptor);
        cr_assert_eq(m->n_devices_ids, 1);
        cr_assert_str_eq(m->devices_ids[0], "ttyUSB0");
        same_bytes("prestart_request.bin", &m->base);
        protobuf_c_message_free_unpacked(&m->base, NULL);
}
