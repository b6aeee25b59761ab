/* SPDX-License-Identifier: Apache-2.0 */
/* Logging discovery's notes once (daemon/notes.c). */
#pragma once

struct base_strvec;
struct dp_plugin;
struct res_devlist;

/* What found has to say, one sentence each, appended to lines: its notes,
 * then one line per group of devices that want one ID, then (with p) the
 * devices refused because p already serves their ID for another device.
 * 0 or -ENOMEM (lines cleared). */
int dp_notes_lines(const struct res_devlist *found, const struct dp_plugin *p,
                   struct base_strvec *lines);

/* Log each of found's notes and ID clashes (as warnings, prefixed with the
 * resource name) that is not in *logged, then make *logged the current
 * set (free with base_strv_free). p (may be NULL) tells which clashing device
 * the plugin kept. 0 or -ENOMEM. */
int dp_notes_log(char ***logged, const char *resource, const struct res_devlist *found,
                 const struct dp_plugin *p);
