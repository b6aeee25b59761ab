/* SPDX-License-Identifier: Apache-2.0 */
/* dp_rpc: glue between grpc core byte buffers and protobuf-c messages, the
 * errno → gRPC status mapping, and a blocking unary client call (used by the
 * test kubelet and the benchmark; the daemon itself never blocks). */
#pragma once

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin.h" /* DP_MAX_MESSAGE */

/* Full method names of the v1beta1 API. */
#define DP_METHOD_REGISTER "/v1beta1.Registration/Register"
#define DP_METHOD_OPTIONS "/v1beta1.DevicePlugin/GetDevicePluginOptions"
#define DP_METHOD_LIST_AND_WATCH "/v1beta1.DevicePlugin/ListAndWatch"
#define DP_METHOD_PREFERRED "/v1beta1.DevicePlugin/GetPreferredAllocation"
#define DP_METHOD_ALLOCATE "/v1beta1.DevicePlugin/Allocate"
#define DP_METHOD_PRESTART "/v1beta1.DevicePlugin/PreStartContainer"
#define DP_METHOD_PODRES_LIST "/v1.PodResourcesLister/List"

struct dp_daemon;

/* Every tag on the daemon's completion queue is one of these, embedded in
 * its owner: the serve runtime's calls and the DRA servers' (daemon/dra)
 * share the queue, and the main thread runs fn with the daemon's lock
 * held. */
struct dp_tag {
        void (*fn)(struct dp_daemon *d, struct dp_tag *tag, bool ok);
};

/* One unary client call sent as a single batch: grpc writes into these
 * until the batch's tag completes, so they live as long as the call. */
struct dp_unary {
        grpc_byte_buffer *send;
        grpc_byte_buffer *recv;
        grpc_metadata_array md_initial;
        grpc_metadata_array md_trailing;
        grpc_status_code status;
        grpc_slice details;
};

/* Takes send (may be NULL: start then fails). */
void dp_unary_init(struct dp_unary *u, grpc_byte_buffer *send);
grpc_call_error dp_unary_start(grpc_call *call, struct dp_unary *u, void *tag);
void dp_unary_clear(struct dp_unary *u);
/* Start a unary call of method (a static string) on cq with u's request
 * (dp_unary_init); tag comes back on cq when it ends. NULL if it cannot
 * start; u stays for the caller to clear either way. */
grpc_call *dp_unary_begin(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
                          int timeout_ms, struct dp_unary *u, void *tag);

/* Open a server-streaming call (ListAndWatch): send the one request and
 * half-close, and receive the initial metadata into md, as one batch.
 * send and md must live until tag completes; the messages are read with
 * GRPC_OP_RECV_MESSAGE batches after it. */
grpc_call_error dp_stream_start(grpc_call *call, grpc_byte_buffer *send, grpc_metadata_array *md,
                                void *tag);

/* A grpc byte buffer holding the packed message; NULL on allocation failure. */
grpc_byte_buffer *dp_pack(const ProtobufCMessage *msg);

/* Decode a byte buffer (NULL means an empty message). -EMSGSIZE over
 * DP_MAX_MESSAGE, -EBADMSG when it does not decode. */
int dp_unpack(grpc_byte_buffer *buf, const ProtobufCMessageDescriptor *desc,
              ProtobufCMessage **ret);

grpc_status_code dp_status_from_errno(int neg_errno);

/* grpc_init(), with Debian's abseil told not to look for lock-order
 * cycles first (see rpc.c). */
void dp_grpc_init(void);

/* A channel to a unix socket path; NULL when path does not fit. */
grpc_channel *dp_channel_unix(const char *path);

/* Blocking unary call: sends req; when the status is OK, *ret_recv gets
 * the answer's bytes (grpc_byte_buffer_destroy; NULL if none came).
 * Returns the call's gRPC status; *ret_details gets the status message
 * (malloc'd) when non-NULL. */
grpc_status_code dp_call_unary_raw(grpc_channel *ch, const char *method,
                                   const ProtobufCMessage *req, int timeout_ms,
                                   grpc_byte_buffer **ret_recv, char **ret_details);

/* dp_call_unary_raw, with the answer decoded into *ret (when the status
 * is OK and ret is non-NULL). */
grpc_status_code dp_call_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
                               const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **ret,
                               char **ret_details, int timeout_ms);

/* Shut cq down, drain what is left on it, and destroy it. */
void dp_cq_destroy(grpc_completion_queue *cq);

/* Monotonic-clock deadline timeout_ms from now. */
gpr_timespec dp_deadline_ms(int timeout_ms);
