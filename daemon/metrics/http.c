/* SPDX-License-Identifier: Apache-2.0 */
/* The monitoring endpoint: /metrics, /healthz and /readyz, GET and HEAD
 * only, served by a small HTTP/1.1 server of our own on one libevent
 * thread (bufferevents and an evconnlistener, public API only).
 *
 * Why not evhttp: it reads whatever a connection sends ahead of the
 * request it is answering, without limit (16 clients pipelining
 * "GET /healthz" took gigabytes), owns its listener, so an accept error
 * reached us with evhttp's callback argument, and gives no say over
 * which connection makes way when the endpoint is full. Here:
 *
 * - Input: each connection reads at most HTTP_INPUT_BUDGET ahead (the
 *   bufferevent's read high-water mark); past it the kernel's socket
 *   buffer fills and the client is paused. One request is answered at a
 *   time per connection; the next is parsed once the answer is sent. A
 *   request head is HTTP_MAX_REQUEST at most, a body DP_HTTP_MAX_BODY (read
 *   and dropped: nothing here takes one).
 * - Connections: HTTP_MAX_CONNECTIONS at most. The listener never stops
 *   for a full endpoint (a paused listener leaves the kubelet's probe in
 *   the backlog behind idle attackers): a new connection evicts the one
 *   that made no progress for longest (progress: accepted, a request
 *   complete, an answer sent), so idle and slowloris connections make way
 *   and a probe, which sends its request at once, is answered.
 * - Time: a connection must complete a request within HTTP_REQUEST_S of
 *   its last progress, and take an answer within HTTP_WRITE_S.
 * - Pages: a /metrics page is rendered once for the scrapes waiting at
 *   that moment and shared by them; at most HTTP_MAX_PAGES are alive.
 * - PodResources is asked by its own worker thread (podresources.c); a
 *   scrape waits for it in a list, never on this thread, so /healthz and
 *   /readyz are answered meanwhile.
 *
 * The listening socket is ours, made before the lock-down: afterwards the
 * seccomp filter refuses sockets of any family but AF_UNIX. When its
 * address cannot be bound (port taken), the daemon serves its devices
 * anyway and this thread binds it again with back-off. The thread starts
 * after the lock-down, so it inherits the filter, no capabilities and
 * no_new_privs like grpc's threads. With no connection open it waits in
 * epoll_wait with no timeout: a daemon nobody scrapes does not wake. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
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
#include "loop.h"
#include "metrics.h"
#include "log.h"

#define HTTP_MAX_CONNECTIONS 64
#define HTTP_INPUT_BUDGET (64 * 1024)
#define HTTP_MAX_REQUEST (16 * 1024)
#define HTTP_MAX_PAGES 4
#define HTTP_REQUEST_S 5
#define HTTP_WRITE_S 10
/* A scrape waits this long at most for PodResources and a page slot. */
#define HTTP_WAIT_S 15
#define HTTP_MAX_WRITE (256 * 1024)
/* The kernel's buffers of each connection, which the memory cgroup
 * charges to the daemon too: the receive side at most what we would
 * read ahead anyway (the kernel doubles it, and autotuning stops), the
 * send side enough for a page to stream. */
#define HTTP_SO_RCVBUF (32 * 1024)
#define HTTP_SO_SNDBUF (256 * 1024)
/* The kernel caps it at net.core.somaxconn (4096 by default since Linux
 * 5.4; glibc's SOMAXCONN still says 128). */
#define HTTP_BACKLOG 4096
/* Accepted per turn of the loop: then the connections taken get to read
 * their requests before more arrive, so a burst of new ones cannot evict
 * a probe that has sent its request but not had it read. */
#define HTTP_ACCEPTS_PER_TURN 16
/* A loop that cannot take its own lock within this long is stuck. */
#define HEALTH_LOCK_TIMEOUT_S 2
/* After accept() fails (no fds left, most likely) the listener rests,
 * doubling from the first to the second; a taken port is tried again
 * likewise. */
#define ACCEPT_REST_MIN_MS 100
#define ACCEPT_REST_MAX_MS 2000
#define BIND_RETRY_MIN_MS 1000
#define BIND_RETRY_MAX_MS 30000

