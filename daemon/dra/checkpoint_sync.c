/* SPDX-License-Identifier: Apache-2.0 */
/* Two instances, one checkpoint. During a rolling update the old and the
 * new pod share <plugin dir>/checkpoint.json: the new one loads it at
 * start while the kubelet still calls the old one, and each replaces the
 * whole file with what it holds in memory. Without care the last writer
 * wins: the new instance drops a claim the old one prepared after that
 * load, and the old one, answering its last call while it stops, drops
 * every claim the new one prepared since.
 *
 * So each instance remembers the file it last read or wrote (device,
 * inode, times and size: every write is a new file renamed into place,
 * and a freed inode number comes back at once) and the uids it held. Before a save, a file that changed
 * since is merged three ways, that memory being the base: a claim the
 * other added (not in the base) is adopted, one the other removed (in the
 * base, gone from the file) is dropped, and this instance's own additions
 * and removals stand. Both then converge on the same set, whatever order
 * they write in. One window stays: a write landing between another's read
 * and its rename (an fsync long, and only while both run) is lost to it
 * until the next change. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dra-node-internal.h"
#include "log.h"

#define CHECKPOINT "checkpoint.json"

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool in_base(const struct dra_ck_sync *ck, const char *uid) {
        return ck->n_uids && bsearch(&uid, ck->uids, ck->n_uids, sizeof(char *), cmp_str);
}

/* A cleared claim (uid NULL) is none. */
static bool in_claims(const struct dra_claim *c, size_t n, const char *uid) {
        for (size_t i = 0; i < n; i++)
                if (c[i].uid && strcmp(c[i].uid, uid) == 0)
                        return true;
        return false;
}

void dra_checkpoint_sync_free(struct dra_node *n) {
        base_strv_free(n->ck.uids);
        n->ck = (struct dra_ck_sync){ 0 };
}

void dra_checkpoint_synced(struct dra_node *n) {
        char **uids = calloc(n->n_prepared + 1, sizeof(char *));
        struct stat st;

        dra_checkpoint_sync_free(n);
        if (!uids || fstatat(n->dir_fd, CHECKPOINT, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                /* No base: the next save writes what it holds, as before. */
                free(uids);
                return;
        }
        for (size_t i = 0; i < n->n_prepared; i++)
                if (!(uids[i] = strdup(n->prepared[i].uid))) {
                        base_strv_free(uids);
                        return;
                }
        qsort(uids, n->n_prepared, sizeof(char *), cmp_str);
        n->ck = (struct dra_ck_sync){ .known = true,
                                      .dev = st.st_dev,
                                      .ino = st.st_ino,
                                      .mtime = st.st_mtim,
                                      .ctime = st.st_ctim,
                                      .size = st.st_size,
                                      .uids = uids,
                                      .n_uids = n->n_prepared };
}

static bool same_time(struct timespec a, struct timespec b) {
        return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static bool same_file(const struct dra_ck_sync *ck, const struct stat *st) {
        return st->st_dev == ck->dev && st->st_ino == ck->ino && st->st_size == ck->size &&
               same_time(st->st_mtim, ck->mtime) && same_time(st->st_ctim, ck->ctime);
}

/* The checkpoint another instance wrote, decoded; NULL when it is what
 * this instance last saw, is gone, or cannot be read (then ours stands). */
static int read_theirs(struct dra_node *n, struct dra_claim **ret, size_t *ret_n) {
        _cleanup_free_ char *text = NULL, *msg = NULL;
        struct stat st;
        size_t len = 0;
        int r;

        if (!n->ck.known || fstatat(n->dir_fd, CHECKPOINT, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            same_file(&n->ck, &st))
                return 0;
        r = base_read_file_at(n->dir_fd, CHECKPOINT, O_NOFOLLOW, DRA_CHECKPOINT_MAX_BYTES, &text,
                              &len);
        if (r >= 0)
                r = dra_checkpoint_decode(text, len, ret, ret_n, &msg);
        if (r < 0)
                log_with(LOG_WARN, &(struct log_fields){ .path = n->plugin_dir, .err = -r },
                         "dra: %s/%s was written by another instance but cannot be read (%s); "
                         "writing ours over it",
                         n->plugin_dir, CHECKPOINT, msg ? msg : strerror(-r));
        return r < 0 ? r : 1;
}

void dra_checkpoint_merge(struct dra_node *n) {
        struct dra_claim *theirs = NULL, *merged;
        size_t n_theirs = 0, k = 0, adopted = 0, dropped = 0;

        if (read_theirs(n, &theirs, &n_theirs) <= 0)
                return;
        merged = calloc(n->n_prepared + n_theirs + 1, sizeof(*merged));
        if (!merged || n->n_prepared + n_theirs > DRA_CHECKPOINT_MAX_CLAIMS) {
                free(merged);
                dra_claims_free(theirs, n_theirs);
                return;
        }
        for (size_t i = 0; i < n->n_prepared; i++) {
                struct dra_claim *c = &n->prepared[i];
                if (in_base(&n->ck, c->uid) && !in_claims(theirs, n_theirs, c->uid)) {
                        dra_claim_clear(c); /* the other instance unprepared it */
                        dropped++;
                } else
                        merged[k++] = *c;
        }
        for (size_t i = 0; i < n_theirs; i++) {
                struct dra_claim *c = &theirs[i];
                if (!in_base(&n->ck, c->uid) && !in_claims(n->prepared, n->n_prepared, c->uid)) {
                        merged[k++] = *c; /* the other instance prepared it */
                        *c = (struct dra_claim){ 0 };
                        adopted++;
                }
        }
        free(n->prepared);
        n->prepared = merged;
        n->n_prepared = k;
        dra_claims_free(theirs, n_theirs);
        log_with(LOG_INFO, &(struct log_fields){ .path = n->plugin_dir },
                 "dra: %s/%s was written by another instance: %zu of its claims adopted, %zu it "
                 "unprepared dropped",
                 n->plugin_dir, CHECKPOINT, adopted, dropped);
}
