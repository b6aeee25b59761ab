/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi's nodes: GET of one node and a watch of its labels. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "fakeapi_internal.h"

/* ---- nodes' labels: GET and a watch on one node (metadata.name) ---- */

static void node_add_labels(struct fakeapi *f, cJSON *md, const char *name) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(f->node_labels, name);

        if (l)
                cJSON_AddItemToObject(md, "labels", cJSON_Duplicate(l, true));
}

/* The Node object as a watch sends it (f->mu held); NULL when unknown. */
static cJSON *node_object(struct fakeapi *f, const char *name) {
        const char *uid = fa_jstr(f->nodes, name, NULL);
        cJSON *node, *md;

        if (!uid)
                return NULL;
        node = cJSON_CreateObject();
        cJSON_AddStringToObject(node, "kind", "Node");
        cJSON_AddStringToObject(node, "apiVersion", "v1");
        md = cJSON_AddObjectToObject(node, "metadata");
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "uid", uid);
        node_add_labels(f, md, name);
        return node;
}

/* watch=true&fieldSelector=metadata.name=NAME, no resourceVersion: the
 * node as it is (ADDED), then a MODIFIED per label change. */
bool fa_handle_node_watch(struct fakeapi *f, SSL *s, int fd, const struct request *r) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
        char *sel = fa_query_get(r->query, "fieldSelector");
        char *tos = fa_query_get(r->query, "timeoutSeconds");
        uint64_t deadline =
                fa_now_ns() + (uint64_t)(tos ? strtoul(tos, NULL, 10) : 1800) * 1000000000u;
        const char *name = sel && strncmp(sel, "metadata.name=", 14) == 0 ? sel + 14 : NULL;
        const char *type = "ADDED";
        uint64_t gen, drops;
        bool ok;

        free(tos);
        if (!name) {
                free(sel);
                return fa_send_status(s, 400, "BadRequest", "only metadata.name is supported", 0);
        }
        ok = fa_send_all(s, head, sizeof(head) - 1);
        pthread_mutex_lock(&f->mu);
        gen = f->node_gen;
        drops = f->node_drops;
        while (ok && drops == f->node_drops) {
                cJSON *node = node_object(f, name);
                if (node) {
                        pthread_mutex_unlock(&f->mu);
                        ok = fa_send_event(s, type, node);
                        cJSON_Delete(node);
                        pthread_mutex_lock(&f->mu);
                }
                type = "MODIFIED";
                while (ok && f->node_gen == gen && drops == f->node_drops && !f->stopping &&
                       fa_now_ns() < deadline && !fa_peer_gone(fd)) {
                        struct timespec ts;
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        ts.tv_nsec += 100000000;
                        if (ts.tv_nsec >= 1000000000) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000;
                        }
                        pthread_cond_timedwait(&f->cond, &f->mu, &ts);
                }
                if (f->node_gen == gen)
                        break;
                gen = f->node_gen;
        }
        pthread_mutex_unlock(&f->mu);
        free(sel);
        return ok && fa_send_all(s, "0\r\n\r\n", 5);
}

void fakeapi_end_node_watches(struct fakeapi *f) {
        pthread_mutex_lock(&f->mu);
        f->node_drops++;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
}

void fakeapi_set_node_labels(struct fakeapi *f, const char *name, cJSON *labels) {
        pthread_mutex_lock(&f->mu);
        cJSON_DeleteItemFromObjectCaseSensitive(f->node_labels, name);
        if (labels)
                cJSON_AddItemToObject(f->node_labels, name, labels);
        f->node_gen++;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
}

bool fa_handle_node(struct fakeapi *f, SSL *s, const char *name) {
        cJSON *node;
        bool ok;

        pthread_mutex_lock(&f->mu);
        node = node_object(f, name);
        pthread_mutex_unlock(&f->mu);
        if (!node)
                return fa_send_status(s, 404, "NotFound", "nodes not found", 0);
        ok = fa_send_json(s, 200, node);
        cJSON_Delete(node);
        return ok;
}

void fakeapi_add_node(struct fakeapi *f, const char *name, const char *uid) {
        pthread_mutex_lock(&f->mu);
        cJSON_DeleteItemFromObjectCaseSensitive(f->nodes, name);
        cJSON_AddStringToObject(f->nodes, name, uid);
        pthread_mutex_unlock(&f->mu);
}
