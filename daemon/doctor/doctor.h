/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: `cdiplug doctor`, what the command layer calls. What the
 * doctor's checks share is doctor-internal.h. */
#pragma once

#include <stdbool.h>

struct cJSON;

struct doc_options {
        const char *config_path;
        const char *host_root;
        const char *kubelet_dir;
        const char *kubelet_root; /* DRA's plugins_registry and plugins are below it */
        const char *kubeconfig;   /* NULL: the in-cluster credentials */
        const char *cdi_dir;
        const char *metrics_address;     /* NULL: the config's */
        const char *node_name;           /* --node-name, for the resources' "nodes"; or NULL */
        const struct cJSON *node_labels; /* --node-labels as an object, or NULL: not known */
        /* The instance tag of $POD_UID (doctor in the pod), or NULL: any
         * instance's socket will do (doctor on the host). */
        const char *instance;
        bool json;
};

/* Run every check, print the report on stdout; returns the number of
 * problems found (warnings are none), 0 when nothing is wrong. */
int doc_run(const struct doc_options *o);
