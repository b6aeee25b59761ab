/* SPDX-License-Identifier: Apache-2.0 */
/* test-kubelet [--pod-resources SOCK --scrape HOST:PORT] DIR RESOURCE...:
 * serve kubelet.sock in DIR, wait for each resource to register, then
 * print what a kubelet would see: the Register request, the device list,
 * and an Allocate answer for the first device. With --pod-resources it
 * also serves PodResources on SOCK, listing pod "demo" (namespace
 * "default", container "app") as holding what it allocated, and with
 * --scrape prints the daemon's metrics about it. Used by the demo; exits 0
 * when every resource answered. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kubelet.h"
#include "rpc.h"

/* What was allocated, for PodResources. */
static V1__ContainerDevices held[64];
static V1__ContainerDevices *held_p[64];
static char *held_ids[64];
static size_t n_held;

static void hold(const char *resource, const char *id) {
        if (n_held == 64)
                return;
        v1__container_devices__init(&held[n_held]);
        held[n_held].resource_name = strdup(resource);
        held_ids[n_held] = strdup(id);
        held[n_held].n_device_ids = 1;
        held[n_held].device_ids = &held_ids[n_held];
        held_p[n_held] = &held[n_held];
        n_held++;
}

/* GET /metrics from HOST:PORT (numeric IPv4) and print the lines about
 * devices and their pods. */
static int print_metrics(const char *addr) {
        char host[64], req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        const char *colon = strrchr(addr, ':');
        struct sockaddr_in sa = { .sin_family = AF_INET };
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap);
        int fd;

        if (!colon || (size_t)(colon - addr) >= sizeof(host) || !buf)
                return -1;
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
        char *end;
        unsigned long port = strtoul(colon + 1, &end, 10);
        if (end == colon + 1 || *end || port == 0 || port > 65535)
                return -1;
        sa.sin_port = htons((uint16_t)port);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || fd < 0 ||
            connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            write(fd, req, strlen(req)) < 0) {
                fprintf(stderr, "test-kubelet: cannot scrape %s\n", addr);
                free(buf);
                return -1;
        }
        for (ssize_t r; (r = read(fd, buf + n, cap - n - 1)) > 0;)
                if ((n += (size_t)r) + 1 == cap)
                        buf = realloc(buf, cap *= 2);
        close(fd);
        buf[n] = '\0';
        printf("\nGET http://%s/metrics (a sample):\n", addr);
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
                if (strncmp(line, "cdiplug_device_allocation_info{", 31) == 0 ||
                    strncmp(line, "cdiplug_device_info{", 20) == 0 ||
                    strncmp(line, "cdiplug_devices{", 16) == 0 ||
                    strncmp(line, "cdiplug_pod_resources_up", 24) == 0 ||
                    strncmp(line, "cdiplug_allocate_requests_total{", 32) == 0)
                        printf("  %s\n", line);
        free(buf);
        return 0;
}

static void print_allocate(struct tk *tk, const char *resource, const char *id) {
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *creqs[] = { &creq };
        char *ids[] = { (char *)id };
        ProtobufCMessage *resp = NULL;
        char *details = NULL;
        grpc_channel *ch = tk_dial(tk, resource);

        creq.n_devices_ids = 1;
        creq.devices_ids = ids;
        req.n_container_requests = 1;
        req.container_requests = creqs;
        grpc_status_code st =
                dp_call_unary(ch, DP_METHOD_ALLOCATE, &req.base,
                              &v1beta1__allocate_response__descriptor, &resp, &details, 5000);
        printf("  Allocate([\"%s\"]) -> status %d %s\n", id, st, details ? details : "");
        if (st == GRPC_STATUS_OK)
                hold(resource, id);
        if (resp) {
                V1beta1__AllocateResponse *a = (V1beta1__AllocateResponse *)resp;
                for (size_t i = 0; i < a->n_container_responses; i++) {
                        V1beta1__ContainerAllocateResponse *c = a->container_responses[i];
                        for (size_t j = 0; j < c->n_cdi_devices; j++)
                                printf("    cdi_devices: %s\n", c->cdi_devices[j]->name);
                        for (size_t j = 0; j < c->n_annotations; j++)
                                printf("    annotation:  %s=%s\n", c->annotations[j]->key,
                                       c->annotations[j]->value);
                        for (size_t j = 0; j < c->n_devices; j++)
                                printf("    device:      %s -> %s (%s)\n", c->devices[j]->host_path,
                                       c->devices[j]->container_path, c->devices[j]->permissions);
                }
                protobuf_c_message_free_unpacked(resp, NULL);
        }
        free(details);
        grpc_channel_destroy(ch);
}

