/* SPDX-License-Identifier: Apache-2.0 */
/* Test-side client calls to a running plugin, built on dp_call_unary. */
#pragma once

#include <grpc/grpc.h>

#include "deviceplugin.pb-c.h"

/* Allocate with one container per NULL-separated group of IDs, the list
 * ending with two NULLs: allocate(ch, &resp, &msg, "a", "b", NULL, "c", NULL, NULL). */
grpc_status_code call_allocate(grpc_channel *ch, V1beta1__AllocateResponse **ret, char **ret_msg,
                               ...);

/* GetPreferredAllocation for one container; available and must are
 * comma-separated ID lists ("" for none). */
grpc_status_code call_preferred(grpc_channel *ch, const char *available, const char *must, int size,
                                V1beta1__PreferredAllocationResponse **ret, char **ret_msg);

/* A ListAndWatch stream of our own, to read lists one by one. */
struct lw_stream;
struct lw_stream *lw_open(grpc_channel *ch);
/* Next list within timeout_ms, or NULL. */
V1beta1__ListAndWatchResponse *lw_next(struct lw_stream *s, int timeout_ms);
void lw_close(struct lw_stream *s);
/* Wait up to timeout_ms for the server to end the stream; its status and
 * message (*ret_msg, free with gpr_free). On timeout the call is cancelled
 * and the status says CANCELLED. */
grpc_status_code lw_status(struct lw_stream *s, char **ret_msg, int timeout_ms);