enum conn_state {
        C_READ,  /* reading a request */
        C_WAIT,  /* a scrape waiting for PodResources or a page slot */
        C_WRITE, /* sending an answer */
};

struct conn {
        struct dp_http *h;
        struct bufferevent *bev;
        struct event *timer;
        enum conn_state state;
        bool head;                /* the request being answered is a HEAD */
        bool close_after;         /* close once the answer is sent */
        bool eof;                 /* the client sent all it will */
        size_t body_left;         /* body bytes to drop before the next request */
        struct conn *prev, *next; /* by progress, oldest first */
        bool linked;
};

/* A /metrics page, shared by the scrapes it answers. */
struct page {
        struct dp_http *h;
        unsigned refs;
        struct dp_mbuf b;
};

struct dp_http {
        struct dp_metrics_source src; /* the runtime's state, under its lock */
        int listen_fd;                /* ours until the listener takes it */
        bool listening;
        struct sockaddr_storage ss;
        unsigned ss_len;
        char *address;
        struct event_base *base;
        struct evconnlistener *listener;
        struct event *stop_ev, *rest_ev, *bind_ev, *podres_ev, *pages_ev, *turn_ev;
        int stop_fd, podres_fd;
        pthread_t thread;
        bool running;
        struct conn *oldest, *newest;
        size_t n_conns;
        unsigned pages;           /* alive */
        unsigned accept_failures; /* in a row */
        unsigned turn_accepts;    /* in this turn of the loop */
        bool resting;             /* after an accept error */
        unsigned bind_failures;
        struct dp_podres *pr; /* NULL: pod labels off */
};

static void on_stop(evutil_socket_t fd, short what, void *arg);

/* libevent's complaints are about clients: debug level, one line. */
static void event_log(int severity, const char *msg) {
        (void)severity;
        log_debug("metrics endpoint: %s", msg);
}

static void conn_free(struct conn *c);
static void process(struct conn *c);
static void serve_waiting(struct dp_http *h);

/* The least recently progressed connection is the first to make way. */
static void unlink_conn(struct conn *c) {
        struct dp_http *h = c->h;

        if (!c->linked)
                return;
        c->linked = false;
        if (c->prev)
                c->prev->next = c->next;
        else
                h->oldest = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                h->newest = c->prev;
        c->prev = c->next = NULL;
}

static void arm(struct conn *c) {
        int s = c->state == C_READ   ? HTTP_REQUEST_S
                : c->state == C_WAIT ? HTTP_WAIT_S
                                     : HTTP_WRITE_S;
        const struct timeval tv = { s, 0 };
        evtimer_add(c->timer, &tv);
}

static void progress(struct conn *c) {
        struct dp_http *h = c->h;

        unlink_conn(c);
        c->prev = h->newest;
        if (h->newest)
                h->newest->next = c;
        else
                h->oldest = c;
        h->newest = c;
        c->linked = true;
        arm(c);
}

static void conn_free(struct conn *c) {
        struct dp_http *h = c->h;

        unlink_conn(c);
        h->n_conns--;
        event_free(c->timer);
        /* Drops the references to any page being sent. */
        bufferevent_free(c->bev);
        free(c);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
        struct conn *c = arg;
        log_debug("metrics endpoint: closing a connection that %s in time",
                  c->state == C_READ ? "sent no complete request" : "took no answer");
        conn_free(c);
}

static const char *status_text(int status) {
        switch (status) {
        case 200:
                return "OK";
        case 400:
                return "Bad Request";
        case 404:
                return "Not Found";
        case 405:
                return "Method Not Allowed";
        case 413:
                return "Content Too Large";
        case 431:
                return "Request Header Fields Too Large";
        case 500:
                return "Internal Server Error";
        case 501:
                return "Not Implemented";
        case 503:
                return "Service Unavailable";
        case 505:
                return "HTTP Version Not Supported";
        default:
                return "Unknown";
        }
}

