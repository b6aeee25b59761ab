#include "kubelet.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rpc.h"
#include "util.h"

#define TK_MAX_PLUGINS 128

struct tk_stream {
        struct tk *tk;
        struct tk_plugin *plugin;
        grpc_channel *ch;
        grpc_completion_queue *cq;
        grpc_call *call;
        pthread_t thread;
        struct tk_stream *next;
};

struct tk_plugin {
        char *resource;
        char *endpoint;           /* full socket path */
        unsigned registrations;
        unsigned lists;
        unsigned lists_at_register;
        uint64_t registered_at_ns;  /* CLOCK_MONOTONIC of the latest Register */
        uint64_t arrived_at_ns;     /* when that Register's request arrived */
        uint64_t list_at_ns;        /* when the newest list arrived */
        V1beta1__ListAndWatchResponse *latest;
        V1beta1__RegisterRequest *last_req;
        V1beta1__DevicePluginOptions *last_opts;
};

struct tk {
        char *dir;
        char *sock;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        grpc_server *server;
        grpc_completion_queue *cq;
        pthread_t thread;
        struct tk_plugin plugins[TK_MAX_PLUGINS];
        size_t n_plugins;
        struct tk_stream *streams;  /* all streams ever opened, joined on restart */
        uint64_t restarted_at_ns;   /* when the last restart deleted the sockets */
};

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

static void *stream_main(void *arg) {
        struct tk_stream *s = arg;
        struct tk *tk = s->tk;
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        grpc_byte_buffer *send = dp_pack(&empty.base);
        grpc_metadata_array md, trailing;
        grpc_status_code status;
        grpc_slice details;
        grpc_op ops[4];
        int tag;

        grpc_metadata_array_init(&md);
        grpc_metadata_array_init(&trailing);
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_SEND_MESSAGE;
        ops[1].data.send_message.send_message = send;
        ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[3].data.recv_initial_metadata.recv_initial_metadata = &md;
        grpc_call_start_batch(s->call, ops, 4, &tag, NULL);
        grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        for (;;) {
                grpc_byte_buffer *recv = NULL;
                memset(ops, 0, sizeof(ops));
                ops[0].op = GRPC_OP_RECV_MESSAGE;
                ops[0].data.recv_message.recv_message = &recv;
                if (grpc_call_start_batch(s->call, ops, 1, &tag, NULL) != GRPC_CALL_OK)
                        break;
                grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                if (!ev.success || !recv)
                        break;
                ProtobufCMessage *msg = NULL;
                int r = dp_unpack(recv, &v1beta1__list_and_watch_response__descriptor, &msg);
                grpc_byte_buffer_destroy(recv);
                if (r < 0)
                        break;
                pthread_mutex_lock(&tk->lock);
                if (s->plugin->latest)
                        v1beta1__list_and_watch_response__free_unpacked(s->plugin->latest, NULL);
                s->plugin->latest = (V1beta1__ListAndWatchResponse *)msg;
                s->plugin->lists++;
                s->plugin->list_at_ns = now_ns();
                pthread_cond_broadcast(&tk->cond);
                pthread_mutex_unlock(&tk->lock);
        }
        memset(ops, 0, sizeof(ops));
        details = grpc_empty_slice();
        ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        ops[0].data.recv_status_on_client.trailing_metadata = &trailing;
        ops[0].data.recv_status_on_client.status = &status;
        ops[0].data.recv_status_on_client.status_details = &details;
        grpc_call_start_batch(s->call, ops, 1, &tag, NULL);
        grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        grpc_slice_unref(details);
        grpc_metadata_array_destroy(&md);
        grpc_metadata_array_destroy(&trailing);
        grpc_byte_buffer_destroy(send);
        /* A replaced or broken stream gives its connection back at once,
         * as the kubelet closes the old endpoint's client. */
        pthread_mutex_lock(&tk->lock);
        grpc_call_unref(s->call);
        s->call = NULL;
        pthread_mutex_unlock(&tk->lock);
        grpc_channel_destroy(s->ch);
        s->ch = NULL;
        return NULL;
}

/* The stream takes over ch, the connection the kubelet dialed for
 * GetDevicePluginOptions, as the kubelet's client does. */
static void stream_open(struct tk *tk, struct tk_plugin *p, grpc_channel *ch) {
        struct tk_stream *s = calloc(1, sizeof(*s));
        if (!s) {
                grpc_channel_destroy(ch);
                return;
        }
        s->tk = tk;
        s->plugin = p;
        s->ch = ch;
        s->cq = grpc_completion_queue_create_for_next(NULL);
        s->call = grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                           grpc_slice_from_static_string(DP_METHOD_LIST_AND_WATCH), NULL,
                                           gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        s->next = tk->streams;
        tk->streams = s;
        pthread_create(&s->thread, NULL, stream_main, s);
}

