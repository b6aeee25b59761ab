/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi internals: HTTP/1.1 over a blocking TLS connection (requests
 * with a Content-Length body, answers with a Content-Length or chunked)
 * and the API server's Status objects. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MUST(c)                                                                                    \
        do {                                                                                       \
                if (!(c)) {                                                                        \
                        fprintf(stderr, "fakeapi: %s failed (%s:%d): %s\n", #c, __FILE__,          \
                                __LINE__, strerror(errno));                                        \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)

#define MAX_HEAD (64 * 1024)
#define MAX_BODY (32 * 1024 * 1024)

struct request {
        char method[16];
        char *path, *query; /* owned: one buffer, query points inside */
        size_t content_length;
        bool expect_continue, close;
        char *auth;       /* the Authorization value */
        char *user_agent; /* the User-Agent value */
        char *body;
};

struct rbuf {
        SSL *ssl;
        int fd;
        char buf[MAX_HEAD];
        size_t len;
};

bool fa_send_all(SSL *s, const char *p, size_t n);
bool fa_send_response(SSL *s, int code, const char *body, int retry_after, bool close);
bool fa_send_json(SSL *s, int code, const cJSON *obj);
cJSON *fa_status_obj(int code, const char *reason, const char *msg);
bool fa_send_status(SSL *s, int code, const char *reason, const char *msg, int retry_after);
bool fa_send_chunk(SSL *s, const char *data, size_t n);
/* Parse one request head and read its body; false: drop the connection. */
bool fa_read_request(struct rbuf *b, struct request *r);
void fa_request_clear(struct request *r);
/* The decoded value of key in a query string, or NULL (caller frees). */
char *fa_query_get(const char *q, const char *key);

/* fakeapi_fields.c: obj's metadata.managedFields after a create or update
 * (prev: the object before, or NULL) by the request's field manager;
 * NULL, or the API server's message for a 422. */
const char *fa_managed_fields(cJSON *obj, const cJSON *prev, const char *query,
                              const char *user_agent);

/* fakeapi_rules.c */
/* A string member o.a (.b), or NULL. */
const char *fa_jstr(const cJSON *o, const char *a, const char *b);
/* "spec.nodeName=X,spec.driver=Y": does obj match every term? -EINVAL on
 * a field the server does not index. */
int fa_selector_match(const char *sel, const cJSON *obj);
/* NULL when s is a valid ResourceSlice, else the API server's message. */
const char *fa_slice_invalid(const cJSON *s);
