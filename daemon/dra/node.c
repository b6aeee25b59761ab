/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA driver's grpc server: one server on the daemon's completion
 * queue for both sockets, as server.c does for each resource. The kubelet
 * finds the driver through its plugin registry: it watches plugins_registry,
 * calls GetInfo on every new socket there, dials the endpoint GetInfo
 * names and tells the plugin with NotifyRegistrationStatus whether it took
 * it. It does not call GetInfo again: the registration stands until the
 * socket goes or the kubelet restarts. */
#include <errno.h>
#include <fcntl.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "dra-node-internal.h"
#include "log.h"
#include "pluginregistration.pb-c.h"

#define CALL_OF(t, member) ((struct dra_call *)((char *)(t)-offsetof(struct dra_call, member)))

/* The gRPC services served as "<package>.<service>": the DRAPlugin
 * versions newest first (the kubelet takes the first one it knows), then
 * the optional health service in both versions, named as the kubelet and
 * upstream's plugin helper name them. Kubelets from 1.37 open a health
 * stream only when GetInfo lists one; older ones open v1alpha1 whatever
 * is listed. */
static const char *const supported_versions[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin",
                                                  "v1.DRAResourceHealth",
                                                  "v1alpha1.DRAResourceHealth" };

static void on_call(struct dp_daemon *d, struct dp_tag *tag, bool ok);

static void dra_node_freep(struct dra_node **n) {
        dra_node_free(*n);
}

static void message_freep(ProtobufCMessage **m) {
        if (*m)
                protobuf_c_message_free_unpacked(*m, NULL);
}

static int mkdir_one(const char *path, mode_t mode) {
        if (mkdir(path, mode) < 0 && errno != EEXIST) {
                int r = -errno;
                log_with(LOG_ERR, &(struct log_fields){ .path = path, .err = -r },
                         "dra: cannot create %s: %s", path, strerror(-r));
                return r;
        }
        return 0;
}

/* The kubelet root exists on any node; what is below it may not yet (a
 * kubelet that never ran a DRA driver). The registry dir is the kubelet's
 * and others' too: 0750 as the kubelet makes it. The plugin dir is ours
 * alone: 0700. */
static int make_dirs(struct dra_node *n) {
        _cleanup_free_ char *plugins = NULL;
        int r = xasprintf(&plugins, "%s/plugins", n->plugin_dir);

        if (r < 0)
                return r;
        /* plugins is "<root>/plugins/<driver>/plugins": cut to <root>/plugins. */
        *strrchr(plugins, '/') = '\0';
        *strrchr(plugins, '/') = '\0';
        r = mkdir_one(n->registry_dir, 0750);
        if (r >= 0)
                r = mkdir_one(plugins, 0750);
        if (r >= 0)
                r = mkdir_one(n->plugin_dir, 0700);
        return r;
}

int dra_node_new(const struct dra_node_settings *s, struct dra_node **ret) {
        _cleanup_(dra_node_freep) struct dra_node *n = calloc(1, sizeof(*n));
        int r;

        if (!n)
                return -ENOMEM;
        n->reg_fd = n->dra_fd = n->dir_fd = n->lock_fd = -1;
        n->lookup = s->lookup;
        n->lookup_ctx = s->lookup_ctx;
        n->cancel = s->cancel;
        n->lock = s->lock;
        n->lookup_timeout_ms = s->lookup_timeout_ms ? s->lookup_timeout_ms : 40000;
        n->deadline_set = s->deadline_set;
        n->deadline_ctx = s->deadline_ctx;
        n->registered = s->registered;
        n->driver = strdup(s->driver);
        if (!n->driver)
                return -ENOMEM;
        struct dra_socket_paths p;
        _cleanup_free_ char *msg = NULL;
        r = dra_socket_paths(s->kubelet_root, s->driver, s->instance, &p, &msg);
        if (r == -ENAMETOOLONG)
                log_with(LOG_ERR, &(struct log_fields){ .path = s->kubelet_root, .err = -r },
                         "dra: %s", msg ? msg : strerror(-r));
        if (r < 0)
                return r;
        n->registry_dir = p.registry_dir;
        n->registry_name = p.registry_name;
        n->registry_path = p.registry_path;
        n->plugin_dir = p.plugin_dir;
        n->endpoint = p.endpoint;
        r = make_dirs(n);
        if (r < 0)
                return r;
        n->dir_fd = open(n->plugin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (n->dir_fd < 0) {
                r = -errno;
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot open %s: %s", n->plugin_dir, strerror(-r));
                return r;
        }
        r = dra_checkpoint_open(n);
        if (r >= 0)
                r = dra_checkpoint_load(n);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(n);
        return 0;
}

/* Whether a socket at path answers a connect: another instance's, live
 * (a rolling update without POD_UID shares the names), and not a dead
 * run's leftover. */
static bool socket_answers(const struct sockaddr_un *sa) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        return fd >= 0 && (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ||
                           errno == EAGAIN || errno == EINPROGRESS);
}

