/* SPDX-License-Identifier: Apache-2.0 */
/* The endpoint's text parsing: a request head.
 *
 * An HTTP/1.1 request head (RFC 9112) is parsed strictly: the endpoint
 * takes GET and HEAD of three paths, so anything ambiguous is refused
 * rather than guessed at. A request that two parsers could frame
 * differently (obs-fold, conflicting Content-Length, Transfer-Encoding,
 * a bare CR or LF, control bytes) is the shape of request smuggling. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "metrics.h"
#include "log.h"

/* tchar of RFC 9110 5.6.2. */
static bool tchar(unsigned char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool token(const char *s, size_t n) {
        if (!n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!tchar((unsigned char)s[i]))
                        return false;
        return true;
}

static bool name_is(const char *name, size_t n, const char *want) {
        return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* Whether the comma-separated list s[0..n) holds tok (case-insensitive). */
static bool list_has(const char *s, size_t n, const char *tok) {
        size_t tlen = strlen(tok);

        for (size_t i = 0; i < n;) {
                while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ','))
                        i++;
                size_t start = i;
                while (i < n && s[i] != ',')
                        i++;
                size_t end = i;
                while (end > start && (s[end - 1] == ' ' || s[end - 1] == '\t'))
                        end--;
                if (end - start == tlen && strncasecmp(s + start, tok, tlen) == 0)
                        return true;
        }
        return false;
}

static int request_line(const char *s, size_t n, struct dp_http_request *req) {
        const char *sp1 = memchr(s, ' ', n), *sp2;

        if (!sp1 || !token(s, (size_t)(sp1 - s)))
                return 400;
        sp2 = memchr(sp1 + 1, ' ', (size_t)(s + n - sp1 - 1));
        if (!sp2 || sp2 == sp1 + 1)
                return 400;
        const char *target = sp1 + 1, *version = sp2 + 1;
        size_t tlen = (size_t)(sp2 - target), vlen = (size_t)(s + n - version);
        for (size_t i = 0; i < tlen; i++)
                if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f)
                        return 400;
        if (vlen != 8 || strncmp(version, "HTTP/", 5) != 0 || version[6] != '.' ||
            version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9')
                return 400;
        if (version[5] != '1')
                return 505;
        req->http10 = version[7] == '0';
        req->close = req->http10; /* until a keep-alive says otherwise */

        size_t mlen = (size_t)(sp1 - s);
        req->method = mlen == 3 && memcmp(s, "GET", 3) == 0    ? DP_HTTP_GET
                      : mlen == 4 && memcmp(s, "HEAD", 4) == 0 ? DP_HTTP_HEAD
                                                               : DP_HTTP_OTHER;
        /* absolute-form (RFC 9112 3.2.2) names the same path after the
         * authority. */
        if (tlen > 7 && (strncasecmp(target, "http://", 7) == 0 ||
                         (tlen > 8 && strncasecmp(target, "https://", 8) == 0))) {
                const char *auth = memchr(target, '/', tlen) + 2;
                const char *slash = memchr(auth, '/', (size_t)(target + tlen - auth));
                if (!slash) {
                        /* The path is "/", which nothing here serves: an
                         * empty one, still pointing into the head, does
                         * the same. */
                        target += tlen;
                        tlen = 0;
                } else {
                        tlen -= (size_t)(slash - target);
                        target = slash;
                }
        }
        req->path = target;
        req->path_len = 0; /* the head has no NUL: bounded by tlen */
        while (req->path_len < tlen && target[req->path_len] != '?' && target[req->path_len] != '#')
                req->path_len++;
        return 0;
}

static int header(const char *s, size_t n, struct dp_http_request *req, bool *seen_length,
                  unsigned *hosts) {
        const char *colon = memchr(s, ':', n);

        if (s[0] == ' ' || s[0] == '\t') /* obs-fold: refused (RFC 9112 5.2) */
                return 400;
        if (!colon || !token(s, (size_t)(colon - s)))
                return 400;
        size_t nlen = (size_t)(colon - s);
        const char *v = colon + 1, *end = s + n;
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        for (const char *p = v; p < end; p++)
                if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
                        return 400;
        size_t vlen = (size_t)(end - v);

        if (name_is(s, nlen, "Transfer-Encoding"))
                return 501; /* no body is taken here, so no chunked one */
        if (name_is(s, nlen, "Host"))
                (*hosts)++;
        if (name_is(s, nlen, "Connection")) {
                if (list_has(v, vlen, "close"))
                        req->close = true;
                else if (req->http10 && list_has(v, vlen, "keep-alive"))
                        req->close = false;
        }
        if (name_is(s, nlen, "Content-Length")) {
                uint64_t len = 0;
                if (!vlen)
                        return 400;
                for (size_t i = 0; i < vlen; i++) {
                        if (v[i] < '0' || v[i] > '9')
                                return 400;
                        if (len > (UINT64_MAX - 9) / 10)
                                return 413;
                        len = len * 10 + (uint64_t)(v[i] - '0');
                }
                if (*seen_length && len != req->content_length)
                        return 400;
                *seen_length = true;
                if (len > DP_HTTP_MAX_BODY)
                        return 413;
                req->content_length = (size_t)len;
        }
        return 0;
}

int dp_http_parse_head(const char *head, size_t len, struct dp_http_request *ret) {
        struct dp_http_request req = { 0 };
        bool seen_length = false, first = true;
        unsigned hosts = 0;
        int r;

        for (size_t i = 0; i < len;) {
                const char *line = head + i, *crlf = NULL;
                for (size_t j = i; j < len; j++) {
                        /* A bare CR or LF, or a NUL: never in a request. */
                        if (head[j] == '\r' && j + 1 < len && head[j + 1] == '\n') {
                                crlf = head + j;
                                break;
                        }
                        if (head[j] == '\r' || head[j] == '\n' || head[j] == '\0')
                                return 400;
                }
                size_t n = crlf ? (size_t)(crlf - line) : len - i;
                if (!n)
                        return 400;
                r = first ? request_line(line, n, &req)
                          : header(line, n, &req, &seen_length, &hosts);
                if (r)
                        return r;
                first = false;
                i += n + (crlf ? 2 : 0);
        }
        if (first)
                return 400;
        /* RFC 9112 3.2: exactly one Host in HTTP/1.1. */
        if (hosts > 1 || (!req.http10 && hosts == 0))
                return 400;
        *ret = req;
        return 0;
}
