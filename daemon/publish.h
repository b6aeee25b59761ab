/* SPDX-License-Identifier: Apache-2.0 */
/* The CDI specs the daemon writes: per resource with retries
 * (publish.c), and the clean-up at start-up (specs.c). */
#pragma once

struct dp_daemon;
struct dp_plugin;
struct dp_resource;

/* publish.c */
/* Write plugin's spec (res's, or the one a reload is about to give it)
 * into the CDI dir, counted in res's metrics. 0 or a negative errno. */
int dp_spec_write(struct dp_resource *res, const struct dp_plugin *plugin);
int dp_spec_publish(struct dp_resource *res);
void dp_spec_due(struct dp_daemon *d);

/* specs.c */
void dp_specs_startup(struct dp_daemon *d);
