/* SPDX-License-Identifier: Apache-2.0 */
/* Spec files on disk: atomic replacement, the ownership record, and removal
 * of cdiplug's own stale specs.
 *
 * CDI consumers (containerd, CRI-O, podman) watch the spec directories and
 * load every "*.json"/"*.yaml" in them, so anything transient we create
 * there must be a dot-file with another suffix. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi-internal.h"
#include "cdi.h"

int cdi_read_file_at(int dfd, const char *name, bool nofollow, char **ret_buf, size_t *ret_len) {
        return base_read_file_at(dfd, name, nofollow ? O_NOFOLLOW : 0, CDI_MAX_FILE_SIZE, ret_buf,
                                 ret_len);
}

/* Replace dfd/name with data, atomically. Mode 0644 whatever the umask:
 * runtimes running as other users read the specs. */
static int replace_at(int dfd, const char *name, const char *data, size_t len) {
        return base_write_atomic_at(dfd, name, CDI_TMP_PREFIX, data, len, 0644);
}

/* ---- ownership record --------------------------------------------------- */

static const char owned_header[] =
        "# cdiplug: CDI spec files in this directory that cdiplug wrote and may\n"
        "# replace or remove. One file name per line. Do not edit.\n";

/* Only plain spec names we could have produced: a damaged or hand-edited
 * record must never make us unlink "../x" or a dot-file. */
static bool owned_name_ok(const char *s, size_t len) {
        if (len <= strlen(".json") || len > NAME_MAX || s[0] == '.')
                return false;
        if (memchr(s, '/', len) || memchr(s, '\0', len))
                return false;
        return memcmp(s + len - strlen(".json"), ".json", strlen(".json")) == 0;
}

int cdi_owned_load(int dfd, struct base_strvec *ret_names) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_strvec_ struct base_strvec names = { 0 };
        size_t len = 0;
        int r;

        r = cdi_read_file_at(dfd, CDI_OWNER_RECORD, true, &buf, &len);
        if (r == -ENOENT) {
                *ret_names = names;
                return 0;
        }
        if (r < 0)
                return r;

        for (char *line = buf, *end; line < buf + len; line = end + 1) {
                end = memchr(line, '\n', (size_t)(buf + len - line));
                if (!end)
                        end = buf + len; /* last line without newline */
                *end = '\0';
                if (line[0] == '#' || !owned_name_ok(line, (size_t)(end - line)))
                        continue;
                if (base_strv_contains(names.v, line))
                        continue;
                r = base_strvec_push_dup(&names, line);
                if (r < 0)
                        return r;
        }
        *ret_names = names;
        names = (struct base_strvec){ 0 };
        return 0;
}

static int owned_store(int dfd, char *const *names) {
        _cleanup_free_ char *buf = NULL;
        size_t len = strlen(owned_header), off;

        for (char *const *n = names; n && *n; n++)
                len += strlen(*n) + 1;
        buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, owned_header, strlen(owned_header));
        off = strlen(owned_header);
        for (char *const *n = names; n && *n; n++) {
                size_t l = strlen(*n);
                memcpy(buf + off, *n, l);
                buf[off + l] = '\n';
                off += l + 1;
        }
        return replace_at(dfd, CDI_OWNER_RECORD, buf, len);
}

int cdi_spec_is_owned_at(int dir_fd, const char *file_name, bool *ret_owned) {
        _cleanup_strvec_ struct base_strvec owned = { 0 };
        int r;

        r = cdi_owned_load(dir_fd, &owned);
        if (r < 0)
                return r;
        *ret_owned = base_strv_contains(owned.v, file_name);
        return 0;
}

/* ---- public entry points ------------------------------------------------ */

