/* SPDX-License-Identifier: Apache-2.0 */
#include "kubelet.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dra_health_v1.pb-c.h"
#include "dra_health_v1alpha1.pb-c.h"
#include "dra_v1beta1.pb-c.h"
#include "log.h"
#include "rpc.h"

#define TK_DRA_MAX 16
#define TK_DRA_CALL_MS 5000

struct tk_dra_driver {
        char *name;
        char *reg_path;   /* the registry socket it came through */
        grpc_channel *ch; /* to its endpoint */
        Pluginregistration__PluginInfo *info;
        unsigned registrations;
        uint64_t notified_ns; /* CLOCK_MONOTONIC as the latest Notify was sent */
        /* Channels of earlier registrations: a call another thread made on
         * one may still run (the kubelet lets a call to the old instance
         * of a rolling update finish), so they go only at tk_dra_stop. */
        grpc_channel **retired;
        size_t n_retired;
};

struct tk_dra {
        char *dir; /* root/plugins_registry */
        int ino, wd, stop_fd;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        char *refuse; /* NULL: accept */
        struct tk_dra_driver drivers[TK_DRA_MAX];
        size_t n_drivers;
};

struct tk_dra_health {
        grpc_completion_queue *cq;
        grpc_call *call;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool alpha;
        grpc_byte_buffer *send, *recv;
        grpc_metadata_array md, trailing;
        grpc_status_code status;
        grpc_slice details;
        unsigned lists;
        char *latest;
        bool ended;
        /* The kubelet's health cache for this driver: every device heard
         * of, with when it was last reported (its own clock, as the
         * kubelet stamps a report when it arrives). */
        struct tk_health_entry *cache;
        size_t n_cache;
};

struct tk_health_entry {
        char *key; /* "pool/device" */
        int health;
        int64_t timeout_s;
        char *message;
        struct timespec at; /* CLOCK_MONOTONIC */
};

static struct timespec deadline_in(int timeout_ms) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

static struct tk_dra_driver *driver_get(struct tk_dra *k, const char *name, bool create) {
        for (size_t i = 0; i < k->n_drivers; i++)
                if (strcmp(k->drivers[i].name, name) == 0)
                        return &k->drivers[i];
        if (!create || k->n_drivers == TK_DRA_MAX)
                return NULL;
        struct tk_dra_driver *d = &k->drivers[k->n_drivers];
        d->name = strdup(name);
        if (!d->name)
                return NULL;
        k->n_drivers++;
        return d;
}

static void retire(struct tk_dra_driver *d, grpc_channel *ch) {
        grpc_channel **more = realloc(d->retired, (d->n_retired + 1) * sizeof(*more));

        if (!more)
                abort();
        d->retired = more;
        d->retired[d->n_retired++] = ch;
}

