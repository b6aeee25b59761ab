/* SPDX-License-Identifier: Apache-2.0 */
/* The names a resource goes by outside the config: its CDI kind, spec file
 * and socket file. Every valid kubelet resource name gets names that CDI
 * consumers and unix sockets accept; where that takes a rewrite, or a
 * configuration cannot be served, check, generate and serve say so alike. */
#pragma once

#include <stdbool.h>

struct cfg_config;

/* The socket file name for a resource under kubelet_dir:
 * "cdiplug-<resource with '/' as '-'>.sock" when "<kubelet_dir>/<that>"
 * fits sun_path (107 bytes and the NUL). Otherwise, since the name is ours
 * to choose: "cdiplug-", the first up to 32 characters of the name part
 * (after the '/'; fewer if the dir leaves less room) and "-", then the
 * 32-bit FNV-1a hash of the whole resource name as 8 hex digits, ".sock".
 * Stable for a given dir. -ENAMETOOLONG when not even
 * "cdiplug-<8 hex>.sock" fits. */
int dp_socket_name(const char *kubelet_dir, const char *resource, char **ret_name);

/* Check every resource's names before anything is written: its CDI kind
 * (logging, as a warning, a kind that differs from the resource name or
 * needs a cdiVersion newer than 0.5.0), its spec file name, and when
 * sockets (serve, check) also its socket name under kubelet_dir, which
 * replaces cfg's socket_name. Two resources with one kind, one spec file or
 * one socket are refused. -EINVAL (logged, naming the resources and what
 * to rename) when the configuration cannot be served as it is. */
int dp_names_prepare(struct cfg_config *cfg, const char *kubelet_dir, bool sockets);
