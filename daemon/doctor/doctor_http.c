/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: one bounded HTTP/1.0 GET, to ask the running daemon's /readyz.
 * HTTP/1.0 so the server closes the connection after the answer and no
 * chunked encoding can come back; every wait is bounded by one deadline. */
#include "doctor-internal.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "loop.h"
#include "config.h"
#include "log.h"

#define HTTP_MAX_ANSWER (64 * 1024)

/* Wait for events on fd until the deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, long long deadline) {
        for (;;) {
                long long left = deadline - (long long)dp_now_ms();
                struct pollfd p = { .fd = fd, .events = events };
                if (left <= 0)
                        return -ETIMEDOUT;
                int r = poll(&p, 1, (int)left);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r > 0)
                        return 0;
        }
}

/* The address is numeric, as serve takes it: nothing is resolved. */
static int connect_to(const char *hostport, long long deadline, int *ret_fd) {
        struct sockaddr_storage ss;
        unsigned len;
        const char *msg = NULL;
        int err = 0, r = dp_http_parse_address(hostport, &ss, &len, &msg);
        socklen_t err_len = sizeof(err);

        if (r < 0)
                return r;
        _cleanup_close_ int fd =
                socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
                return -errno;
        if ((r = wait_fd(fd, POLLOUT, deadline)) < 0)
                return r;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) < 0)
                return -errno;
        if (err)
                return -err;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int doc_http_get(const char *hostport, const char *path, int timeout_ms, int *ret_status,
                 char **ret_body) {
        long long deadline = (long long)dp_now_ms() + timeout_ms;
        _cleanup_free_ char *req = NULL, *buf = NULL;
        _cleanup_close_ int fd = -1;
        size_t n = 0, sent = 0;
        int r, status;

        r = connect_to(hostport, deadline, &fd);
        if (r < 0)
                return r;
        if (xasprintf(&req, "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n", path,
                      hostport) < 0)
                return -ENOMEM;
        while (sent < strlen(req)) {
                ssize_t k = send(fd, req + sent, strlen(req) - sent, MSG_NOSIGNAL);
                if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
                        if ((r = wait_fd(fd, POLLOUT, deadline)) < 0)
                                return r;
                        continue;
                }
                if (k < 0)
                        return -errno;
                sent += (size_t)k;
        }
        buf = malloc(HTTP_MAX_ANSWER + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = recv(fd, buf + n, HTTP_MAX_ANSWER - n, 0);
                if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
                        if ((r = wait_fd(fd, POLLIN, deadline)) < 0)
                                return r;
                        continue;
                }
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t)k;
                if (n == HTTP_MAX_ANSWER)
                        return -E2BIG;
        }
        buf[n] = '\0';
        char sp;
        /* NOLINTNEXTLINE(cert-err34-c): three digits at most, range-checked below */
        if (sscanf(buf, "HTTP/1.%*1[01]%c%3d", &sp, &status) != 2 || sp != ' ' || status < 100 ||
            status > 599)
                return -EBADMSG;
        char *body = strstr(buf, "\r\n\r\n");
        if (!body)
                return -EBADMSG;
        if (ret_body) {
                char *copy = strdup(body + 4);
                if (!copy)
                        return -ENOMEM;
                *ret_body = copy;
        }
        *ret_status = status;
        return 0;
}

/* Ask the running daemon whether the kubelet accepted its resources: a
 * readiness endpoint answers 200 when ready and an error status when not;
 * its body is shown line by line as the daemon wrote it. */
void doc_check_readyz(struct doc_ctx *c, const char *hostport) {
        _cleanup_free_ char *body = NULL;
        int status = 0;
        int r = doc_http_get(hostport, "/readyz", 2000, &status, &body);

        if (r < 0) {
                doc_add(c, "kubelet", DOC_WARN,
                        "is the daemon running, and its metrics address reachable from here?",
                        "cannot ask the daemon's /readyz on %s: %s: registration not checked",
                        hostport, strerror(-r));
                return;
        }
        /* One finding per line of the answer, as the daemon wrote it. */
        size_t lines = 0;
        for (char *save = NULL, *line = strtok_r(body, "\n", &save); line && lines < 256;
             line = strtok_r(NULL, "\n", &save), lines++)
                doc_add(c, "kubelet", status == 200 ? DOC_OK : DOC_INFO, NULL, "daemon /readyz: %s",
                        line);
        if (status != 200)
                doc_add(c, "kubelet", DOC_PROBLEM,
                        "see the daemon's log for its registration errors",
                        "the daemon's /readyz on %s answers %d: not every resource is registered with the kubelet",
                        hostport, status);
}
