/* SPDX-License-Identifier: Apache-2.0 */
/* Removing only what this process made. During a rolling update two
 * instances share the kubelet's socket dirs (and, with no pod UID, the
 * very names), so "remove my socket" must not remove the socket the
 * other instance bound in its place: the path is compared by device and
 * inode with what this process bound before it is unlinked. A rename keeps
 * the inode, so an id taken on the temp name holds for the final one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base.h"

int base_owned_id(const char *path, struct base_owned *ret) {
        struct stat st;

        if (lstat(path, &st) < 0)
                return -errno;
        *ret = (struct base_owned){ .dev = st.st_dev, .ino = st.st_ino, .set = true };
        return 0;
}

bool base_owned_is(const char *path, const struct base_owned *id) {
        struct stat st;

        return id->set && lstat(path, &st) == 0 && st.st_dev == id->dev && st.st_ino == id->ino;
}

int base_owned_unlink(const char *path, struct base_owned *id) {
        struct base_owned was = *id;
        struct stat st;

        *id = (struct base_owned){ 0 };
        if (!was.set)
                return -ESTALE;
        if (lstat(path, &st) < 0)
                return -errno;
        /* Between this check and the unlink only a rename over the path
         * could intervene: each instance binds its own names (POD_UID),
         * and with shared names a replacement lands in that instant only
         * from a start that raced this stop anyway. */
        if (st.st_dev != was.dev || st.st_ino != was.ino)
                return -ESTALE;
        if (unlink(path) < 0)
                return -errno;
        return 0;
}

/* Whether a unix socket at path is dead: connect() refused, so no
 * process listens on it (a SIGKILLed instance's). A listener accepts (or,
 * its backlog full, says EAGAIN): alive, left alone. The one live socket
 * that refuses is one between its bind() and its listen(), a few
 * instructions apart on one thread: cdiplug's instances call both at
 * once, before any other work. */
static bool dead_socket(int dfd, const char *name, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path) ||
            fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode))
                return false;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return false;
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
        close(fd);
        return r == ECONNREFUSED;
}

int base_remove_dead_sockets(const char *dir, bool (*match)(const char *name, void *ctx), void *ctx,
                             char ***ret_removed) {
        _cleanup_strv_ char **removed = NULL;
        size_t n = 0;
        DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                if (de->d_type != DT_SOCK && de->d_type != DT_UNKNOWN)
                        continue;
                if (!match(de->d_name, ctx) || asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        continue;
                if (!dead_socket(dirfd(d), de->d_name, path) ||
                    unlinkat(dirfd(d), de->d_name, 0) < 0)
                        continue;
                char **more = reallocarray(removed, n + 2, sizeof(char *));
                if (!more)
                        continue;
                removed = more;
                removed[n++] = TAKE_PTR(path);
                removed[n] = NULL;
        }
        closedir(d);
        if (ret_removed)
                *ret_removed = TAKE_PTR(removed);
        return (int)n;
}
