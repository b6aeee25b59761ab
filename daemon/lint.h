/* SPDX-License-Identifier: Apache-2.0 */
/* Warnings about what the devices found would do, for check and serve:
 * devices two resources both offer, and lists near the kubelet's limit. */
#pragma once

#include <stddef.h>

struct cfg_config;
struct dp_plugin;

/* Log a warning for each device (by its first node) that more than one
 * of the plugins lists, naming both resources and the node: the first 10,
 * then how many more. Returns how many such devices there are. */
size_t dp_warn_overlaps(struct dp_plugin *const *plugins, size_t n);

/* Log a warning when the plugin's list reaches the kubelet's message
 * limit, or half of it (hotplug could then push it over). Returns 1 when
 * it warned, else 0. */
int dp_warn_list_size(const struct dp_plugin *p);

/* check: discover every resource's devices under host_root and warn as
 * above. 0, or a negative errno when discovery failed (logged as a
 * warning: check's verdict is about the config). */
int dp_check_devices(const char *host_root, const struct cfg_config *cfg);
