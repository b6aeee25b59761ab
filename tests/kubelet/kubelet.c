/* SPDX-License-Identifier: Apache-2.0 */
#include "kubelet.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rpc.h"
#include "log.h"

#define TK_MAX_PLUGINS 128

/* The kubelet serves every call on its own goroutine; we get the same
 * concurrency from one thread draining one completion queue, each batch
 * tagged with what to do when it completes. A thread per call, as this
 * file once had, spent more on waking threads than the daemon spent on
 * answering, and the benchmark measured mostly that. */
struct tk_op {
        void (*fn)(struct tk *tk, struct tk_op *op, bool ok);
};

#define OP_OWNER(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* One ListAndWatch stream, on the connection dialled for its Register. */
struct tk_stream {
        struct tk_op op;
        enum { ST_OPEN, ST_RECV, ST_STATUS } phase;
        struct tk_plugin *plugin;
        grpc_channel *ch;
        grpc_call *call;
        grpc_byte_buffer *send, *recv;
        grpc_metadata_array md, trailing;
        grpc_status_code status;
        grpc_slice details;
        struct tk_stream *next;
};

/* One call on kubelet.sock, from the slot offered to the server to the
 * answer, with the dial-back in between. */
struct tk_reg {
        struct tk_op op;      /* the server call's batches */
        struct tk_op dial_op; /* GetDevicePluginOptions on the dialled channel */
        enum { RG_NEW, RG_RECV, RG_DIAL, RG_FINISH } phase;
        grpc_call *call;
        grpc_call_details details;
        grpc_metadata_array md;
        grpc_byte_buffer *recv, *send;
        grpc_slice status_details;
        int cancelled;
        uint64_t arrived_ns;
        V1beta1__RegisterRequest *req;
        char *endpoint;
        grpc_channel *ch;
        grpc_call *dial;
        struct dp_unary u;
        struct tk_reg *next;
};

struct tk_plugin {
        char *resource;
        char *endpoint; /* full socket path */
        unsigned registrations;
        unsigned lists;
        unsigned lists_at_register;
        uint64_t registered_at_ns; /* CLOCK_MONOTONIC of the latest Register */
        uint64_t arrived_at_ns;    /* when that Register's request arrived */
        uint64_t list_at_ns;       /* when the newest list arrived */
        V1beta1__ListAndWatchResponse *latest;
        V1beta1__RegisterRequest *last_req;
        V1beta1__DevicePluginOptions *last_opts;
};

struct tk {
        char *dir;
        char *sock;
        pthread_mutex_t lock;      /* everything below; held by the loop while it runs an op */
        pthread_cond_t cond;       /* broadcast after every op */
        grpc_completion_queue *cq; /* the only one */
        pthread_t thread;
        grpc_server *server;
        bool serving;     /* offering slots, dialling back */
        bool server_down; /* its shutdown completed */
        struct tk_op shutdown_op;
        struct tk_reg *regs;       /* calls on kubelet.sock not yet freed */
        struct tk_stream *streams; /* streams not yet freed */
        struct tk_plugin plugins[TK_MAX_PLUGINS];
        size_t n_plugins;
        uint64_t restarted_at_ns; /* when the last restart deleted the sockets */
        bool changed;             /* something a waiter looks at: wake them */
};

/* Enough slots that 64 plugins registering at once never wait for one. */
#define TK_SLOTS 16

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct tk_plugin *plugin_get(struct tk *tk, const char *resource, bool create) {
        for (size_t i = 0; i < tk->n_plugins; i++)
                if (strcmp(tk->plugins[i].resource, resource) == 0)
                        return &tk->plugins[i];
        if (!create || tk->n_plugins == TK_MAX_PLUGINS)
                return NULL;
        struct tk_plugin *p = &tk->plugins[tk->n_plugins++];
        memset(p, 0, sizeof(*p));
        p->resource = strdup(resource);
        return p;
}

