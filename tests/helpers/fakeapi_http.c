/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi's HTTP/1.1: see fakeapi_http.h. */
#include <strings.h>

#include "fakeapi_http.h"

/* ---- output ---- */

bool fa_send_all(SSL *s, const char *p, size_t n) {
        while (n > 0) {
                int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
                int w = SSL_write(s, p, chunk);

                if (w <= 0)
                        return false;
                p += w;
                n -= (size_t)w;
        }
        return true;
}

static const char *fa_reason_phrase(int code) {
        switch (code) {
        case 100:
                return "Continue";
        case 200:
                return "OK";
        case 201:
                return "Created";
        case 400:
                return "Bad Request";
        case 401:
                return "Unauthorized";
        case 404:
                return "Not Found";
        case 405:
                return "Method Not Allowed";
        case 409:
                return "Conflict";
        case 410:
                return "Gone";
        case 413:
                return "Request Entity Too Large";
        case 422:
                return "Unprocessable Entity";
        case 429:
                return "Too Many Requests";
        case 500:
                return "Internal Server Error";
        case 503:
                return "Service Unavailable";
        default:
                return "Status";
        }
}

bool fa_send_response(SSL *s, int code, const char *body, int retry_after, bool close) {
        char head[512];
        size_t blen = body ? strlen(body) : 0;
        char ra[48] = "";
        int n;

        if (retry_after > 0)
                snprintf(ra, sizeof(ra), "Retry-After: %d\r\n", retry_after);
        n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n%s%s\r\n",
                     code, fa_reason_phrase(code), blen, ra, close ? "Connection: close\r\n" : "");
        MUST(n > 0 && (size_t)n < sizeof(head));
        return fa_send_all(s, head, (size_t)n) && (blen == 0 || fa_send_all(s, body, blen));
}

bool fa_send_json(SSL *s, int code, const cJSON *obj) {
        char *txt = cJSON_PrintUnformatted(obj);
        bool ok;

        MUST(txt);
        ok = fa_send_response(s, code, txt, 0, false);
        free(txt);
        return ok;
}

cJSON *fa_status_obj(int code, const char *reason, const char *msg) {
        cJSON *st = cJSON_CreateObject();

        cJSON_AddStringToObject(st, "kind", "Status");
        cJSON_AddStringToObject(st, "apiVersion", "v1");
        cJSON_AddObjectToObject(st, "metadata");
        cJSON_AddStringToObject(st, "status", "Failure");
        cJSON_AddStringToObject(st, "message", msg);
        cJSON_AddStringToObject(st, "reason", reason);
        cJSON_AddNumberToObject(st, "code", code);
        return st;
}

bool fa_send_status(SSL *s, int code, const char *reason, const char *msg, int retry_after) {
        cJSON *st = fa_status_obj(code, reason, msg);
        char *txt = cJSON_PrintUnformatted(st);
        bool ok;

        MUST(txt);
        ok = fa_send_response(s, code, txt, retry_after, false);
        free(txt);
        cJSON_Delete(st);
        return ok;
}

bool fa_send_chunk(SSL *s, const char *data, size_t n) {
        char head[32];
        int h = snprintf(head, sizeof(head), "%zx\r\n", n);

        return fa_send_all(s, head, (size_t)h) && fa_send_all(s, data, n) &&
               fa_send_all(s, "\r\n", 2);
}

/* ---- input ---- */

/* Fill until the buffer holds "\r\n\r\n"; false on EOF, error or a head
 * too long. */
static bool fa_read_head(struct rbuf *b, size_t *ret_end) {
        for (;;) {
                char *e = b->len >= 4 ? memmem(b->buf, b->len, "\r\n\r\n", 4) : NULL;
                int r;

                if (e) {
                        *ret_end = (size_t)(e - b->buf) + 4;
                        return true;
                }
                if (b->len == sizeof(b->buf))
                        return false;
                r = SSL_read(b->ssl, b->buf + b->len, (int)(sizeof(b->buf) - b->len));
                if (r <= 0)
                        return false;
                b->len += (size_t)r;
        }
}

