/* SPDX-License-Identifier: Apache-2.0 */
/* The checkpoint of prepared claims, <plugin dir>/checkpoint.json: the
 * kubelet may call Unprepare after the claim is gone from the API server,
 * and after our restart, so what Prepare answered is kept on disk. It is
 * replaced whole, atomically (base_write_atomic_at): a SIGKILL or a power
 * cut at any moment leaves the old or the new one.
 *
 * The file is the only truth. During a rolling update two instances (the
 * old and the new pod) serve the kubelet at once and share it, so every
 * change is a read-modify-write under an exclusive flock of
 * checkpoint.lock beside it: read the file, change it, write it, unlock.
 * Nothing is merged and no copy in memory is trusted over the file; the
 * copy in n->prepared is what the file held when last read, for the
 * answers that need no change and for whoever keeps specs for claims. The
 * lock is never held across a call to the API server, only for one read
 * and one write of a file of at most DRA_CHECKPOINT_MAX_BYTES.
 *
 * A file that cannot be read back (damage, a bug, a hand edit) is never
 * replaced: another instance may hold claims only it records. Every
 * Prepare and Unprepare then fails its claims with an error naming the
 * file until it reads again (doctor says what to do); the claims already
 * known stay known, so their CDI specs stay.
 * The codec is the model's (dra.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dra-node-internal.h"
#include "log.h"
#include "loop.h"

#define CHECKPOINT DRA_CHECKPOINT_FILE
/* Temps are CHECKPOINT_TMP<random>; the prefix also matches the fixed temp
 * name older versions used, so their leftover goes too. */
#define CHECKPOINT_TMP ".checkpoint.json.tmp"
#define CHECKPOINT_LOCK "checkpoint.lock"
/* The other holder holds the lock for one read and one fsynced write;
 * past this it is stuck (a hung disk, a stopped process), and the call
 * fails its claims rather than hold the daemon up longer. */
#define LOCK_WAIT_MS 2000

int dra_checkpoint_open(struct dra_node *n) {
        n->lock_fd =
                openat(n->dir_fd, CHECKPOINT_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (n->lock_fd < 0) {
                int r = -errno;
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot open %s/%s: %s", n->plugin_dir, CHECKPOINT_LOCK,
                         strerror(-r));
                return r;
        }
        return 0;
}

/* Non-blocking tries with a growing pause (0.1 ms up to 10 ms), bounded:
 * flock itself has no timeout, and a blocking one would wait on a stuck
 * holder forever with the daemon's lock held. */
int dra_checkpoint_lock(struct dra_node *n) {
        uint64_t until = dp_now_ms() + LOCK_WAIT_MS;
        long pause_ns = 100 * 1000;

        for (;;) {
                if (flock(n->lock_fd, LOCK_EX | LOCK_NB) == 0)
                        return 0;
                if (errno != EWOULDBLOCK && errno != EINTR)
                        break;
                if (dp_now_ms() >= until) {
                        errno = ETIMEDOUT;
                        break;
                }
                nanosleep(&(struct timespec){ .tv_nsec = pause_ns }, NULL);
                pause_ns = pause_ns * 2 > 10 * 1000 * 1000 ? 10 * 1000 * 1000 : pause_ns * 2;
        }
        int r = -errno;
        log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                 "dra: cannot lock %s/%s: %s", n->plugin_dir, CHECKPOINT_LOCK,
                 r == -ETIMEDOUT ? "another instance held it for more than 2 s" : strerror(-r));
        return r;
}

void dra_checkpoint_unlock(struct dra_node *n) {
        (void)flock(n->lock_fd, LOCK_UN);
}

static bool has_uid(const struct dra_claim *c, size_t n, const char *uid) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(c[i].uid, uid) == 0)
                        return true;
        return false;
}

/* The file's claims become n->prepared; whoever keeps things for claims
 * hears of those that left. */
static void take(struct dra_node *n, struct dra_claim *claims, size_t count) {
        bool gone = false;

        for (size_t i = 0; i < n->n_prepared && !gone; i++)
                gone = !has_uid(claims, count, n->prepared[i].uid);
        dra_claims_free(n->prepared, n->n_prepared);
        n->prepared = claims;
        n->n_prepared = count;
        if (gone && n->unprepared)
                n->unprepared(n->unprepared_ctx);
}

