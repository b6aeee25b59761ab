/* SPDX-License-Identifier: Apache-2.0 */
/* base: what every module of cdiplug shares, and nothing else. Ownership by
 * cleanup attributes, after systemd's alloc-util.h: a variable marked
 * _cleanup_free_ is freed when it goes out of scope, TAKE_PTR hands it over.
 */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(base_freep)
#define _cleanup_close_ _cleanup_(base_closep)
#define _cleanup_closedir_ _cleanup_(base_closedirp)
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hand ownership over: returns the value and leaves NULL or -1 behind. */
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _base_p = (p);                                                       \
                (p) = NULL;                                                                        \
                _base_p;                                                                           \
        })
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _base_fd = (fd);                                                               \
                (fd) = -1;                                                                         \
                _base_fd;                                                                          \
        })

static inline void base_freep(void *p) {
        free(*(void **)p);
}

/* Cleanup runs on error paths after errno was set for the caller: keep it. */
static inline void base_closep(const int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

static inline void base_closedirp(DIR **d) {
        if (*d) {
                int saved = errno;
                closedir(*d);
                errno = saved;
        }
}

/* String vectors (strv.c): lists travel as NULL-terminated char **
 * (env, mount options, device nodes, file names). The functions accept a
 * NULL vector as empty. */
void base_strv_free(char **strv);
size_t base_strv_length(char *const *strv);
bool base_strv_contains(char *const *strv, const char *s);
/* A copy of src; *ret is NULL when src is NULL or empty. */
int base_strv_copy(char *const *src, char ***ret);

/* How a vector is built: the kept length and capacity make appending
 * amortised O(1). v is NULL or NULL-terminated. */
struct base_strvec {
        char **v;
        size_t n, cap;
};
/* Appends s, taking it even on error; a NULL s (a failed strdup or
 * printf) is -ENOMEM. */
int base_strvec_push(struct base_strvec *sv, char *s);
int base_strvec_push_dup(struct base_strvec *sv, const char *s);
void base_strvec_clear(struct base_strvec *sv); /* frees, leaves it empty */
/* Hands the vector over (NULL when nothing was pushed), leaving sv empty. */
char **base_strvec_take(struct base_strvec *sv);

static inline void base_strv_freep(char ***strv) {
        base_strv_free(*strv);
}
#define _cleanup_strv_ _cleanup_(base_strv_freep)
#define _cleanup_strvec_ _cleanup_(base_strvec_clear)

/* The per-device edits a selector asks for (edits.c), defined once for the
 * selector, the devices discovery finds, the plugin's shared copies and
 * the CDI spec's nodes. */

/* A device node's access overrides, for every node of a device. Unset,
 * the reference CDI library copies the host node's mode and gives the
 * node the container process's uid/gid, which is what non-root pods need. */
struct base_node_access {
        char *permissions;  /* cgroup access, a subset of "rwm"; NULL: runtime default */
        unsigned file_mode; /* permission bits, at most 0777; 0: unset */
        bool has_uid, has_gid;
        unsigned uid, gid;
};
void base_node_access_clear(struct base_node_access *a); /* frees, leaves it zeroed */
int base_node_access_copy(const struct base_node_access *src, struct base_node_access *ret);

/* A bind mount, copied verbatim from the config. */
struct base_mount {
        char *host_path;      /* host-absolute */
        char *container_path; /* absolute */
        bool read_only;
};

struct base_edits {
        char **env;                /* "KEY=VALUE", NULL-terminated; NULL when none */
        struct base_mount *mounts; /* NULL when n_mounts is 0 */
        size_t n_mounts;
        struct base_node_access node;
};
void base_edits_clear(struct base_edits *e); /* frees, leaves it zeroed */
int base_edits_copy(const struct base_edits *src, struct base_edits *ret);
/* A NULL env equals an empty one. */
bool base_edits_equal(const struct base_edits *a, const struct base_edits *b);

/* Read the regular file path (relative to dfd; flags adds e.g. O_NOFOLLOW)
 * whole into a NUL-terminated buffer. -EINVAL when it is not a regular
 * file, -EFBIG past max bytes, else 0 or the errno of open/read. */
int base_read_file_at(int dfd, const char *path, int flags, size_t max, char **ret_buf,
                      size_t *ret_len);
/* The same for a file already open (read from its current offset). A
 * procfs or sysfs file (or any that says size 0) is read in one read of
 * min(max, BASE_PSEUDO_READ) + 1 bytes first: a sysctl answers only the
 * first read. */
#define BASE_PSEUDO_READ ((size_t)64 << 10)
int base_read_fd(int fd, size_t max, char **ret_buf, size_t *ret_len);

/* An upper bound on the values (tree nodes) parsing the JSON text s of len
 * bytes makes, counted without allocating: check it against a cap before
 * cJSON_Parse, so what is parsed is bounded and not only what is read. */
size_t base_json_values(const char *s, size_t len);

/* Replace dfd/name with len bytes of data so that a crash at any instant
 * leaves either the old or the new content under name (atomic.c): an
 * exclusively created temp file tmp_prefix<random> in the same dir,
 * written, given mode (umask aside), fsynced, renamed over name, and the
 * dir fsynced. tmp_prefix should start with '.' and not end in a suffix a
 * watcher of the dir loads. On failure before the rename nothing is left
 * behind; 0 or a negative errno. */
int base_write_atomic_at(int dfd, const char *name, const char *tmp_prefix, const void *data,
                         size_t len, mode_t mode);
/* Remove the regular files named tmp_prefix* in dfd, temps a crash left:
 * how many, or a negative errno. */
int base_remove_temps_at(int dfd, const char *tmp_prefix);

/* Why a document (the config, a selector) was refused, for a person
 * (field_error.c): the JSON path of the field ("resources[1].shares",
 * "usb.vendor"; "" for the document itself) and what is wrong with it.
 * Filled once, where the failure is found; both NULL when unset. */
struct base_field_error {
        char *field;
        char *msg;
};
/* Replace what e holds; returns -EINVAL, or -ENOMEM (e left empty) when
 * the message cannot be made. */
int base_field_error_set(struct base_field_error *e, const char *field, const char *fmt, ...)
        _printf_(3, 4);
int base_field_error_setv(struct base_field_error *e, const char *field, const char *fmt,
                          va_list ap) __attribute__((format(printf, 3, 0)));
void base_field_error_clear(struct base_field_error *e); /* frees, leaves it empty */

/* What this process bound at a path (owned.c): its device and inode. */
struct base_owned {
        dev_t dev;
        ino_t ino;
        bool set;
};
/* The id of what is at path now (lstat); 0 or a negative errno. */
int base_owned_id(const char *path, struct base_owned *ret);
/* Whether path still holds what id names. */
bool base_owned_is(const char *path, const struct base_owned *id);
/* Unlink path only when it still holds what id names: 0 when removed,
 * -ESTALE when it holds something else (another instance's socket) or
 * id was never set, -ENOENT when gone. id is cleared either way. */
int base_owned_unlink(const char *path, struct base_owned *id);
/* Remove the unix sockets in dir whose names match (match(name, ctx))
 * and which no process listens on any more (connect() refused: an
 * instance killed before it could remove its own). A socket that accepts,
 * or is anything but refused, stays. How many went (their paths in
 * *ret_removed, NULL-terminated, when asked), or a negative errno when
 * dir cannot be read. */
int base_remove_dead_sockets(const char *dir, bool (*match)(const char *name, void *ctx), void *ctx,
                             char ***ret_removed);

/* s for a message (quote.c): at most max bytes of it, anything but
 * printable ASCII (and the backslash) as \xHH, cut to fit size (>= 1). */
void base_quote(const char *s, size_t max, char *out, size_t size);

/* FNV-1a of a string (hash.c): fixed forever, names are made from it. */
uint32_t base_fnv1a32(const char *s);
uint64_t base_fnv1a64(const char *s);
