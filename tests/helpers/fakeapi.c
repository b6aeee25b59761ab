/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi: see fakeapi.h. The wire formats follow the upstream sources
 * (k8s.io/apimachinery): a list is {"kind": "ResourceSliceList",
 * "apiVersion": "resource.k8s.io/v1", "metadata": {"resourceVersion"},
 * "items"}, a watch is a chunked stream of {"type", "object"} lines, an
 * error is a Status object {"kind": "Status", "status": "Failure",
 * "reason", "message", "code"}, and an expired resourceVersion on a watch
 * is an ERROR event holding a Status with code 410 ("Expired").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "fakeapi_internal.h"
#include "fakeapi_tls.h"

static const char *const count_names[C_N] = { "GET", "POST", "PUT", "DELETE", "WATCH", "OTHER" };

/* Counters, the log ring, faults and auth; false: stop handling (*ok
 * says whether the connection survives). */
static bool admit(struct fakeapi *f, SSL *s, const struct request *r, bool watch, bool *ok) {
        int c = C_OTHER, status = -1, retry_after = 0;
        struct logent *le;
        bool authorized;

        for (int i = 0; i < C_N; i++)
                if (strcmp(r->method, count_names[i]) == 0)
                        c = i;
        if (c == C_GET && watch)
                c = C_WATCH;
        pthread_mutex_lock(&f->mu);
        f->counts[c]++;
        le = &f->log[f->n_log++ % LOG_RING];
        snprintf(le->method, sizeof(le->method), "%s", r->method);
        snprintf(le->path, sizeof(le->path), "%s", r->path);
        le->ns = fa_now_ns();
        for (size_t i = 0; i < f->n_faults; i++) {
                struct fault *ft = &f->faults[i];
                if (ft->n == 0 || (ft->method && strcmp(ft->method, r->method) != 0) ||
                    (ft->prefix && strncmp(r->path, ft->prefix, strlen(ft->prefix)) != 0))
                        continue;
                ft->n--;
                status = ft->status;
                retry_after = ft->retry_after;
                break;
        }
        authorized = !f->token || (r->auth && strncmp(r->auth, "Bearer ", 7) == 0 &&
                                   strcmp(r->auth + 7, f->token) == 0);
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);

        if (status == 0) {
                *ok = false;
                return false;
        }
        if (status > 0) {
                *ok = fa_send_status(s, status, status == 429 ? "TooManyRequests" : "InternalError",
                                     "injected fault", retry_after);
                return false;
        }
        if (!authorized) {
                *ok = fa_send_status(s, 401, "Unauthorized", "Unauthorized", 0);
                return false;
        }
        return true;
}

static bool handle(struct fakeapi *f, SSL *s, int fd, const struct request *r) {
        fakeapi_hook_fn *hook;
        void *hook_ctx;
        char *w = fa_query_get(r->query, "watch");
        bool watch = w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0);
        bool ok = true;
        const char *rest;

        free(w);
        if (!admit(f, s, r, watch, &ok))
                return ok;
        pthread_mutex_lock(&f->mu);
        hook = f->hook;
        hook_ctx = f->hook_ctx;
        pthread_mutex_unlock(&f->mu);
        if (hook &&
            hook(hook_ctx, (struct fakeapi_peer *)s, r->method, r->path, r->query, watch, &ok))
                return ok;
        if (strcmp(r->path, SLICES) == 0) {
                if (strcmp(r->method, "GET") == 0)
                        return watch ? fa_handle_watch(f, s, fd, r) : fa_handle_list(f, s, r);
                if (strcmp(r->method, "POST") == 0)
                        return fa_handle_create(f, s, r);
        } else if (strncmp(r->path, SLICES "/", sizeof(SLICES)) == 0) {
                rest = r->path + sizeof(SLICES);
                if (strcmp(r->method, "GET") == 0)
                        return fa_handle_get_slice(f, s, rest);
                if (strcmp(r->method, "PUT") == 0)
                        return fa_handle_update(f, s, r, rest);
                if (strcmp(r->method, "DELETE") == 0)
                        return fa_handle_delete(f, s, rest);
        } else if (strncmp(r->path, CLAIMS_NS, strlen(CLAIMS_NS)) == 0) {
                if (strcmp(r->method, "GET") == 0)
                        return fa_handle_claim(f, s, r->path + strlen(CLAIMS_NS));
        } else if (strcmp(r->path, "/api/v1/nodes") == 0 && watch) {
                if (strcmp(r->method, "GET") == 0)
                        return fa_handle_node_watch(f, s, fd, r);
        } else if (strncmp(r->path, NODES, strlen(NODES)) == 0) {
                if (strcmp(r->method, "GET") == 0)
                        return fa_handle_node(f, s, r->path + strlen(NODES));
        } else
                return fa_send_status(s, 404, "NotFound",
                                      "the server could not find the requested resource", 0);
        return fa_send_status(s, 405, "MethodNotAllowed", "method not allowed", 0);
}

