/* SPDX-License-Identifier: Apache-2.0 */
/* Removing only what this process made. During a rolling update two
 * instances share the kubelet's socket dirs (and, with no pod UID, the
 * very names), so "remove my socket" must not remove the socket the
 * other instance bound in its place: the path is compared by device and
 * inode with what this process bound before it is unlinked. A rename keeps
 * the inode, so an id taken on the temp name holds for the final one. */
#include <errno.h>
#include <sys/stat.h>
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