static void page_unref(const void *data, size_t len, void *arg) {
        struct page *p = arg;
        struct dp_http *h = p->h;

        (void)data, (void)len;
        if (--p->refs)
                return;
        dp_mbuf_free(&p->b);
        free(p);
        h->pages--;
        /* The page was mapped; what its rendering freed leaves holes in
         * the heap that would stay resident until the next scrape. */
        malloc_trim(0);
        /* Not from here: this runs inside a bufferevent's write or free. */
        event_active(h->pages_ev, 0, 0);
}

/* Sends the status line, header fields and body (text, or page when not
 * NULL); HEAD gets GET's header fields, Content-Length included, and no
 * body (RFC 9110 9.3.2): load balancers and uptime checkers probe with
 * HEAD. */
static void respond(struct conn *c, int status, const char *type, const char *text,
                    struct page *page) {
        struct evbuffer *out = bufferevent_get_output(c->bev);
        size_t len = page ? page->b.len : strlen(text);

        /* A refused request: its client gets no second try on the connection. */
        if (status >= 400 && status != 404 && status != 503)
                c->close_after = true;
        if (evbuffer_add_printf(out,
                                "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                                "%s%s\r\n",
                                status, status_text(status), type, len,
                                status == 405 ? "Allow: GET, HEAD\r\n" : "",
                                c->close_after ? "Connection: close\r\n" : "") < 0)
                c->close_after = true;
        else if (!c->head && len) {
                if (page) {
                        page->refs++;
                        if (evbuffer_add_reference(out, page->b.s, len, page_unref, page) < 0) {
                                page->refs--;
                                c->close_after = true;
                        }
                } else if (evbuffer_add(out, text, len) < 0)
                        c->close_after = true;
        }
        c->state = C_WRITE;
        arm(c);
}

static void respond_text(struct conn *c, int status, const char *text) {
        respond(c, status, "text/plain; charset=utf-8", text, NULL);
}

static void healthz(struct conn *c) {
        const struct dp_metrics_source *src = &c->h->src;
        struct timespec until;
        bool stopping;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += HEALTH_LOCK_TIMEOUT_S;
        /* Both loops hold the runtime's lock for all of their work and let go when
         * they wait: a handler stuck in a loop or a blocking call keeps it,
         * and the probe fails within seconds. */
        if (src->lock(src->ctx, &until) < 0)
                return respond_text(c, 503, "the daemon's loops are stuck\n");
        stopping = src->stopping(src->ctx);
        src->unlock(src->ctx);
        if (stopping)
                return respond_text(c, 503, "shutting down\n");
        respond_text(c, 200, "ok\n");
}

static void readyz(struct conn *c) {
        const struct dp_metrics_source *src = &c->h->src;
        struct dp_mbuf b = { 0 };
        bool all = true;

        src->lock(src->ctx, NULL);
        for (size_t i = 0, n = src->n_res(src->ctx); i < n; i++) {
                struct dp_metrics_res res;
                const char *why = NULL;
                src->res(src->ctx, i, &res);
                bool ready = dp_resource_ready(&res, &why);
                all &= ready;
                dp_mbuf_puts(&b, res.name);
                dp_mbuf_puts(&b, ready ? ": ready\n" : ": not ready: ");
                if (!ready) {
                        dp_mbuf_puts(&b, why);
                        dp_mbuf_puts(&b, "\n");
                }
        }
        if (src->stopping(src->ctx)) {
                all = false;
                dp_mbuf_puts(&b, "shutting down\n");
        }
        src->unlock(src->ctx);
        if (b.err)
                respond_text(c, 500, "out of memory\n");
        else
                respond_text(c, all ? 200 : 503, b.s ? b.s : "");
        dp_mbuf_free(&b);
}

static bool path_is(const struct dp_http_request *req, const char *path) {
        return strlen(path) == req->path_len && memcmp(req->path, path, req->path_len) == 0;
}

