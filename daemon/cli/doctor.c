/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug doctor: the node checked, read-only. */
#include "config.h"
#include "doctor.h"

#include "cli-internal.h"

/* doctor explains an invalid config instead of stopping at it. */
int cli_doctor(const struct dp_options *o) {
        int problems = doc_run(&(struct doc_options){ .config_path = o->config_path,
                                                      .host_root = o->host_root,
                                                      .kubelet_dir = o->kubelet_dir,
                                                      .kubelet_root = o->kubelet_root,
                                                      .kubeconfig = o->kubeconfig,
                                                      .cdi_dir = o->cdi_dir,
                                                      .metrics_address = o->metrics_address,
                                                      .instance = o->instance,
                                                      .json = o->json });
        return problems ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