static void set_broken(struct dra_node *n, const char *why) {
        _cleanup_free_ char *msg = NULL;

        if (xasprintf(&msg,
                      "the checkpoint of prepared claims %s/%s cannot be read (%s): no claim is "
                      "prepared or unprepared until it can (see cdiplug doctor)",
                      n->plugin_dir, CHECKPOINT, why) < 0)
                msg = NULL;
        /* Said once per new reason, not once per call. */
        if (!n->ck_error || !msg || strcmp(n->ck_error, msg) != 0)
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir },
                         "dra: checkpoint %s/%s is unusable (%s): left as it is (another "
                         "instance may hold claims only it records); every Prepare and Unprepare "
                         "fails its claims until it reads again, see cdiplug doctor; the %zu "
                         "claims last read stay known",
                         n->plugin_dir, CHECKPOINT, why, n->n_prepared);
        if (msg) {
                free(n->ck_error);
                n->ck_error = TAKE_PTR(msg);
        }
}

int dra_checkpoint_read(struct dra_node *n) {
        _cleanup_free_ char *text = NULL, *msg = NULL;
        struct dra_claim *claims = NULL;
        size_t len = 0, count = 0;
        int r;

        r = base_read_file_at(n->dir_fd, CHECKPOINT, O_NOFOLLOW, DRA_CHECKPOINT_MAX_BYTES, &text,
                              &len);
        if (r == -ENOENT)
                r = 0; /* none yet: no claims */
        else if (r >= 0)
                r = dra_checkpoint_decode(text, len, &claims, &count, &msg);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                set_broken(n, msg ? msg : strerror(-r));
                return -EBADMSG;
        }
        if (n->ck_error)
                log_with(LOG_INFO, &(struct log_fields){ .path = n->plugin_dir },
                         "dra: the checkpoint %s/%s reads again", n->plugin_dir, CHECKPOINT);
        free(n->ck_error);
        n->ck_error = NULL;
        take(n, claims, count);
        return 0;
}

/* Mode 0600: only cdiplug reads it back. Under the lock. */
int dra_checkpoint_save(struct dra_node *n) {
        _cleanup_free_ char *text = NULL, *msg = NULL;
        size_t len;
        int r;

        r = dra_checkpoint_encode(n->prepared, n->n_prepared, &text, &len, &msg);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot encode the checkpoint: %s", msg ? msg : strerror(-r));
                return r;
        }
        r = base_write_atomic_at(n->dir_fd, CHECKPOINT, CHECKPOINT_TMP, text, len, 0600);
        if (r < 0)
                log_with(LOG_ERR, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot write %s/%s: %s", n->plugin_dir, CHECKPOINT, strerror(-r));
        return r;
}

/* At start: temps a crash left (under the lock: another instance's temp
 * may be in flight), then the file. One that cannot be read is left as
 * it is, and the daemon starts: its device plugins and the claims of a
 * later, readable file need nothing from it. */
int dra_checkpoint_load(struct dra_node *n) {
        int r = dra_checkpoint_lock(n);

        if (r < 0)
                return r;
        r = base_remove_temps_at(n->dir_fd, CHECKPOINT_TMP);
        if (r < 0)
                log_with(LOG_WARN, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: cannot remove leftover temps %s/%s*: %s; continuing", n->plugin_dir,
                         CHECKPOINT_TMP, strerror(-r));
        r = dra_checkpoint_read(n);
        dra_checkpoint_unlock(n);
        if (r == -EBADMSG)
                return 0;
        if (r >= 0)
                log_with(LOG_INFO, &(struct log_fields){ .path = n->plugin_dir },
                         "dra: %zu prepared claims from %s/%s", n->n_prepared, n->plugin_dir,
                         CHECKPOINT);
        return r;
}

int dra_node_refresh(struct dra_node *n) {
        if (!n || n->lock_fd < 0)
                return 0;
        return dra_checkpoint_read(n);
}

const char *dra_node_plugin_dir(const struct dra_node *n) {
        return n->plugin_dir;
}
