/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Open a server-streaming call of method (a full gRPC method name) on the
 * unix socket, with an HTTP/2 flow-control window of 0, and never read: no
 * message, and so no status after it, can reach this peer. The call stays
 * open until the returned socket is closed. */
int stuck_stream(const char *socket_path, const char *method);
