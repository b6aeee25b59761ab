/* SPDX-License-Identifier: Apache-2.0 */
/* The command layer: one file per command (serve.c, check.c, generate.c,
 * doctor.c, manifests.c, version.c), main.c's table dispatching to them. Exit codes
 * are chosen here and nowhere else: the libraries below return 0 or a
 * negative errno. */
#pragma once

#include <stdbool.h>

#include "config.h"

struct cfg_config;
struct dp_options;

enum {
        CLI_EXIT_OK = 0,
        CLI_EXIT_FAILURE = 1, /* something failed at run time */
        CLI_EXIT_USAGE = 2,   /* usage or configuration error, nothing written */
};

/* Each command: its exit status. */
int cli_serve(const struct dp_options *o);
int cli_check(const struct dp_options *o);
int cli_generate(const struct dp_options *o);
int cli_doctor(const struct dp_options *o);
int cli_manifests(const struct dp_options *o);
int cli_version(const struct dp_options *o);

/* prepare.c: the config, loaded and its names worked out as serve would:
 * 0, or the exit status (2: the config is wrong, 1: something else
 * failed), having said why. */
int cli_load_prepared(const struct dp_options *o, bool sockets, struct cfg_config **ret);
/* The same, with fn (NULL: logged) hearing whether this node (--node-name,
 * --node-labels) serves each resource that has "nodes"; those it does not
 * serve are left out of *ret. */
int cli_load_selected(const struct dp_options *o, bool sockets, cfg_select_fn *fn, void *ctx,
                      struct cfg_config **ret);
/* --node-labels as a JSON object (*ret NULL when not given): 0 or the exit
 * status, having said why. */
struct cJSON;
int cli_node_labels(const struct dp_options *o, struct cJSON **ret);
/* Keep the resources this node serves (cfg_nodes_select): 0 or the exit
 * status, having said why. */
int cli_select(const struct dp_options *o, struct cfg_config *cfg, const struct cJSON *labels,
               cfg_select_fn *fn, void *ctx);
/* The identity serve switches to (--user over the config's "user"),
 * resolved now: 0 or the exit status, having said why. */
int cli_resolve_user(const struct dp_options *o, const struct cfg_config *cfg);
/* Valid, but probably not what the operator meant: said, not refused. */
void cli_check_warnings(const struct cfg_config *cfg);