int cdi_dir_open(const char *path, int *ret_fd) {
        int fd;

        if (!path || !*path)
                return -EINVAL;
        /* Only the last component: /etc or /run missing is not ours to fix. */
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

/* Consumers reject a spec without devices, so "no devices" is written as
 * "no file": leaving the last one would advertise devices that are gone.
 * The claim in the record stays, for when devices come back. */
static int remove_own_spec(int dir_fd, const char *kind) {
        _cleanup_free_ char *name = NULL;
        _cleanup_strvec_ struct base_strvec owned = { 0 };
        struct stat st;
        int r;

        r = cdi_spec_file_name(kind, &name);
        if (r < 0)
                return r;
        r = cdi_owned_load(dir_fd, &owned);
        if (r < 0)
                return r;
        if (!base_strv_contains(owned.v, name))
                return 0;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISREG(st.st_mode))
                return 0;
        if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return fsync(dir_fd) < 0 ? -errno : 0;
}

/* Whether dfd/name is already exactly this spec, as we would write it. */
static bool same_content_at(int dfd, const char *name, const char *json) {
        _cleanup_free_ char *old = NULL;
        struct stat st;
        size_t len;

        if (cdi_read_file_at(dfd, name, true, &old, &len) < 0)
                return false;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || (st.st_mode & 07777) != 0644)
                return false;
        return len == strlen(json) && memcmp(old, json, len) == 0;
}

int cdi_spec_write_at(int dir_fd, const struct cdi_spec *spec) {
        _cleanup_free_ char *json = NULL, *name = NULL;
        _cleanup_strvec_ struct base_strvec owned = { 0 };
        struct stat st;
        int r;

        if (!spec)
                return -EINVAL;
        if (spec->n_devices == 0)
                return remove_own_spec(dir_fd, spec->kind);
        r = cdi_spec_to_json(spec, &json);
        if (r < 0)
                return r;
        r = cdi_spec_file_name(spec->kind, &name);
        if (r < 0)
                return r;
        r = cdi_owned_load(dir_fd, &owned);
        if (r < 0)
                return r;

        if (!base_strv_contains(owned.v, name)) {
                /* Someone else's file under our name: never clobber it. */
                if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        return -EEXIST;
                if (errno != ENOENT)
                        return -errno;
                /* Claim the name before the file exists: a crash in between
                 * leaves a claim without a file (harmless), never a file of
                 * ours that we would later refuse to touch as foreign. */
                r = base_strvec_push_dup(&owned, name);
                if (r < 0)
                        return r;
                r = owned_store(dir_fd, owned.v);
                if (r < 0)
                        return r;
        } else if (same_content_at(dir_fd, name, json))
                /* Every daemon start and every hotplug that changes
                 * nothing would otherwise cost two fsyncs and wake every
                 * runtime watching the dir. */
                return 0;
        return replace_at(dir_fd, name, json, strlen(json));
}

int cdi_spec_write(const char *dir, const struct cdi_spec *spec) {
        _cleanup_close_ int dfd = -1;
        int r;

        r = cdi_dir_open(dir, &dfd);
        if (r < 0)
                return r;
        return cdi_spec_write_at(dfd, spec);
}