/* The device manager's Register: check, dial back, then answer. */
static grpc_status_code handle_register(struct tk *tk, grpc_byte_buffer *buf, uint64_t arrived_ns,
                                        char **ret_msg) {
        ProtobufCMessage *msg = NULL;
        V1beta1__RegisterRequest *req;
        ProtobufCMessage *opts = NULL;
        _cleanup_free_ char *endpoint = NULL;
        grpc_channel *ch;
        grpc_status_code st;

        if (dp_unpack(buf, &v1beta1__register_request__descriptor, &msg) < 0) {
                *ret_msg = strdup("cannot decode RegisterRequest");
                return GRPC_STATUS_INVALID_ARGUMENT;
        }
        req = (V1beta1__RegisterRequest *)msg;
        if (strcmp(req->version, "v1beta1") != 0 || strchr(req->endpoint, '/') || !*req->resource_name) {
                xasprintf(ret_msg, "bad RegisterRequest (version \"%s\", endpoint \"%s\")", req->version,
                          req->endpoint);
                protobuf_c_message_free_unpacked(msg, NULL);
                return GRPC_STATUS_INVALID_ARGUMENT;
        }
        xasprintf(&endpoint, "%s/%s", tk->dir, req->endpoint);
        ch = dp_channel_unix(endpoint);
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        st = dp_call_unary(ch, DP_METHOD_OPTIONS, &empty.base, &v1beta1__device_plugin_options__descriptor,
                           &opts, ret_msg, 5000);
        if (st != GRPC_STATUS_OK) {
                grpc_channel_destroy(ch);
                protobuf_c_message_free_unpacked(msg, NULL);
                return GRPC_STATUS_FAILED_PRECONDITION;
        }

        pthread_mutex_lock(&tk->lock);
        struct tk_plugin *p = plugin_get(tk, req->resource_name, true);
        free(p->endpoint);
        p->endpoint = TAKE_PTR(endpoint);
        if (p->last_req)
                protobuf_c_message_free_unpacked(&p->last_req->base, NULL);
        if (p->last_opts)
                protobuf_c_message_free_unpacked(&p->last_opts->base, NULL);
        p->last_req = req;
        p->last_opts = (V1beta1__DevicePluginOptions *)opts;
        /* Like the kubelet, a new registration replaces the endpoint: the
         * old client's stream is closed. */
        for (struct tk_stream *old = tk->streams; old; old = old->next)
                if (old->plugin == p && old->call)
                        grpc_call_cancel(old->call, NULL);
        p->registrations++;
        p->registered_at_ns = now_ns();
        p->arrived_at_ns = arrived_ns;
        p->lists_at_register = p->lists;
        stream_open(tk, p, ch);
        pthread_cond_broadcast(&tk->cond);
        pthread_mutex_unlock(&tk->lock);
        return GRPC_STATUS_OK;
}

/* One incoming call, handled on its own thread and completion queue, as
 * the kubelet serves each RPC on its own goroutine: 64 plugins registering
 * at once are not queued behind each other's dial-backs. */
struct tk_call {
        struct tk *tk;
        grpc_completion_queue *cq;
        grpc_call *call;
        grpc_call_details details;
        grpc_metadata_array md;
        pthread_t thread;
        struct tk_call *next;
};

static void *call_main(void *arg) {
        struct tk_call *c = arg;
        grpc_byte_buffer *recv = NULL, *send;
        grpc_slice status_details;
        grpc_status_code st;
        _cleanup_free_ char *msg = NULL;
        int cancelled = 0, tag;
        grpc_op ops[4];
        size_t n = 0;

        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_RECV_MESSAGE;
        ops[1].data.recv_message.recv_message = &recv;
        grpc_call_start_batch(c->call, ops, 2, &tag, NULL);
        grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        uint64_t arrived_ns = now_ns();
        if (grpc_slice_str_cmp(c->details.method, DP_METHOD_REGISTER) != 0)
                st = GRPC_STATUS_UNIMPLEMENTED;
        else
                st = handle_register(c->tk, recv, arrived_ns, &msg);
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        send = dp_pack(&empty.base);
        status_details = grpc_slice_from_copied_string(msg ? msg : "");
        memset(ops, 0, sizeof(ops));
        if (st == GRPC_STATUS_OK) {
                ops[n].op = GRPC_OP_SEND_MESSAGE;
                ops[n++].data.send_message.send_message = send;
        }
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = st;
        ops[n++].data.send_status_from_server.status_details = &status_details;
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &cancelled;
        grpc_call_start_batch(c->call, ops, n, &tag, NULL);
        grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        grpc_slice_unref(status_details);
        grpc_byte_buffer_destroy(send);
        if (recv)
                grpc_byte_buffer_destroy(recv);
        return NULL;
}