static void *conn_main(void *arg) {
        struct conn *c = arg;
        struct rbuf *b = calloc(1, sizeof(*b));
        SSL *s = SSL_new(c->f->ssl);
        sigset_t set;

        /* A client that hangs up mid-answer must not kill the test. */
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        MUST(b && s);
        b->ssl = s;
        b->fd = c->fd;
        SSL_set_fd(s, c->fd);
        if (SSL_accept(s) == 1) {
                for (;;) {
                        struct request r;
                        bool ok;

                        if (!fa_read_request(b, &r)) {
                                fa_request_clear(&r);
                                break;
                        }
                        ok = handle(c->f, s, c->fd, &r) && !r.close;
                        fa_request_clear(&r);
                        if (!ok)
                                break;
                }
        }
        ERR_clear_error();
        SSL_free(s);
        free(b);
        shutdown(c->fd, SHUT_RDWR);
        pthread_mutex_lock(&c->f->mu);
        c->done = true;
        pthread_mutex_unlock(&c->f->mu);
        ERR_clear_error();
        return NULL;
}

/* Join finished connection threads, with f->mu held. */
static void reap(struct fakeapi *f, bool all) {
        for (size_t i = 0; i < MAX_CONNS; i++) {
                struct conn *c = &f->conns[i];
                if (!c->used || (!c->done && !all))
                        continue;
                pthread_mutex_unlock(&f->mu);
                pthread_join(c->th, NULL);
                pthread_mutex_lock(&f->mu);
                close(c->fd);
                c->used = false;
        }
}

