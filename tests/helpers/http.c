/* SPDX-License-Identifier: Apache-2.0 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int http_free_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
                if (fd >= 0)
                        close(fd);
                return -errno;
        }
        close(fd);
        return ntohs(sa.sin_port);
}

int http_connect(int port) {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

int http_raw(int port, const char *raw, size_t len, char **ret_body, int timeout_ms) {
        long long until = now_ms() + timeout_ms;
        size_t cap = 65536, n = 0;
        char *buf;
        int fd = http_connect(port), status = 0;

        if (fd < 0)
                return fd;
        for (size_t off = 0; off < len;) {
                ssize_t w = send(fd, raw + off, len - off, MSG_NOSIGNAL);
                if (w < 0)
                        break; /* the server may answer and close early */
                off += (size_t)w;
        }
        buf = malloc(cap);
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                long long left = until - now_ms();
                if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
                        free(buf);
                        close(fd);
                        return -ETIMEDOUT;
                }
                if (n + 4096 > cap)
                        buf = realloc(buf, cap *= 2);
                ssize_t r = read(fd, buf + n, cap - n - 1);
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        buf[n] = '\0';
        /* A 3-digit status from the daemon under test; any other line
         * leaves 0, which every caller asserts against.
         * NOLINTNEXTLINE(cert-err34-c) */
        (void)sscanf(buf, "HTTP/1.%*d %d", &status);
        if (ret_body) {
                char *body = strstr(buf, "\r\n\r\n");
                *ret_body = strdup(body ? body + 4 : "");
        }
        free(buf);
        return status;
}

int http_probe(int port, const char *path, int timeout_ms) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        long long until = now_ms() + timeout_ms;
        char req[256], buf[512];
        size_t n = 0;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), status = 0;
        int len = snprintf(req, sizeof(req),
                           "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);

        if (fd < 0)
                return -errno;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
                close(fd);
                return -errno;
        }
        for (bool sent = false;;) {
                struct pollfd p = { .fd = fd, .events = sent ? POLLIN : POLLOUT };
                long long left = until - now_ms();
                if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
                        close(fd);
                        return -ETIMEDOUT;
                }
                if (!sent) {
                        if (send(fd, req, (size_t)len, MSG_NOSIGNAL) != len) {
                                close(fd);
                                return -EIO;
                        }
                        sent = true;
                        continue;
                }
                ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
                if (r <= 0 || (n += (size_t)r) >= sizeof(buf) - 1 || memchr(buf, '\n', n))
                        break;
        }
        close(fd);
        buf[n] = '\0';
        /* "HTTP/1.x NNN ..." */
        if (strncmp(buf, "HTTP/1.", 7) == 0 && buf[7] && buf[8] == ' ')
                status = (int)strtol(buf + 9, NULL, 10);
        return status;
}

int http_get(int port, const char *path, char **ret_body) {
        char req[512];
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
        return http_raw(port, req, (size_t)n, ret_body, 10000);
}

double http_metric(int port, const char *sample) {
        char *body = NULL, needle[160];
        const char *p;
        double v;

        if (http_get(port, "/metrics", &body) != 200) {
                free(body);
                return -1;
        }
        snprintf(needle, sizeof(needle), "\n%s ", sample);
        p = strstr(body, needle);
        v = p ? strtod(p + strlen(needle), NULL) : -1;
        free(body);
        return v;
}

int file_count(const char *path, const char *needle) {
        FILE *f = fopen(path, "r");
        char *line = NULL;
        size_t cap = 0;
        int n = 0;

        if (!f)
                return 0;
        while (getline(&line, &cap, f) >= 0)
                n += strstr(line, needle) != NULL;
        free(line);
        fclose(f);
        return n;
}

int file_wait_for(const char *path, const char *needle, int timeout_ms) {
        return file_wait_count(path, needle, 1, timeout_ms);
}

int file_wait_count(const char *path, const char *needle, int n, int timeout_ms) {
        long long until = now_ms() + timeout_ms;
        int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        int r = -ETIMEDOUT;

        if (fd < 0)
                return -errno;
        inotify_add_watch(fd, path, IN_MODIFY);
        for (;;) {
                if (file_count(path, needle) >= n) {
                        r = 0;
                        break;
                }
                struct pollfd p = { .fd = fd, .events = POLLIN };
                long long left = until - now_ms();
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        break;
                char ev[4096];
                while (read(fd, ev, sizeof(ev)) > 0)
                        ;
        }
        close(fd);
        return r;
}

int wait_closed(int fd, int timeout_ms) {
        long long until = now_ms() + timeout_ms;
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char buf[4096];
                long long left = until - now_ms();
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        return -ETIMEDOUT;
                if (read(fd, buf, sizeof(buf)) <= 0)
                        return 0;
        }
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

char *lines_with(const char *text, const char *prefix) {
        char **lines = NULL, *out;
        size_t n = 0, total = 1;

        for (const char *p = text; p && *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                if (strncmp(p, prefix, strlen(prefix)) == 0) {
                        lines = realloc(lines, (n + 1) * sizeof(*lines));
                        lines[n++] = strndup(p, len);
                        total += len + 1;
                }
                p = nl ? nl + 1 : NULL;
        }
        if (n)
                qsort(lines, n, sizeof(*lines), cmp_str);
        out = calloc(1, total);
        for (size_t i = 0; i < n; i++) {
                strcat(out, lines[i]);
                if (i + 1 < n)
                        strcat(out, "\n");
                free(lines[i]);
        }
        free(lines);
        return out;
}