/* Bound under its final name and listening at once, as upstream's helper
 * does (net.Listen): the kubelet's plugin watcher stats every name it is
 * told of, and a temporary name renamed away is gone by then (an error
 * line in its log); it dials only later, from its reconciler. Only a live
 * socket of another instance under the name is replaced atomically, by a
 * hidden name (the watcher skips names starting with '.') renamed over it:
 * unlinked, that instance would see its socket go and make it again. */
static int listen_on(const char *path, int *ret_fd, struct base_owned *ret_id) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *tmp = NULL;
        const char *base = strrchr(path, '/');
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (socket_answers(&sa)) {
                /* ".<name less .sock>.t": shorter than the name itself, so
                 * what fits sun_path as named fits as bound (dra_socket_paths). */
                r = xasprintf(&tmp, "%.*s/.%.*s.t", (int)(base - path), path,
                              (int)(strlen(base + 1) - strlen(".sock")), base + 1);
                if (r < 0)
                        return r;
                if (strlen(tmp) >= sizeof(sa.sun_path))
                        return -ENAMETOOLONG;
                memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
        }
        /* Left by an earlier run: bind would fail. The names are ours. */
        if (unlink(sa.sun_path) < 0 && errno != ENOENT)
                log_with(LOG_WARN, &(struct log_fields){ .path = sa.sun_path, .err = errno },
                         "dra: cannot remove stale socket %s: %m", sa.sun_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
            base_owned_id(sa.sun_path, ret_id) < 0 || (tmp && rename(tmp, path) < 0)) {
                r = -errno;
                log_with(LOG_ERR, &(struct log_fields){ .path = path, .err = -r },
                         "dra: cannot listen on %s: %s", path, strerror(-r));
                if (fd >= 0)
                        close(fd);
                if (tmp)
                        (void)unlink(tmp);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

static int request_next(struct dra_node *n) {
        struct dra_call *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->n = n;
        c->tag.fn = on_call;
        if (dp_server_call_request(n->server, n->cq, &c->sc, &c->tag) < 0) {
                free(c);
                return -EIO;
        }
        n->live++;
        return 0;
}

static grpc_status_code get_info(struct dra_call *c) {
        Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;

        info.type = (char *)"DRAPlugin";
        info.name = c->n->driver;
        info.endpoint = c->n->endpoint;
        info.supported_versions = (char **)supported_versions;
        info.n_supported_versions = ELEMENTSOF(supported_versions);
        c->sc.send = dp_pack(&info.base);
        return c->sc.send ? GRPC_STATUS_OK : GRPC_STATUS_RESOURCE_EXHAUSTED;
}

/* The kubelet's verdict. It has already dialled the endpoint when it
 * accepts, and a refusal (another plugin of the same name, a version it
 * does not know) is worth an error line each time: nothing will work. */
static grpc_status_code notify(struct dra_call *c, const ProtobufCMessage *msg) {
        const Pluginregistration__RegistrationStatus *st =
                (const Pluginregistration__RegistrationStatus *)msg;
        Pluginregistration__RegistrationStatusResponse resp =
                PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
        struct dra_node *n = c->n;

        if (st->plugin_registered) {
                if (!n->accepted)
                        log_with(LOG_INFO, &(struct log_fields){ .path = n->endpoint },
                                 "dra: the kubelet registered driver \"%s\" at %s", n->driver,
                                 n->endpoint);
                n->accepted = true;
        } else {
                n->accepted = false;
                log_with(LOG_ERR, &(struct log_fields){ .path = n->registry_path },
                         "dra: the kubelet refused driver \"%s\": %.1024s", n->driver,
                         st->error && *st->error ? st->error : "(no reason given)");
        }
        if (n->registered)
                n->registered(n->deadline_ctx, n->accepted);
        c->sc.send = dp_pack(&resp.base);
        return c->sc.send ? GRPC_STATUS_OK : GRPC_STATUS_RESOURCE_EXHAUSTED;
}

bool dra_node_accepted(const struct dra_node *n) {
        return n->accepted;
}

/* Decode, answer: the gRPC status. */
static grpc_status_code answer(struct dra_call *c, const char *method, char **ret_msg) {
        const ProtobufCMessageDescriptor *desc;
        _cleanup_(message_freep) ProtobufCMessage *req = NULL;
        int r;

        if (strcmp(method, DRA_METHOD_GET_INFO) == 0)
                desc = &pluginregistration__info_request__descriptor;
        else if (strcmp(method, DRA_METHOD_NOTIFY) == 0)
                desc = &pluginregistration__registration_status__descriptor;
        else {
                xasprintf(ret_msg, "unknown method %.100s", method);
                return GRPC_STATUS_UNIMPLEMENTED;
        }
        r = dp_unpack(c->sc.recv, desc, &req);
        if (r < 0) {
                xasprintf(ret_msg, "cannot decode %s: %s", desc->name, strerror(-r));
                return dp_status_from_errno(r);
        }
        if (desc == &pluginregistration__info_request__descriptor)
                return get_info(c);
        return notify(c, req);
}

static void on_recv(struct dra_call *c) {
        _cleanup_free_ char *method = NULL, *msg = NULL;
        grpc_status_code st;

        method = strndup((const char *)GRPC_SLICE_START_PTR(c->sc.details.method),
                         GRPC_SLICE_LENGTH(c->sc.details.method));
        if (!method) {
                dra_call_finish(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        if (strcmp(method, DRA_METHOD_HEALTH_V1ALPHA1) == 0 ||
            strcmp(method, DRA_METHOD_HEALTH_V1) == 0) {
                dra_health_open(c);
                return;
        }
        if (dra_prepare_method(c, method))
                return;
        st = answer(c, method, &msg);
        if (st != GRPC_STATUS_OK)
                log_with(LOG_WARN, &(struct log_fields){ .path = "" }, "dra: %s refused: %s",
                         method, msg ? msg : "out of memory");
        dra_call_finish(c, st, msg);
}

static void on_call(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dra_call *c = CALL_OF(tag, tag);
        struct dra_node *n = c->n;
        grpc_op op;

        (void)d;
        switch (c->phase) {
        case DRA_NEW:
                if (!ok) { /* the server is shutting down */
                        dra_call_free(c);
                        return;
                }
                if (n->up && request_next(n) < 0)
                        log_error("dra: cannot accept further calls: out of memory");
                memset(&op, 0, sizeof(op));
                op.op = GRPC_OP_RECV_MESSAGE;
                op.data.recv_message.recv_message = &c->sc.recv;
                c->phase = DRA_RECV;
                if (grpc_call_start_batch(c->sc.call, &op, 1, &c->tag, NULL) != GRPC_CALL_OK)
                        dra_call_free(c);
                return;
        case DRA_RECV:
                if (!ok) {
                        dra_call_free(c);
                        return;
                }
                on_recv(c);
                return;
        case DRA_FINISH:
                dra_call_free(c);
                return;
        }
}

static void on_shutdown(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dra_node *n =
                (struct dra_node *)((char *)tag - offsetof(struct dra_node, shutdown_tag));

        (void)d;
        (void)ok;
        grpc_server_destroy(n->server);
        n->server = NULL;
        n->stopping = false;
        n->live--;
}

int dra_node_start(struct dra_node *n, grpc_completion_queue *cq) {
        grpc_arg args[] = {
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                  .value.integer = DP_MAX_MESSAGE },
                { .type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_ENABLE_CHANNELZ,
                  .value.integer = 0 },
        };
        grpc_channel_args cargs = { .num_args = ELEMENTSOF(args), .args = args };
        int r;

        if (n->server)
                return 0;
        n->cq = cq;
        n->server = grpc_server_create(&cargs, NULL);
        grpc_server_register_completion_queue(n->server, cq, NULL);
        grpc_server_start(n->server);
        n->shutdown_tag.fn = on_shutdown;
        n->live++;
        n->up = true;
        r = request_next(n);
        /* The DRA socket first: the kubelet dials the endpoint GetInfo
         * names as soon as it sees the registry socket. */
        if (r >= 0)
                r = listen_on(n->endpoint, &n->dra_fd, &n->dra_id);
        if (r >= 0)
                r = listen_on(n->registry_path, &n->reg_fd, &n->reg_id);
        if (r < 0) {
                dra_node_stop(n);
                return r;
        }
        log_with(LOG_INFO, &(struct log_fields){ .path = n->registry_path },
                 "dra: driver \"%s\" serving on %s, registering through %s", n->driver, n->endpoint,
                 n->registry_path);
        return 0;
}

int dra_node_relisten(struct dra_node *n) {
        struct stat st;

        if (!n->up)
                return 0;
        if (n->reg_fd >= 0 && stat(n->registry_path, &st) == 0)
                return 0;
        if (n->reg_fd >= 0)
                close(n->reg_fd);
        n->reg_fd = -1;
        int r = listen_on(n->registry_path, &n->reg_fd, &n->reg_id);
        if (r >= 0)
                log_with(LOG_INFO, &(struct log_fields){ .path = n->registry_path },
                         "dra: registry socket %s re-created", n->registry_path);
        return r;
}

const char *dra_node_registry_dir(const struct dra_node *n) {
        return n->registry_dir;
}

const char *dra_node_registry_name(const struct dra_node *n) {
        return n->registry_name;
}

const char *dra_node_registry_path(const struct dra_node *n) {
        return n->registry_path;
}

const char *dra_node_endpoint(const struct dra_node *n) {
        return n->endpoint;
}

void dra_node_poll_fds(const struct dra_node *n, int ret[2]) {
        ret[0] = n->reg_fd;
        ret[1] = n->dra_fd;
}

void dra_node_accept(struct dra_node *n, int lfd) {
        if (!n->up || (lfd != n->reg_fd && lfd != n->dra_fd))
                return;
        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno != EAGAIN)
                                log_with(LOG_WARN, &(struct log_fields){ .err = errno },
                                         "dra: accept: %m; continuing");
                        return;
                }
                grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
                /* grpc owns fd from here. */
                grpc_server_add_channel_from_fd(n->server, fd, creds);
                grpc_server_credentials_release(creds);
        }
}

