/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet's PodResourcesLister, served with grpc core on its own
 * socket, completion queue and thread: List answers whatever the test set
 * last (or garbage, or nothing until the caller's deadline). Stopping it
 * deletes the socket, as the kubelet's restart does. */
#include "kubelet.h"

#include <errno.h>
#include <fcntl.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rpc.h"
#include "log.h"

#define PR_SLOTS 8

struct tk_pr_call {
        struct tk_pr *pr;
        enum { PC_NEW, PC_RECV, PC_FINISH, PC_SILENT } phase;
        grpc_call *call;
        grpc_call_details details;
        grpc_metadata_array md;
        grpc_byte_buffer *recv, *send;
        grpc_slice status_details;
        int cancelled;
        struct tk_pr_call *next;
};

struct tk_pr {
        char *path;
        grpc_server *server;
        grpc_completion_queue *cq;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond; /* a call freed, the server down */
        bool serving, down;
        enum tk_pr_mode mode;
        uint8_t *answer; /* packed ListPodResourcesResponse */
        size_t answer_len;
        unsigned calls;
        struct tk_pr_call *live;
        int shutdown_tag;
};

static void call_free(struct tk_pr *pr, struct tk_pr_call *c) {
        for (struct tk_pr_call **pp = &pr->live; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        if (c->call)
                grpc_call_unref(c->call);
        grpc_call_details_destroy(&c->details);
        grpc_metadata_array_destroy(&c->md);
        if (c->recv)
                grpc_byte_buffer_destroy(c->recv);
        if (c->send)
                grpc_byte_buffer_destroy(c->send);
        grpc_slice_unref(c->status_details);
        free(c);
        pthread_cond_broadcast(&pr->cond);
}

static void offer(struct tk_pr *pr) {
        struct tk_pr_call *c = calloc(1, sizeof(*c));

        if (!c)
                return;
        c->pr = pr;
        c->status_details = grpc_empty_slice();
        grpc_call_details_init(&c->details);
        grpc_metadata_array_init(&c->md);
        if (grpc_server_request_call(pr->server, &c->call, &c->details, &c->md, pr->cq, pr->cq,
                                     c) != GRPC_CALL_OK) {
                call_free(pr, c);
                return;
        }
        c->next = pr->live;
        pr->live = c;
}

static void answer(struct tk_pr *pr, struct tk_pr_call *c) {
        static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a, 0x7f };
        grpc_status_code st = GRPC_STATUS_OK;
        grpc_op ops[3];
        size_t n = 0;

        memset(ops, 0, sizeof(ops));
        pr->calls++;
        if (grpc_slice_str_cmp(c->details.method, "/v1.PodResourcesLister/List") != 0)
                st = GRPC_STATUS_UNIMPLEMENTED;
        else if (pr->mode == TK_PR_SILENT) {
                /* Answer nothing; the client's deadline ends the call. */
                ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
                ops[0].data.recv_close_on_server.cancelled = &c->cancelled;
                c->phase = PC_SILENT;
                if (grpc_call_start_batch(c->call, ops, 1, c, NULL) != GRPC_CALL_OK)
                        call_free(pr, c);
                return;
        } else {
                grpc_slice s = pr->mode == TK_PR_GARBAGE
                                       ? grpc_slice_from_copied_buffer((const char *)garbage,
                                                                       sizeof(garbage))
                                       : grpc_slice_from_copied_buffer((const char *)pr->answer,
                                                                       pr->answer_len);
                c->send = grpc_raw_byte_buffer_create(&s, 1);
                grpc_slice_unref(s);
                ops[n].op = GRPC_OP_SEND_MESSAGE;
                ops[n++].data.send_message.send_message = c->send;
        }
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = st;
        ops[n++].data.send_status_from_server.status_details = &c->status_details;
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
        c->phase = PC_FINISH;
        if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK)
                call_free(pr, c);
}

