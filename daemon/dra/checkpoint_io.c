/* SPDX-License-Identifier: Apache-2.0 */
/* The checkpoint of prepared claims, <plugin dir>/checkpoint.json: the
 * kubelet may call Unprepare after the claim is gone from the API server,
 * and after our restart, so what Prepare answered is kept on disk. It is
 * replaced whole, atomically (temp file, fsync, rename, fsync of the dir):
 * a SIGKILL or a power cut at any moment leaves the old or the new one.
 * The codec is the model's (dra.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dra-node-internal.h"
#include "log.h"

#define CHECKPOINT "checkpoint.json"
#define CHECKPOINT_TMP ".checkpoint.json.tmp"
#define CHECKPOINT_BAD "checkpoint.json.bad"

static int write_all(int fd, const char *buf, size_t len) {
        while (len > 0) {
                ssize_t w = write(fd, buf, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                buf += w;
                len -= (size_t)w;
        }
        return 0;
}

/* Only this process writes the file, under the daemon's lock: one fixed
 * temp name is enough, and one left by a crash is simply replaced. */
int dra_checkpoint_save(struct dra_node *n) {
        _cleanup_free_ char *text = NULL, *msg = NULL;
        size_t len;
        int fd, r;

        r = dra_checkpoint_encode(n->prepared, n->n_prepared, &text, &len, &msg);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot encode the checkpoint: %s", msg ? msg : strerror(-r));
                return r;
        }
        fd = openat(n->dir_fd, CHECKPOINT_TMP,
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                r = -errno;
        if (r == 0)
                r = write_all(fd, text, len);
        /* On disk before the rename makes it visible. */
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (fd >= 0)
                close(fd);
        if (r == 0 && renameat(n->dir_fd, CHECKPOINT_TMP, n->dir_fd, CHECKPOINT) < 0)
                r = -errno;
        /* And the rename itself durable. */
        if (r == 0 && fsync(n->dir_fd) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(n->dir_fd, CHECKPOINT_TMP, 0);
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot write %s/%s: %s", n->plugin_dir, CHECKPOINT, strerror(-r));
        }
        return r;
}

static int read_all(int fd, char **ret, size_t *ret_len) {
        struct stat st;
        char *buf;
        size_t len = 0;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if (st.st_size > DRA_CHECKPOINT_MAX_BYTES)
                return -EFBIG;
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (len < (size_t)st.st_size) {
                ssize_t got = read(fd, buf + len, (size_t)st.st_size - len);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0) {
                        int r = got < 0 ? -errno : -EIO;
                        free(buf);
                        return r;
                }
                len += (size_t)got;
        }
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* A checkpoint that cannot be read back is moved aside, kept for a human,
 * and the daemon starts with none: Unprepare of a claim it does not know
 * succeeds, and Prepare asks the API server again. Nothing on the host
 * depends on it (the CDI specs are per resource), so starting is better
 * than refusing to. */
int dra_checkpoint_load(struct dra_node *n) {
        _cleanup_free_ char *text = NULL, *msg = NULL;
        struct dra_claim *claims = NULL;
        size_t len = 0, count = 0;
        int fd, r;

        fd = openat(n->dir_fd, CHECKPOINT, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT)
                return 0;
        if (fd < 0)
                r = -errno;
        else {
                r = read_all(fd, &text, &len);
                close(fd);
        }
        if (r >= 0)
                r = dra_checkpoint_decode(text, len, &claims, &count, &msg);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: checkpoint %s/%s is unusable (%s): moved to %s, starting with no "
                         "prepared claims",
                         n->plugin_dir, CHECKPOINT, msg ? msg : strerror(-r), CHECKPOINT_BAD);
                if (renameat(n->dir_fd, CHECKPOINT, n->dir_fd, CHECKPOINT_BAD) < 0)
                        log_with(LOG_WARN,
                                 &(struct log_fields){ .path = n->plugin_dir, .err = errno },
                                 "dra: cannot move the checkpoint aside: %m; it is overwritten at "
                                 "the next Prepare");
                return 0;
        }
        n->prepared = claims;
        n->n_prepared = count;
        log_with(LOG_INFO, &(struct log_fields){ .path = n->plugin_dir },
                 "dra: %zu prepared claims from %s/%s", count, n->plugin_dir, CHECKPOINT);
        return 0;
}
