/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug doctor: the node checked, read-only. */
#include <cjson/cJSON.h>

#include "config.h"
#include "doctor.h"

#include "cli-internal.h"

/* doctor explains an invalid config instead of stopping at it. */
int cli_doctor(const struct dp_options *o) {
        struct cJSON *labels = NULL;
        int r = cli_node_labels(o, &labels);

        if (r != 0)
                return r;
        int problems = doc_run(&(struct doc_options){ .config_path = o->config_path,
                                                      .node_name = o->node_name,
                                                      .node_labels = labels,
                                                      .host_root = o->host_root,
                                                      .kubelet_dir = o->kubelet_dir,
                                                      .kubelet_root = o->kubelet_root,
                                                      .kubeconfig = o->kubeconfig,
                                                      .cdi_dir = o->cdi_dir,
                                                      .metrics_address = o->metrics_address,
                                                      .instance = o->instance,
                                                      .json = o->json });
        cJSON_Delete(labels);
        return problems ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
