/* SPDX-License-Identifier: Apache-2.0 */
/* One grpc core server per resource, all on the daemon's completion queue.
 *
 * A unary call goes through three tags in turn: the server hands us the
 * call (NEW), we read the request (RECV), we answer and wait for the peer
 * to close (FINISH). A ListAndWatch stream instead keeps two tags alive:
 * one for "the peer went away" and one for the send in flight; grpc allows
 * only one send at a time, so a change that arrives while a send is in
 * flight is sent when that send completes, always as the newest list. */
#include <grpc/byte_buffer.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "cdi.h"
#include "config.h"
#include "serve-internal.h"
#include "plugin.h"
#include "resources.h"
#include "rpc.h"
#include "log.h"

enum call_phase { PH_NEW, PH_RECV, PH_FINISH };

struct dp_call {
        struct dp_tag tag;       /* unary phases, and a stream's first read */
        struct dp_tag send_tag;  /* streams: the send in flight */
        struct dp_tag close_tag; /* streams: peer closed or call cancelled */
        struct dp_resource *res;
        enum call_phase phase;
        struct dp_server_call sc;
        /* streams */
        unsigned refs;
        bool sending;
        bool closed;
        bool ending; /* the resource is going: end with a status once the send in flight is done */
        bool status_in_flight; /* the stream's status is on its way (send_tag) */
        uint64_t sent_gen;
        struct dp_call *next;
};

static void on_call(struct dp_daemon *d, struct dp_tag *tag, bool ok);
static void on_stream_send(struct dp_daemon *d, struct dp_tag *tag, bool ok);
static void on_stream_close(struct dp_daemon *d, struct dp_tag *tag, bool ok);

#define CALL_OF(t, member) ((struct dp_call *)((char *)(t)-offsetof(struct dp_call, member)))

static void call_free(struct dp_call *c) {
        struct dp_resource *res = c->res;

        dp_server_call_clear(&c->sc);
        res->d->live--;
        res->life.calls--;
        dp_maybe_finish(res->d);
        free(c);
        dp_resource_maybe_free(res);
}

/* Offer the server a slot for its next incoming call. */
static int request_next(struct dp_resource *res) {
        struct dp_call *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->res = res;
        c->tag.fn = on_call;
        c->send_tag.fn = on_stream_send;
        c->close_tag.fn = on_stream_close;
        c->phase = PH_NEW;
        if (dp_server_call_request(res->srv.server, res->d->cq, &c->sc, &c->tag) < 0) {
                free(c);
                return -EIO;
        }
        res->d->live++;
        res->life.calls++;
        return 0;
}

static void finish(struct dp_call *c, grpc_status_code status, const char *msg) {
        grpc_op ops[4];
        size_t n;

        memset(ops, 0, sizeof(ops));
        n = dp_server_call_finish_ops(&c->sc, status, msg, ops);
        c->phase = PH_FINISH;
        c->sc.md_sent = true;
        if (grpc_call_start_batch(c->sc.call, ops, n, &c->tag, NULL) != GRPC_CALL_OK)
                call_free(c);
}

/* Decode, answer with the plugin, encode: returns the gRPC status. On a
 * refusal, *ret_device (malloc'd, or NULL) is the device ID it is about,
 * for the log line. */