int main(int argc, char **argv) {
        struct tk *tk;
        struct tk_pr *pr = NULL;
        const char *pr_sock = NULL, *scrape = NULL;
        int failed = 0;

        while (argc > 2 && strncmp(argv[1], "--", 2) == 0) {
                if (strcmp(argv[1], "--pod-resources") == 0)
                        pr_sock = argv[2];
                else if (strcmp(argv[1], "--scrape") == 0)
                        scrape = argv[2];
                else
                        break;
                argv += 2;
                argc -= 2;
        }
        if (argc < 3) {
                fprintf(stderr,
                        "usage: test-kubelet [--pod-resources SOCK [--scrape HOST:PORT]] DIR RESOURCE...\n");
                return 2;
        }
        if (pr_sock && tk_pr_start(pr_sock, &pr) < 0) {
                fprintf(stderr, "test-kubelet: cannot serve PodResources on %s\n", pr_sock);
                return 1;
        }
        if (tk_start(argv[1], &tk) < 0) {
                fprintf(stderr, "test-kubelet: cannot serve %s/kubelet.sock\n", argv[1]);
                return 1;
        }
        printf("test-kubelet: serving %s/kubelet.sock\n", argv[1]);
        for (int i = 2; i < argc; i++) {
                const char *resource = argv[i];
                V1beta1__RegisterRequest *req;
                V1beta1__DevicePluginOptions *opts;
                V1beta1__ListAndWatchResponse *list;

                if (tk_wait_registered(tk, resource, 1, 10000) < 0 ||
                    tk_last_register(tk, resource, &req, &opts) < 0 ||
                    tk_wait_lists(tk, resource, 1, 10000, &list) < 0) {
                        printf("%s: did not register within 10 s\n", resource);
                        failed++;
                        continue;
                }
                printf("\nRegister: resource_name=%s endpoint=%s version=%s\n", req->resource_name,
                       req->endpoint, req->version);
                printf("  GetDevicePluginOptions: pre_start_required=%d get_preferred_allocation_available=%d\n",
                       opts->pre_start_required, opts->get_preferred_allocation_available);
                printf("  ListAndWatch: %zu devices\n", list->n_devices);
                for (size_t j = 0; j < list->n_devices; j++)
                        printf("    %-24s %s\n", list->devices[j]->id, list->devices[j]->health);
                if (list->n_devices > 0)
                        print_allocate(tk, resource, list->devices[0]->id);
                v1beta1__list_and_watch_response__free_unpacked(list, NULL);
                protobuf_c_message_free_unpacked(&req->base, NULL);
                protobuf_c_message_free_unpacked(&opts->base, NULL);
        }
        if (pr) {
                V1__ContainerResources ctr = V1__CONTAINER_RESOURCES__INIT;
                V1__ContainerResources *ctrs[] = { &ctr };
                V1__PodResources pod = V1__POD_RESOURCES__INIT;
                V1__PodResources *pods[] = { &pod };
                V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
                ctr.name = "app";
                ctr.n_devices = n_held;
                ctr.devices = held_p;
                pod.name = "demo";
                pod.namespace_ = "default";
                pod.n_containers = 1;
                pod.containers = ctrs;
                resp.n_pod_resources = 1;
                resp.pod_resources = pods;
                tk_pr_set(pr, &resp);
                printf("\nPodResources: pod default/demo, container app holds %zu device IDs\n",
                       n_held);
                if (scrape && print_metrics(scrape) < 0)
                        failed++;
                tk_pr_stop(pr);
        }
        for (size_t i = 0; i < n_held; i++) {
                free(held[i].resource_name);
                free(held_ids[i]);
        }
        tk_stop(tk);
        return failed ? 1 : 0;
}
