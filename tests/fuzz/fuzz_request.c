/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the device-plugin request path as server.c runs it: dp_unpack of a
 * grpc byte buffer into each request message the kubelet sends us (and
 * RegisterRequest, which the test kubelet decodes), then, for Allocate and
 * GetPreferredAllocation, the plugin's answer on fixed devices and the
 * re-encoding of that answer. The first input byte picks the message and
 * the resource (shares 1 or 3, every allocate mode); the rest is the wire
 * encoding. A bad request must yield an error and message, never a crash. */
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "plugin.h"
#include "resources.h"
#include "rpc.h"

static struct cfg_config *cfg;
static struct dp_plugin *plugins[2];

static const char config_json[] =
        "{\"resources\":["
        "{\"name\":\"example.com/serial\",\"match\":[{\"path\":\"/dev/ttyUSB*\"}],"
        "\"allocate\":[\"cdi-cri\",\"cdi-annotations\",\"device-specs\"],\"policy\":\"packed\"},"
        "{\"name\":\"example.com/gpu\",\"match\":[{\"path\":\"/dev/dri/renderD*\",\"env\":{\"A\":\"1\"},"
        "\"mounts\":[{\"hostPath\":\"/opt/a\",\"containerPath\":\"/a\",\"readOnly\":true}],"
        "\"permissions\":\"rw\"}],\"shares\":3,"
        "\"allocate\":[\"cdi-cri\",\"device-specs\"],\"policy\":\"spread\"}]}";

static void setup(void) {
        static char *ids[] = { "ttyUSB0", "ttyUSB1", "ttyUSB2", "renderD128" };
        static char *nodes[][3] = { { "/dev/ttyUSB0", NULL },
                                    { "/dev/ttyUSB1", NULL },
                                    { "/dev/ttyUSB2", NULL },
                                    { "/dev/dri/renderD128", "/dev/dri/card0", NULL } };
        struct cfg_error err = { 0 };
        struct res_device devs[4];
        bool changed;

        if (cfg_parse(config_json, strlen(config_json), &cfg, &err) < 0) {
                fprintf(stderr, "fuzz_request: config: %s: %s\n", err.field, err.msg);
                abort();
        }
        memset(devs, 0, sizeof(devs));
        for (int i = 0; i < 4; i++) {
                devs[i].id = ids[i];
                devs[i].nodes = nodes[i];
                devs[i].n_nodes = i == 3 ? 2 : 1;
                devs[i].numa_node = i % 2 ? 1 : (i == 2 ? -1 : 0);
        }
        struct res_devlist serial = { .devs = devs, .n = 3 }, gpu = { .devs = devs + 3, .n = 1 };
        FUZZ_CHECK(dp_plugin_new(&cfg->resources[0], &plugins[0]) == 0);
        FUZZ_CHECK(dp_plugin_update(plugins[0], &serial, &changed) == 0);
        FUZZ_CHECK(dp_plugin_new(&cfg->resources[1], &plugins[1]) == 0);
        FUZZ_CHECK(dp_plugin_update(plugins[1], &gpu, &changed) == 0);
}

static const ProtobufCMessageDescriptor *const descs[] = {
        &v1beta1__allocate_request__descriptor,
        &v1beta1__preferred_allocation_request__descriptor,
        &v1beta1__pre_start_container_request__descriptor,
        &v1beta1__empty__descriptor,
        &v1beta1__register_request__descriptor,
};

/* Packing an answer must work and give what unpacks to an equal size. */
static void check_repack(const ProtobufCMessage *msg) {
        grpc_byte_buffer *buf = dp_pack(msg);
        FUZZ_CHECK(buf);
        ProtobufCMessage *back = NULL;
        FUZZ_CHECK(dp_unpack(buf, msg->descriptor, &back) == 0);
        FUZZ_CHECK(protobuf_c_message_get_packed_size(back) ==
                   protobuf_c_message_get_packed_size(msg));
        protobuf_c_message_free_unpacked(back, NULL);
        grpc_byte_buffer_destroy(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (!cfg)
                setup();
        if (size < 1)
                return 0;
        const ProtobufCMessageDescriptor *desc = descs[data[0] % 5];
        const struct dp_plugin *p = plugins[(data[0] / 5) % 2];
        data++;
        size--;

        grpc_slice slice = grpc_slice_from_copied_buffer((const char *)data, size);
        grpc_byte_buffer *buf = grpc_raw_byte_buffer_create(&slice, 1);
        grpc_slice_unref(slice);
        ProtobufCMessage *req = NULL;
        int r = dp_unpack(buf, desc, &req);
        grpc_byte_buffer_destroy(buf);
        if (r < 0) {
                FUZZ_CHECK(r == -EBADMSG || r == -EMSGSIZE);
                return 0;
        }
        FUZZ_CHECK(req && req->descriptor == desc);

        char *msg = NULL, *dev = NULL;
        if (desc == &v1beta1__allocate_request__descriptor) {
                V1beta1__AllocateResponse *resp = NULL;
                r = dp_allocate(p, (V1beta1__AllocateRequest *)req, &resp, &msg, &dev);
                if (r == 0)
                        check_repack(&resp->base);
                else
                        FUZZ_CHECK(!resp && (r != -EINVAL || msg));
                dp_allocate_response_free(resp);
        } else if (desc == &v1beta1__preferred_allocation_request__descriptor) {
                V1beta1__PreferredAllocationResponse *resp = NULL;
                r = dp_preferred(p, (V1beta1__PreferredAllocationRequest *)req, &resp, &msg, &dev);
                if (r == 0)
                        check_repack(&resp->base);
                else
                        FUZZ_CHECK(!resp && (r != -EINVAL || msg));
                dp_preferred_response_free(resp);
        } else {
                /* Requests are only decoded, never sent on; packing one must
                 * still not crash. Not checked for a round trip: protobuf-c
                 * keeps an unknown field numbered 0 (tag bytes 80 00) when
                 * decoding, yet refuses it on the next decode. */
                size_t len = protobuf_c_message_get_packed_size(req);
                uint8_t *out = malloc(len ? len : 1);
                FUZZ_CHECK(out && protobuf_c_message_pack(req, out) == len);
                free(out);
        }
        /* Only a refusal names the device it is about. */
        FUZZ_CHECK(!dev || r == -EINVAL);
        free(dev);
        free(msg);
        protobuf_c_message_free_unpacked(req, NULL);
        return 0;
}
