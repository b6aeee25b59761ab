/* SPDX-License-Identifier: Apache-2.0 */
/* Live reload (reload.c): the config file's changes applied per resource,
 * and resources a reload removed, freed once nothing uses them. */
#pragma once

struct dp_daemon;
struct dp_resource;
struct inotify_event;

int dp_reload_setup(struct dp_daemon *d);
void dp_reload_event(struct dp_daemon *d, const struct inotify_event *ev);
void dp_reload(struct dp_daemon *d, const char *why);
void dp_resource_maybe_free(struct dp_resource *res);
void dp_retired_free_all(struct dp_daemon *d);
