/* SPDX-License-Identifier: Apache-2.0 */
#include "calls.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"

grpc_status_code call_allocate(grpc_channel *ch, V1beta1__AllocateResponse **ret, char **ret_msg,
                               ...) {
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *creqs[16];
        const char *id;
        va_list ap;

        va_start(ap, ret_msg);
        for (;;) {
                id = va_arg(ap, const char *);
                if (!id)
                        break;
                V1beta1__ContainerAllocateRequest *c = calloc(1, sizeof(*c));
                v1beta1__container_allocate_request__init(c);
                c->devices_ids = calloc(64, sizeof(char *));
                do
                        c->devices_ids[c->n_devices_ids++] = (char *)id;
                while ((id = va_arg(ap, const char *)));
                creqs[req.n_container_requests++] = c;
        }
        va_end(ap);
        req.container_requests = creqs;
        ProtobufCMessage *resp = NULL;
        grpc_status_code st =
                dp_call_unary(ch, DP_METHOD_ALLOCATE, &req.base,
                              &v1beta1__allocate_response__descriptor, &resp, ret_msg, 5000);
        for (size_t i = 0; i < req.n_container_requests; i++) {
                free(creqs[i]->devices_ids);
                free(creqs[i]);
        }
        if (ret)
                *ret = (V1beta1__AllocateResponse *)resp;
        else if (resp)
                protobuf_c_message_free_unpacked(resp, NULL);
        return st;
}

static size_t split(char *s, char **out, size_t max) {
        size_t n = 0;
        for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
                out[n++] = tok;
        return n;
}

grpc_status_code call_preferred(grpc_channel *ch, const char *available, const char *must, int size,
                                V1beta1__PreferredAllocationResponse **ret, char **ret_msg) {
        V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest c =
                V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        V1beta1__ContainerPreferredAllocationRequest *cs[] = { &c };
        char *a = strdup(available), *m = strdup(must), *av[256], *mv[256];

        c.n_available_deviceids = split(a, av, 256);
        c.available_deviceids = av;
        c.n_must_include_deviceids = split(m, mv, 256);
        c.must_include_deviceids = mv;
        c.allocation_size = size;
        req.n_container_requests = 1;
        req.container_requests = cs;
        ProtobufCMessage *resp = NULL;
        grpc_status_code st = dp_call_unary(ch, DP_METHOD_PREFERRED, &req.base,
                                            &v1beta1__preferred_allocation_response__descriptor,
                                            &resp, ret_msg, 5000);
        free(a);
        free(m);
        *ret = (V1beta1__PreferredAllocationResponse *)resp;
        return st;
}

struct lw_stream {
        grpc_completion_queue *cq;
        grpc_call *call;
        grpc_byte_buffer *send;
        grpc_metadata_array md;
        bool pending; /* a RECV_MESSAGE batch whose tag has not come back */
        grpc_byte_buffer *recv;
};

struct lw_stream *lw_open(grpc_channel *ch) {
        struct lw_stream *s = calloc(1, sizeof(*s));
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        int tag;

        s->cq = grpc_completion_queue_create_for_next(NULL);
        s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                           grpc_slice_from_static_string(DP_METHOD_LIST_AND_WATCH),
                                           NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        s->send = dp_pack(&empty.base);
        grpc_metadata_array_init(&s->md);
        dp_stream_start(s->call, s->send, &s->md, &tag);
        grpc_completion_queue_next(s->cq, dp_deadline_ms(5000), NULL);
        return s;
}

V1beta1__ListAndWatchResponse *lw_next(struct lw_stream *s, int timeout_ms) {
        static int tag;
        grpc_op op;

        if (!s->pending) {
                memset(&op, 0, sizeof(op));
                op.op = GRPC_OP_RECV_MESSAGE;
                op.data.recv_message.recv_message = &s->recv;
                if (grpc_call_start_batch(s->call, &op, 1, &tag, NULL) != GRPC_CALL_OK)
                        return NULL;
                s->pending = true;
        }
        grpc_event ev = grpc_completion_queue_next(s->cq, dp_deadline_ms(timeout_ms), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
                return NULL; /* timed out: the batch stays pending */
        s->pending = false;
        if (!ev.success || !s->recv)
                return NULL;
        ProtobufCMessage *m = NULL;
        dp_unpack(s->recv, &v1beta1__list_and_watch_response__descriptor, &m);
        grpc_byte_buffer_destroy(s->recv);
        s->recv = NULL;
        return (V1beta1__ListAndWatchResponse *)m;
}

void lw_close(struct lw_stream *s) {
        grpc_call_cancel(s->call, NULL);
        grpc_call_unref(s->call);
        dp_cq_destroy(s->cq);
        if (s->recv)
                grpc_byte_buffer_destroy(s->recv);
        grpc_byte_buffer_destroy(s->send);
        grpc_metadata_array_destroy(&s->md);
        free(s);
}

grpc_status_code lw_status(struct lw_stream *s, char **ret_msg, int timeout_ms) {
        static int tag;
        grpc_status_code st = GRPC_STATUS__DO_NOT_USE;
        grpc_slice details = grpc_empty_slice();
        grpc_metadata_array trailing;
        grpc_op op;

        grpc_metadata_array_init(&trailing);
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        op.data.recv_status_on_client.status = &st;
        op.data.recv_status_on_client.status_details = &details;
        op.data.recv_status_on_client.trailing_metadata = &trailing;
        if (grpc_call_start_batch(s->call, &op, 1, &tag, NULL) != GRPC_CALL_OK)
                return GRPC_STATUS__DO_NOT_USE;
        for (;;) {
                grpc_event ev = grpc_completion_queue_next(s->cq, dp_deadline_ms(timeout_ms), NULL);
                if (ev.type != GRPC_OP_COMPLETE) {
                        /* The batch holds st and details: cancel, then let it finish. */
                        grpc_call_cancel(s->call, NULL);
                        timeout_ms = 5000;
                        continue;
                }
                if (ev.tag == &tag)
                        break;
                s->pending = false; /* a RECV_MESSAGE of lw_next came back */
                if (s->recv) {
                        grpc_byte_buffer_destroy(s->recv);
                        s->recv = NULL;
                }
        }
        if (ret_msg)
                *ret_msg = grpc_slice_to_c_string(details);
        grpc_slice_unref(details);
        grpc_metadata_array_destroy(&trailing);
        return st;
}
