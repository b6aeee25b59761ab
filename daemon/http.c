/* SPDX-License-Identifier: Apache-2.0 */
/* The monitoring endpoint: libevent's evhttp on one thread of ours,
 * serving /metrics, /healthz and /readyz, GET and HEAD only.
 *
 * The listening socket is ours, bound before the lock-down: afterwards
 * the seccomp filter refuses sockets of any family but AF_UNIX. The
 * thread starts after the lock-down, so it inherits the filter, no
 * capabilities and no_new_privs like grpc's threads. With no connection
 * open, libevent waits in epoll_wait with no timeout: a daemon nobody
 * scrapes does not wake up for it.
 *
 * Bounds, so that a hostile or broken client cannot hold the endpoint: a
 * few connections served at once and as many waiting, unread, for a slot
 * (past those the listener pauses and clients wait in the kernel's
 * backlog, holding no fd of ours), the request line and headers capped,
 * a small body at most (read and dropped: nothing here takes one), and an
 * idle timeout per connection. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "config.h"
#include "daemon.h"
#include "metrics.h"
#include "util.h"

/* Served at once; as many more wait, unread, for a slot. */
#define HTTP_MAX_SERVED 16
#define HTTP_MAX_CONNECTIONS (2 * HTTP_MAX_SERVED)
#define HTTP_TIMEOUT_S 5
#define HTTP_MAX_REQUEST (16 * 1024)
#define HTTP_MAX_BODY 1024
#define HTTP_MAX_WRITE (256 * 1024)
/* A loop that cannot take its own lock within this long is stuck. */
#define HEALTH_LOCK_TIMEOUT_S 2
/* After accept() fails for want of fds, the listener rests this long. */
#define HTTP_ACCEPT_REST_MS 250

struct dp_http {
        struct dp_daemon *d;
        int listen_fd;
        char *address;
        struct event_base *base;
        struct evhttp *http;
        struct evconnlistener *listener;
        struct event *stop_ev, *admit_ev, *rest_ev;
        int stop_fd;
        pthread_t thread;
        bool running;
        /* Connections: served, waiting for a slot, accepted in this turn
         * of the loop; HTTP_MAX_CONNECTIONS in all. */
        struct evhttp_connection *live[HTTP_MAX_SERVED];
        struct evhttp_connection *waiting[HTTP_MAX_CONNECTIONS];
        struct bufferevent *fresh[HTTP_MAX_CONNECTIONS];
        size_t n_live, n_waiting, n_fresh;
        bool resting; /* after an accept error */
        struct dp_podres pr;
};

int dp_http_parse_address(const char *address, void *ret_sockaddr, unsigned *ret_len,
                          const char **ret_msg) {
        struct sockaddr_storage ss = { 0 };
        _cleanup_free_ char *host = NULL;
        const char *colon, *port_s;
        char *end;
        unsigned long port;

        if (address[0] == '[') {
                const char *close = strchr(address, ']');
                if (!close || close[1] != ':') {
                        *ret_msg = "an IPv6 address must be written [ADDRESS]:PORT";
                        return -EINVAL;
                }
                host = strndup(address + 1, (size_t)(close - address - 1));
                port_s = close + 2;
        } else {
                colon = strrchr(address, ':');
                if (!colon || strchr(address, ':') != colon) {
                        *ret_msg = "must be HOST:PORT with a numeric host, e.g. 127.0.0.1:9633";
                        return -EINVAL;
                }
                host = strndup(address, (size_t)(colon - address));
                port_s = colon + 1;
        }
        if (!host)
                return -ENOMEM;
        errno = 0;
        port = strtoul(port_s, &end, 10);
        if (!*port_s || *end || errno || port == 0 || port > 65535 || *port_s == '+' ||
            *port_s == '-') {
                *ret_msg = "the port must be a number from 1 to 65535";
                return -EINVAL;
        }
        if (address[0] == '[') {
                struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&ss;
                sa->sin6_family = AF_INET6;
                sa->sin6_port = htons((uint16_t)port);
                if (inet_pton(AF_INET6, host, &sa->sin6_addr) != 1) {
                        *ret_msg = "not a numeric IPv6 address";
                        return -EINVAL;
                }
                *ret_len = sizeof(*sa);
        } else {
                struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
                sa->sin_family = AF_INET;
                sa->sin_port = htons((uint16_t)port);
                /* ":PORT" listens on every IPv4 address. */
                if (*host && inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
                        *ret_msg = "not a numeric IPv4 address (host names are not resolved)";
                        return -EINVAL;
                }
                *ret_len = sizeof(*sa);
        }
        memcpy(ret_sockaddr, &ss, *ret_len);
        return 0;
}