static int keep_names(const char *const *kinds, struct base_strvec *keep) {
        int r;

        for (; kinds && *kinds; kinds++) {
                _cleanup_free_ char *name = NULL;
                r = cdi_spec_file_name(*kinds, &name);
                if (r < 0)
                        return r;
                r = base_strvec_push(keep, TAKE_PTR(name));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* An empty list, not NULL, for callers that iterate it. */
static int take_list(struct base_strvec *sv, char ***ret) {
        if (!ret)
                return 0;
        if (!sv->v)
                sv->v = calloc(1, sizeof(char *));
        if (!sv->v)
                return -ENOMEM;
        *ret = base_strvec_take(sv);
        return 0;
}

/* With remove, our files of kinds not kept go (cdi_remove_stale); without,
 * they stay claimed and are listed (cdi_sweep). Either way, temp files a
 * crash left go, and claims whose file is gone are dropped. */
static int sweep_at(int dir_fd, const char *const *kinds, bool remove, char ***ret_names) {
        _cleanup_strvec_ struct base_strvec owned = { 0 }, keep = { 0 }, still = { 0 },
                                            names = { 0 };
        bool changed = false;
        int r;

        r = keep_names(kinds, &keep);
        if (r < 0)
                return r;
        r = cdi_owned_load(dir_fd, &owned);
        if (r < 0)
                return r;
        for (char **n = owned.v; n && *n; n++) {
                struct stat st;

                if (base_strv_contains(keep.v, *n)) {
                        r = base_strvec_push_dup(&still, *n);
                        if (r < 0)
                                return r;
                        continue;
                }
                /* We only ever write regular files; anything else under the
                 * name was put there by someone else: forget it, keep it. */
                if (fstatat(dir_fd, *n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                return -errno;
                        changed = true;
                        continue;
                }
                if (!S_ISREG(st.st_mode)) {
                        changed = true;
                        continue;
                }
                if (!remove) {
                        r = base_strvec_push_dup(&still, *n);
                        if (r >= 0)
                                r = base_strvec_push_dup(&names, *n);
                        if (r < 0)
                                return r;
                        continue;
                }
                changed = true;
                if (unlinkat(dir_fd, *n, 0) < 0 && errno != ENOENT)
                        return -errno;
                r = base_strvec_push_dup(&names, *n);
                if (r < 0)
                        return r;
        }

        r = base_remove_temps_at(dir_fd, CDI_TMP_PREFIX);
        if (r < 0)
                return r;
        /* The record shrinks only after the unlinks: a crash in between
         * leaves claims without files, never our files without a claim.
         * With nothing removed there is nothing to make durable, and a
         * daemon's start (every restart of it) spends no fsync here. */
        if (changed) {
                r = owned_store(dir_fd, still.v);
                if (r < 0)
                        return r;
        } else if (r > 0 && fsync(dir_fd) < 0) {
                return -errno;
        }
        return take_list(&names, ret_names);
}

int cdi_remove_stale_at(int dir_fd, const char *const *kinds, char ***ret_removed) {
        return sweep_at(dir_fd, kinds, true, ret_removed);
}

/* The dir, or -ENOENT when there is none (nothing of ours there). */
static int open_dir(const char *dir, int *ret_fd) {
        int fd;

        if (!dir || !*dir)
                return -EINVAL;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

static int sweep(const char *dir, const char *const *kinds, bool remove, char ***ret_names) {
        _cleanup_close_ int dfd = -1;
        int r = open_dir(dir, &dfd);

        if (r == -ENOENT) {
                struct base_strvec none = { 0 };
                return take_list(&none, ret_names);
        }
        if (r < 0)
                return r;
        return sweep_at(dfd, kinds, remove, ret_names);
}

int cdi_remove_stale(const char *dir, const char *const *kinds, char ***ret_removed) {
        return sweep(dir, kinds, true, ret_removed);
}

int cdi_sweep(const char *dir, const char *const *kinds, char ***ret_stale) {
        return sweep(dir, kinds, false, ret_stale);
}

int cdi_spec_remove(const char *dir, const char *file_name, bool *ret_removed) {
        _cleanup_strvec_ struct base_strvec owned = { 0 }, still = { 0 };
        _cleanup_close_ int dfd = -1;
        bool removed = false;
        struct stat st;
        int r = open_dir(dir, &dfd);

        if (r == -ENOENT) {
                *ret_removed = false;
                return 0;
        }
        if (r < 0)
                return r;
        r = cdi_owned_load(dfd, &owned);
        if (r < 0)
                return r;
        if (!base_strv_contains(owned.v, file_name)) {
                /* Not ours (any more): never touched. */
                *ret_removed = false;
                return 0;
        }
        for (char **n = owned.v; n && *n; n++)
                if (strcmp(*n, file_name) != 0 && (r = base_strvec_push_dup(&still, *n)) < 0)
                        return r;
        /* Only a regular file is one we wrote (see sweep_at). */
        if (fstatat(dfd, file_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return -errno;
        } else if (S_ISREG(st.st_mode)) {
                if (unlinkat(dfd, file_name, 0) < 0 && errno != ENOENT)
                        return -errno;
                removed = true;
        }
        /* The claim goes after the file, and the record's replacement
         * fsyncs the dir, which makes the unlink durable too. */
        r = owned_store(dfd, still.v);
        if (r < 0)
                return r;
        *ret_removed = removed;
        return 0;
}
