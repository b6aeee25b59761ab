/* SPDX-License-Identifier: Apache-2.0 */
/* The watcher (watch.c): signals, inotify on the kubelet dir and the
 * device dirs, and the retry timer, turned into actions. */
#pragma once

struct dp_daemon;
struct dp_resource;

int dp_watch_setup(struct dp_daemon *d);
void dp_watch_handle(struct dp_daemon *d);
void dp_watch_due(struct dp_daemon *d);
void dp_watch_resource(struct dp_daemon *d, struct dp_resource *res);
