/* SPDX-License-Identifier: Apache-2.0 */
/* A gRPC peer that never reads, written as raw HTTP/2 frames, since a real
 * client always opens its flow-control window. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "stuck.h"

/* One HTTP/2 frame: 9-byte header, then the payload. */
static size_t frame(uint8_t *out, uint8_t type, uint8_t flags, uint32_t stream, const void *payload,
                    size_t len) {
        out[0] = (uint8_t)(len >> 16);
        out[1] = (uint8_t)(len >> 8);
        out[2] = (uint8_t)len;
        out[3] = type;
        out[4] = flags;
        out[5] = (uint8_t)(stream >> 24);
        out[6] = (uint8_t)(stream >> 16);
        out[7] = (uint8_t)(stream >> 8);
        out[8] = (uint8_t)stream;
        memcpy(out + 9, payload, len);
        return 9 + len;
}

/* HPACK "literal header field without indexing, new name", short strings. */
static size_t header(uint8_t *out, const char *name, const char *value) {
        size_t n = 0, nl = strlen(name), vl = strlen(value);
        out[n++] = 0;
        out[n++] = (uint8_t)nl;
        memcpy(out + n, name, nl);
        n += nl;
        out[n++] = (uint8_t)vl;
        memcpy(out + n, value, vl);
        return n + vl;
}

int stuck_stream(const char *socket_path, const char *method) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        uint8_t buf[1024], hpack[256], settings[6] = { 0, 4, 0, 0, 0, 0 }, msg[5] = { 0 };
        size_t n = 0, h = 0;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        cr_assert_geq(fd, 0);
        cr_assert_lt(strlen(socket_path), sizeof(sa.sun_path));
        strcpy(sa.sun_path, socket_path);
        cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s: %m", socket_path);
        static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        /* The HTTP/2 connection preface is 24 bytes on the wire, no NUL. */
        memcpy(buf, preface, sizeof(preface) - 1);
        n = sizeof(preface) - 1;
        /* SETTINGS_INITIAL_WINDOW_SIZE = 0 */
        n += frame(buf + n, 4, 0, 0, settings, sizeof(settings));
        h += header(hpack + h, ":method", "POST");
        h += header(hpack + h, ":scheme", "http");
        h += header(hpack + h, ":path", method);
        h += header(hpack + h, ":authority", "localhost");
        h += header(hpack + h, "content-type", "application/grpc");
        h += header(hpack + h, "te", "trailers");
        n += frame(buf + n, 1, 4 /* END_HEADERS */, 1, hpack, h);
        /* The request, an empty message, and the end of the client's side. */
        n += frame(buf + n, 0, 1 /* END_STREAM */, 1, msg, sizeof(msg));
        cr_assert_eq(write(fd, buf, n), (ssize_t)n);
        return fd;
}