static bool fa_read_body(struct rbuf *b, char *dst, size_t n) {
        size_t have = b->len < n ? b->len : n;

        memcpy(dst, b->buf, have);
        memmove(b->buf, b->buf + have, b->len - have);
        b->len -= have;
        while (have < n) {
                int r = SSL_read(b->ssl, dst + have,
                                 (int)(n - have > (1u << 20) ? 1u << 20 : n - have));
                if (r <= 0)
                        return false;
                have += (size_t)r;
        }
        return true;
}

void fa_request_clear(struct request *r) {
        free(r->path);
        free(r->auth);
        free(r->user_agent);
        free(r->body);
        memset(r, 0, sizeof(*r));
}

static char *fa_header_value(char *line, const char *name) {
        size_t n = strlen(name);

        if (strncasecmp(line, name, n) != 0 || line[n] != ':')
                return NULL;
        line += n + 1;
        while (*line == ' ' || *line == '\t')
                line++;
        return line;
}

/* Parse one request head (and read its body); false: drop the connection. */
bool fa_read_request(struct rbuf *b, struct request *r) {
        size_t end;
        char *line, *save = NULL, *head, *target, *v;

        memset(r, 0, sizeof(*r));
        if (!fa_read_head(b, &end))
                return false;
        head = strndup(b->buf, end - 4);
        MUST(head);
        memmove(b->buf, b->buf + end, b->len - end);
        b->len -= end;

        line = strtok_r(head, "\r\n", &save);
        target = line ? strchr(line, ' ') : NULL;
        if (!target || (size_t)(target - line) >= sizeof(r->method)) {
                free(head);
                return false;
        }
        memcpy(r->method, line, (size_t)(target - line));
        target++;
        v = strchr(target, ' ');
        if (!v || strcmp(v + 1, "HTTP/1.1") != 0) {
                free(head);
                return false;
        }
        r->path = strndup(target, (size_t)(v - target));
        MUST(r->path);
        r->query = strchr(r->path, '?');
        if (r->query)
                *r->query++ = '\0';

        while ((line = strtok_r(NULL, "\r\n", &save))) {
                if ((v = fa_header_value(line, "Content-Length")))
                        r->content_length = strtoul(v, NULL, 10);
                else if ((v = fa_header_value(line, "Authorization")))
                        r->auth = strdup(v);
                else if ((v = fa_header_value(line, "User-Agent")))
                        r->user_agent = strdup(v);
                else if ((v = fa_header_value(line, "Expect")))
                        r->expect_continue = strcasecmp(v, "100-continue") == 0;
                else if ((v = fa_header_value(line, "Connection")))
                        r->close = strcasecmp(v, "close") == 0;
                else if ((v = fa_header_value(line, "Transfer-Encoding"))) {
                        /* No client of ours sends a chunked body. */
                        free(head);
                        return false;
                }
        }
        free(head);
        if (r->content_length > MAX_BODY)
                return false;
        if (r->expect_continue && r->content_length > 0 &&
            !fa_send_all(b->ssl, "HTTP/1.1 100 Continue\r\n\r\n", 25))
                return false;
        r->body = malloc(r->content_length + 1);
        MUST(r->body);
        if (!fa_read_body(b, r->body, r->content_length))
                return false;
        r->body[r->content_length] = '\0';
        return true;
}

/* The decoded value of key in an application/x-www-form-urlencoded query,
 * or NULL (caller frees). */
char *fa_query_get(const char *q, const char *key) {
        size_t klen = strlen(key);

        while (q && *q) {
                const char *amp = strchr(q, '&');
                size_t len = amp ? (size_t)(amp - q) : strlen(q);

                if (len > klen && strncmp(q, key, klen) == 0 && q[klen] == '=') {
                        char *out = malloc(len), *o = out;

                        MUST(out);
                        for (size_t i = klen + 1; i < len; i++) {
                                char hex[3] = { 0 }, *end;
                                unsigned long hv = 0;

                                if (q[i] == '%' && i + 2 < len + 1) {
                                        memcpy(hex, q + i + 1, 2);
                                        hv = strtoul(hex, &end, 16);
                                }
                                if (q[i] == '%' && i + 2 < len + 1 && end == hex + 2) {
                                        *o++ = (char)hv;
                                        i += 2;
                                } else
                                        *o++ = q[i] == '+' ? ' ' : q[i];
                        }
                        *o = '\0';
                        return out;
                }
                q = amp ? amp + 1 : NULL;
        }
        return NULL;
}
