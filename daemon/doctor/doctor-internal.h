/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: `cdiplug doctor`, a read-only check of a node that explains in
 * plain words what stands between the config and a device in a pod, with
 * the fix. Files: doctor.c (report, output, kubelet and kernel checks),
 * doctor_match.c (what each selector matched and why not), doctor_cdi.c
 * (runtime configs, CDI dirs and specs), doctor_http.c (the daemon's
 * /readyz), doctor_root.c (reading inside the host root), doctor_dra.c
 * (DRA's kubelet dirs and API credentials).
 *
 * Nothing here writes, creates or removes a file, and nothing but a
 * regular file is opened for reading. Runtime configs, the files and dirs
 * they name, and the kernel's /proc and /dev are read inside the host
 * root, symlinks and ".." resolved as discovery resolves them; the kubelet
 * dir and --cdi-dir are taken as given, like `serve` does.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "doctor.h"

struct cfg_config;

enum doc_level { DOC_OK, DOC_INFO, DOC_WARN, DOC_PROBLEM };

struct doc_finding {
        const char *check; /* "config", "match", "kubelet", "runtime", "cdi", "kernel" */
        enum doc_level level;
        char *msg;
        char *fix; /* NULL when there is nothing to do */
};

struct doc_ctx {
        const struct doc_options *o;
        struct cfg_config *cfg; /* NULL when the config is invalid */
        uid_t uid;              /* the serving identity */
        gid_t gid;
        /* What the runtimes read, from their configs (host paths). */
        char **runtime_dirs;    /* NULL-terminated; NULL: no runtime config found */
        bool runtime_assumed;   /* no config seen: runtime_dirs are the defaults */
        int ownership_from_ctx; /* device_ownership_from_security_context: -1 unknown */
        struct doc_finding *v;
        size_t n, cap;
        bool oom;
};

/* Add a finding; fix may be NULL. Out of memory is remembered and
 * reported once at the end. */
void doc_add(struct doc_ctx *c, const char *check, enum doc_level level, const char *fix,
             const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* host_root + path (path absolute), malloc'd; NULL on OOM. */
char *doc_host_path(const struct doc_ctx *c, const char *path);
/* Up to max-1 bytes of a small file (sysfs, procfs), trailing whitespace
 * trimmed; 0 or a negative errno. */
int doc_read_small(const char *path, char *buf, size_t max);

struct stat;

/* --- reading inside the host root (doctor_root.c) ---
 * path is host-absolute ("/etc/containerd/config.toml"); it is resolved
 * with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) under --host-root:
 * "/" and ".." in it and in its symlinks stop at the root. */

/* fstat of what path names (links followed inside the root); opens
 * nothing but an O_PATH descriptor. */
int doc_root_stat(const struct doc_ctx *c, const char *path, struct stat *ret);
/* path's contents, NUL-terminated, at most max bytes (-EFBIG beyond).
 * Anything but a regular file is not opened: a warning under check says
 * what it is and that it was skipped, and -EINVAL is returned. */
int doc_root_read(struct doc_ctx *c, const char *check, const char *path, size_t max,
                  char **ret_buf, size_t *ret_len);
/* The directory path, opened O_RDONLY|O_DIRECTORY. */
int doc_root_open_dir(const struct doc_ctx *c, const char *path, int *ret_fd);
/* The names in directory path, without "." and "..", sorted with strcmp
 * (the byte order of Go's os.ReadDir, which containerd and CRI-O use);
 * -E2BIG past 65536 entries. NULL-terminated, possibly empty. */
int doc_root_list(const struct doc_ctx *c, const char *path, char ***ret_names);
/* Append to out what the absolute glob pattern matches inside the root,
 * each component matched in name order (as Go's filepath.Glob: '*'
 * matches a leading dot). At most max paths, and a bounded number of
 * directory entries looked at: -E2BIG when a bound stopped it, out then
 * holding what it found until then. */
struct base_strvec;
int doc_root_glob(const struct doc_ctx *c, const char *pattern, size_t max,
                  struct base_strvec *out);

/* Whether uid/gid may write (and with need_exec, search) what st
 * describes, with no capability: mode bits only. */
bool doc_can_write(const struct stat *st, uid_t uid, gid_t gid, bool need_exec);

void doc_check_match(struct doc_ctx *c);
void doc_check_runtime(struct doc_ctx *c);
void doc_check_cdi(struct doc_ctx *c);
/* For a config with DRA resources: the plugin registry and plugin dirs
 * under --kubelet-root, and the API credentials (doc_check_credentials
 * with the service account's dir). */
void doc_check_dra(struct doc_ctx *c);
/* --kubeconfig, else the in-cluster environment and the token and CA in
 * sa_dir: there and readable by the serving identity, never read. */
void doc_check_credentials(struct doc_ctx *c, const char *sa_dir);

/* GET path from http://hostport (an IPv4 address, "[IPv6]" or a host name,
 * ":port") as HTTP/1.0, reading at most 64 KiB, all within timeout_ms.
 * *ret_body (may be NULL) is malloc'd and NUL-terminated. -ETIMEDOUT,
 * -ECONNREFUSED..., -EBADMSG for an answer that is not HTTP, -EINVAL for a
 * bad hostport. */
int doc_http_get(const char *hostport, const char *path, int timeout_ms, int *ret_status,
                 char **ret_body);
/* Report what the running daemon's /readyz on hostport says about the
 * registrations (a problem unless it answers 200). */
void doc_check_readyz(struct doc_ctx *c, const char *hostport);

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