/* What the kubelet's plugin watcher does with one new socket. */
static void register_socket(struct tk_dra *k, const char *name) {
        _cleanup_free_ char *path = NULL, *details = NULL, *refuse = NULL;
        Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
        Pluginregistration__RegistrationStatus st = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
        Pluginregistration__PluginInfo *info = NULL;
        grpc_channel *reg, *ch;
        grpc_status_code s;

        if (name[0] == '.' || xasprintf(&path, "%s/%s", k->dir, name) < 0)
                return;
        /* The kubelet dials the registry socket blocking (grpc WithBlock,
         * up to its dial timeout): a socket seen at bind, before its
         * listen, is dialled again until it answers, not dropped. A
         * fresh channel each time, as grpc's reconnect back-off would wait
         * a second. */
        for (int tries = 0;; tries++) {
                reg = dp_channel_unix(path);
                if (!reg)
                        return;
                s = dp_call_unary(reg, "/pluginregistration.Registration/GetInfo", &req.base,
                                  &pluginregistration__plugin_info__descriptor,
                                  (ProtobufCMessage **)&info, &details, TK_DRA_CALL_MS);
                if (s != GRPC_STATUS_UNAVAILABLE || tries >= TK_DRA_CALL_MS || access(path, F_OK))
                        break;
                grpc_channel_destroy(reg);
                free(details);
                details = NULL;
                nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
        }
        if (s != GRPC_STATUS_OK || !info) {
                fprintf(stderr, "tk_dra: GetInfo on %s: status %d %s\n", path, s,
                        details ? details : "");
                grpc_channel_destroy(reg);
                return;
        }
        ch = dp_channel_unix(info->endpoint);
        pthread_mutex_lock(&k->lock);
        if (k->refuse)
                refuse = strdup(k->refuse);
        pthread_mutex_unlock(&k->lock);
        /* The kubelet refuses what it cannot use; a test can make it
         * refuse anything. */
        if (strcmp(info->type, "DRAPlugin") != 0 && !refuse)
                refuse = strdup("unknown plugin type");
        st.plugin_registered = !refuse;
        st.error = refuse ? refuse : (char *)"";
        free(details);
        details = NULL;
        struct timespec sent;
        clock_gettime(CLOCK_MONOTONIC, &sent);
        s = dp_call_unary(reg, "/pluginregistration.Registration/NotifyRegistrationStatus",
                          &st.base, &pluginregistration__registration_status_response__descriptor,
                          NULL, &details, TK_DRA_CALL_MS);
        grpc_channel_destroy(reg);
        if (s != GRPC_STATUS_OK)
                fprintf(stderr, "tk_dra: NotifyRegistrationStatus on %s: status %d %s\n", path, s,
                        details ? details : "");
        pthread_mutex_lock(&k->lock);
        struct tk_dra_driver *d = driver_get(k, info->name, true);
        if (d) {
                if (d->info)
                        pluginregistration__plugin_info__free_unpacked(d->info, NULL);
                if (d->ch)
                        retire(d, d->ch);
                free(d->reg_path);
                d->info = info;
                d->ch = ch;
                d->reg_path = TAKE_PTR(path);
                info = NULL;
                ch = NULL;
                d->registrations++;
                d->notified_ns = (uint64_t)sent.tv_sec * 1000000000u + (uint64_t)sent.tv_nsec;
        }
        pthread_cond_broadcast(&k->cond);
        pthread_mutex_unlock(&k->lock);
        if (info)
                pluginregistration__plugin_info__free_unpacked(info, NULL);
        if (ch)
                grpc_channel_destroy(ch);
}

static void scan(struct tk_dra *k) {
        DIR *dir = opendir(k->dir);
        struct dirent *e;

        if (!dir)
                return;
        while ((e = readdir(dir)))
                if (e->d_type == DT_SOCK)
                        register_socket(k, e->d_name);
        closedir(dir);
}

