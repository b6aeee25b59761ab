/* SPDX-License-Identifier: Apache-2.0 */
/* Ready-made fakeapi hooks (fakeapi_set_hook) for the node labels and the
 * claim path: a node watch whose labels flip in a storm, and requests the
 * server holds unanswered until released. One hook per server at a time;
 * each takes its state as ctx. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "fakeapi.h"

/* The first watch of node's labels gets n MODIFIED events, every
 * interval_us, each with "kubernetes.io/hostname": node, a "flip" label of
 * its index, and "example.com/zone" alternating between "b" and "c", but
 * "a" in the last; then the stream stays open (no more events) until
 * release. Later watches are the fake server's own (set its labels to the
 * final ones). sent counts the events written. */
struct fakeapi_flips {
        const char *node;
        unsigned n;
        unsigned interval_us;
        atomic_bool release;
        atomic_uint sent;
        atomic_bool started; /* the first watch was taken */
};
fakeapi_hook_fn fakeapi_flips_hook;

/* Requests whose path starts with prefix (and, if query_has is set, whose
 * query contains it) are held without an answer until release, then
 * answered by the fake server as usual. held counts those waiting now. */
struct fakeapi_hold {
        const char *prefix;
        const char *query_has;
        atomic_bool release;
        atomic_uint held;
};
fakeapi_hook_fn fakeapi_hold_hook;
