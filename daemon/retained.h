/* SPDX-License-Identifier: Apache-2.0 */
/* CDI specs of resources no longer configured (retained.c), kept while
 * PodResources shows a pod holding one of their devices. add records one
 * (resource may be NULL: found at start-up); check asks PodResources now
 * (after adds, and on every reload); due runs on the timer. */
#pragma once

#include <stdint.h>

struct dp_daemon;

int dp_retained_add(struct dp_daemon *d, const char *file, const char *resource);
void dp_retained_check(struct dp_daemon *d);
/* The resource whose retained spec is file (removed by a reload, still
 * kept), or NULL: none, or one found at start-up whose resource is not
 * known. */
const char *dp_retained_resource(const struct dp_daemon *d, const char *file);
void dp_retained_due(struct dp_daemon *d);
uint64_t dp_retained_due_at(const struct dp_daemon *d);
void dp_retained_stop(struct dp_daemon *d);
void dp_retained_free(struct dp_daemon *d);