static void handle(struct conn *c, const struct dp_http_request *req) {
        log_debug("metrics endpoint: %s %.*s",
                  req->method == DP_HTTP_GET    ? "GET"
                  : req->method == DP_HTTP_HEAD ? "HEAD"
                                                : "another method",
                  (int)(req->path_len > 200 ? 200 : req->path_len), req->path);
        c->head = req->method == DP_HTTP_HEAD;
        c->close_after = req->close || c->eof;
        c->body_left = req->content_length;
        if (req->method == DP_HTTP_OTHER)
                return respond_text(c, 405, "only GET and HEAD are served here\n");
        if (path_is(req, "/metrics")) {
                c->state = C_WAIT;
                arm(c);
                return serve_waiting(c->h);
        }
        if (path_is(req, "/healthz"))
                return healthz(c);
        if (path_is(req, "/readyz"))
                return readyz(c);
        respond_text(c, 404, "not found: try /metrics, /healthz or /readyz\n");
}

/* Parses and answers what the connection sent, one request at a time:
 * the next waits in the input (within its budget) until this one's answer
 * is sent. */
static void process(struct conn *c) {
        struct evbuffer *in = bufferevent_get_input(c->bev);

        while (c->state == C_READ) {
                size_t len = evbuffer_get_length(in);
                if (c->body_left) {
                        size_t n = len < c->body_left ? len : c->body_left;
                        evbuffer_drain(in, n);
                        c->body_left -= n;
                        if (c->body_left) {
                                if (c->eof)
                                        return conn_free(c);
                                return;
                        }
                        continue;
                }
                /* Empty lines before a request are ignored (RFC 9112 2.2). */
                const unsigned char *p = evbuffer_pullup(in, len < 2 ? (ev_ssize_t)len : 2);
                if (len >= 2 && p[0] == '\r' && p[1] == '\n') {
                        evbuffer_drain(in, 2);
                        continue;
                }
                struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
                if (end.pos < 0) {
                        if (len > HTTP_MAX_REQUEST)
                                return respond_text(c, 431, "request too large\n");
                        if (c->eof)
                                return conn_free(c);
                        return;
                }
                if ((size_t)end.pos + 4 > HTTP_MAX_REQUEST)
                        return respond_text(c, 431, "request too large\n");
                char head[HTTP_MAX_REQUEST];
                struct dp_http_request req;
                size_t hlen = (size_t)end.pos;
                evbuffer_remove(in, head, hlen);
                evbuffer_drain(in, 4);
                progress(c);
                int status = dp_http_parse_head(head, hlen, &req);
                if (status) {
                        c->head = false;
                        respond_text(c, status,
                                     status == 413 ? "request body too large\n" : "bad request\n");
                        continue;
                }
                handle(c, &req);
        }
}

static void on_read(struct bufferevent *bev, void *arg) {
        struct conn *c = arg;
        (void)bev;
        if (c->state == C_READ)
                process(c);
}

/* The answer is sent (the output drained). */
static void on_write(struct bufferevent *bev, void *arg) {
        struct conn *c = arg;
        (void)bev;

        if (c->state != C_WRITE)
                return;
        if (c->close_after)
                return conn_free(c);
        c->state = C_READ;
        progress(c);
        process(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg) {
        struct conn *c = arg;

        if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) && !(what & BEV_EVENT_ERROR)) {
                /* Half-closed: what was sent is still answered. */
                c->eof = true;
                bufferevent_disable(bev, EV_READ);
                if (c->state == C_READ)
                        process(c);
                return;
        }
        conn_free(c);
}

static void serve_page(struct dp_http *h, const struct dp_podres_answer *answer) {
        struct page *p = calloc(1, sizeof(*p));
        uint64_t errors = h->pr ? dp_podres_errors(h->pr) : 0;

        if (!p || dp_metrics_render(&h->src, answer, errors, &p->b) < 0) {
                if (p)
                        dp_mbuf_free(&p->b);
                free(p);
                for (struct conn *c = h->oldest, *next; c; c = next) {
                        next = c->next;
                        if (c->state == C_WAIT)
                                respond_text(c, 500, "out of memory\n");
                }
                return;
        }
        p->h = h;
        p->refs = 1;
        h->pages++;
        for (struct conn *c = h->oldest, *next; c; c = next) {
                next = c->next;
                if (c->state == C_WAIT)
                        respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, p);
        }
        page_unref(NULL, 0, p);
}

/* Our resources' names and DRA pools ("<driver>:<pool>"), for
 * PodResources to keep their IDs only. */