static void *watch_thread(void *arg) {
        struct tk_dra *k = arg;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

        scan(k);
        for (;;) {
                struct pollfd fds[2] = { { .fd = k->ino, .events = POLLIN },
                                         { .fd = k->stop_fd, .events = POLLIN } };
                if (poll(fds, 2, -1) < 0 && errno != EINTR)
                        return NULL;
                if (fds[1].revents)
                        return NULL;
                ssize_t len = read(k->ino, buf, sizeof(buf));
                for (ssize_t off = 0; off < len;) {
                        const struct inotify_event *ev = (const void *)(buf + off);
                        off += (ssize_t)(sizeof(*ev) + ev->len);
                        if (ev->len && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                                register_socket(k, ev->name);
                }
        }
}

int tk_dra_start(const char *root, struct tk_dra **ret) {
        struct tk_dra *k = calloc(1, sizeof(*k));

        if (!k)
                return -ENOMEM;
        if (xasprintf(&k->dir, "%s/plugins_registry", root) < 0) {
                free(k);
                return -ENOMEM;
        }
        (void)mkdir(root, 0755);
        (void)mkdir(k->dir, 0750);
        /* Its own reference: a test may run it without tk_start. */
        dp_grpc_init();
        pthread_mutex_init(&k->lock, NULL);
        pthread_cond_init(&k->cond, NULL);
        k->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        k->stop_fd = eventfd(0, EFD_CLOEXEC);
        k->wd = k->ino < 0 ? -1 : inotify_add_watch(k->ino, k->dir, IN_CREATE | IN_MOVED_TO);
        if (k->wd < 0 || k->stop_fd < 0 || pthread_create(&k->thread, NULL, watch_thread, k)) {
                int r = -errno;
                if (k->ino >= 0)
                        close(k->ino);
                if (k->stop_fd >= 0)
                        close(k->stop_fd);
                free(k->dir);
                free(k);
                grpc_shutdown();
                return r ? r : -EIO;
        }
        *ret = k;
        return 0;
}

void tk_dra_stop(struct tk_dra *k) {
        uint64_t one = 1;

        if (!k)
                return;
        if (write(k->stop_fd, &one, sizeof(one)) != sizeof(one))
                abort();
        pthread_join(k->thread, NULL);
        for (size_t i = 0; i < k->n_drivers; i++) {
                struct tk_dra_driver *d = &k->drivers[i];
                if (d->info)
                        pluginregistration__plugin_info__free_unpacked(d->info, NULL);
                if (d->ch)
                        grpc_channel_destroy(d->ch);
                for (size_t j = 0; j < d->n_retired; j++)
                        grpc_channel_destroy(d->retired[j]);
                free(d->retired);
                free(d->reg_path);
                free(d->name);
        }
        close(k->ino);
        close(k->stop_fd);
        pthread_mutex_destroy(&k->lock);
        pthread_cond_destroy(&k->cond);
        free(k->refuse);
        free(k->dir);
        free(k);
        grpc_shutdown();
}

void tk_dra_refuse(struct tk_dra *k, const char *reason) {
        pthread_mutex_lock(&k->lock);
        free(k->refuse);
        k->refuse = reason ? strdup(reason) : NULL;
        pthread_mutex_unlock(&k->lock);
}

unsigned tk_dra_registrations(struct tk_dra *k, const char *driver) {
        pthread_mutex_lock(&k->lock);
        struct tk_dra_driver *d = driver_get(k, driver, false);
        unsigned n = d ? d->registrations : 0;
        pthread_mutex_unlock(&k->lock);
        return n;
}

uint64_t tk_dra_notified_ns(struct tk_dra *k, const char *driver) {
        pthread_mutex_lock(&k->lock);
        struct tk_dra_driver *d = driver_get(k, driver, false);
        uint64_t ns = d ? d->notified_ns : 0;
        pthread_mutex_unlock(&k->lock);
        return ns;
}

int tk_dra_wait_registered(struct tk_dra *k, const char *driver, unsigned count, int timeout_ms) {
        struct timespec until = deadline_in(timeout_ms);
        int r = 0;

        pthread_mutex_lock(&k->lock);
        for (;;) {
                struct tk_dra_driver *d = driver_get(k, driver, false);
                if (d && d->registrations >= count)
                        break;
                if (pthread_cond_timedwait(&k->cond, &k->lock, &until) == ETIMEDOUT) {
                        r = -ETIMEDOUT;
                        break;
                }
        }
        pthread_mutex_unlock(&k->lock);
        return r;
}

static Pluginregistration__PluginInfo *info_copy(const Pluginregistration__PluginInfo *info) {
        size_t len = pluginregistration__plugin_info__get_packed_size(info);
        _cleanup_free_ uint8_t *buf = malloc(len + 1);

        if (!buf)
                return NULL;
        pluginregistration__plugin_info__pack(info, buf);
        return pluginregistration__plugin_info__unpack(NULL, len, buf);
}

int tk_dra_info(struct tk_dra *k, const char *driver, Pluginregistration__PluginInfo **ret) {
        int r = -ENOENT;

        pthread_mutex_lock(&k->lock);
        struct tk_dra_driver *d = driver_get(k, driver, false);
        if (d && d->info) {
                *ret = info_copy(d->info);
                r = *ret ? 0 : -ENOMEM;
        }
        pthread_mutex_unlock(&k->lock);
        return r;
}

bool tk_dra_advertises(struct tk_dra *k, const char *driver, const char *service) {
        bool yes = false;

        pthread_mutex_lock(&k->lock);
        struct tk_dra_driver *d = driver_get(k, driver, false);
        for (size_t i = 0; d && d->info && i < d->info->n_supported_versions && !yes; i++)
                yes = strcmp(d->info->supported_versions[i], service) == 0;
        pthread_mutex_unlock(&k->lock);
        return yes;
}

grpc_status_code tk_dra_probe(struct tk_dra *k, const char *driver,
                              Pluginregistration__PluginInfo **ret) {
        Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
        _cleanup_free_ char *path = NULL;
        grpc_status_code s;
        grpc_channel *ch;

        pthread_mutex_lock(&k->lock);
        struct tk_dra_driver *d = driver_get(k, driver, false);
        if (d && d->reg_path)
                path = strdup(d->reg_path);
        pthread_mutex_unlock(&k->lock);
        if (!path)
                return GRPC_STATUS_NOT_FOUND;
        ch = dp_channel_unix(path);
        if (!ch)
                return GRPC_STATUS_INTERNAL;
        s = dp_call_unary(ch, "/pluginregistration.Registration/GetInfo", &req.base,
                          &pluginregistration__plugin_info__descriptor, (ProtobufCMessage **)ret,
                          NULL, TK_DRA_CALL_MS);
        grpc_channel_destroy(ch);
        return s;
}

grpc_channel *tk_dra_channel(struct tk_dra *k, const char *driver) {
        pthread_mutex_lock(&k->lock);
        struct tk_dra_driver *d = driver_get(k, driver, false);
        grpc_channel *ch = d ? d->ch : NULL;
        pthread_mutex_unlock(&k->lock);
        return ch;
}

int tk_dra_restart(struct tk_dra *k) {
        DIR *dir = opendir(k->dir);
        struct dirent *e;
        int r = 0;

        if (!dir)
                return -errno;
        while ((e = readdir(dir)))
                if (e->d_type == DT_SOCK && unlinkat(dirfd(dir), e->d_name, 0) < 0)
                        r = -errno;
        closedir(dir);
        return r;
}

/* Health streams: one thread and completion queue each, reading until the
 * stream ends. */

enum { H_OPEN = 1, H_RECV, H_STATUS };

static char *summary(struct tk_dra_health *h) {
        ProtobufCMessage *m = NULL;
        const ProtobufCMessageDescriptor *desc =
                h->alpha ? &v1alpha1__node_watch_resources_response__descriptor
                         : &v1__node_watch_resources_response__descriptor;
        char *out = NULL;
        size_t len = 0;
        FILE *f;

        if (dp_unpack(h->recv, desc, &m) < 0)
                return strdup("(undecodable)");
        f = open_memstream(&out, &len);
        if (!f) {
                protobuf_c_message_free_unpacked(m, NULL);
                return NULL;
        }
        /* The two versions are the same fields: read each through its own
         * generated type, so a difference would show. */
        if (h->alpha) {
                const V1alpha1__NodeWatchResourcesResponse *r = (const void *)m;
                for (size_t i = 0; i < r->n_devices; i++)
                        fprintf(f, "%s%s/%s=%s", i ? "," : "", r->devices[i]->device->pool_name,
                                r->devices[i]->device->device_name,
                                r->devices[i]->health == V1ALPHA1__HEALTH_STATUS__HEALTHY
                                        ? "HEALTHY"
                                : r->devices[i]->health == V1ALPHA1__HEALTH_STATUS__UNHEALTHY
                                        ? "UNHEALTHY"
                                        : "UNKNOWN");
        } else {
                const V1__NodeWatchResourcesResponse *r = (const void *)m;
                for (size_t i = 0; i < r->n_devices; i++)
                        fprintf(f, "%s%s/%s=%s", i ? "," : "", r->devices[i]->device->pool_name,
                                r->devices[i]->device->device_name,
                                r->devices[i]->health == V1__HEALTH_STATUS__HEALTHY ? "HEALTHY"
                                : r->devices[i]->health == V1__HEALTH_STATUS__UNHEALTHY
                                        ? "UNHEALTHY"
                                        : "UNKNOWN");
        }
        fclose(f);
        protobuf_c_message_free_unpacked(m, NULL);
        return out;
}

/* What the kubelet's health cache does with a list: each device reported
 * is stamped now with its health, message and timeout (v1alpha1 has
 * neither of the last two: 1.34 to 1.36 use 30 s for every device); one
 * not reported keeps its last report until that times out. */
static void cache_update(struct tk_dra_health *h) {
        V1__NodeWatchResourcesResponse *r = NULL;
        struct timespec now;

        /* Wire-compatible: v1alpha1 lacks fields 4 and 5, dropped below. */
        if (dp_unpack(h->recv, &v1__node_watch_resources_response__descriptor,
                      (ProtobufCMessage **)&r) < 0)
                return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (size_t i = 0; i < r->n_devices; i++) {
                const V1__DeviceHealth *d = r->devices[i];
                char *key = NULL;
                struct tk_health_entry *e = NULL;
                if (!d->device ||
                    xasprintf(&key, "%s/%s", d->device->pool_name, d->device->device_name) < 0)
                        continue;
                for (size_t k = 0; k < h->n_cache && !e; k++)
                        if (strcmp(h->cache[k].key, key) == 0)
                                e = &h->cache[k];
                if (!e) {
                        struct tk_health_entry *more =
                                realloc(h->cache, (h->n_cache + 1) * sizeof(*more));
                        if (!more) {
                                free(key);
                                continue;
                        }
                        h->cache = more;
                        e = &h->cache[h->n_cache++];
                        *e = (struct tk_health_entry){ .key = TAKE_PTR(key) };
                }
                free(key);
                free(e->message);
                e->health = d->health;
                e->timeout_s = h->alpha || d->health_check_timeout_seconds <= 0
                                       ? 30
                                       : d->health_check_timeout_seconds;
                e->message = strdup(h->alpha ? "" : d->message);
                e->at = now;
        }
        v1__node_watch_resources_response__free_unpacked(r, NULL);
}

static bool start_recv(struct tk_dra_health *h) {
        grpc_op op;

        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &h->recv;
        return grpc_call_start_batch(h->call, &op, 1, (void *)(intptr_t)H_RECV, NULL) ==
               GRPC_CALL_OK;
}

static void *health_thread(void *arg) {
        struct tk_dra_health *h = arg;
        bool status_done = false, recv_done = false;

        while (!status_done || !recv_done) {
                grpc_event ev =
                        grpc_completion_queue_next(h->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                if (ev.type != GRPC_OP_COMPLETE)
                        break;
                switch ((intptr_t)ev.tag) {
                case H_OPEN:
                        if (!ev.success || !start_recv(h))
                                recv_done = true;
                        break;
                case H_RECV:
                        if (!ev.success || !h->recv) {
                                recv_done = true;
                                break;
                        }
                        pthread_mutex_lock(&h->lock);
                        free(h->latest);
                        h->latest = summary(h);
                        cache_update(h);
                        h->lists++;
                        pthread_cond_broadcast(&h->cond);
                        pthread_mutex_unlock(&h->lock);
                        grpc_byte_buffer_destroy(h->recv);
                        h->recv = NULL;
                        if (!start_recv(h))
                                recv_done = true;
                        break;
                case H_STATUS:
                        status_done = true;
                        pthread_mutex_lock(&h->lock);
                        h->ended = true;
                        pthread_cond_broadcast(&h->cond);
                        pthread_mutex_unlock(&h->lock);
                        break;
                }
        }
        return NULL;
}

int tk_dra_health_open(struct tk_dra *k, const char *driver, const char *version,
                       struct tk_dra_health **ret) {
        V1__NodeWatchResourcesRequest req = V1__NODE_WATCH_RESOURCES_REQUEST__INIT;
        grpc_channel *ch = tk_dra_channel(k, driver);
        struct tk_dra_health *h;
        grpc_op op;

        if (!ch)
                return -ENOENT;
        /* Kubelets from 1.37 open v1 only when GetInfo lists the service;
         * 1.34 to 1.36 open v1alpha1 whatever it lists. */
        if (strcmp(version, "v1") == 0 && !tk_dra_advertises(k, driver, "v1.DRAResourceHealth"))
                return -EPROTONOSUPPORT;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->alpha = strcmp(version, "v1alpha1") == 0;
        pthread_mutex_init(&h->lock, NULL);
        pthread_cond_init(&h->cond, NULL);
        grpc_metadata_array_init(&h->md);
        grpc_metadata_array_init(&h->trailing);
        h->cq = grpc_completion_queue_create_for_next(NULL);
        grpc_slice method = grpc_slice_from_static_string(
                h->alpha ? "/v1alpha1.DRAResourceHealth/NodeWatchResources"
                         : "/v1.DRAResourceHealth/NodeWatchResources");
        h->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, h->cq, method, NULL,
                                           gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        h->send = dp_pack(&req.base);
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        op.data.recv_status_on_client.trailing_metadata = &h->trailing;
        op.data.recv_status_on_client.status = &h->status;
        op.data.recv_status_on_client.status_details = &h->details;
        if (dp_stream_start(h->call, h->send, &h->md, (void *)(intptr_t)H_OPEN) != GRPC_CALL_OK ||
            grpc_call_start_batch(h->call, &op, 1, (void *)(intptr_t)H_STATUS, NULL) !=
                    GRPC_CALL_OK ||
            pthread_create(&h->thread, NULL, health_thread, h) != 0)
                abort(); /* a test helper: nothing sensible to go on with */
        *ret = h;
        return 0;
}

int tk_dra_health_wait(struct tk_dra_health *h, unsigned n, int timeout_ms, char **ret) {
        struct timespec until = deadline_in(timeout_ms);
        int r = 0;

        pthread_mutex_lock(&h->lock);
        while (h->lists < n && r == 0)
                if (pthread_cond_timedwait(&h->cond, &h->lock, &until) == ETIMEDOUT)
                        r = -ETIMEDOUT;
        if (r == 0 && ret) {
                *ret = strdup(h->latest ? h->latest : "");
                if (!*ret)
                        r = -ENOMEM;
        }
        pthread_mutex_unlock(&h->lock);
        return r;
}

int tk_dra_health_view(struct tk_dra_health *h, char **ret) {
        struct timespec now;
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        if (!f)
                return -ENOMEM;
        clock_gettime(CLOCK_MONOTONIC, &now);
        pthread_mutex_lock(&h->lock);
        for (size_t i = 0; i < h->n_cache; i++) {
                const struct tk_health_entry *e = &h->cache[i];
                int64_t age_ms = (now.tv_sec - e->at.tv_sec) * 1000 +
                                 (now.tv_nsec - e->at.tv_nsec) / 1000000;
                int health = age_ms > e->timeout_s * 1000 ? V1__HEALTH_STATUS__UNKNOWN : e->health;
                fprintf(f, "%s%s=%s", i ? "," : "", e->key,
                        health == V1__HEALTH_STATUS__HEALTHY     ? "HEALTHY"
                        : health == V1__HEALTH_STATUS__UNHEALTHY ? "UNHEALTHY"
                                                                 : "UNKNOWN");
        }
        pthread_mutex_unlock(&h->lock);
        fclose(f);
        *ret = out;
        return out ? 0 : -ENOMEM;
}

int tk_dra_health_detail(struct tk_dra_health *h, const char *key, int64_t *ret_timeout_s,
                         char **ret_message) {
        int r = -ENOENT;

        pthread_mutex_lock(&h->lock);
        for (size_t i = 0; i < h->n_cache; i++)
                if (strcmp(h->cache[i].key, key) == 0) {
                        *ret_timeout_s = h->cache[i].timeout_s;
                        *ret_message = strdup(h->cache[i].message ? h->cache[i].message : "");
                        r = *ret_message ? 0 : -ENOMEM;
                }
        pthread_mutex_unlock(&h->lock);
        return r;
}

unsigned tk_dra_health_lists(struct tk_dra_health *h) {
        pthread_mutex_lock(&h->lock);
        unsigned n = h->lists;
        pthread_mutex_unlock(&h->lock);
        return n;
}

int tk_dra_health_wait_end(struct tk_dra_health *h, int timeout_ms, grpc_status_code *ret) {
        struct timespec until = deadline_in(timeout_ms);
        int r = 0;

        pthread_mutex_lock(&h->lock);
        while (!h->ended && r == 0)
                if (pthread_cond_timedwait(&h->cond, &h->lock, &until) == ETIMEDOUT)
                        r = -ETIMEDOUT;
        if (r == 0)
                *ret = h->status;
        pthread_mutex_unlock(&h->lock);
        return r;
}

void tk_dra_health_close(struct tk_dra_health *h) {
        if (!h)
                return;
        grpc_call_cancel(h->call, NULL);
        pthread_join(h->thread, NULL);
        grpc_call_unref(h->call);
        dp_cq_destroy(h->cq);
        if (h->send)
                grpc_byte_buffer_destroy(h->send);
        if (h->recv)
                grpc_byte_buffer_destroy(h->recv);
        grpc_metadata_array_destroy(&h->md);
        grpc_metadata_array_destroy(&h->trailing);
        grpc_slice_unref(h->details);
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->cond);
        free(h->latest);
        for (size_t i = 0; i < h->n_cache; i++) {
                free(h->cache[i].key);
                free(h->cache[i].message);
        }
        free(h->cache);
        free(h);
}

/* Prepare and Unprepare: the same request fields in both versions. */

static grpc_status_code dra_call(struct tk_dra *k, const char *driver, const char *version,
                                 bool prepare, const struct tk_dra_claim *claims, size_t n,
                                 const ProtobufCMessageDescriptor *v1beta1_desc,
                                 const ProtobufCMessageDescriptor *v1_desc,
                                 ProtobufCMessage **ret) {
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest req =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *v = calloc(n + 1, sizeof(*v));
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim **ptrs = calloc(n + 1, sizeof(*ptrs));
        /* Static: grpc keeps a method name it sent in the channel's
         * header table (HPACK) and compares later ones against it. */
        static const char *const methods[2][2] = {
                { "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
                  "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources" },
                { "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
                  "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources" },
        };
        grpc_byte_buffer *recv = NULL;
        grpc_channel *ch = tk_dra_channel(k, driver);
        grpc_status_code st;
        bool beta = strcmp(version, "v1beta1") == 0;

        if (!v || !ptrs || !ch) {
                free(v);
                free(ptrs);
                return GRPC_STATUS_INTERNAL;
        }
        for (size_t i = 0; i < n; i++) {
                k8s__io__kubelet__pkg__apis__dra__v1__claim__init(&v[i]);
                v[i].namespace_ = (char *)claims[i].ns;
                v[i].name = (char *)claims[i].name;
                v[i].uid = (char *)claims[i].uid;
                ptrs[i] = &v[i];
        }
        req.claims = ptrs;
        req.n_claims = n;
        /* The unprepare request is the same message, field for field. */
        st = dp_call_unary_raw(ch, methods[beta][prepare], &req.base, 60000, &recv, NULL);
        free(v);
        free(ptrs);
        if (st == GRPC_STATUS_OK) {
                ProtobufCMessage *m = NULL;
                if (beta && dp_unpack(recv, v1beta1_desc, &m) < 0)
                        st = GRPC_STATUS_DATA_LOSS;
                if (m)
                        protobuf_c_message_free_unpacked(m, NULL);
                if (st == GRPC_STATUS_OK && dp_unpack(recv, v1_desc, ret) < 0)
                        st = GRPC_STATUS_DATA_LOSS;
        }
        if (recv)
                grpc_byte_buffer_destroy(recv);
        return st;
}

grpc_status_code tk_dra_prepare(
        struct tk_dra *k, const char *driver, const char *version,
        const struct tk_dra_claim *claims, size_t n,
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse **ret) {
        return dra_call(
                k, driver, version, true, claims, n,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor,
                (ProtobufCMessage **)ret);
}

grpc_status_code tk_dra_unprepare(
        struct tk_dra *k, const char *driver, const char *version,
        const struct tk_dra_claim *claims, size_t n,
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse **ret) {
        return dra_call(
                k, driver, version, false, claims, n,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
                (ProtobufCMessage **)ret);
}