static void *loop_main(void *arg) {
        struct tk *tk = arg;

        for (;;) {
                grpc_event ev = grpc_completion_queue_next(
                        tk->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                if (ev.type == GRPC_QUEUE_SHUTDOWN)
                        return NULL;
                if (ev.type != GRPC_OP_COMPLETE)
                        continue;
                pthread_mutex_lock(&tk->lock);
                ((struct tk_op *)ev.tag)->fn(tk, ev.tag, ev.success);
                /* Only then: the benchmark's waiting thread would otherwise
                 * wake for every batch, and compete with what it measures. */
                if (tk->changed)
                        pthread_cond_broadcast(&tk->cond);
                tk->changed = false;
                pthread_mutex_unlock(&tk->lock);
        }
}

static void stream_free(struct tk *tk, struct tk_stream *s) {
        tk->changed = true;
        for (struct tk_stream **pp = &tk->streams; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        if (s->call)
                grpc_call_unref(s->call);
        /* A replaced or broken stream gives its connection back at once,
         * as the kubelet closes the old endpoint's client. */
        grpc_channel_destroy(s->ch);
        if (s->send)
                grpc_byte_buffer_destroy(s->send);
        if (s->recv)
                grpc_byte_buffer_destroy(s->recv);
        grpc_metadata_array_destroy(&s->md);
        grpc_metadata_array_destroy(&s->trailing);
        grpc_slice_unref(s->details);
        free(s);
}

static void stream_record(struct tk *tk, struct tk_stream *s) {
        ProtobufCMessage *msg = NULL;
        struct tk_plugin *p = s->plugin;

        if (dp_unpack(s->recv, &v1beta1__list_and_watch_response__descriptor, &msg) < 0)
                return;
        if (p->latest)
                v1beta1__list_and_watch_response__free_unpacked(p->latest, NULL);
        p->latest = (V1beta1__ListAndWatchResponse *)msg;
        p->lists++;
        p->list_at_ns = now_ns();
        tk->changed = true;
}

static void on_stream(struct tk *tk, struct tk_op *op, bool ok) {
        struct tk_stream *s = OP_OWNER(op, struct tk_stream, op);
        grpc_op ops[1];

        memset(ops, 0, sizeof(ops));
        if (s->phase == ST_STATUS) {
                stream_free(tk, s);
                return;
        }
        if (s->phase == ST_RECV && ok && s->recv) {
                stream_record(tk, s);
                grpc_byte_buffer_destroy(s->recv);
                s->recv = NULL;
        } else if (s->phase == ST_RECV || !ok) {
                /* The stream ended: collect its status, then let go. */
                ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
                ops[0].data.recv_status_on_client.trailing_metadata = &s->trailing;
                ops[0].data.recv_status_on_client.status = &s->status;
                ops[0].data.recv_status_on_client.status_details = &s->details;
                s->phase = ST_STATUS;
                if (grpc_call_start_batch(s->call, ops, 1, &s->op, NULL) != GRPC_CALL_OK)
                        stream_free(tk, s);
                return;
        }
        ops[0].op = GRPC_OP_RECV_MESSAGE;
        ops[0].data.recv_message.recv_message = &s->recv;
        s->phase = ST_RECV;
        if (grpc_call_start_batch(s->call, ops, 1, &s->op, NULL) != GRPC_CALL_OK)
                stream_free(tk, s);
}

/* The stream takes over ch, the connection the kubelet dialed for
 * GetDevicePluginOptions, as the kubelet's client does. */
static void stream_open(struct tk *tk, struct tk_plugin *p, grpc_channel *ch) {
        struct tk_stream *s = calloc(1, sizeof(*s));
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;

        if (!s) {
                grpc_channel_destroy(ch);
                return;
        }
        s->op.fn = on_stream;
        s->plugin = p;
        s->ch = ch;
        s->details = grpc_empty_slice();
        grpc_metadata_array_init(&s->md);
        grpc_metadata_array_init(&s->trailing);
        s->send = dp_pack(&empty.base);
        s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, tk->cq,
                                           grpc_slice_from_static_string(DP_METHOD_LIST_AND_WATCH),
                                           NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        s->next = tk->streams;
        tk->streams = s;
        tk->changed = true;
        s->phase = ST_OPEN;
        if (dp_stream_start(s->call, s->send, &s->md, &s->op) != GRPC_CALL_OK)
                stream_free(tk, s);
}

static void reg_free(struct tk *tk, struct tk_reg *g) {
        tk->changed = true;
        for (struct tk_reg **pp = &tk->regs; *pp; pp = &(*pp)->next)
                if (*pp == g) {
                        *pp = g->next;
                        break;
                }
        if (g->call)
                grpc_call_unref(g->call);
        if (g->dial)
                grpc_call_unref(g->dial);
        if (g->ch)
                grpc_channel_destroy(g->ch);
        grpc_call_details_destroy(&g->details);
        grpc_metadata_array_destroy(&g->md);
        if (g->recv)
                grpc_byte_buffer_destroy(g->recv);
        if (g->send)
                grpc_byte_buffer_destroy(g->send);
        grpc_slice_unref(g->status_details);
        if (g->req)
                protobuf_c_message_free_unpacked(&g->req->base, NULL);
        free(g->endpoint);
        dp_unary_clear(&g->u);
        free(g);
}

static void reg_finish(struct tk *tk, struct tk_reg *g, grpc_status_code st, const char *msg) {
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        grpc_op ops[3];
        size_t n = 0;

        memset(ops, 0, sizeof(ops));
        if (st == GRPC_STATUS_OK) {
                g->send = dp_pack(&empty.base);
                ops[n].op = GRPC_OP_SEND_MESSAGE;
                ops[n++].data.send_message.send_message = g->send;
        }
        g->status_details = grpc_slice_from_copied_string(msg ? msg : "");
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = st;
        ops[n++].data.send_status_from_server.status_details = &g->status_details;
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &g->cancelled;
        g->phase = RG_FINISH;
        if (grpc_call_start_batch(g->call, ops, n, &g->op, NULL) != GRPC_CALL_OK)
                reg_free(tk, g);
}

/* The plugin answered GetDevicePluginOptions (or did not): only now does
 * the kubelet record the registration and answer Register. */
static void on_dialled(struct tk *tk, struct tk_op *op, bool ok) {
        struct tk_reg *g = OP_OWNER(op, struct tk_reg, dial_op);
        ProtobufCMessage *opts = NULL;

        if (!ok || g->u.status != GRPC_STATUS_OK ||
            dp_unpack(g->u.recv, &v1beta1__device_plugin_options__descriptor, &opts) < 0) {
                _cleanup_free_ char *msg = NULL;
                char *why = grpc_slice_to_c_string(g->u.details);
                xasprintf(&msg, "cannot dial %s: status %d %s", g->endpoint, g->u.status, why);
                gpr_free(why);
                reg_finish(tk, g, GRPC_STATUS_FAILED_PRECONDITION, msg);
                return;
        }
        struct tk_plugin *p = plugin_get(tk, g->req->resource_name, true);
        free(p->endpoint);
        p->endpoint = TAKE_PTR(g->endpoint);
        if (p->last_req)
                protobuf_c_message_free_unpacked(&p->last_req->base, NULL);
        if (p->last_opts)
                protobuf_c_message_free_unpacked(&p->last_opts->base, NULL);
        p->last_req = TAKE_PTR(g->req);
        p->last_opts = (V1beta1__DevicePluginOptions *)opts;
        /* Like the kubelet, a new registration replaces the endpoint: the
         * old client's stream is closed. */
        for (struct tk_stream *old = tk->streams; old; old = old->next)
                if (old->plugin == p)
                        grpc_call_cancel(old->call, NULL);
        p->registrations++;
        p->registered_at_ns = now_ns();
        p->arrived_at_ns = g->arrived_ns;
        p->lists_at_register = p->lists;
        tk->changed = true;
        stream_open(tk, p, TAKE_PTR(g->ch));
        reg_finish(tk, g, GRPC_STATUS_OK, NULL);
}

/* The dial-back as the kubelet makes it: a new connection to the plugin's
 * socket. We connect it and hand grpc the fd, a direct channel: grpc core's
 * full client channel (resolver, load balancing, subchannel) cost this
 * test kubelet more CPU per registration than the daemon spends on one,
 * and the benchmark measured mostly that. */
static grpc_channel *dial_back(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        grpc_arg args[] = {
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                  .value.integer = DP_MAX_MESSAGE },
        };
        grpc_channel_args cargs = { .num_args = ELEMENTSOF(args), .args = args };
        grpc_channel_credentials *creds;
        grpc_channel *ch;
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                return NULL;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return NULL;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                return NULL;
        }
        creds = grpc_insecure_credentials_create();
        ch = grpc_channel_create_from_fd(path, fd, creds, &cargs);
        grpc_channel_credentials_release(creds);
        return ch;
}

