/* SPDX-License-Identifier: Apache-2.0 */
/* NodeWatchResources (KEP-4680): the kubelet keeps one stream open and
 * expects the complete device list with each device's health, again after
 * every change. v1alpha1 (kubelets 1.34-1.36) and v1 (newer) differ only
 * in their package: the messages are the same fields with the same
 * numbers, so one packed list serves both. As on ListAndWatch (server.c),
 * grpc takes one send at a time per call: a change that comes while a
 * send is in flight goes out when it completes, always the newest list. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "dra-node-internal.h"
#include "dra_health_v1.pb-c.h"
#include "log.h"
#include "loop.h"

#define CALL_OF(t, member) ((struct dra_call *)((char *)(t)-offsetof(struct dra_call, member)))

static void on_send(struct dp_daemon *d, struct dp_tag *tag, bool ok);
static void on_close(struct dp_daemon *d, struct dp_tag *tag, bool ok);

/* While a stream is open, the next resend is on the owner's timer. */
static void arm(struct dra_node *n) {
        if (!n->streams)
                return;
        n->health_due_ms = dp_now_ms() + DRA_HEALTH_RESEND_S * 1000;
        if (n->deadline_set)
                n->deadline_set(n->deadline_ctx, n->health_due_ms);
}

static void stream_send(struct dra_call *c) {
        struct dra_node *n = c->n;
        grpc_slice slice;

        if (c->sending || c->closed || c->sent_gen == n->health_gen || !n->health_buf)
                return;
        slice = grpc_slice_from_copied_buffer((const char *)n->health_buf, n->health_len);
        if (dp_server_call_send_message(&c->sc, slice, &c->send_tag) < 0)
                return;
        c->sending = true;
        c->refs++;
        c->sent_gen = n->health_gen;
}

static void stream_close(struct dra_call *c) {
        grpc_op ops[2];
        size_t k = 0;

        memset(ops, 0, sizeof(ops));
        k += dp_server_call_md_op(&c->sc, &ops[k]);
        k += dp_server_call_status_op(&c->sc, GRPC_STATUS_UNAVAILABLE, "cdiplug is stopping",
                                      &ops[k]);
        c->closed = true;
        if (grpc_call_start_batch(c->sc.call, ops, k, &c->send_tag, NULL) != GRPC_CALL_OK)
                return;
        c->sending = c->sc.md_sent = c->status_in_flight = true;
        c->refs++;
}

static void stream_end(struct dra_call *c) {
        if (c->closed)
                return;
        if (c->sending) {
                c->ending = true;
                return;
        }
        c->ending = false;
        stream_close(c);
}