static grpc_status_code answer(struct dp_call *c, const char *method, char **ret_msg,
                               char **ret_device) {
        struct dp_plugin *p = c->res->plugin;
        ProtobufCMessage *req = NULL;
        const ProtobufCMessageDescriptor *desc;
        struct base_field_error err = { 0 };
        grpc_status_code st;
        int r;

        if (strcmp(method, DP_METHOD_OPTIONS) == 0)
                desc = &v1beta1__empty__descriptor;
        else if (strcmp(method, DP_METHOD_ALLOCATE) == 0)
                desc = &v1beta1__allocate_request__descriptor;
        else if (strcmp(method, DP_METHOD_PREFERRED) == 0)
                desc = &v1beta1__preferred_allocation_request__descriptor;
        else if (strcmp(method, DP_METHOD_PRESTART) == 0)
                desc = &v1beta1__pre_start_container_request__descriptor;
        else {
                xasprintf(ret_msg, "unknown method %.100s", method);
                return GRPC_STATUS_UNIMPLEMENTED;
        }
        r = dp_unpack(c->sc.recv, desc, &req);
        if (r < 0) {
                xasprintf(ret_msg, "cannot decode %s: %s", desc->name, strerror(-r));
                return dp_status_from_errno(r);
        }
        if (desc == &v1beta1__allocate_request__descriptor) {
                V1beta1__AllocateResponse *resp = NULL;
                r = dp_allocate(p, (V1beta1__AllocateRequest *)req, &resp, &err, ret_device);
                if (r >= 0)
                        c->sc.send = dp_pack(&resp->base);
                dp_allocate_response_free(resp);
        } else if (desc == &v1beta1__preferred_allocation_request__descriptor) {
                V1beta1__PreferredAllocationResponse *resp = NULL;
                r = dp_preferred(p, (V1beta1__PreferredAllocationRequest *)req, &resp, &err,
                                 ret_device);
                if (r >= 0)
                        c->sc.send = dp_pack(&resp->base);
                dp_preferred_response_free(resp);
        } else if (desc == &v1beta1__empty__descriptor) {
                c->sc.send = dp_pack(&dp_plugin_options.base);
        } else {
                V1beta1__PreStartContainerResponse resp =
                        V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
                c->sc.send = dp_pack(&resp.base);
        }
        protobuf_c_message_free_unpacked(req, NULL);
        if (r == -EINVAL)
                *ret_msg = dp_answer_error_text(&err);
        base_field_error_clear(&err);
        st = dp_status_from_errno(r);
        if (r >= 0 && !c->sc.send)
                st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        if (st != GRPC_STATUS_OK && !*ret_msg)
                xasprintf(ret_msg, "%s failed: %s", method, strerror(-r));
        return st;
}

/* Ends a ListAndWatch stream with a status the kubelet logs (one send at
 * a time: the caller made sure none is in flight). */
static void stream_close(struct dp_call *c, grpc_status_code code, const char *msg) {
        size_t n = 0;
        grpc_op ops[2];

        memset(ops, 0, sizeof(ops));
        n += dp_server_call_md_op(&c->sc, &ops[n]);
        n += dp_server_call_status_op(&c->sc, code, msg, &ops[n]);
        c->closed = true;
        if (grpc_call_start_batch(c->sc.call, ops, n, &c->send_tag, NULL) != GRPC_CALL_OK)
                return;
        c->sending = true;
        c->status_in_flight = true;
        c->sc.md_sent = true;
        c->refs++;
}

/* A list the kubelet cannot read (its stream would fail on it anyway) is
 * never sent: the stream ends with a status saying why, and the other
 * resources keep serving. Devices are never dropped from a running list,
 * so it would not fit later either. */
static void stream_refuse(struct dp_call *c) {
        struct dp_resource *res = c->res;
        const struct dp_plugin *p = res->plugin;
        _cleanup_free_ char *msg = NULL;
        size_t len = 0;

        dp_plugin_list(p, NULL, &len);
        if (xasprintf(
                    &msg,
                    "the device list of %zu IDs (%zu devices x %u shares) is %zu bytes, over the "
                    "kubelet's message limit of %zu bytes (4 MiB): not sent; lower \"shares\" or narrow "
                    "\"match\"",
                    p->n_ids, p->n_devs, res->cfg->shares, len, (size_t)DP_MAX_MESSAGE) < 0)
                msg = NULL;
        log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name }, "resource \"%s\": %s",
                 res->cfg->name, msg ? msg : "device list too large, not sent");
        stream_close(c, GRPC_STATUS_RESOURCE_EXHAUSTED, msg ? msg : "device list too large");
}

/* The resource is going (a reload removed it, or the daemon stops): each
 * open stream ends with a status and a message the kubelet logs, not with
 * the HTTP/2 reset that cancelling the call sends. grpc takes one send at a
 * time, so a stream with a list in flight ends once that send is done. */
static void stream_end(struct dp_call *c) {
        struct dp_resource *res = c->res;

        if (c->closed)
                return;
        if (c->sending) {
                c->ending = true;
                return;
        }
        c->ending = false;
        stream_close(c, GRPC_STATUS_UNAVAILABLE,
                     res->d->stopping ? "cdiplug is stopping"
                                      : "the resource was removed from cdiplug's configuration");
}

