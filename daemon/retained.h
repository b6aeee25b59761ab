/* SPDX-License-Identifier: Apache-2.0 */
/* CDI specs of resources no longer configured (retained.c), kept while
 * PodResources shows a pod holding one of their devices. add records one
 * (resource may be NULL: found at start-up); check asks PodResources now
 * (after adds, and on every reload); due runs on the timer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
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
/* A reload left devices gone (plugin.h): ask PodResources about them as
 * about retained specs, now and on the same timer. */
void dp_retained_devices(struct dp_daemon *d);

/* gone.c: whether any resource has gone devices; and, on a List answer
 * (its wire bytes, read in place), forget those no pod holds (their spec
 * is rewritten). Returns whether one is still held. */
bool dp_gone_any(const struct dp_daemon *d);
bool dp_gone_judge(struct dp_daemon *d, const void *wire, size_t len);
