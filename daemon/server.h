/* SPDX-License-Identifier: Apache-2.0 */
/* One resource's grpc server (server.c): its socket in the kubelet dir,
 * the DevicePlugin calls and the ListAndWatch streams it pushes to. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct dp_daemon;
struct dp_resource;

int dp_server_start(struct dp_resource *res);
int dp_server_listen(struct dp_resource *res);
void dp_server_unlisten(struct dp_resource *res, bool unlink_path);
void dp_server_accept(struct dp_resource *res);
void dp_accept_due(struct dp_daemon *d);
int dp_server_poll_fd(const struct dp_resource *res);
/* Streams end with a status first; the server's other calls are
 * cancelled once every status is out (see dp_server_cancel_stopping). */
void dp_server_stop(struct dp_resource *res);
/* Cancel every call of every stopping server now, statuses out or not:
 * for a peer that takes none (it does not read) when the daemon stops. */
void dp_server_cancel_stopping(struct dp_daemon *d);
void dp_server_push(struct dp_resource *res);
int dp_resource_refresh(struct dp_resource *res, bool *ret_changed);
size_t dp_server_streams(const struct dp_resource *res);