/* Cancelling the server's calls resets the streams on the wire, so it
 * waits until every stream's status has gone out; it ends whatever else
 * is left (a unary call whose request never came). */
static void maybe_cancel_calls(struct dp_resource *res) {
        if (res->srv.state != SRV_STOPPING || !res->srv.server)
                return;
        for (const struct dp_call *c = res->srv.streams; c; c = c->next)
                if (c->ending || c->status_in_flight)
                        return;
        grpc_server_cancel_all_calls(res->srv.server);
}

static void stream_send(struct dp_call *c) {
        struct dp_resource *res = c->res;
        grpc_slice slice;
        uint8_t *buf;
        size_t len;
        int r;

        if (c->sending || c->closed || c->sent_gen == res->plugin->generation)
                return;
        /* Packed for each send and freed once sent: the kubelet keeps one
         * stream, sent to once per change, and a list kept for 10,000
         * devices would cost 200 kB for nothing. */
        r = dp_plugin_list(res->plugin, &buf, &len);
        if (r == -EMSGSIZE) {
                stream_refuse(c);
                return;
        }
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": cannot pack the device list: out of memory",
                         res->cfg->name);
                return;
        }
        slice = grpc_slice_new(buf, len, free);
        if (dp_server_call_send_message(&c->sc, slice, &c->send_tag) < 0)
                return;
        c->sending = true;
        c->refs++;
        c->sent_gen = res->plugin->generation;
}

static void stream_unref(struct dp_call *c) {
        if (--c->refs > 0)
                return;
        for (struct dp_call **pp = &c->res->srv.streams; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        log_with(LOG_DEBUG, &(struct log_fields){ .resource = c->res->cfg->name },
                 "resource \"%s\": ListAndWatch stream closed", c->res->cfg->name);
        call_free(c);
}

static void on_stream_send(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dp_call *c = CALL_OF(tag, send_tag);

        c->sending = false;
        c->status_in_flight = false;
        if (c->sc.send) /* NULL after a status */
                grpc_byte_buffer_destroy(c->sc.send);
        c->sc.send = NULL;
        if (!ok) {
                c->closed = true;
                c->ending = false;
        } else if (c->ending)
                stream_end(c);
        else
                stream_send(c);
        /* Before the unref: while c holds it, res is still there. */
        maybe_cancel_calls(c->res);
        stream_unref(c);
}

static void on_stream_close(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dp_call *c = CALL_OF(tag, close_tag);

        c->closed = true;
        stream_unref(c);
}

static void stream_open(struct dp_call *c) {
        grpc_op op;

        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        op.data.recv_close_on_server.cancelled = &c->sc.cancelled;
        if (grpc_call_start_batch(c->sc.call, &op, 1, &c->close_tag, NULL) != GRPC_CALL_OK) {
                call_free(c);
                return;
        }
        c->refs = 1;
        c->next = c->res->srv.streams;
        c->res->srv.streams = c;
        log_with(LOG_DEBUG, &(struct log_fields){ .resource = c->res->cfg->name },
                 "resource \"%s\": ListAndWatch stream opened", c->res->cfg->name);
        stream_send(c);
}

static void on_call(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dp_call *c = CALL_OF(tag, tag);
        struct dp_resource *res = c->res;
        _cleanup_free_ char *method = NULL, *msg = NULL, *device = NULL;
        grpc_op op;

        switch (c->phase) {
        case PH_NEW:
                if (!ok) { /* the server is shutting down */
                        call_free(c);
                        return;
                }
                if (res->srv.state == SRV_UP && request_next(res) < 0)
                        log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                                 "resource \"%s\": cannot accept further calls", res->cfg->name);
                memset(&op, 0, sizeof(op));
                op.op = GRPC_OP_RECV_MESSAGE;
                op.data.recv_message.recv_message = &c->sc.recv;
                c->phase = PH_RECV;
                if (grpc_call_start_batch(c->sc.call, &op, 1, &c->tag, NULL) != GRPC_CALL_OK)
                        call_free(c);
                return;
        case PH_RECV:
                if (!ok) {
                        call_free(c);
                        return;
                }
                method = strndup((const char *)GRPC_SLICE_START_PTR(c->sc.details.method),
                                 GRPC_SLICE_LENGTH(c->sc.details.method));
                if (!method) {
                        finish(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                        return;
                }
                if (strcmp(method, DP_METHOD_LIST_AND_WATCH) == 0) {
                        stream_open(c);
                        return;
                }
                double t0 = dp_mono_seconds();
                grpc_status_code st = answer(c, method, &msg, &device);
                if (strcmp(method, DP_METHOD_ALLOCATE) == 0)
                        dp_stats_allocate(&res->stats, (int)st, dp_mono_seconds() - t0);
                if (st != GRPC_STATUS_OK)
                        log_with(LOG_WARN,
                                 &(struct log_fields){ .resource = res->cfg->name,
                                                       .device = device },
                                 "resource \"%s\": %s refused: %s", res->cfg->name, method, msg);
                finish(c, st, msg);
                return;
        case PH_FINISH:
                call_free(c);
                return;
        }
}

static void on_shutdown(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dp_resource *res = (struct dp_resource *)((char *)tag - offsetof(struct dp_resource,
                                                                                srv.shutdown_tag));

        grpc_server_destroy(res->srv.server);
        res->srv.server = NULL;
        res->srv.state = SRV_DOWN;
        d->live--;
        /* Without this, a resource moved to DRA and back while this
         * server still stopped would have no socket until the next reload. */
        if (res->srv.serve_again && !res->life.retired && !d->stopping && !dp_resource_is_dra(res))
                dp_server_serve(res);
        res->srv.serve_again = false;
        dp_maybe_finish(d);
        dp_resource_maybe_free(res);
}

/* The grpc server lives as long as the daemon and has no port of its own:
 * we listen on the socket ourselves and hand it each connection. When the
 * kubelet deletes the socket file, only that listening socket is made
 * again, in microseconds, while the server, its calls and its state stay;
 * rebuilding 64 grpc servers after every kubelet restart cost far more. */
int dp_server_start(struct dp_resource *res) {
        struct dp_daemon *d = res->d;
        grpc_arg args[] = {
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                  .value.integer = DP_MAX_MESSAGE },
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_MAX_CONCURRENT_STREAMS,
                  .value.integer = 64 },
                /* No channelz node and trace per server and connection:
                 * nothing reads them, and they cost memory. */
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_ENABLE_CHANNELZ,
                  .value.integer = 0 },
        };
        grpc_channel_args cargs = { .num_args = ELEMENTSOF(args), .args = args };

        /* A DRA resource is served by the DRA driver (dra.c): no socket
         * of its own, no Register. */
        if (res->srv.state != SRV_DOWN || dp_resource_is_dra(res))
                return 0;
        res->srv.server = grpc_server_create(&cargs, NULL);
        grpc_server_register_completion_queue(res->srv.server, d->cq, NULL);
        grpc_server_start(res->srv.server);
        res->srv.state = SRV_UP;
        d->live++;
        res->srv.shutdown_tag.fn = on_shutdown;
        if (request_next(res) < 0) {
                dp_server_stop(res);
                return -EIO;
        }
        return 0;
}