static int resource_names(const struct dp_metrics_source *src, char ***ret, size_t *ret_n) {
        char **v;
        size_t n, k = 0;

        src->lock(src->ctx, NULL);
        n = src->n_res(src->ctx);
        v = calloc(2 * n + 1, sizeof(*v));
        for (size_t i = 0; v && i < n; i++) {
                struct dp_metrics_res res;
                src->res(src->ctx, i, &res);
                if ((v[k++] = strdup(res.name)) && (!res.pool || (v[k++] = strdup(res.pool))))
                        continue;
                for (size_t j = 0; j < k; j++)
                        free(v[j]);
                free(v);
                v = NULL;
        }
        src->unlock(src->ctx);
        if (!v)
                return -ENOMEM;
        *ret = v;
        *ret_n = k;
        return 0;
}

/* Scrapes waiting get one page, once PodResources has answered (or
 * failed) and a page slot is free. */
static void serve_waiting(struct dp_http *h) {
        struct dp_podres_answer *answer = NULL;
        bool any = false;

        for (struct conn *c = h->oldest; c && !any; c = c->next)
                any = c->state == C_WAIT;
        if (!any || h->pages >= HTTP_MAX_PAGES)
                return;
        if (h->pr) {
                char **names = NULL;
                size_t n = 0;
                if (resource_names(&h->src, &names, &n) == 0) {
                        answer = dp_podres_get(h->pr, names, n);
                        for (size_t i = 0; i < n; i++)
                                free(names[i]);
                        free(names);
                }
                if (!answer)
                        return; /* asked: on_podres() comes back */
        }
        serve_page(h, answer);
        if (answer)
                dp_podres_unref(h->pr, answer);
}

static void on_podres(evutil_socket_t fd, short what, void *arg) {
        struct dp_http *h = arg;
        uint64_t n;

        (void)!read(fd, &n, sizeof(n));
        serve_waiting(h);
}

static void on_pages(evutil_socket_t fd, short what, void *arg) {
        serve_waiting(arg);
}

static void listen_later(struct dp_http *h);

/* The listener stays on while full: the connection that made no progress
 * for longest makes way (see the top of this file). */
static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int socklen, void *arg) {
        struct dp_http *h = arg;
        struct conn *c;

        (void)sa, (void)socklen;
        h->accept_failures = 0;
        if (++h->turn_accepts == HTTP_ACCEPTS_PER_TURN) {
                /* A zero timer runs after the next epoll_wait, which
                 * reports what the new connections have sent. */
                static const struct timeval now = { 0, 0 };
                evconnlistener_disable(l);
                evtimer_add(h->turn_ev, &now);
        }
        if (h->n_conns >= HTTP_MAX_CONNECTIONS) {
                log_debug("metrics endpoint: %d connections open, closing the longest idle",
                          HTTP_MAX_CONNECTIONS);
                conn_free(h->oldest);
        }
        /* Best effort: without them the kernel's defaults hold. */
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){ HTTP_SO_RCVBUF }, sizeof(int));
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){ HTTP_SO_SNDBUF }, sizeof(int));
        c = calloc(1, sizeof(*c));
        if (!c || !(c->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE))) {
                free(c);
                evutil_closesocket(fd);
                return;
        }
        c->timer = evtimer_new(h->base, on_deadline, c);
        if (!c->timer) {
                bufferevent_free(c->bev);
                free(c);
                return;
        }
        c->h = h;
        h->n_conns++;
        bufferevent_setwatermark(c->bev, EV_READ, 0, HTTP_INPUT_BUDGET);
        /* The page goes out in a few writes, not in 16 kB ones. */
        bufferevent_set_max_single_write(c->bev, HTTP_MAX_WRITE);
        bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
        progress(c);
}

/* accept() failed for a reason other than a client's (no fds left, most
 * likely): the listener rests, longer each time, instead of spinning. */