static void on_event(struct tk_pr *pr, struct tk_pr_call *c, bool ok) {
        grpc_op ops[2];

        switch (c->phase) {
        case PC_NEW:
                if (!ok) {
                        call_free(pr, c);
                        return;
                }
                if (pr->serving)
                        offer(pr);
                memset(ops, 0, sizeof(ops));
                ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
                ops[1].op = GRPC_OP_RECV_MESSAGE;
                ops[1].data.recv_message.recv_message = &c->recv;
                c->phase = PC_RECV;
                if (grpc_call_start_batch(c->call, ops, 2, c, NULL) != GRPC_CALL_OK)
                        call_free(pr, c);
                return;
        case PC_RECV:
                if (!ok)
                        call_free(pr, c);
                else
                        answer(pr, c);
                return;
        case PC_FINISH:
        case PC_SILENT:
                call_free(pr, c);
                return;
        }
}

static void *loop(void *arg) {
        struct tk_pr *pr = arg;

        for (;;) {
                grpc_event ev = grpc_completion_queue_next(
                        pr->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                if (ev.type == GRPC_QUEUE_SHUTDOWN)
                        return NULL;
                if (ev.type != GRPC_OP_COMPLETE)
                        continue;
                pthread_mutex_lock(&pr->lock);
                if (ev.tag == &pr->shutdown_tag) {
                        pr->down = true;
                        pthread_cond_broadcast(&pr->cond);
                } else
                        on_event(pr, ev.tag, ev.success);
                pthread_mutex_unlock(&pr->lock);
        }
}

int tk_pr_start(const char *path, struct tk_pr **ret) {
        struct tk_pr *pr = calloc(1, sizeof(*pr));
        _cleanup_free_ char *addr = NULL;
        V1__ListPodResourcesResponse empty = V1__LIST_POD_RESOURCES_RESPONSE__INIT;

        if (!pr || xasprintf(&addr, "unix:%s", path) < 0)
                return -ENOMEM;
        dp_grpc_init();
        pr->path = strdup(path);
        pthread_mutex_init(&pr->lock, NULL);
        pthread_cond_init(&pr->cond, NULL);
        tk_pr_set(pr, &empty);
        unlink(path);
        pr->cq = grpc_completion_queue_create_for_next(NULL);
        pr->server = grpc_server_create(NULL, NULL);
        grpc_server_register_completion_queue(pr->server, pr->cq, NULL);
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        int port = grpc_server_add_http2_port(pr->server, addr, creds);
        grpc_server_credentials_release(creds);
        if (!port) {
                grpc_server_destroy(pr->server);
                dp_cq_destroy(pr->cq);
                free(pr->answer);
                free(pr->path);
                free(pr);
                grpc_shutdown();
                return -EADDRNOTAVAIL;
        }
        grpc_server_start(pr->server);
        pthread_mutex_lock(&pr->lock);
        pr->serving = true;
        for (int i = 0; i < PR_SLOTS; i++)
                offer(pr);
        pthread_mutex_unlock(&pr->lock);
        pthread_create(&pr->thread, NULL, loop, pr);
        *ret = pr;
        return 0;
}

void tk_pr_stop(struct tk_pr *pr) {
        if (!pr)
                return;
        pthread_mutex_lock(&pr->lock);
        pr->serving = false;
        grpc_server_shutdown_and_notify(pr->server, pr->cq, &pr->shutdown_tag);
        grpc_server_cancel_all_calls(pr->server);
        /* No batch may start once the queue is shut down: wait until the
         * loop has freed every call and seen the server go. */
        while (!pr->down || pr->live)
                pthread_cond_wait(&pr->cond, &pr->lock);
        pthread_mutex_unlock(&pr->lock);
        grpc_completion_queue_shutdown(pr->cq);
        pthread_join(pr->thread, NULL);
        grpc_server_destroy(pr->server);
        grpc_completion_queue_destroy(pr->cq);
        unlink(pr->path);
        pthread_cond_destroy(&pr->cond);
        pthread_mutex_destroy(&pr->lock);
        free(pr->answer);
        free(pr->path);
        free(pr);
        grpc_shutdown();
}

void tk_pr_set(struct tk_pr *pr, const V1__ListPodResourcesResponse *resp) {
        size_t len = v1__list_pod_resources_response__get_packed_size(resp);
        uint8_t *buf = malloc(len + 1);

        v1__list_pod_resources_response__pack(resp, buf);
        pthread_mutex_lock(&pr->lock);
        free(pr->answer);
        pr->answer = buf;
        pr->answer_len = len;
        pr->mode = TK_PR_ANSWER;
        pthread_mutex_unlock(&pr->lock);
}

/* Serialized protobuf messages concatenate into their merge: a repeated
 * field's elements add up. */
void tk_pr_add_pod(struct tk_pr *pr, const V1__PodResources *pod) {
        V1__ListPodResourcesResponse one = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        V1__PodResources *pods[] = { (V1__PodResources *)pod };
        one.n_pod_resources = 1;
        one.pod_resources = pods;
        size_t len = v1__list_pod_resources_response__get_packed_size(&one);

        pthread_mutex_lock(&pr->lock);
        uint8_t *buf = realloc(pr->answer, pr->answer_len + len + 1);
        if (buf) {
                v1__list_pod_resources_response__pack(&one, buf + pr->answer_len);
                pr->answer = buf;
                pr->answer_len += len;
                pr->mode = TK_PR_ANSWER;
        }
        pthread_mutex_unlock(&pr->lock);
}

void tk_pr_mode(struct tk_pr *pr, enum tk_pr_mode mode) {
        pthread_mutex_lock(&pr->lock);
        pr->mode = mode;
        pthread_mutex_unlock(&pr->lock);
}

unsigned tk_pr_calls(struct tk_pr *pr) {
        pthread_mutex_lock(&pr->lock);
        unsigned n = pr->calls;
        pthread_mutex_unlock(&pr->lock);
        return n;
}

void tk_pr_hold(struct tk_pr *pr, const char *ns, const char *pod, const char *resource,
                const char *id) {
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        V1__PodResources p = V1__POD_RESOURCES__INIT, *pods[] = { &p };
        V1__ContainerResources c = V1__CONTAINER_RESOURCES__INIT, *ctrs[] = { &c };
        V1__ContainerDevices dev = V1__CONTAINER_DEVICES__INIT, *devs[] = { &dev };
        char *ids[] = { (char *)id };

        if (resource) {
                dev.resource_name = (char *)resource;
                dev.n_device_ids = 1;
                dev.device_ids = ids;
                c.name = "app";
                c.n_devices = 1;
                c.devices = devs;
                p.name = (char *)pod;
                p.namespace_ = (char *)ns;
                p.n_containers = 1;
                p.containers = ctrs;
                resp.n_pod_resources = 1;
                resp.pod_resources = pods;
        }
        tk_pr_set(pr, &resp);
}

int tk_pr_age(struct tk_pr *pr, int seconds) {
        struct timespec now, ts[2];

        clock_gettime(CLOCK_REALTIME, &now);
        ts[0] = ts[1] = (struct timespec){ .tv_sec = now.tv_sec - seconds };
        return utimensat(AT_FDCWD, pr->path, ts, 0) < 0 ? -errno : 0;
}

void tk_pr_hold_claim(struct tk_pr *pr, const char *ns, const char *pod, const char *driver,
                      const char *pool, const char *device, const char *cdi) {
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        V1__PodResources p = V1__POD_RESOURCES__INIT, *pods[] = { &p };
        V1__ContainerResources c = V1__CONTAINER_RESOURCES__INIT, *ctrs[] = { &c };
        V1__DynamicResource dyn = V1__DYNAMIC_RESOURCE__INIT, *dyns[] = { &dyn };
        V1__ClaimResource cr = V1__CLAIM_RESOURCE__INIT, *crs[] = { &cr };
        V1__CDIDevice cd = V1__CDIDEVICE__INIT, *cds[] = { &cd };

        cd.name = (char *)cdi;
        cr.n_cdi_devices = 1;
        cr.cdi_devices = cds;
        cr.driver_name = (char *)driver;
        cr.pool_name = (char *)pool;
        cr.device_name = (char *)device;
        dyn.claim_name = "claim";
        dyn.claim_namespace = (char *)ns;
        dyn.n_claim_resources = 1;
        dyn.claim_resources = crs;
        c.name = "app";
        c.n_dynamic_resources = 1;
        c.dynamic_resources = dyns;
        p.name = (char *)pod;
        p.namespace_ = (char *)ns;
        p.n_containers = 1;
        p.containers = ctrs;
        resp.n_pod_resources = 1;
        resp.pod_resources = pods;
        tk_pr_set(pr, &resp);
}