/* The device manager's Register: check, dial back, then answer. */
static void reg_received(struct tk *tk, struct tk_reg *g) {
        ProtobufCMessage *msg = NULL;
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        _cleanup_free_ char *why = NULL;

        if (grpc_slice_str_cmp(g->details.method, DP_METHOD_REGISTER) != 0) {
                reg_finish(tk, g, GRPC_STATUS_UNIMPLEMENTED, NULL);
                return;
        }
        if (!tk->serving) {
                reg_finish(tk, g, GRPC_STATUS_UNAVAILABLE, "shutting down");
                return;
        }
        if (dp_unpack(g->recv, &v1beta1__register_request__descriptor, &msg) < 0) {
                reg_finish(tk, g, GRPC_STATUS_INVALID_ARGUMENT, "cannot decode RegisterRequest");
                return;
        }
        g->req = (V1beta1__RegisterRequest *)msg;
        if (strcmp(g->req->version, "v1beta1") != 0 || strchr(g->req->endpoint, '/') ||
            !*g->req->resource_name) {
                xasprintf(&why, "bad RegisterRequest (version \"%s\", endpoint \"%s\")",
                          g->req->version, g->req->endpoint);
                reg_finish(tk, g, GRPC_STATUS_INVALID_ARGUMENT, why);
                return;
        }
        xasprintf(&g->endpoint, "%s/%s", tk->dir, g->req->endpoint);
        g->ch = dial_back(g->endpoint);
        if (!g->ch) {
                xasprintf(&why, "cannot dial %s: %s", g->endpoint, strerror(errno));
                reg_finish(tk, g, GRPC_STATUS_FAILED_PRECONDITION, why);
                return;
        }
        g->dial = grpc_channel_create_call(g->ch, NULL, GRPC_PROPAGATE_DEFAULTS, tk->cq,
                                           grpc_slice_from_static_string(DP_METHOD_OPTIONS), NULL,
                                           dp_deadline_ms(5000), NULL);
        dp_unary_init(&g->u, dp_pack(&empty.base));
        g->phase = RG_DIAL;
        if (dp_unary_start(g->dial, &g->u, &g->dial_op) != GRPC_CALL_OK)
                reg_finish(tk, g, GRPC_STATUS_INTERNAL, "cannot dial back");
}

