/* SPDX-License-Identifier: Apache-2.0 */
/* The checkpoint of prepared claims, <plugin dir>/checkpoint.json: the
 * kubelet may call Unprepare after the claim is gone from the API server,
 * and after our restart, so what Prepare answered is kept on disk. It is
 * replaced whole, atomically (base_write_atomic_at): a SIGKILL or a power
 * cut at any moment leaves the old or the new one.
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
/* Temps are CHECKPOINT_TMP<random>; the prefix also matches the fixed temp
 * name older versions used, so their leftover goes too. */
#define CHECKPOINT_TMP ".checkpoint.json.tmp"
#define CHECKPOINT_BAD "checkpoint.json.bad"

/* Mode 0600: only this process reads it back. */
int dra_checkpoint_save(struct dra_node *n) {
        _cleanup_free_ char *text = NULL, *msg = NULL;
        size_t len;
        int r;

        dra_checkpoint_merge(n);
        r = dra_checkpoint_encode(n->prepared, n->n_prepared, &text, &len, &msg);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot encode the checkpoint: %s", msg ? msg : strerror(-r));
                return r;
        }
        r = base_write_atomic_at(n->dir_fd, CHECKPOINT, CHECKPOINT_TMP, text, len, 0600);
        if (r >= 0)
                dra_checkpoint_synced(n);
        if (r < 0)
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot write %s/%s: %s", n->plugin_dir, CHECKPOINT, strerror(-r));
        return r;
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
        int r;

        /* A temp a crash left behind, never renamed: not a checkpoint. */
        r = base_remove_temps_at(n->dir_fd, CHECKPOINT_TMP);
        if (r < 0)
                log_with(LOG_WARN, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot remove leftover temps %s/%s*: %s; continuing", n->plugin_dir,
                         CHECKPOINT_TMP, strerror(-r));
        r = base_read_file_at(n->dir_fd, CHECKPOINT, O_NOFOLLOW, DRA_CHECKPOINT_MAX_BYTES, &text,
                              &len);
        if (r == -ENOENT)
                return 0;
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
        dra_checkpoint_synced(n);
        log_with(LOG_INFO, &(struct log_fields){ .path = n->plugin_dir },
                 "dra: %zu prepared claims from %s/%s", count, n->plugin_dir, CHECKPOINT);
        return 0;
}