/* libevent's complaints are about clients: debug level, one line. */
static void event_log(int severity, const char *msg) {
        (void)severity;
        log_debug("metrics endpoint: %s", msg);
}

static void on_stop(evutil_socket_t fd, short what, void *arg);
static void on_admit(evutil_socket_t fd, short what, void *arg);
static void on_rest_over(evutil_socket_t fd, short what, void *arg);
static void on_request(struct evhttp_request *req, void *arg);
static struct bufferevent *on_accept(struct event_base *base, void *arg);
static void on_accept_error(struct evconnlistener *l, void *arg);

static int setup(struct dp_http *h) {
        struct event_config *cfg = event_config_new();
        struct evhttp_bound_socket *bound;

        if (!cfg)
                return -ENOMEM;
        /* One thread uses the base, so no locks; and the environment does
         * not get to pick another backend. */
        event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_IGNORE_ENV);
        h->base = event_base_new_with_config(cfg);
        event_config_free(cfg);
        if (!h->base || !(h->http = evhttp_new(h->base)))
                return -ENOMEM;
        h->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (h->stop_fd < 0)
                return -errno;
        h->stop_ev = event_new(h->base, h->stop_fd, EV_READ, on_stop, h);
        h->admit_ev = event_new(h->base, -1, 0, on_admit, h);
        h->rest_ev = evtimer_new(h->base, on_rest_over, h);
        if (!h->stop_ev || !h->admit_ev || !h->rest_ev || event_add(h->stop_ev, NULL) < 0)
                return -ENOMEM;
        evhttp_set_timeout(h->http, HTTP_TIMEOUT_S);
        evhttp_set_max_headers_size(h->http, HTTP_MAX_REQUEST);
        evhttp_set_max_body_size(h->http, HTTP_MAX_BODY);
        /* Every method reaches on_request, which answers 405 with Allow
         * (evhttp's own refusal would be 501). */
        evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                                    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                                    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                                    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
        evhttp_set_gencb(h->http, on_request, h);
        evhttp_set_bevcb(h->http, on_accept, h);
        bound = evhttp_accept_socket_with_handle(h->http, h->listen_fd);
        if (!bound)
                return -errno ?: -EIO;
        h->listen_fd = -1; /* evhttp closes it when freed */
        h->listener = evhttp_bound_socket_get_listener(bound);
        evconnlistener_set_error_cb(h->listener, on_accept_error);
        return 0;
}

int dp_http_open(struct dp_daemon *d, const char *address, const char *podres_path,
                 struct dp_http **ret) {
        struct sockaddr_storage ss;
        unsigned len;
        const char *msg = NULL;
        int one = 1, r;
        struct dp_http *h;

        r = dp_http_parse_address(address, &ss, &len, &msg);
        if (r < 0) {
                log_error("metrics address \"%s\": %s", address, msg ? msg : strerror(-r));
                return r;
        }
        h = calloc(1, sizeof(*h));
        if (!h || !(h->address = strdup(address))) {
                free(h);
                return -ENOMEM;
        }
        h->d = d;
        h->stop_fd = -1;
        dp_podres_init(&h->pr, podres_path);
        h->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (h->listen_fd < 0 ||
            setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(h->listen_fd, (struct sockaddr *)&ss, len) < 0 || listen(h->listen_fd, 64) < 0) {
                r = -errno;
                log_error("metrics: cannot listen on %s: %s", address, strerror(-r));
                dp_http_stop(h);
                return r;
        }
        event_set_log_callback(event_log);
        r = setup(h);
        if (r < 0) {
                log_error("metrics: cannot set up the HTTP endpoint on %s: %s", address,
                          strerror(-r));
                dp_http_stop(h);
                return r;
        }
        *ret = h;
        return 0;
}

