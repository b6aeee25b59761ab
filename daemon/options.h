/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line values, in one place: main.c fills them, the daemon's
 * files read them through d->opts. */
#pragma once

#include <stdbool.h>

#include "config.h"

struct dp_options {
        const char *config_path;
        const char *kubelet_dir;
        const char *cdi_dir;
        const char *host_root;
        const char *user;                 /* --user, overrides the config's "user" */
        const char *metrics_address;      /* --metrics-address, overrides "metrics" */
        const char *pod_resources_socket; /* --pod-resources-socket */
        enum cfg_log_format log_format;   /* --log-format, overrides the config's */
        bool no_sandbox;
        bool to_stdout; /* generate --stdout */
        bool json;      /* doctor --json */
};
