/* SPDX-License-Identifier: Apache-2.0 */
/* The end of a DRA call, shared by the registration server (node.c), the
 * DRAPlugin methods (node_prepare.c) and the health streams
 * (node_health.c): in a file of its own so that they all call down into
 * it, and node.c, which hands calls to the other two, is not called back. */
#include <stdlib.h>
#include <string.h>

#include "dra-node-internal.h"

void dra_call_free(struct dra_call *c) {
        struct dra_node *n = c->n;

        dp_server_call_clear(&c->sc);
        free(c);
        n->live--;
}

void dra_call_finish(struct dra_call *c, grpc_status_code status, const char *msg) {
        grpc_op ops[4];
        size_t k;

        /* A unary call: its initial metadata has not gone out. */
        memset(ops, 0, sizeof(ops));
        k = dp_server_call_finish_ops(&c->sc, status, msg, ops);
        c->phase = DRA_FINISH;
        c->sc.md_sent = true;
        if (grpc_call_start_batch(c->sc.call, ops, k, &c->tag, NULL) != GRPC_CALL_OK)
                dra_call_free(c);
}