/* Listens unless resting after an accept error or full: then further
 * clients wait in the kernel's backlog, holding no fd of ours. */
static void resume(struct dp_http *h) {
        if (h->listener && !h->resting &&
            h->n_live + h->n_waiting + h->n_fresh < HTTP_MAX_CONNECTIONS)
                evconnlistener_enable(h->listener);
}

/* A new connection, before evhttp sets it up. libevent tells nothing
 * more, so on_admit() looks at it after this turn of the loop; until then
 * a reference of ours keeps the bufferevent, and with it the fd. */
static struct bufferevent *on_accept(struct event_base *base, void *arg) {
        struct dp_http *h = arg;
        struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

        if (!bev)
                return NULL;
        /* The page goes out in a few writes, not in 16 kB ones. */
        bufferevent_set_max_single_write(bev, HTTP_MAX_WRITE);
        bufferevent_incref(bev);
        h->fresh[h->n_fresh++] = bev;
        /* Stops the listener's accept loop too. */
        if (h->n_live + h->n_waiting + h->n_fresh >= HTTP_MAX_CONNECTIONS)
                evconnlistener_disable(h->listener);
        event_active(h->admit_ev, 0, 0);
        return bev;
}

static bool drop(struct evhttp_connection **list, size_t *n, struct evhttp_connection *evcon) {
        for (size_t i = 0; i < *n; i++)
                if (list[i] == evcon) {
                        memmove(list + i, list + i + 1, (--*n - i) * sizeof(*list));
                        return true;
                }
        return false;
}

/* A served connection went: the longest waiting one takes its slot. */
static void on_close(struct evhttp_connection *evcon, void *arg) {
        struct dp_http *h = arg;

        if (drop(h->live, &h->n_live, evcon) && h->n_waiting > 0) {
                struct evhttp_connection *next = h->waiting[0];
                drop(h->waiting, &h->n_waiting, next);
                h->live[h->n_live++] = next;
                bufferevent_enable(evhttp_connection_get_bufferevent(next), EV_READ);
        } else {
                drop(h->waiting, &h->n_waiting, evcon);
        }
        resume(h);
}

/* Each new connection is served if a slot is free, else it waits, unread,
 * for one: a client that closed and reconnects at once may be seen
 * reconnecting before its old connections close. */
static void on_admit(evutil_socket_t fd, short what, void *arg) {
        struct dp_http *h = arg;

        for (size_t i = 0; i < h->n_fresh; i++) {
                struct bufferevent *bev = h->fresh[i];
                bufferevent_event_cb ecb = NULL;
                void *cbarg = NULL;

                /* evhttp gives each connection's bufferevent the connection
                 * as its callbacks' argument; no callbacks: already gone. */
                bufferevent_getcb(bev, NULL, NULL, &ecb, &cbarg);
                struct evhttp_connection *evcon = cbarg;
                if (ecb && evcon && evhttp_connection_get_bufferevent(evcon) == bev) {
                        if (h->n_live < HTTP_MAX_SERVED) {
                                h->live[h->n_live++] = evcon;
                        } else {
                                bufferevent_disable(bev, EV_READ);
                                h->waiting[h->n_waiting++] = evcon;
                        }
                        evhttp_connection_set_closecb(evcon, on_close, h);
                }
                bufferevent_decref(bev);
        }
        h->n_fresh = 0;
        resume(h);
}

/* accept() failed for a reason other than a client's (no fds left, most
 * likely): rest the listener for a moment instead of spinning on it. */
static void on_accept_error(struct evconnlistener *l, void *arg) {
        struct dp_http *h = arg;
        const struct timeval rest = { 0, HTTP_ACCEPT_REST_MS * 1000 };

        log_warn("metrics endpoint: cannot accept a connection: %s",
                 strerror(EVUTIL_SOCKET_ERROR()));
        evconnlistener_disable(l);
        h->resting = true;
        evtimer_add(h->rest_ev, &rest);
}