/* Only the socket this process bound is removed: with the same names
 * (no POD_UID), a newer instance's socket may stand at the path now. */
static void unlisten(int *fd, const char *path, struct base_owned *id) {
        int r;

        if (*fd < 0)
                return;
        close(*fd);
        *fd = -1;
        r = base_owned_unlink(path, id);
        if (r == -ESTALE)
                log_with(LOG_INFO, &(struct log_fields){ .path = path },
                         "dra: %s is another instance's socket now; left in place", path);
        else if (r < 0 && r != -ENOENT)
                log_with(LOG_WARN, &(struct log_fields){ .path = path, .err = -r },
                         "dra: cannot remove %s: %s", path, strerror(-r));
}

void dra_node_stop(struct dra_node *n) {
        dra_prepare_stop(n);
        /* The registry socket first: the kubelet stops dialling us. */
        unlisten(&n->reg_fd, n->registry_path, &n->reg_id);
        unlisten(&n->dra_fd, n->endpoint, &n->dra_id);
        if (!n->up)
                return;
        n->up = false;
        n->stopping = true;
        grpc_server_shutdown_and_notify(n->server, n->cq, &n->shutdown_tag);
        dra_health_end_all(n);
        /* The streams' statuses go first; a unary call whose request never
         * came ends now. */
        if (!dra_health_ending(n))
                grpc_server_cancel_all_calls(n->server);
}

bool dra_node_done(const struct dra_node *n) {
        return n->live == 0;
}

void dra_node_free(struct dra_node *n) {
        if (!n)
                return;
        if (n->reg_fd >= 0)
                close(n->reg_fd);
        if (n->dra_fd >= 0)
                close(n->dra_fd);
        if (n->dir_fd >= 0)
                close(n->dir_fd);
        dra_health_free(n);
        dra_prepare_free(n);
        if (n->lock_fd >= 0)
                close(n->lock_fd);
        free(n->ck_error);
        free(n->driver);
        free(n->registry_dir);
        free(n->registry_name);
        free(n->registry_path);
        free(n->plugin_dir);
        free(n->endpoint);
        free(n);
}