static void reg_offer(struct tk *tk);

static void on_reg(struct tk *tk, struct tk_op *op, bool ok) {
        struct tk_reg *g = OP_OWNER(op, struct tk_reg, op);
        grpc_op ops[2];

        switch (g->phase) {
        case RG_NEW:
                if (!ok) { /* the server is shutting down */
                        reg_free(tk, g);
                        return;
                }
                if (tk->serving)
                        reg_offer(tk);
                memset(ops, 0, sizeof(ops));
                ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
                ops[1].op = GRPC_OP_RECV_MESSAGE;
                ops[1].data.recv_message.recv_message = &g->recv;
                g->phase = RG_RECV;
                if (grpc_call_start_batch(g->call, ops, 2, &g->op, NULL) != GRPC_CALL_OK)
                        reg_free(tk, g);
                return;
        case RG_RECV:
                g->arrived_ns = now_ns();
                if (!ok)
                        reg_free(tk, g);
                else
                        reg_received(tk, g);
                return;
        case RG_DIAL: /* no server batch is in flight while dialling */
        case RG_FINISH:
                reg_free(tk, g);
                return;
        }
}

/* Offer the server a slot for its next call. */
static void reg_offer(struct tk *tk) {
        struct tk_reg *g = calloc(1, sizeof(*g));

        if (!g)
                return;
        g->op.fn = on_reg;
        g->dial_op.fn = on_dialled;
        g->phase = RG_NEW;
        g->status_details = grpc_empty_slice();
        grpc_call_details_init(&g->details);
        grpc_metadata_array_init(&g->md);
        dp_unary_init(&g->u, NULL);
        if (grpc_server_request_call(tk->server, &g->call, &g->details, &g->md, tk->cq, tk->cq,
                                     &g->op) != GRPC_CALL_OK) {
                reg_free(tk, g);
                return;
        }
        g->next = tk->regs;
        tk->regs = g;
}

