/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi: a fake Kubernetes API server over HTTPS, for the tests of
 * daemon/kube. It serves what the daemon calls: ResourceSlices (list with
 * fieldSelector, watch, create, update, delete, one resourceVersion
 * counter), ResourceClaims and Nodes from fixtures. Its CA and server
 * certificate (127.0.0.1, localhost) are made in memory at start and
 * written as PEM files to a temp dir. One thread per connection, blocking
 * TLS, HTTP/1.1 with keep-alive; watches are chunked streams of
 * apimachinery watch events. Test hooks: faults, token rotation, the
 * kubelet's wipe, expiry of the watch history, counters and a copy of
 * the current slices. Functions abort the test (criterion asserts) on
 * set-up failures.
 */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fakeapi;

/* Make the certificates and bind 127.0.0.1 on a free port. With listening
 * false the socket is bound but not listening, so connections are refused
 * until fakeapi_listen(). */
struct fakeapi *fakeapi_new(bool listening);
void fakeapi_listen(struct fakeapi *f);
void fakeapi_free(struct fakeapi *f); /* NULL ok */

const char *fakeapi_url(const struct fakeapi *f);     /* "https://127.0.0.1:PORT" */
const char *fakeapi_ca_file(const struct fakeapi *f); /* the CA's PEM file */
/* Write dir/token (token) and dir/kubeconfig, which names this server, its
 * CA and that token file, as cdiplug reads one: the kubeconfig's path
 * (free it), or NULL. */
char *fakeapi_write_kubeconfig(const struct fakeapi *f, const char *dir, const char *token);
const char *fakeapi_dir(const struct fakeapi *f); /* the temp dir (removed by free) */

/* The bearer token required from now on (NULL: none); a request without
 * it is answered 401. */
void fakeapi_set_token(struct fakeapi *f, const char *token);

/* Fixtures: a Node with its uid, and a ResourceClaim object (taken). */
void fakeapi_add_node(struct fakeapi *f, const char *name, const char *uid);
void fakeapi_add_claim(struct fakeapi *f, cJSON *claim);
/* A Node's labels (taken; NULL: none), in its GET and, as a MODIFIED
 * event, on every watch of it (watch=true, fieldSelector=metadata.name=). */
void fakeapi_set_node_labels(struct fakeapi *f, const char *name, cJSON *labels);
/* End every open node watch (the stream just ends, as at its timeout). */
void fakeapi_end_node_watches(struct fakeapi *f);

/* The next n requests whose method (NULL: any) and path (prefix, NULL:
 * any) match are answered with status (0: the connection is closed
 * without an answer) and, when retry_after > 0, a Retry-After header. */
void fakeapi_fault(struct fakeapi *f, const char *method, const char *path_prefix, unsigned n,
                   int status, int retry_after);

/* Forget the watch history: a watch from an older resourceVersion gets an
 * ERROR event with a 410 Status, open watches too (as_http: open watches
 * just end, and a new one from an older version gets a 410 answer). */
void fakeapi_expire(struct fakeapi *f, bool as_http);

/* The kubelet's start: delete every slice of node, with DELETED events. */
void fakeapi_wipe(struct fakeapi *f, const char *node);

/* Requests answered so far with this method ("GET", "POST", ...; "WATCH"
 * counts watch GETs, which are not in "GET"). */
unsigned fakeapi_count(struct fakeapi *f, const char *method);

/* Wait until n requests with method (as fakeapi_count names them) have
 * come, at most timeout_ms; returns whether they have. */
bool fakeapi_wait_count(struct fakeapi *f, const char *method, unsigned n, int timeout_ms);

/* The monotonic time (CLOCK_MONOTONIC, ns) of the last request matching
 * method and path prefix (NULL: any), 0 if none. */
uint64_t fakeapi_last_request_ns(struct fakeapi *f, const char *method, const char *path_prefix);

/* A copy of the current slices (a cJSON array; caller deletes). */
cJSON *fakeapi_slices(struct fakeapi *f);

/* Wait until pred(slices, ctx) holds, re-checked after every request and
 * change, at most timeout_ms; returns whether it held. */
bool fakeapi_wait(struct fakeapi *f, bool (*pred)(const cJSON *slices, void *ctx), void *ctx,
                  int timeout_ms);

/* Add or replace a slice directly, as another client would (taken). */
void fakeapi_put_slice(struct fakeapi *f, cJSON *slice);

/* A hostile or broken server on demand: fn sees every request after the
 * counters, faults and token check (watch: a watch GET) and answers it
 * itself through peer, returning true (*keep: whether the connection
 * goes on), or returns false to let the fake server answer as usual.
 * Called on the connection's thread. NULL: none. */
struct fakeapi_peer;
typedef bool fakeapi_hook_fn(void *ctx, struct fakeapi_peer *peer, const char *method,
                             const char *path, const char *query, bool watch, bool *keep);
void fakeapi_set_hook(struct fakeapi *f, fakeapi_hook_fn *fn, void *ctx);
/* Raw bytes; one chunk of a chunked answer (n 0: the last); a whole answer
 * with a Content-Length (body: JSON text). False: the peer is gone. */
bool fakeapi_peer_send(struct fakeapi_peer *p, const void *data, size_t n);
bool fakeapi_peer_chunk(struct fakeapi_peer *p, const void *data, size_t n);
bool fakeapi_peer_answer(struct fakeapi_peer *p, int code, const char *body);

/* How many lists asked for a page (limit=) so far. */
unsigned fakeapi_lists_paged(struct fakeapi *f);