static void on_accept_error(struct evconnlistener *l, void *arg) {
        struct dp_http *h = arg;
        uint64_t ms = dp_backoff_ms(ACCEPT_REST_MIN_MS, ACCEPT_REST_MAX_MS, h->accept_failures++);
        const struct timeval rest = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
        int err = EVUTIL_SOCKET_ERROR();

        if (h->accept_failures == 1)
                log_with(LOG_WARN, &(struct log_fields){ .err = err },
                         "metrics endpoint on %s: cannot accept a connection: %s; pausing "
                         "accepts, starting with %llu ms",
                         h->address, strerror(err), (unsigned long long)ms);
        evconnlistener_disable(l);
        h->resting = true;
        evtimer_add(h->rest_ev, &rest);
}

static void on_rest_over(evutil_socket_t fd, short what, void *arg) {
        struct dp_http *h = arg;
        h->resting = false;
        if (!evtimer_pending(h->turn_ev, NULL))
                evconnlistener_enable(h->listener);
}

static void on_turn(evutil_socket_t fd, short what, void *arg) {
        struct dp_http *h = arg;
        h->turn_accepts = 0;
        if (!h->resting)
                evconnlistener_enable(h->listener);
}

static void log_serving(struct dp_http *h) {
        const char *pr = dp_podres_path(h->pr);
        log_info("metrics: serving /metrics, /healthz and /readyz on http://%s%s%s", h->address,
                 pr ? ", pod labels from " : "", pr ? pr : "");
}

/* bind and listen; 0, or -errno with the socket left to try again. The
 * backlog is as deep as the kernel allows (net.core.somaxconn): a burst
 * of connections that overflows it has the kernel drop SYNs, the probe's
 * among them, and a dropped SYN is retried only after a second. Queued,
 * they are taken and evicted in a few milliseconds. */
static int try_listen(struct dp_http *h) {
        if (h->listening)
                return 0; /* only the listener was missing */
        if (bind(h->listen_fd, (struct sockaddr *)&h->ss, h->ss_len) < 0 ||
            listen(h->listen_fd, HTTP_BACKLOG) < 0)
                return -errno;
        h->listening = true;
        return 0;
}

static int make_listener(struct dp_http *h) {
        h->listener = evconnlistener_new(
                h->base, on_accept, h, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                0 /* listening already, with HTTP_BACKLOG */, h->listen_fd);
        if (!h->listener)
                return -ENOMEM;
        h->listen_fd = -1;
        evconnlistener_set_error_cb(h->listener, on_accept_error);
        return 0;
}

static void on_bind_retry(evutil_socket_t fd, short what, void *arg) {
        struct dp_http *h = arg;
        int r = try_listen(h);

        if (r == 0)
                r = make_listener(h);
        if (r == 0) {
                log_info("metrics: %s is free now", h->address);
                log_serving(h);
                return;
        }
        log_with(LOG_DEBUG, &(struct log_fields){ .err = r },
                 "metrics: still cannot listen on %s: %s", h->address, strerror(-r));
        h->bind_failures++;
        listen_later(h);
}

static void listen_later(struct dp_http *h) {
        uint64_t ms = dp_backoff_ms(BIND_RETRY_MIN_MS, BIND_RETRY_MAX_MS, h->bind_failures);
        const struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
        evtimer_add(h->bind_ev, &tv);
}

static int setup(struct dp_http *h) {
        struct event_config *cfg = event_config_new();

        if (!cfg)
                return -ENOMEM;
        /* One thread uses the base, so no locks; and the environment does
         * not get to pick another backend. */
        event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_IGNORE_ENV);
        h->base = event_base_new_with_config(cfg);
        event_config_free(cfg);
        if (!h->base)
                return -ENOMEM;
        h->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        h->podres_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (h->stop_fd < 0 || h->podres_fd < 0)
                return -errno;
        h->stop_ev = event_new(h->base, h->stop_fd, EV_READ, on_stop, h);
        h->podres_ev = event_new(h->base, h->podres_fd, EV_READ | EV_PERSIST, on_podres, h);
        h->pages_ev = event_new(h->base, -1, 0, on_pages, h);
        h->rest_ev = evtimer_new(h->base, on_rest_over, h);
        h->bind_ev = evtimer_new(h->base, on_bind_retry, h);
        h->turn_ev = evtimer_new(h->base, on_turn, h);
        if (!h->stop_ev || !h->podres_ev || !h->pages_ev || !h->rest_ev || !h->bind_ev ||
            !h->turn_ev || event_add(h->stop_ev, NULL) < 0 || event_add(h->podres_ev, NULL) < 0)
                return -ENOMEM;
        return h->listening ? make_listener(h) : 0;
}