static void on_server_down(struct tk *tk, struct tk_op *op, bool ok) {
        (void)op, (void)ok;
        tk->server_down = true;
        tk->changed = true;
}

/* Called with the lock held. */
static int serve(struct tk *tk) {
        _cleanup_free_ char *addr = NULL;
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();

        xasprintf(&addr, "unix:%s", tk->sock);
        tk->server = grpc_server_create(NULL, NULL);
        grpc_server_register_completion_queue(tk->server, tk->cq, NULL);
        int port = grpc_server_add_http2_port(tk->server, addr, creds);
        grpc_server_credentials_release(creds);
        if (!port) {
                grpc_server_destroy(tk->server);
                tk->server = NULL;
                return -EADDRNOTAVAIL;
        }
        grpc_server_start(tk->server);
        tk->serving = true;
        tk->server_down = false;
        for (int i = 0; i < TK_SLOTS; i++)
                reg_offer(tk);
        return 0;
}

static bool quiet(struct tk *tk, bool regs, bool streams) {
        return (!regs || (tk->server_down && !tk->regs)) && (!streams || !tk->streams);
}

/* Called with the lock held: wait until every call or stream is gone. */
static void wait_quiet(struct tk *tk, bool regs, bool streams) {
        while (!quiet(tk, regs, streams))
                pthread_cond_wait(&tk->cond, &tk->lock);
}

/* A kubelet that goes away answers nothing more and drops what it
 * dialled. Called with the lock held. */
static void unserve(struct tk *tk) {
        tk->serving = false;
        tk->shutdown_op.fn = on_server_down;
        grpc_server_shutdown_and_notify(tk->server, tk->cq, &tk->shutdown_op);
        grpc_server_cancel_all_calls(tk->server);
        for (struct tk_reg *g = tk->regs; g; g = g->next)
                if (g->phase == RG_DIAL)
                        grpc_call_cancel(g->dial, NULL);
        wait_quiet(tk, true, false);
        grpc_server_destroy(tk->server);
        tk->server = NULL;
}

/* A kubelet that goes away takes every stream with it. */
static void streams_close(struct tk *tk) {
        for (struct tk_stream *s = tk->streams; s; s = s->next)
                grpc_call_cancel(s->call, NULL);
        wait_quiet(tk, false, true);
}

static void delete_sockets(struct tk *tk, bool keep_kubelet_sock) {
        DIR *dir = opendir(tk->dir);
        struct dirent *de;

        if (!dir)
                return;
        while ((de = readdir(dir))) {
                struct stat st;
                if (keep_kubelet_sock && strcmp(de->d_name, "kubelet.sock") == 0)
                        continue;
                if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISSOCK(st.st_mode))
                        unlinkat(dirfd(dir), de->d_name, 0);
        }
        closedir(dir);
}

int tk_start(const char *dir, struct tk **ret) {
        struct tk *tk = calloc(1, sizeof(*tk));
        pthread_condattr_t attr;

        if (!tk)
                return -ENOMEM;
        dp_grpc_init();
        tk->dir = strdup(dir);
        xasprintf(&tk->sock, "%s/kubelet.sock", dir);
        pthread_mutex_init(&tk->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&tk->cond, &attr);
        tk->cq = grpc_completion_queue_create_for_next(NULL);
        pthread_create(&tk->thread, NULL, loop_main, tk);
        mkdir(dir, 0755);
        unlink(tk->sock);
        pthread_mutex_lock(&tk->lock);
        int r = serve(tk);
        pthread_mutex_unlock(&tk->lock);
        if (r < 0) {
                tk_stop(tk);
                return r;
        }
        *ret = tk;
        return 0;
}