static void on_rest_over(evutil_socket_t fd, short what, void *arg) {
        struct dp_http *h = arg;
        h->resting = false;
        resume(h);
}

struct body {
        struct dp_mbuf b;
        bool trim;
};

/* A scrape's allocations (grpc's call, the List answer, the connection)
 * are freed by the time its page is sent but leave free pages amid the
 * heap, which would stay resident until the next scrape (about 120 kB
 * with 1,000 allocated IDs): give them back, as the daemon does after a
 * kubelet restart's burst. The page itself and the decoded answer are
 * mappings of their own. */
static void body_free(const void *data, size_t len, void *arg) {
        struct body *body = arg;
        bool trim = body->trim;

        dp_mbuf_free(&body->b);
        free(body);
        if (trim)
                malloc_trim(0);
}

/* Answers with b's text, which it takes (b is left empty). HEAD gets
 * GET's header fields, Content-Length included, and no body (RFC 9110
 * 9.3.2): load balancers and uptime checkers probe with HEAD. */
static void reply(struct evhttp_request *req, int status, const char *type, struct dp_mbuf *b,
                  bool trim) {
        struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
        struct evbuffer *out = evhttp_request_get_output_buffer(req);
        struct body *body = malloc(sizeof(*body));
        char length[24];

        if (!body) {
                dp_mbuf_free(b);
                evhttp_send_error(req, HTTP_INTERNAL, NULL);
                return;
        }
        body->b = *b;
        body->trim = trim;
        *b = (struct dp_mbuf){ 0 };
        snprintf(length, sizeof(length), "%zu", body->b.len);
        if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD || body->b.len == 0) {
                body_free(NULL, 0, body);
        } else if (evbuffer_add_reference(out, body->b.s, body->b.len, body_free, body) < 0) {
                body_free(NULL, 0, body);
                evhttp_send_error(req, HTTP_INTERNAL, NULL);
                return;
        }
        evhttp_add_header(headers, "Content-Type", type);
        evhttp_add_header(headers, "Content-Length", length);
        if (status == 405)
                evhttp_add_header(headers, "Allow", "GET, HEAD");
        evhttp_send_reply(req, status, NULL, NULL);
}

static void reply_text(struct evhttp_request *req, int status, const char *text) {
        struct dp_mbuf b = { 0 };

        dp_mbuf_puts(&b, text);
        if (b.err) {
                dp_mbuf_free(&b);
                evhttp_send_error(req, HTTP_INTERNAL, NULL);
                return;
        }
        reply(req, status, "text/plain; charset=utf-8", &b, false);
}

static void healthz(struct dp_http *h, struct evhttp_request *req) {
        struct timespec until;
        bool stopping;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += HEALTH_LOCK_TIMEOUT_S;
        /* Both loops hold d->lock for all of their work and let go when
         * they wait: a handler stuck in a loop or a blocking call keeps it,
         * and the probe fails within seconds. */
        if (pthread_mutex_timedlock(&h->d->lock, &until) != 0)
                return reply_text(req, HTTP_SERVUNAVAIL, "the daemon's loops are stuck\n");
        stopping = h->d->stopping;
        pthread_mutex_unlock(&h->d->lock);
        if (stopping)
                return reply_text(req, HTTP_SERVUNAVAIL, "shutting down\n");
        reply_text(req, HTTP_OK, "ok\n");
}

