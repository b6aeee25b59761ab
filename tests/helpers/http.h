/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal HTTP/1.1 client for the tests of the metrics endpoint, raw
 * sockets on loopback, and waiting for a line in a log file (inotify). */
#pragma once

#include <stddef.h>

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int http_free_port(void);
/* A connected socket to 127.0.0.1:port, or -errno. */
int http_connect(int port);
/* Send raw, read the whole answer (the server closes); returns the status
 * code (0 when none could be parsed, -errno on failure). *ret_body, if
 * not NULL, gets the body (malloc'd). */
int http_raw(int port, const char *raw, size_t len, char **ret_body, int timeout_ms);
int http_get(int port, const char *path, char **ret_body);
/* The value of a sample on 127.0.0.1:port's /metrics (the first line that
 * starts with sample and a space), or -1 when there is none. */
double http_metric(int port, const char *sample);
/* A kubelet-style probe: GET path on a new connection, everything
 * (connect included) within timeout_ms; the status, or -ETIMEDOUT. */
int http_probe(int port, const char *path, int timeout_ms);
/* Wait until path holds needle (inotify on the file); 0 or -ETIMEDOUT. */
int file_wait_for(const char *path, const char *needle, int timeout_ms);
/* Lines of path holding needle. */
int file_count(const char *path, const char *needle);
/* Wait until at least n lines of path hold needle. */
int file_wait_count(const char *path, const char *needle, int n, int timeout_ms);
/* Wait until fd reads EOF or an error (the peer closed); 0 or -ETIMEDOUT. */
int wait_closed(int fd, int timeout_ms);
/* Lines of text starting with prefix, sorted, joined with '\n' (malloc'd). */
char *lines_with(const char *text, const char *prefix);
