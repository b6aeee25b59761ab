/* SPDX-License-Identifier: Apache-2.0 */
/* The command layer: one file per command (serve.c, check.c, generate.c,
 * doctor.c, manifests.c, version.c), main.c's table dispatching to them. Exit codes
 * are chosen here and nowhere else: the libraries below return 0 or a
 * negative errno. */
#pragma once

#include <stdbool.h>

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
/* The identity serve switches to (--user over the config's "user"),
 * resolved now: 0 or the exit status, having said why. */
int cli_resolve_user(const struct dp_options *o, const struct cfg_config *cfg);
/* Valid, but probably not what the operator meant: said, not refused. */
void cli_check_warnings(const struct cfg_config *cfg);