static void readyz(struct dp_http *h, struct evhttp_request *req) {
        struct dp_daemon *d = h->d;
        struct dp_mbuf b = { 0 };
        bool all = true;

        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < d->n_res; i++) {
                const char *why = NULL;
                bool ready = dp_resource_ready(d->res[i], &why);
                all &= ready;
                dp_mbuf_puts(&b, d->res[i]->cfg->name);
                dp_mbuf_puts(&b, ready ? ": ready\n" : ": not ready: ");
                if (!ready) {
                        dp_mbuf_puts(&b, why);
                        dp_mbuf_puts(&b, "\n");
                }
        }
        if (d->stopping) {
                all = false;
                dp_mbuf_puts(&b, "shutting down\n");
        }
        pthread_mutex_unlock(&d->lock);
        if (b.err) {
                dp_mbuf_free(&b);
                return evhttp_send_error(req, HTTP_INTERNAL, NULL);
        }
        reply(req, all ? HTTP_OK : HTTP_SERVUNAVAIL, "text/plain; charset=utf-8", &b, false);
}

static void metrics(struct dp_http *h, struct evhttp_request *req) {
        struct dp_mbuf b = { 0 };

        if (dp_metrics_render(h->d, &h->pr, &b) < 0) {
                dp_mbuf_free(&b);
                return reply_text(req, HTTP_INTERNAL, "out of memory\n");
        }
        reply(req, HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &b, true);
}

static const char *method_name(enum evhttp_cmd_type m) {
        switch (m) {
        case EVHTTP_REQ_GET:
                return "GET";
        case EVHTTP_REQ_HEAD:
                return "HEAD";
        case EVHTTP_REQ_POST:
                return "POST";
        case EVHTTP_REQ_PUT:
                return "PUT";
        case EVHTTP_REQ_DELETE:
                return "DELETE";
        default:
                return "another method";
        }
}

static void on_request(struct evhttp_request *req, void *arg) {
        struct dp_http *h = arg;
        enum evhttp_cmd_type method = evhttp_request_get_command(req);
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;

        log_debug("metrics endpoint: %s %.200s", method_name(method), evhttp_request_get_uri(req));
        if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD)
                return reply_text(req, 405, "only GET and HEAD are served here\n");
        if (path && strcmp(path, "/metrics") == 0)
                return metrics(h, req);
        if (path && strcmp(path, "/healthz") == 0)
                return healthz(h, req);
        if (path && strcmp(path, "/readyz") == 0)
                return readyz(h, req);
        reply_text(req, HTTP_NOTFOUND, "not found: try /metrics, /healthz or /readyz\n");
}

static void on_stop(evutil_socket_t fd, short what, void *arg) {
        struct dp_http *h = arg;
        event_base_loopbreak(h->base);
}

static void *serve(void *arg) {
        struct dp_http *h = arg;

        pthread_setname_np(pthread_self(), "cdiplug-http");
        event_base_dispatch(h->base);
        return NULL;
}

int dp_http_start(struct dp_http *h) {
        int r = -pthread_create(&h->thread, NULL, serve, h);

        if (r < 0) {
                log_error("metrics: cannot start the HTTP endpoint on %s: %s", h->address,
                          strerror(-r));
                return r;
        }
        h->running = true;
        log_info("metrics: serving /metrics, /healthz and /readyz on http://%s%s%s", h->address,
                 h->pr.path ? ", pod labels from " : "", h->pr.path ? h->pr.path : "");
        return 0;
}

void dp_http_stop(struct dp_http *h) {
        static const uint64_t one = 1;

        if (!h)
                return;
        if (h->running) {
                if (write(h->stop_fd, &one, sizeof(one)) < 0)
                        log_error("metrics: cannot stop the HTTP endpoint: %m");
                else
                        pthread_join(h->thread, NULL);
        }
        /* evhttp_free frees the listener and each connection; on_close
         * must not wake a listener that may be gone. */
        h->listener = NULL;
        if (h->http)
                evhttp_free(h->http);
        for (size_t i = 0; i < h->n_fresh; i++)
                bufferevent_decref(h->fresh[i]);
        if (h->stop_ev)
                event_free(h->stop_ev);
        if (h->admit_ev)
                event_free(h->admit_ev);
        if (h->rest_ev)
                event_free(h->rest_ev);
        if (h->base)
                event_base_free(h->base);
        if (h->stop_fd >= 0)
                close(h->stop_fd);
        if (h->listen_fd >= 0)
                close(h->listen_fd);
        dp_podres_clear(&h->pr);
        free(h->address);
        free(h);
}
