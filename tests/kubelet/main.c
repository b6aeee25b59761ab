/* test-kubelet DIR RESOURCE...: serve kubelet.sock in DIR, wait for each
 * resource to register, then print what a kubelet would see: the Register
 * request, the device list, and an Allocate answer for the first device.
 * Used by the demo; exits 0 when every resource answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet.h"
#include "rpc.h"

static void print_allocate(struct tk *tk, const char *resource, const char *id) {
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *creqs[] = {&creq};
        char *ids[] = {(char *)id};
        ProtobufCMessage *resp = NULL;
        char *details = NULL;
        grpc_channel *ch = tk_dial(tk, resource);

        creq.n_devices_ids = 1;
        creq.devices_ids = ids;
        req.n_container_requests = 1;
        req.container_requests = creqs;
        grpc_status_code st = dp_call_unary(ch, DP_METHOD_ALLOCATE, &req.base,
                                            &v1beta1__allocate_response__descriptor, &resp, &details, 5000);
        printf("  Allocate([\"%s\"]) -> status %d %s\n", id, st, details ? details : "");
        if (resp) {
                V1beta1__AllocateResponse *a = (V1beta1__AllocateResponse *)resp;
                for (size_t i = 0; i < a->n_container_responses; i++) {
                        V1beta1__ContainerAllocateResponse *c = a->container_responses[i];
                        for (size_t j = 0; j < c->n_cdi_devices; j++)
                                printf("    cdi_devices: %s\n", c->cdi_devices[j]->name);
                        for (size_t j = 0; j < c->n_annotations; j++)
                                printf("    annotation:  %s=%s\n", c->annotations[j]->key, c->annotations[j]->value);
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
        int failed = 0;

        if (argc < 3) {
                fprintf(stderr, "usage: test-kubelet DIR RESOURCE...\n");
                return 2;
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
        tk_stop(tk);
        return failed ? 1 : 0;
}