int dp_http_open(const struct dp_metrics_source *src, const char *address, const char *podres_path,
                 struct dp_http **ret) {
        const char *msg = NULL;
        int one = 1, r;
        struct dp_http *h;

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->src = *src;
        h->stop_fd = h->podres_fd = h->listen_fd = -1;
        r = dp_http_parse_address(address, &h->ss, &h->ss_len, &msg);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = msg ? 0 : r },
                         "metrics address \"%s\": %s", address, msg ? msg : strerror(-r));
                free(h);
                return r;
        }
        if (!(h->address = strdup(address))) {
                free(h);
                return -ENOMEM;
        }
        event_set_log_callback(event_log);
        r = setup(h);
        if (r == 0 && podres_path)
                r = dp_podres_new(podres_path, h->podres_fd, &h->pr);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = r },
                         "metrics: cannot set up the HTTP endpoint on %s: %s", address,
                         strerror(-r));
                dp_http_stop(h);
                return r;
        }
        h->listen_fd = socket(h->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (h->listen_fd < 0 ||
            setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
                r = -errno;
                log_with(LOG_ERR, &(struct log_fields){ .err = r },
                         "metrics: cannot make a socket for %s: %s", address, strerror(-r));
                dp_http_stop(h);
                return r;
        }
        /* A taken port must not keep the devices from being served: the
         * endpoint's thread binds it again, with back-off. */
        r = try_listen(h);
        if (r == 0)
                r = make_listener(h);
        if (r == -ENOMEM) {
                log_with(LOG_ERR, &(struct log_fields){ .err = r },
                         "metrics: cannot set up the HTTP endpoint on %s: %s", address,
                         strerror(-r));
                dp_http_stop(h);
                return r;
        }
        if (r < 0)
                log_with(LOG_WARN, &(struct log_fields){ .err = r },
                         "metrics: cannot listen on %s: %s; serving the devices without the "
                         "endpoint, trying again in %d s and longer",
                         address, strerror(-r), BIND_RETRY_MIN_MS / 1000);
        *ret = h;
        return 0;
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
        int r = h->pr ? dp_podres_start(h->pr) : 0;

        /* Before the thread: the base is the thread's alone once it runs. */
        if (r == 0 && !h->listener)
                listen_later(h);
        if (r == 0)
                r = -pthread_create(&h->thread, NULL, serve, h);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = r },
                         "metrics: cannot start the HTTP endpoint on %s: %s", h->address,
                         strerror(-r));
                return r;
        }
        h->running = true;
        if (h->listener)
                log_serving(h);
        return 0;
}

void dp_http_stop(struct dp_http *h) {
        static const uint64_t one = 1;

        if (!h)
                return;
        if (h->running) {
                if (write(h->stop_fd, &one, sizeof(one)) < 0)
                        log_with(LOG_ERR, &(struct log_fields){ .err = errno },
                                 "metrics: cannot stop the HTTP endpoint: %m");
                else
                        pthread_join(h->thread, NULL);
        }
        /* Connections first: freeing one drops its page, which wakes
         * pages_ev. */
        while (h->oldest)
                conn_free(h->oldest);
        if (h->listener)
                evconnlistener_free(h->listener);
        /* The worker writes podres_fd: it goes before the fd. */
        dp_podres_free(h->pr);
        struct event *evs[] = { h->stop_ev,   h->rest_ev,  h->bind_ev,
                                h->podres_ev, h->pages_ev, h->turn_ev };
        for (size_t i = 0; i < sizeof(evs) / sizeof(*evs); i++)
                if (evs[i])
                        event_free(evs[i]);
        if (h->base)
                event_base_free(h->base);
        if (h->stop_fd >= 0)
                close(h->stop_fd);
        if (h->podres_fd >= 0)
                close(h->podres_fd);
        if (h->listen_fd >= 0)
                close(h->listen_fd);
        free(h->address);
        free(h);
}
