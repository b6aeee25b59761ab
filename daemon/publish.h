/* SPDX-License-Identifier: Apache-2.0 */
/* The CDI specs the daemon writes: per resource with retries
 * (publish.c), and the clean-up at start-up (specs.c). */
#pragma once

struct dp_daemon;
struct dp_resource;

/* publish.c */
int dp_spec_publish(struct dp_resource *res);
void dp_spec_due(struct dp_daemon *d);

/* specs.c */
void dp_specs_startup(struct dp_daemon *d);