static void stream_unref(struct dra_call *c) {
        if (--c->refs > 0)
                return;
        for (struct dra_call **pp = &c->n->streams; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        dra_call_free(c);
}

bool dra_health_ending(const struct dra_node *n) {
        for (const struct dra_call *c = n->streams; c; c = c->next)
                if (c->ending || c->status_in_flight)
                        return true;
        return false;
}

static void on_send(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dra_call *c = CALL_OF(tag, send_tag);
        struct dra_node *n = c->n;

        (void)d;
        c->sending = false;
        c->status_in_flight = false;
        if (c->sc.send)
                grpc_byte_buffer_destroy(c->sc.send);
        c->sc.send = NULL;
        if (!ok) {
                c->closed = true;
                c->ending = false;
        } else if (c->ending)
                stream_end(c);
        else
                stream_send(c);
        /* Stopping: once every status is out, what is left is cancelled. */
        if (n->stopping && n->server && !dra_health_ending(n))
                grpc_server_cancel_all_calls(n->server);
        stream_unref(c);
}

static void on_close(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dra_call *c = CALL_OF(tag, close_tag);

        (void)d;
        (void)ok;
        c->closed = true;
        stream_unref(c);
}

void dra_health_open(struct dra_call *c) {
        grpc_op op;

        c->send_tag.fn = on_send;
        c->close_tag.fn = on_close;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        op.data.recv_close_on_server.cancelled = &c->sc.cancelled;
        if (grpc_call_start_batch(c->sc.call, &op, 1, &c->close_tag, NULL) != GRPC_CALL_OK) {
                dra_call_free(c);
                return;
        }
        c->refs = 1;
        c->next = c->n->streams;
        c->n->streams = c;
        stream_send(c);
        if (!c->n->health_due_ms)
                arm(c->n);
}

void dra_health_end_all(struct dra_node *n) {
        for (struct dra_call *c = n->streams; c; c = c->next)
                stream_end(c);
}

/* buf (the list, stamped) replaces the one streamed, to every stream;
 * the resend is due DRA_HEALTH_RESEND_S from now. */
static void publish(struct dra_node *n, uint8_t *buf, size_t len) {
        free(n->health_buf);
        n->health_buf = buf;
        n->health_len = len;
        n->health_gen++;
        for (struct dra_call *c = n->streams; c; c = c->next)
                stream_send(c);
        arm(n);
}

/* Packed once per change, for every stream of both versions. */
int dra_node_health_set(struct dra_node *n, const struct dra_health_device *devs, size_t count) {
        V1__NodeWatchResourcesResponse resp = V1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
        _cleanup_free_ V1__DeviceHealth *health = calloc(count + 1, sizeof(*health));
        _cleanup_free_ V1__DeviceIdentifier *ids = calloc(count + 1, sizeof(*ids));
        _cleanup_free_ V1__DeviceHealth **ptrs = calloc(count + 1, sizeof(*ptrs));
        int64_t now = (int64_t)time(NULL);
        uint8_t *buf, *bare;
        size_t len, bare_len;

        if (!health || !ids || !ptrs)
                return -ENOMEM;
        for (size_t i = 0; i < count; i++) {
                ids[i] = (V1__DeviceIdentifier)V1__DEVICE_IDENTIFIER__INIT;
                ids[i].pool_name = (char *)devs[i].pool;
                ids[i].device_name = (char *)devs[i].device;
                health[i] = (V1__DeviceHealth)V1__DEVICE_HEALTH__INIT;
                health[i].device = &ids[i];
                health[i].health =
                        devs[i].healthy ? V1__HEALTH_STATUS__HEALTHY : V1__HEALTH_STATUS__UNHEALTHY;
                health[i].health_check_timeout_seconds = DRA_HEALTH_TIMEOUT_S;
                if (devs[i].message)
                        health[i].message = (char *)devs[i].message;
                ptrs[i] = &health[i];
        }
        resp.devices = ptrs;
        resp.n_devices = count;
        /* Without the times first: a list that did not change (a reload
         * that left the DRA resources as they were) is not sent again. */
        len = v1__node_watch_resources_response__get_packed_size(&resp);
        if (len > DP_MAX_MESSAGE)
                return -EMSGSIZE;
        bare = malloc(len + 1);
        if (!bare)
                return -ENOMEM;
        v1__node_watch_resources_response__pack(&resp, bare);
        bare_len = len;
        if (n->health_bare && n->health_bare_len == len && memcmp(n->health_bare, bare, len) == 0) {
                free(bare);
                return 0;
        }
        for (size_t i = 0; i < count; i++)
                health[i].last_updated_time = now;
        len = v1__node_watch_resources_response__get_packed_size(&resp);
        if (len > DP_MAX_MESSAGE || !(buf = malloc(len + 1))) {
                free(bare);
                return len > DP_MAX_MESSAGE ? -EMSGSIZE : -ENOMEM;
        }
        v1__node_watch_resources_response__pack(&resp, buf);
        free(n->health_bare);
        n->health_bare = bare;
        n->health_bare_len = bare_len;
        publish(n, buf, len);
        return 0;
}

/* The same list stamped now, for the resend that keeps it from timing
 * out in the kubelet. */
static int restamp(struct dra_node *n) {
        V1__NodeWatchResourcesResponse *m =
                v1__node_watch_resources_response__unpack(NULL, n->health_bare_len, n->health_bare);
        int64_t now = (int64_t)time(NULL);
        uint8_t *buf;
        size_t len;

        if (!m)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_devices; i++)
                m->devices[i]->last_updated_time = now;
        len = v1__node_watch_resources_response__get_packed_size(m);
        buf = len <= DP_MAX_MESSAGE ? malloc(len + 1) : NULL;
        if (buf)
                v1__node_watch_resources_response__pack(m, buf);
        v1__node_watch_resources_response__free_unpacked(m, NULL);
        if (!buf)
                return len > DP_MAX_MESSAGE ? -EMSGSIZE : -ENOMEM;
        publish(n, buf, len);
        return 0;
}

/* The kubelet takes a device whose last report is older than its
 * timeout for Unknown, whether or not anything changed: while a stream is
 * open, the list goes out again every DRA_HEALTH_RESEND_S, on the node's
 * one deadline (dra_node_expire). */
void dra_health_expire(struct dra_node *n, uint64_t now_ms, uint64_t *next_ms) {
        if (!n->streams || !n->health_bare || n->stopping) {
                n->health_due_ms = 0;
                return;
        }
        if (n->health_due_ms > now_ms) {
                *next_ms = dp_due_min(*next_ms, n->health_due_ms);
                return;
        }
        if (restamp(n) < 0)
                log_warn("dra: cannot stamp the device health list again; the kubelet may "
                         "show its devices as Unknown until the next change");
        n->health_due_ms = now_ms + DRA_HEALTH_RESEND_S * 1000;
        *next_ms = dp_due_min(*next_ms, n->health_due_ms);
}

void dra_health_free(struct dra_node *n) {
        free(n->health_buf);
        free(n->health_bare);
        n->health_buf = n->health_bare = NULL;
}

void dra_node_health_resend(struct dra_node *n, unsigned delay_ms) {
        if (!n || !n->streams || !n->health_bare || n->stopping)
                return;
        n->health_due_ms = dp_now_ms() + delay_ms;
        if (n->deadline_set)
                n->deadline_set(n->deadline_ctx, n->health_due_ms);
}
