/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc.h"

#include <dlfcn.h>
#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Debian 12 builds abseil with mutex deadlock detection on: every lock
 * grpc takes is recorded in a global lock-order graph, which cost the
 * daemon a few percent of its CPU and about 450 kB of memory that only
 * grows. The switch is a C++ function; we look it up by its (abseil
 * 20220623, Debian-namespaced) name, so any other abseil just keeps its
 * default. 0 is OnDeadlockCycle::kIgnore. */
void dp_grpc_init(void) {
        void (*set_mode)(int) = (void (*)(int))dlsym(
                RTLD_DEFAULT,
                "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE");

        if (set_mode)
                set_mode(0);
        grpc_init();
}

grpc_byte_buffer *dp_pack(const ProtobufCMessage *msg) {
        size_t len = protobuf_c_message_get_packed_size(msg);
        grpc_slice slice = grpc_slice_malloc(len);
        grpc_byte_buffer *buf;

        protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(slice));
        buf = grpc_raw_byte_buffer_create(&slice, 1);
        grpc_slice_unref(slice);
        return buf;
}

int dp_unpack(grpc_byte_buffer *buf, const ProtobufCMessageDescriptor *desc,
              ProtobufCMessage **ret) {
        grpc_byte_buffer_reader reader;
        grpc_slice flat;
        ProtobufCMessage *msg;
        size_t len;

        if (!buf) {
                msg = protobuf_c_message_unpack(desc, NULL, 0, NULL);
                if (!msg)
                        return -ENOMEM;
                *ret = msg;
                return 0;
        }
        if (grpc_byte_buffer_length(buf) > DP_MAX_MESSAGE)
                return -EMSGSIZE;
        if (!grpc_byte_buffer_reader_init(&reader, buf))
                return -EBADMSG;
        flat = grpc_byte_buffer_reader_readall(&reader);
        grpc_byte_buffer_reader_destroy(&reader);
        len = GRPC_SLICE_LENGTH(flat);
        msg = protobuf_c_message_unpack(desc, NULL, len, GRPC_SLICE_START_PTR(flat));
        grpc_slice_unref(flat);
        if (!msg)
                return -EBADMSG;
        *ret = msg;
        return 0;
}

grpc_status_code dp_status_from_errno(int neg_errno) {
        switch (neg_errno) {
        case 0:
                return GRPC_STATUS_OK;
        case -EINVAL:
        case -EBADMSG:
        case -E2BIG:
        case -ENOENT:
                return GRPC_STATUS_INVALID_ARGUMENT;
        case -EMSGSIZE:
        case -ENOMEM:
                return GRPC_STATUS_RESOURCE_EXHAUSTED;
        case -ENOSYS:
                return GRPC_STATUS_UNIMPLEMENTED;
        case -EAGAIN:
        case -ESHUTDOWN:
                return GRPC_STATUS_UNAVAILABLE;
        default:
                return GRPC_STATUS_INTERNAL;
        }
}

gpr_timespec dp_deadline_ms(int timeout_ms) {
        return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                            gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

grpc_channel *dp_channel_unix(const char *path) {
        _cleanup_free_ char *target = NULL;
        grpc_channel_credentials *creds;
        grpc_channel *ch;
        grpc_arg args[] = {
                /* The channel owns its connection: destroying it closes
                 * it, and a kubelet's restart leaves nothing behind. */
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
                  .value.integer = 1 },
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                  .value.integer = DP_MAX_MESSAGE },
                /* Nothing reads channelz, and every call here is
                 * retried, if at all, by its caller. */
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_ENABLE_CHANNELZ,
                  .value.integer = 0 },
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_ENABLE_RETRIES,
                  .value.integer = 0 },
        };
        grpc_channel_args cargs = { .num_args = ELEMENTSOF(args), .args = args };

        if (xasprintf(&target, "unix:%s", path) < 0)
                return NULL;
        creds = grpc_insecure_credentials_create();
        ch = grpc_channel_create(target, creds, &cargs);
        grpc_channel_credentials_release(creds);
        return ch;
}

void dp_unary_init(struct dp_unary *u, grpc_byte_buffer *send) {
        memset(u, 0, sizeof(*u));
        u->send = send;
        u->status = GRPC_STATUS_UNKNOWN;
        u->details = grpc_empty_slice();
        grpc_metadata_array_init(&u->md_initial);
        grpc_metadata_array_init(&u->md_trailing);
}