void dp_server_serve(struct dp_resource *res) {
        struct dp_daemon *d = res->d;

        if (res->srv.state == SRV_STOPPING) {
                res->srv.serve_again = true; /* on_shutdown serves it */
                return;
        }
        if (dp_server_start(res) < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": cannot start its server", res->cfg->name);
                return;
        }
        /* Like at start-up: the socket waits for kubelet.sock (watch.c). */
        if (d->watch.kubelet_wd >= 0 && dp_kubelet_present(d) && dp_server_listen(res) >= 0)
                dp_register(res);
}

int dp_server_listen(struct dp_resource *res) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (res->srv.state != SRV_UP || res->srv.listen_fd >= 0)
                return 0;
        /* Checked against sun_path at start-up. */
        memcpy(sa.sun_path, res->socket_path, strlen(res->socket_path) + 1);
        /* A socket left by an earlier run would make bind fail; the name is
         * ours alone. */
        if (unlink(res->socket_path) < 0 && errno != ENOENT)
                log_with(LOG_WARN,
                         &(struct log_fields){ .resource = res->cfg->name,
                                               .path = res->socket_path,
                                               .err = errno },
                         "resource \"%s\": cannot remove stale socket %s: %m", res->cfg->name,
                         res->socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
                int r = -errno;
                log_with(LOG_ERR,
                         &(struct log_fields){
                                 .resource = res->cfg->name, .path = res->socket_path, .err = r },
                         "resource \"%s\": cannot listen on %s: %s", res->cfg->name,
                         res->socket_path, strerror(-r));
                if (fd >= 0)
                        close(fd);
                return r;
        }
        res->srv.listen_fd = fd;
        res->srv.listen_gen = res->d->kubelet.gen;
        log_with(LOG_INFO,
                 &(struct log_fields){ .resource = res->cfg->name, .path = res->socket_path },
                 "resource \"%s\": serving on %s", res->cfg->name, res->socket_path);
        return 0;
}

