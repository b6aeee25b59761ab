/* SPDX-License-Identifier: Apache-2.0 */
/* toml: a small, bounded reader for the TOML that container runtimes keep
 * their settings in (containerd's config.toml, CRI-O's crio.conf and its
 * drop-ins), enough for `cdiplug doctor` to read a handful of keys.
 *
 * It reads all of TOML 1.0's syntax (tables, array tables, dotted and
 * quoted keys, the four string kinds, arrays over several lines, inline
 * tables) but keeps only what the doctor needs: strings, booleans,
 * integers and arrays of strings. Anything else (floats, dates, arrays of
 * tables' contents, mixed arrays) is read, checked for shape and kept as
 * TOML_OTHER. It does not reject every document the TOML spec forbids
 * (redefined tables, for instance): the runtime itself is the judge of
 * that, the doctor only needs the values the runtime would see.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define TOML_MAX_BYTES (1024 * 1024)
#define TOML_MAX_ENTRIES 16384
#define TOML_MAX_DEPTH 32 /* key components and array nesting */

enum toml_type { TOML_STRING, TOML_BOOL, TOML_INT, TOML_STRV, TOML_OTHER };

struct toml_value {
        enum toml_type type;
        char *str;     /* TOML_STRING */
        bool b;        /* TOML_BOOL */
        long long i;   /* TOML_INT */
        char **strv;   /* TOML_STRV: NULL-terminated, possibly empty */
        unsigned line; /* where the value starts, 1-based */
};

/* One key = value, with its full key path: table header components, then
 * the dotted key's. An array table's keys appear once per [[table]]. */
struct toml_entry {
        char **path; /* NULL-terminated components */
        struct toml_value v;
};

struct toml_doc {
        struct toml_entry *entries; /* in document order */
        size_t n;
};

/* Parse text of len bytes (need not be NUL-terminated). -EBADMSG with
 * *ret_line (may be NULL) set to the offending line when the text is not
 * TOML; -E2BIG past TOML_MAX_BYTES or TOML_MAX_ENTRIES; -ENOMEM. */
int toml_parse(const char *text, size_t len, struct toml_doc *ret, unsigned *ret_line);
/* toml_parse on a file's contents; -ENOENT etc. from opening it. */
int toml_load(const char *path, struct toml_doc *ret, unsigned *ret_line);
/* The value at the key path (NULL-terminated components), the last one
 * when a document sets it twice; NULL when absent. */
const struct toml_value *toml_get(const struct toml_doc *doc, const char *const *path);
void toml_doc_free(struct toml_doc *doc); /* accepts an empty doc */
