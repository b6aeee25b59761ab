/* SPDX-License-Identifier: Apache-2.0 */
/* serve: the running daemon, what the command layer calls. What the
 * runtime's files share is serve-internal.h. */
#pragma once

struct cfg_config;
struct dp_options;

/* Takes cfg: a reload replaces it. 0 once stopped by a signal, or a
 * negative errno: -ENAMETOOLONG when a socket path cannot fit. */
int dp_daemon_run(const struct dp_options *opts, struct cfg_config *cfg);