void dp_server_unlisten(struct dp_resource *res, bool unlink_path) {
        if (res->srv.listen_fd < 0)
                return;
        close(res->srv.listen_fd);
        res->srv.listen_fd = -1;
        if (unlink_path && unlink(res->socket_path) < 0 && errno != ENOENT)
                log_with(LOG_WARN,
                         &(struct log_fields){ .resource = res->cfg->name,
                                               .path = res->socket_path,
                                               .err = errno },
                         "resource \"%s\": cannot remove %s: %m", res->cfg->name, res->socket_path);
}

/* Out of fds (EMFILE, ENFILE) or kernel memory, accept fails while the
 * connection stays queued, so the listening socket stays readable and
 * retrying at once spins: 300,000 failures and log lines a second, with
 * the daemon lock held, starved every other call. Instead the socket
 * leaves the poll set for a back-off period (timerfd) and one line a
 * period says how many attempts failed; connections already served go on
 * meanwhile, and queued ones are taken once fds are free again. */
#define ACCEPT_PAUSE_MIN_MS 10
#define ACCEPT_PAUSE_MAX_MS 1000
#define ACCEPT_LOG_EVERY_MS 10000

/* The accept timer set to the earliest end of any resource's pause. */
static void accept_timer_set(struct dp_daemon *d) {
        uint64_t next = 0;
        for (size_t i = 0; i < d->n_res; i++)
                next = dp_due_min(next, d->res[i]->accept.resume_ms);
        dp_timer_set(&d->accept_timer, next);
}

static void accept_failed(struct dp_resource *res, int err) {
        uint64_t now = dp_now_ms();
        uint64_t pause =
                dp_backoff_ms(ACCEPT_PAUSE_MIN_MS, ACCEPT_PAUSE_MAX_MS, res->accept.failures);

        res->accept.failures++;
        res->accept.unlogged++;
        if (!res->accept.logged_ms || now - res->accept.logged_ms >= ACCEPT_LOG_EVERY_MS) {
                log_with(
                        LOG_WARN,
                        &(struct log_fields){
                                .resource = res->cfg->name, .path = res->socket_path, .err = err },
                        "resource \"%s\": accept on %s: %s (%u failed attempts); pausing new connections "
                        "for up to %d ms at a time, serving the open ones",
                        res->cfg->name, res->socket_path, strerror(err), res->accept.unlogged,
                        ACCEPT_PAUSE_MAX_MS);
                res->accept.logged_ms = now;
                res->accept.unlogged = 0;
        }
        res->accept.resume_ms = now + pause;
        accept_timer_set(res->d);
}

void dp_server_accept(struct dp_resource *res) {
        if (res->accept.resume_ms)
                return;
        for (;;) {
                int fd = accept4(res->srv.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno == EAGAIN)
                                return;
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM) {
                                accept_failed(res, errno);
                                return;
                        }
                        log_with(LOG_WARN,
                                 &(struct log_fields){ .resource = res->cfg->name,
                                                       .path = res->socket_path,
                                                       .err = errno },
                                 "resource \"%s\": accept on %s: %m; continuing", res->cfg->name,
                                 res->socket_path);
                        return;
                }
                if (res->accept.failures) {
                        log_with(LOG_INFO,
                                 &(struct log_fields){ .resource = res->cfg->name,
                                                       .path = res->socket_path },
                                 "resource \"%s\": accepting connections on %s again",
                                 res->cfg->name, res->socket_path);
                        res->accept.failures = 0;
                        res->accept.logged_ms = 0;
                        res->accept.unlogged = 0;
                }
                grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
                /* grpc owns fd from here, and closes it with the connection. */
                grpc_server_add_channel_from_fd(res->srv.server, fd, creds);
                grpc_server_credentials_release(creds);
        }
}