/* The four ops that open a client call with its one request; ops must
 * hold at least four, zeroed. */
static void open_ops(grpc_op *ops, grpc_byte_buffer *send, grpc_metadata_array *md) {
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_SEND_MESSAGE;
        ops[1].data.send_message.send_message = send;
        ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[3].data.recv_initial_metadata.recv_initial_metadata = md;
}

grpc_call_error dp_stream_start(grpc_call *call, grpc_byte_buffer *send, grpc_metadata_array *md,
                                void *tag) {
        grpc_op ops[4];

        if (!send)
                return GRPC_CALL_ERROR;
        memset(ops, 0, sizeof(ops));
        open_ops(ops, send, md);
        return grpc_call_start_batch(call, ops, ELEMENTSOF(ops), tag, NULL);
}

grpc_call_error dp_unary_start(grpc_call *call, struct dp_unary *u, void *tag) {
        grpc_op ops[6];

        if (!u->send)
                return GRPC_CALL_ERROR;
        memset(ops, 0, sizeof(ops));
        open_ops(ops, u->send, &u->md_initial);
        ops[4].op = GRPC_OP_RECV_MESSAGE;
        ops[4].data.recv_message.recv_message = &u->recv;
        ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        ops[5].data.recv_status_on_client.trailing_metadata = &u->md_trailing;
        ops[5].data.recv_status_on_client.status = &u->status;
        ops[5].data.recv_status_on_client.status_details = &u->details;
        return grpc_call_start_batch(call, ops, ELEMENTSOF(ops), tag, NULL);
}

void dp_unary_clear(struct dp_unary *u) {
        if (u->send)
                grpc_byte_buffer_destroy(u->send);
        if (u->recv)
                grpc_byte_buffer_destroy(u->recv);
        grpc_metadata_array_destroy(&u->md_initial);
        grpc_metadata_array_destroy(&u->md_trailing);
        grpc_slice_unref(u->details);
        u->send = u->recv = NULL;
        u->details = grpc_empty_slice();
}

grpc_call *dp_unary_begin(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
                          int timeout_ms, struct dp_unary *u, void *tag) {
        grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                                   grpc_slice_from_static_string(method), NULL,
                                                   dp_deadline_ms(timeout_ms), NULL);

        if (call && dp_unary_start(call, u, tag) != GRPC_CALL_OK) {
                grpc_call_unref(call);
                call = NULL;
        }
        return call;
}

grpc_status_code dp_call_unary_raw(grpc_channel *ch, const char *method,
                                   const ProtobufCMessage *req, int timeout_ms,
                                   grpc_byte_buffer **ret_recv, char **ret_details) {
        grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
        struct dp_unary u;
        grpc_call *call;
        grpc_status_code status;

        dp_unary_init(&u, dp_pack(req));
        call = dp_unary_begin(ch, cq, method, timeout_ms, &u, &u);
        if (call)
                /* The deadline on the call bounds this wait. */
                (void)grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        else
                u.status = GRPC_STATUS_INTERNAL;
        status = u.status;
        *ret_recv = NULL;
        if (status == GRPC_STATUS_OK)
                *ret_recv = TAKE_PTR(u.recv);
        if (ret_details) {
                char *d = grpc_slice_to_c_string(u.details);
                *ret_details = strdup(d);
                gpr_free(d);
        }
        dp_unary_clear(&u);
        if (call)
                grpc_call_unref(call);
        dp_cq_destroy(cq);
        return status;
}

grpc_status_code dp_call_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
                               const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **ret,
                               char **ret_details, int timeout_ms) {
        grpc_byte_buffer *recv = NULL;
        grpc_status_code status =
                dp_call_unary_raw(ch, method, req, timeout_ms, &recv, ret_details);

        if (status == GRPC_STATUS_OK && ret && dp_unpack(recv, resp_desc, ret) < 0)
                status = GRPC_STATUS_INTERNAL;
        if (recv)
                grpc_byte_buffer_destroy(recv);
        return status;
}

void dp_cq_destroy(grpc_completion_queue *cq) {
        grpc_completion_queue_shutdown(cq);
        while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
                ;
        grpc_completion_queue_destroy(cq);
}