static void *accept_main(void *arg) {
        struct fakeapi *f = arg;
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        for (;;) {
                struct pollfd p[2] = { { .fd = f->lfd, .events = POLLIN },
                                       { .fd = f->stop_pipe[0], .events = POLLIN } };
                struct conn *slot = NULL;
                int fd;

                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
                if (!(p[0].revents & POLLIN))
                        continue;
                fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                /* As Go's net/http (the real API server) does: an answer
                 * written in pieces (TLS records, a head then a body)
                 * would otherwise wait for the client's delayed ACK,
                 * 40 ms a request, which the benchmark would report as
                 * the daemon's. */
                (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
                pthread_mutex_lock(&f->mu);
                reap(f, false);
                for (size_t i = 0; i < MAX_CONNS && !slot; i++)
                        if (!f->conns[i].used)
                                slot = &f->conns[i];
                if (slot) {
                        *slot = (struct conn){ .f = f, .fd = fd, .used = true };
                        MUST(pthread_create(&slot->th, NULL, conn_main, slot) == 0);
                } else
                        close(fd);
                pthread_mutex_unlock(&f->mu);
        }
        return NULL;
}

struct fakeapi *fakeapi_new(bool listening) {
        struct fakeapi *f = calloc(1, sizeof(*f));
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        pthread_condattr_t ca;

        MUST(f);
        pthread_mutex_init(&f->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&f->cond, &ca);
        pthread_condattr_destroy(&ca);
        snprintf(f->dir, sizeof(f->dir), "/tmp/fakeapi-XXXXXX");
        MUST(mkdtemp(f->dir));
        snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", f->dir);
        f->ssl = fakeapi_tls_make(f->ca);
        f->slices = cJSON_CreateArray();
        f->claims = cJSON_CreateArray();
        f->nodes = cJSON_CreateObject();
        f->node_labels = cJSON_CreateObject();
        f->rv = 1000;
        f->min_rv = 0;

        f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        MUST(f->lfd >= 0);
        MUST(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
        MUST(getsockname(f->lfd, (struct sockaddr *)&sa, &len) == 0);
        snprintf(f->url, sizeof(f->url), "https://127.0.0.1:%u", ntohs(sa.sin_port));
        MUST(pipe2(f->stop_pipe, O_CLOEXEC) == 0);
        if (listening)
                fakeapi_listen(f);
        return f;
}

void fakeapi_listen(struct fakeapi *f) {
        MUST(!f->accepting);
        MUST(listen(f->lfd, 64) == 0);
        f->accepting = true;
        MUST(pthread_create(&f->acceptor, NULL, accept_main, f) == 0);
}

static void rm_dir(const char *dir) {
        char path[192];

        snprintf(path, sizeof(path), "%s/ca.crt", dir);
        unlink(path);
        rmdir(dir);
}

void fakeapi_free(struct fakeapi *f) {
        if (!f)
                return;
        pthread_mutex_lock(&f->mu);
        f->stopping = true;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
        if (f->accepting) {
                MUST(write(f->stop_pipe[1], "x", 1) == 1);
                pthread_join(f->acceptor, NULL);
        }
        pthread_mutex_lock(&f->mu);
        for (size_t i = 0; i < MAX_CONNS; i++)
                if (f->conns[i].used)
                        shutdown(f->conns[i].fd, SHUT_RDWR);
        reap(f, true);
        pthread_mutex_unlock(&f->mu);
        close(f->lfd);
        close(f->stop_pipe[0]);
        close(f->stop_pipe[1]);
        SSL_CTX_free(f->ssl);
        for (size_t i = 0; i < f->n_hist; i++)
                cJSON_Delete(f->hist[i].obj);
        for (size_t i = 0; i < f->n_faults; i++) {
                free(f->faults[i].method);
                free(f->faults[i].prefix);
        }
        cJSON_Delete(f->slices);
        cJSON_Delete(f->claims);
        cJSON_Delete(f->nodes);
        cJSON_Delete(f->node_labels);
        free(f->token);
        rm_dir(f->dir);
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->mu);
        free(f);
}

const char *fakeapi_url(const struct fakeapi *f) {
        return f->url;
}

const char *fakeapi_ca_file(const struct fakeapi *f) {
        return f->ca;
}

const char *fakeapi_dir(const struct fakeapi *f) {
        return f->dir;
}

void fakeapi_set_token(struct fakeapi *f, const char *token) {
        pthread_mutex_lock(&f->mu);
        free(f->token);
        f->token = token ? strdup(token) : NULL;
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_fault(struct fakeapi *f, const char *method, const char *path_prefix, unsigned n,
                   int status, int retry_after) {
        pthread_mutex_lock(&f->mu);
        MUST(f->n_faults < MAX_FAULTS);
        f->faults[f->n_faults++] =
                (struct fault){ .method = method ? strdup(method) : NULL,
                                .prefix = path_prefix ? strdup(path_prefix) : NULL,
                                .n = n,
                                .status = status,
                                .retry_after = retry_after };
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_expire(struct fakeapi *f, bool as_http) {
        pthread_mutex_lock(&f->mu);
        for (size_t i = 0; i < f->n_hist; i++)
                cJSON_Delete(f->hist[i].obj);
        f->n_hist = 0;
        /* As after an etcd compaction: every version so far is gone, a
         * fresh list (at the new version) can be watched from. */
        f->rv++;
        f->min_rv = f->rv;
        f->expire_http = as_http;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
}

unsigned fakeapi_count(struct fakeapi *f, const char *method) {
        unsigned n = 0;

        pthread_mutex_lock(&f->mu);
        for (int i = 0; i < C_N; i++)
                if (strcmp(method, count_names[i]) == 0)
                        n = f->counts[i];
        pthread_mutex_unlock(&f->mu);
        return n;
}

uint64_t fakeapi_last_request_ns(struct fakeapi *f, const char *method, const char *path_prefix) {
        uint64_t t = 0;
        size_t n;

        pthread_mutex_lock(&f->mu);
        n = f->n_log < LOG_RING ? f->n_log : LOG_RING;
        for (size_t i = 0; i < n; i++) {
                const struct logent *le = &f->log[i];
                if ((method && strcmp(le->method, method) != 0) ||
                    (path_prefix && strncmp(le->path, path_prefix, strlen(path_prefix)) != 0))
                        continue;
                if (le->ns > t)
                        t = le->ns;
        }
        pthread_mutex_unlock(&f->mu);
        return t;
}

bool fakeapi_wait_count(struct fakeapi *f, const char *method, unsigned n, int timeout_ms) {
        struct timespec ts;
        int c = -1;

        for (int i = 0; i < C_N; i++)
                if (strcmp(method, count_names[i]) == 0)
                        c = i;
        if (c < 0)
                return false;
        fa_deadline(&ts, timeout_ms);
        pthread_mutex_lock(&f->mu);
        while (f->counts[c] < n)
                if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) == ETIMEDOUT)
                        break;
        bool held = f->counts[c] >= n;
        pthread_mutex_unlock(&f->mu);
        return held;
}

void fakeapi_set_hook(struct fakeapi *f, fakeapi_hook_fn *fn, void *ctx) {
        pthread_mutex_lock(&f->mu);
        f->hook = fn;
        f->hook_ctx = ctx;
        pthread_mutex_unlock(&f->mu);
}

unsigned fakeapi_lists_paged(struct fakeapi *f) {
        unsigned n;

        pthread_mutex_lock(&f->mu);
        n = f->lists_paged;
        pthread_mutex_unlock(&f->mu);
        return n;
}

bool fakeapi_peer_send(struct fakeapi_peer *p, const void *data, size_t n) {
        return fa_send_all((SSL *)p, data, n);
}

bool fakeapi_peer_chunk(struct fakeapi_peer *p, const void *data, size_t n) {
        return fa_send_chunk((SSL *)p, data, n);
}

bool fakeapi_peer_answer(struct fakeapi_peer *p, int code, const char *body) {
        return fa_send_response((SSL *)p, code, body, 0, false);
}