static void call_free(struct tk_call *c) {
        pthread_join(c->thread, NULL);
        grpc_call_unref(c->call);
        grpc_call_details_destroy(&c->details);
        grpc_metadata_array_destroy(&c->md);
        dp_cq_destroy(c->cq);
        free(c);
}

static void *server_main(void *arg) {
        struct tk *tk = arg;
        struct tk_call *calls = NULL;

        for (;;) {
                struct tk_call *c = calloc(1, sizeof(*c));
                grpc_event ev;

                c->tk = tk;
                c->cq = grpc_completion_queue_create_for_next(NULL);
                grpc_call_details_init(&c->details);
                grpc_metadata_array_init(&c->md);
                grpc_server_request_call(tk->server, &c->call, &c->details, &c->md, c->cq, tk->cq, c);
                do
                        ev = grpc_completion_queue_next(tk->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                while (ev.type == GRPC_OP_COMPLETE && ev.tag != c); /* the shutdown tag */
                if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
                        grpc_call_details_destroy(&c->details);
                        grpc_metadata_array_destroy(&c->md);
                        dp_cq_destroy(c->cq);
                        free(c);
                        break;
                }
                c->next = calls;
                calls = c;
                pthread_create(&c->thread, NULL, call_main, c);
        }
        while (calls) {
                struct tk_call *next = calls->next;
                call_free(calls);
                calls = next;
        }
        return NULL;
}

static int serve(struct tk *tk) {
        _cleanup_free_ char *addr = NULL;
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();

        xasprintf(&addr, "unix:%s", tk->sock);
        tk->cq = grpc_completion_queue_create_for_next(NULL);
        tk->server = grpc_server_create(NULL, NULL);
        grpc_server_register_completion_queue(tk->server, tk->cq, NULL);
        int port = grpc_server_add_http2_port(tk->server, addr, creds);
        grpc_server_credentials_release(creds);
        if (!port)
                return -EADDRNOTAVAIL;
        grpc_server_start(tk->server);
        pthread_create(&tk->thread, NULL, server_main, tk);
        return 0;
}

static void unserve(struct tk *tk) {
        int tag;
        grpc_server_shutdown_and_notify(tk->server, tk->cq, &tag);
        grpc_server_cancel_all_calls(tk->server);
        pthread_join(tk->thread, NULL);
        grpc_completion_queue_shutdown(tk->cq);
        while (grpc_completion_queue_next(tk->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
                ;
        grpc_server_destroy(tk->server);
        grpc_completion_queue_destroy(tk->cq);
        tk->server = NULL;
        tk->cq = NULL;
}

/* A kubelet that goes away takes every stream with it. */
static void streams_close(struct tk *tk) {
        pthread_mutex_lock(&tk->lock);
        struct tk_stream *s = TAKE_PTR(tk->streams);
        pthread_mutex_unlock(&tk->lock);
        while (s) {
                struct tk_stream *next = s->next;
                pthread_mutex_lock(&tk->lock);
                if (s->call)
                        grpc_call_cancel(s->call, NULL);
                pthread_mutex_unlock(&tk->lock);
                pthread_join(s->thread, NULL);
                dp_cq_destroy(s->cq);
                free(s);
                s = next;
        }
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
                if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
                        unlinkat(dirfd(dir), de->d_name, 0);
        }
        closedir(dir);
}

int tk_start(const char *dir, struct tk **ret) {
        struct tk *tk = calloc(1, sizeof(*tk));
        pthread_condattr_t attr;

        if (!tk)
                return -ENOMEM;
        grpc_init();
        tk->dir = strdup(dir);
        xasprintf(&tk->sock, "%s/kubelet.sock", dir);
        pthread_mutex_init(&tk->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&tk->cond, &attr);
        mkdir(dir, 0755);
        unlink(tk->sock);
        int r = serve(tk);
        if (r < 0) {
                tk_stop(tk);
                return r;
        }
        *ret = tk;
        return 0;
}

int tk_restart(struct tk *tk, bool sock_first) {
        unserve(tk);
        streams_close(tk);
        tk->restarted_at_ns = now_ns();
        if (sock_first) {
                unlink(tk->sock);
                int r = serve(tk);
                delete_sockets(tk, true);
                return r;
        }
        delete_sockets(tk, false);
        return serve(tk);
}

void tk_stop(struct tk *tk) {
        if (!tk)
                return;
        if (tk->server)
                unserve(tk);
        streams_close(tk);
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
static int wait_until(struct tk *tk, int timeout_ms, bool (*pred)(struct tk *, const void *), const void *arg) {
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
        struct want w = {resource, count};
        pthread_mutex_lock(&tk->lock);
        int r = wait_until(tk, timeout_ms, registered_pred, &w);
        pthread_mutex_unlock(&tk->lock);
        return r;
}

int tk_wait_lists(struct tk *tk, const char *resource, unsigned n, int timeout_ms,
                  V1beta1__ListAndWatchResponse **ret) {
        struct want w = {resource, n};
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
