/* SPDX-License-Identifier: Apache-2.0 */
/* The monitoring endpoint: libmicrohttpd on one internal thread (epoll),
 * serving /metrics, /healthz and /readyz, GET and HEAD only.
 *
 * The listening socket is ours, bound before the lock-down: afterwards
 * the seccomp filter refuses sockets of any family but AF_UNIX. The
 * thread starts after the lock-down, so it inherits the filter, no
 * capabilities and no_new_privs like grpc's threads. With no connection
 * open, libmicrohttpd waits in epoll_wait with no timeout: a daemon
 * nobody scrapes does not wake up for it.
 *
 * Bounds, so that a hostile or broken client cannot hold the endpoint: a
 * few connections at once (more are accepted and closed at once), a small
 * per-connection memory pool that caps the request line and headers, an
 * idle timeout per connection, and no request body is ever read. */
#include <arpa/inet.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "config.h"
#include "daemon.h"
#include "metrics.h"
#include "util.h"

#define HTTP_MAX_CONNECTIONS 16
#define HTTP_TIMEOUT_S 5
#define HTTP_MAX_REQUEST (16 * 1024)
/* A loop that cannot take its own lock within this long is stuck. */
#define HEALTH_LOCK_TIMEOUT_S 2

struct dp_http {
        struct dp_daemon *d;
        int listen_fd;
        char *address;
        struct MHD_Daemon *mhd;
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
        h->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (h->listen_fd < 0 ||
            setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(h->listen_fd, (struct sockaddr *)&ss, len) < 0 || listen(h->listen_fd, 64) < 0) {
                r = -errno;
                log_error("metrics: cannot listen on %s: %s", address, strerror(-r));
                if (h->listen_fd >= 0)
                        close(h->listen_fd);
                free(h->address);
                free(h);
                return r;
        }
        dp_podres_init(&h->pr, podres_path);
        *ret = h;
        return 0;
}

static void body_free(void *cls) {
        struct dp_mbuf *b = cls;
        dp_mbuf_free(b);
        free(b);
}

/* Answers with b's text, which it takes (b is left empty). */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             struct dp_mbuf *b) {
        struct dp_mbuf *body = malloc(sizeof(*body));
        struct MHD_Response *resp;
        enum MHD_Result r;

        if (!body) {
                dp_mbuf_free(b);
                return MHD_NO;
        }
        *body = *b;
        *b = (struct dp_mbuf){ 0 };
        resp = MHD_create_response_from_buffer_with_free_callback_cls(
                body->len, body->s ? body->s : "", body_free, body);
        if (!resp) {
                body_free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        r = MHD_queue_response(conn, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *text) {
        struct dp_mbuf b = { 0 };

        dp_mbuf_puts(&b, text);
        if (b.err) {
                dp_mbuf_free(&b);
                return MHD_NO;
        }
        return reply(conn, status, "text/plain; charset=utf-8", &b);
}

static enum MHD_Result healthz(struct dp_http *h, struct MHD_Connection *conn) {
        struct timespec until;
        bool stopping;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += HEALTH_LOCK_TIMEOUT_S;
        /* Both loops hold d->lock for all of their work and let go when
         * they wait: a handler stuck in a loop or a blocking call keeps it,
         * and the probe fails within seconds. */
        if (pthread_mutex_timedlock(&h->d->lock, &until) != 0)
                return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                                  "the daemon's loops are stuck\n");
        stopping = h->d->stopping;
        pthread_mutex_unlock(&h->d->lock);
        if (stopping)
                return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down\n");
        return reply_text(conn, MHD_HTTP_OK, "ok\n");
}

static enum MHD_Result readyz(struct dp_http *h, struct MHD_Connection *conn) {
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
                return MHD_NO;
        }
        return reply(conn, all ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                     "text/plain; charset=utf-8", &b);
}

static enum MHD_Result metrics(struct dp_http *h, struct MHD_Connection *conn) {
        struct dp_mbuf b = { 0 };

        if (dp_metrics_render(h->d, &h->pr, &b) < 0) {
                dp_mbuf_free(&b);
                return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        }
        return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &b);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
        struct dp_http *h = cls;

        log_debug("metrics endpoint: %.16s %.200s", method, url);
        /* Answered at the headers: a body, if any, is never read, and
         * libmicrohttpd closes the connection after the answer. HEAD is
         * answered as GET and libmicrohttpd leaves the body out (RFC 9110
         * 9.3.2: same header fields, Content-Length included): load
         * balancers and uptime checkers probe with HEAD. */
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
                return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                                  "only GET and HEAD are served here\n");
        if (strcmp(url, "/metrics") == 0) {
                *con_cls = h; /* for done() */
                return metrics(h, conn);
        }
        if (strcmp(url, "/healthz") == 0)
                return healthz(h, conn);
        if (strcmp(url, "/readyz") == 0)
                return readyz(h, conn);
        return reply_text(conn, MHD_HTTP_NOT_FOUND,
                          "not found: try /metrics, /healthz or /readyz\n");
}

/* A scrape's allocations (grpc's call, the List answer, libmicrohttpd's
 * connection) are freed by now but leave free pages amid the heap, which
 * would stay resident until the next scrape (about 120 kB with 1,000
 * allocated IDs): give them back, as the daemon does after a kubelet
 * restart's burst. The page itself and the decoded answer are mappings of
 * their own, already unmapped. */
static void done(void *cls, struct MHD_Connection *conn, void **con_cls,
                 enum MHD_RequestTerminationCode why) {
        if (*con_cls)
                malloc_trim(0);
}

/* libmicrohttpd's complaints are about clients: debug level, one line. */
_printf_(2, 0) static void mhd_log(void *cls, const char *fmt, va_list ap) {
        char line[512];
        vsnprintf(line, sizeof(line), fmt, ap);
        line[strcspn(line, "\n")] = '\0';
        log_debug("metrics endpoint: %s", line);
}

int dp_http_start(struct dp_http *h) {
        h->mhd = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                                  on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->listen_fd,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MAX_REQUEST,
                                  MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_END);
        if (!h->mhd) {
                log_error("metrics: cannot start the HTTP endpoint on %s", h->address);
                return -EIO;
        }
        /* libmicrohttpd closes it when it stops. */
        h->listen_fd = -1;
        log_info("metrics: serving /metrics, /healthz and /readyz on http://%s%s%s", h->address,
                 h->pr.path ? ", pod labels from " : "", h->pr.path ? h->pr.path : "");
        return 0;
}

void dp_http_stop(struct dp_http *h) {
        if (!h)
                return;
        if (h->mhd)
                MHD_stop_daemon(h->mhd);
        if (h->listen_fd >= 0)
                close(h->listen_fd);
        dp_podres_clear(&h->pr);
        free(h->address);
        free(h);
}