int tk_restart(struct tk *tk, bool sock_first) {
        int r;

        pthread_mutex_lock(&tk->lock);
        unserve(tk);
        streams_close(tk);
        tk->restarted_at_ns = now_ns();
        if (sock_first) {
                unlink(tk->sock);
                r = serve(tk);
                delete_sockets(tk, true);
        } else {
                delete_sockets(tk, false);
                r = serve(tk);
        }
        pthread_mutex_unlock(&tk->lock);
        return r;
}

void tk_stop(struct tk *tk) {
        if (!tk)
                return;
        pthread_mutex_lock(&tk->lock);
        if (tk->server)
                unserve(tk);
        streams_close(tk);
        pthread_mutex_unlock(&tk->lock);
        grpc_completion_queue_shutdown(tk->cq);
        pthread_join(tk->thread, NULL);
        grpc_completion_queue_destroy(tk->cq);
        unlink(tk->sock);
        for (size_t i = 0; i < tk->n_plugins; i++) {
                struct tk_plugin *p = &tk->plugins[i];
                free(p->resource);
                free(p->endpoint);
                if (p->latest)
                        v1beta1__list_and_watch_response__free_unpacked(p->latest, NULL);
                if (p->last_req)
                        protobuf_c_message_free_unpacked(&p->last_req->base, NULL);
                if (p->last_opts)
                        protobuf_c_message_free_unpacked(&p->last_opts->base, NULL);
        }
        pthread_cond_destroy(&tk->cond);
        pthread_mutex_destroy(&tk->lock);
        free(tk->dir);
        free(tk->sock);
        free(tk);
        grpc_shutdown();
}

/* Wait on the condition until pred holds or the timeout passes. */
static int wait_until(struct tk *tk, int timeout_ms, bool (*pred)(struct tk *, const void *),
                      const void *arg) {
        struct timespec until;
        int r = 0;

        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
        }
        while (!pred(tk, arg))
                if (pthread_cond_timedwait(&tk->cond, &tk->lock, &until) == ETIMEDOUT) {
                        r = pred(tk, arg) ? 0 : -ETIMEDOUT;
                        break;
                }
        return r;
}

struct want {
        const char *resource;
        unsigned n;
};

static bool registered_pred(struct tk *tk, const void *arg) {
        const struct want *w = arg;
        struct tk_plugin *p = plugin_get(tk, w->resource, false);
        return p && p->registrations >= w->n && p->lists > p->lists_at_register;
}

static bool lists_pred(struct tk *tk, const void *arg) {
        const struct want *w = arg;
        struct tk_plugin *p = plugin_get(tk, w->resource, false);
        return p && p->lists >= w->n && p->latest;
}

unsigned tk_registrations(struct tk *tk, const char *resource) {
        pthread_mutex_lock(&tk->lock);
        struct tk_plugin *p = plugin_get(tk, resource, false);
        unsigned n = p ? p->registrations : 0;
        pthread_mutex_unlock(&tk->lock);
        return n;
}

int tk_drop(struct tk *tk, const char *resource) {
        int n = 0;

        pthread_mutex_lock(&tk->lock);
        struct tk_plugin *p = plugin_get(tk, resource, false);
        for (struct tk_stream *s = tk->streams; p && s; s = s->next)
                if (s->plugin == p) {
                        grpc_call_cancel(s->call, NULL);
                        n++;
                }
        pthread_mutex_unlock(&tk->lock);
        return n;
}

unsigned tk_total_registrations(struct tk *tk) {
        unsigned n = 0;
        pthread_mutex_lock(&tk->lock);
        for (size_t i = 0; i < tk->n_plugins; i++)
                n += tk->plugins[i].registrations;
        pthread_mutex_unlock(&tk->lock);
        return n;
}

unsigned tk_lists(struct tk *tk, const char *resource) {
        pthread_mutex_lock(&tk->lock);
        struct tk_plugin *p = plugin_get(tk, resource, false);
        unsigned n = p ? p->lists : 0;
        pthread_mutex_unlock(&tk->lock);
        return n;
}

