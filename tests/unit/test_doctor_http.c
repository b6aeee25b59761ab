/* SPDX-License-Identifier: Apache-2.0 */
/* doctor's HTTP/1.0 GET against a local server thread: answers, silence,
 * garbage and bad addresses all end in a defined result. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "doctor-internal.h"

struct server {
        int listen_fd;
        const char *answer; /* NULL: accept, read, then stay silent until the client goes */
        char request[1024];
        pthread_t thread;
};

static void *serve_one(void *arg) {
        struct server *s = arg;
        int fd = accept(s->listen_fd, NULL, NULL);
        size_t n = 0;
        if (fd < 0)
                return NULL;
        while (n < sizeof(s->request) - 1 && !strstr(s->request, "\r\n\r\n")) {
                ssize_t k = read(fd, s->request + n, sizeof(s->request) - 1 - n);
                if (k <= 0)
                        break;
                n += (size_t)k;
                s->request[n] = '\0';
        }
        if (s->answer)
                (void)!write(fd, s->answer, strlen(s->answer));
        else {
                char c;
                /* Silent: wait for the client to give up and close. */
                (void)!read(fd, &c, 1);
        }
        close(fd);
        return NULL;
}

static void start(struct server *s, const char *answer, char *hostport, size_t max) {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        memset(s, 0, sizeof(*s));
        s->answer = answer;
        s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert(s->listen_fd >= 0);
        cr_assert_eq(bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(s->listen_fd, 1), 0);
        cr_assert_eq(getsockname(s->listen_fd, (struct sockaddr *)&sa, &len), 0);
        snprintf(hostport, max, "127.0.0.1:%u", ntohs(sa.sin_port));
        cr_assert_eq(pthread_create(&s->thread, NULL, serve_one, s), 0);
}

static void finish(struct server *s) {
        pthread_join(s->thread, NULL);
        close(s->listen_fd);
}

Test(doctor_http, reads_status_and_body) {
        struct server s;
        char hp[64], *body = NULL;
        int status = 0;
        start(&s,
              "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nexample.com/serial: not registered\n",
              hp, sizeof(hp));
        cr_assert_eq(doc_http_get(hp, "/readyz", 5000, &status, &body), 0);
        finish(&s);
        cr_assert_eq(status, 503);
        cr_assert_str_eq(body, "example.com/serial: not registered\n");
        cr_assert_not_null(strstr(s.request, "GET /readyz HTTP/1.0\r\n"), "%s", s.request);
        free(body);
}

Test(doctor_http, silence_times_out) {
        struct server s;
        char hp[64];
        int status = 0;
        start(&s, NULL, hp, sizeof(hp));
        cr_assert_eq(doc_http_get(hp, "/readyz", 100, &status, NULL), -ETIMEDOUT);
        finish(&s);
}

Test(doctor_http, garbage_and_bad_addresses) {
        struct server s;
        char hp[64];
        int status = 0;
        start(&s, "SSH-2.0-OpenSSH\r\n", hp, sizeof(hp));
        cr_assert_eq(doc_http_get(hp, "/readyz", 5000, &status, NULL), -EBADMSG);
        finish(&s);

        /* A port nobody listens on: the listener above is closed now. */
        cr_assert_eq(doc_http_get(hp, "/readyz", 5000, &status, NULL), -ECONNREFUSED);
        cr_assert_eq(doc_http_get("127.0.0.1", "/readyz", 100, &status, NULL), -EINVAL);
        cr_assert_eq(doc_http_get("::1:9100", "/readyz", 100, &status, NULL), -EINVAL,
                     "IPv6 needs brackets");
        cr_assert_eq(doc_http_get("127.0.0.1:http", "/readyz", 100, &status, NULL), -EINVAL);
}

static size_t count_level(const struct doc_ctx *c, enum doc_level level) {
        size_t n = 0;
        for (size_t i = 0; i < c->n; i++)
                n += c->v[i].level == level;
        return n;
}

static void ctx_free(struct doc_ctx *c) {
        for (size_t i = 0; i < c->n; i++) {
                free(c->v[i].msg);
                free(c->v[i].fix);
        }
        free(c->v);
}

Test(doctor_http, readyz_answers_become_findings) {
        struct doc_options o = { .host_root = "/" };
        struct doc_ctx c = { .o = &o };
        struct server s;
        char hp[64];

        start(&s,
              "HTTP/1.0 503 Service Unavailable\r\n\r\nexample.com/serial: registered\nexample.com/fuse: not registered\n",
              hp, sizeof(hp));
        doc_check_readyz(&c, hp);
        finish(&s);
        cr_assert_eq(count_level(&c, DOC_PROBLEM), 1);
        cr_assert_eq(c.n, 3);
        cr_assert_str_eq(c.v[1].msg, "daemon /readyz: example.com/fuse: not registered");
        ctx_free(&c);

        c = (struct doc_ctx){ .o = &o };
        start(&s, "HTTP/1.0 200 OK\r\n\r\nexample.com/serial: registered\n", hp, sizeof(hp));
        doc_check_readyz(&c, hp);
        finish(&s);
        cr_assert_eq(count_level(&c, DOC_PROBLEM) + count_level(&c, DOC_WARN), 0);
        ctx_free(&c);

        /* Nobody listens any more: said, as a warning. */
        c = (struct doc_ctx){ .o = &o };
        doc_check_readyz(&c, hp);
        cr_assert_eq(count_level(&c, DOC_WARN), 1);
        cr_assert_not_null(strstr(c.v[0].msg, "registration not checked"));
        ctx_free(&c);
}