/* The fd the watcher polls for new connections: none while paused. */
int dp_server_poll_fd(const struct dp_resource *res) {
        return res->accept.resume_ms ? -1 : res->srv.listen_fd;
}

void dp_accept_due(void *ctx) {
        struct dp_daemon *d = ctx;
        uint64_t now = dp_now_ms();

        for (size_t i = 0; i < d->n_res; i++) {
                struct dp_resource *res = d->res[i];
                if (!res->accept.resume_ms || res->accept.resume_ms > now)
                        continue;
                res->accept.resume_ms = 0;
                if (res->srv.listen_fd >= 0)
                        dp_server_accept(res);
        }
        accept_timer_set(d);
}

/* The stop timer set to the earliest grace end of a stopping server. */
static void stop_timer_set(struct dp_daemon *d) {
        uint64_t next = 0;

        for (size_t i = 0; i < d->n_res; i++)
                if (d->res[i]->srv.state == SRV_STOPPING)
                        next = dp_due_min(next, d->res[i]->srv.stop_due_ms);
        for (struct dp_resource *res = d->retired; res; res = res->life.next_retired)
                if (res->srv.state == SRV_STOPPING)
                        next = dp_due_min(next, res->srv.stop_due_ms);
        dp_timer_set(&d->stop_timer, next);
}

static void stop_expire(struct dp_resource *res, uint64_t now) {
        if (res->srv.state != SRV_STOPPING || !res->srv.stop_due_ms || res->srv.stop_due_ms > now)
                return;
        res->srv.stop_due_ms = 0;
        log_with(LOG_WARN, &(struct log_fields){ .resource = res->cfg->name },
                 "resource \"%s\": a ListAndWatch peer took no status within %d ms of the "
                 "server's stop; its calls are cancelled",
                 res->cfg->name, DP_STOP_GRACE_MS);
        grpc_server_cancel_all_calls(res->srv.server);
}

/* A reload's stop gets the same grace as the daemon's (drain): a peer
 * that never reads would otherwise keep the old server, and with it the
 * resource's return to the device plugin API, for as long as it likes. */
void dp_server_stop_due(void *ctx) {
        struct dp_daemon *d = ctx;
        uint64_t now = dp_now_ms();

        for (size_t i = 0; i < d->n_res; i++)
                stop_expire(d->res[i], now);
        for (struct dp_resource *res = d->retired; res; res = res->life.next_retired)
                stop_expire(res, now);
        stop_timer_set(d);
}

void dp_server_stop(struct dp_resource *res) {
        dp_server_unlisten(res, true);
        if (res->srv.state != SRV_UP)
                return;
        res->srv.state = SRV_STOPPING;
        res->srv.stop_due_ms = dp_now_ms() + DP_STOP_GRACE_MS;
        /* The earliest so far stays: res may be between d->res and the
         * retired list now. */
        if (!res->d->stop_timer.due_ms || res->d->stop_timer.due_ms > res->srv.stop_due_ms)
                dp_timer_set(&res->d->stop_timer, res->srv.stop_due_ms);
        /* No new calls; the open ones first end with a status. */
        grpc_server_shutdown_and_notify(res->srv.server, res->d->cq, &res->srv.shutdown_tag);
        for (struct dp_call *c = res->srv.streams; c; c = c->next)
                stream_end(c);
        maybe_cancel_calls(res);
}

void dp_server_cancel_stopping(struct dp_daemon *d) {
        for (size_t i = 0; i < d->n_res; i++)
                if (d->res[i]->srv.state == SRV_STOPPING)
                        grpc_server_cancel_all_calls(d->res[i]->srv.server);
        for (struct dp_resource *res = d->retired; res; res = res->life.next_retired)
                if (res->srv.state == SRV_STOPPING)
                        grpc_server_cancel_all_calls(res->srv.server);
}

size_t dp_server_streams(const struct dp_resource *res) {
        size_t n = 0;
        for (const struct dp_call *c = res->srv.streams; c; c = c->next)
                n += !c->closed;
        return n;
}

void dp_server_push(struct dp_resource *res) {
        if (dp_resource_is_dra(res)) {
                dp_dra_publish(res->d);
                return;
        }
        for (struct dp_call *c = res->srv.streams; c; c = c->next)
                stream_send(c);
}