int tk_wait_registered(struct tk *tk, const char *resource, unsigned count, int timeout_ms) {
        struct want w = { resource, count };
        pthread_mutex_lock(&tk->lock);
        int r = wait_until(tk, timeout_ms, registered_pred, &w);
        pthread_mutex_unlock(&tk->lock);
        return r;
}

static unsigned streams_of(struct tk *tk, const char *resource) {
        unsigned n = 0;
        for (struct tk_stream *s = tk->streams; s; s = s->next)
                n += !resource || strcmp(s->plugin->resource, resource) == 0;
        return n;
}

static bool streams_pred(struct tk *tk, const void *arg) {
        const struct want *w = arg;
        return streams_of(tk, w->resource) == w->n;
}

int tk_wait_streams(struct tk *tk, const char *resource, unsigned n, int timeout_ms) {
        struct want w = { resource, n };
        pthread_mutex_lock(&tk->lock);
        int r = wait_until(tk, timeout_ms, streams_pred, &w);
        pthread_mutex_unlock(&tk->lock);
        return r;
}

int tk_wait_lists(struct tk *tk, const char *resource, unsigned n, int timeout_ms,
                  V1beta1__ListAndWatchResponse **ret) {
        struct want w = { resource, n };
        pthread_mutex_lock(&tk->lock);
        int r = wait_until(tk, timeout_ms, lists_pred, &w);
        if (r == 0 && ret) {
                struct tk_plugin *p = plugin_get(tk, resource, false);
                size_t len = v1beta1__list_and_watch_response__get_packed_size(p->latest);
                uint8_t *buf = malloc(len + 1);
                v1beta1__list_and_watch_response__pack(p->latest, buf);
                *ret = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
                free(buf);
        }
        pthread_mutex_unlock(&tk->lock);
        return r;
}

static ProtobufCMessage *copy_msg(const ProtobufCMessage *m) {
        size_t len = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(len + 1);
        protobuf_c_message_pack(m, buf);
        ProtobufCMessage *c = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
        free(buf);
        return c;
}

int tk_last_register(struct tk *tk, const char *resource, V1beta1__RegisterRequest **ret_req,
                     V1beta1__DevicePluginOptions **ret_opts) {
        pthread_mutex_lock(&tk->lock);
        struct tk_plugin *p = plugin_get(tk, resource, false);
        if (!p || !p->last_req) {
                pthread_mutex_unlock(&tk->lock);
                return -ENOENT;
        }
        *ret_req = (V1beta1__RegisterRequest *)copy_msg(&p->last_req->base);
        *ret_opts = (V1beta1__DevicePluginOptions *)copy_msg(&p->last_opts->base);
        pthread_mutex_unlock(&tk->lock);
        return 0;
}

grpc_channel *tk_dial(struct tk *tk, const char *resource) {
        pthread_mutex_lock(&tk->lock);
        struct tk_plugin *p = plugin_get(tk, resource, false);
        grpc_channel *ch = p && p->endpoint ? dp_channel_unix(p->endpoint) : NULL;
        pthread_mutex_unlock(&tk->lock);
        return ch;
}

uint64_t tk_restarted_at_ns(struct tk *tk) {
        pthread_mutex_lock(&tk->lock);
        uint64_t t = tk->restarted_at_ns;
        pthread_mutex_unlock(&tk->lock);
        return t;
}

/* A timestamp of the resource's record, read under the lock; 0 if none. */
static uint64_t plugin_time(struct tk *tk, const char *resource, size_t offset) {
        pthread_mutex_lock(&tk->lock);
        struct tk_plugin *p = plugin_get(tk, resource, false);
        uint64_t t = p ? *(const uint64_t *)((const char *)p + offset) : 0;
        pthread_mutex_unlock(&tk->lock);
        return t;
}

uint64_t tk_registered_at_ns(struct tk *tk, const char *resource) {
        return plugin_time(tk, resource, offsetof(struct tk_plugin, registered_at_ns));
}

uint64_t tk_register_arrived_at_ns(struct tk *tk, const char *resource) {
        return plugin_time(tk, resource, offsetof(struct tk_plugin, arrived_at_ns));
}

uint64_t tk_list_at_ns(struct tk *tk, const char *resource) {
        return plugin_time(tk, resource, offsetof(struct tk_plugin, list_at_ns));
}
