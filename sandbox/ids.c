/* SPDX-License-Identifier: Apache-2.0 */
/* Identity: parsing --user and switching to it. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sbx-internal.h"

/* A decimal id: digits only (no sign, space or base prefix, which strtoul
 * would accept), below (id_t)-1, which the kernel reads as "unchanged". */
static int parse_id(const char *s, size_t len, uint32_t *ret) {
        unsigned long long v = 0;

        if (len == 0 || len > 10)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long long)(s[i] - '0');
        }
        if (v >= UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t)v;
        return 0;
}

static bool is_number(const char *s, size_t len) {
        return len > 0 && strspn(s, "0123456789") >= len;
}

/* The portable user name set (plus the '$' of machine accounts), not
 * starting with '-' so it cannot pass for an option or a negative id. */
static bool is_name(const char *s) {
        size_t len = strlen(s);

        return len > 0 && s[0] != '-' &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789._-$") == len;
}

/* After getpwnam() and friends return NULL: -ENOENT for "no such entry",
 * else the lookup's own failure. glibc leaves errno 0 for a name that is
 * not there; getpwnam(3) lists ENOENT, ESRCH, EBADF and EPERM as other
 * ways NSS modules say the same. */
static int lookup_failed(int err) {
        return err == 0 || err == ENOENT || err == ESRCH || err == EBADF || err == EPERM ? -ENOENT
                                                                                         : -err;
}

static int lookup_user(const char *name, uid_t *ret_uid, gid_t *ret_gid) {
        struct passwd *pw;

        errno = 0;
        pw = getpwnam(name);
        if (!pw)
                return lookup_failed(errno);
        *ret_uid = pw->pw_uid;
        *ret_gid = pw->pw_gid;
        return 0;
}

static int lookup_group(const char *name, gid_t *ret_gid) {
        struct group *gr;

        errno = 0;
        gr = getgrnam(name);
        if (!gr)
                return lookup_failed(errno);
        *ret_gid = gr->gr_gid;
        return 0;
}

static int user_fail(const char **err_problem, const char *problem, int r) {
        if (err_problem)
                *err_problem = problem;
        return r;
}

/* "NAME|UID[:GROUP|GID]". Without a group: a name uses its primary group;
 * a bare UID uses the primary group of the passwd entry with that uid if
 * there is one, else the gid of the same number (containers often run ids
 * with no passwd entry). */
int sbx_resolve_user(const char *spec, struct sbx_options *ret, const char **err_problem) {
        static const char malformed[] = "must be NAME|UID[:GROUP|GID]",
                          range[] = "an id must be below 4294967295";
        _cleanup_free_ char *user = NULL;
        const char *colon, *grp = NULL;
        uint32_t num;
        uid_t uid = 0;
        gid_t gid = 0;
        int r;

        if (!spec || !*spec)
                return user_fail(err_problem, malformed, -EINVAL);
        colon = strchr(spec, ':');
        if (colon) {
                grp = colon + 1;
                if (colon == spec || !*grp || strchr(grp, ':'))
                        return user_fail(err_problem, malformed, -EINVAL);
                user = strndup(spec, (size_t)(colon - spec));
        } else
                user = strdup(spec);
        if (!user)
                return user_fail(err_problem, NULL, -ENOMEM);

        if (is_number(user, strlen(user))) {
                r = parse_id(user, strlen(user), &num);
                if (r < 0)
                        return user_fail(err_problem, r == -ERANGE ? range : malformed, r);
                uid = num;
                errno = 0;
                struct passwd *pw = getpwuid(uid);
                r = pw ? 0 : lookup_failed(errno);
                if (r < 0 && r != -ENOENT)
                        return user_fail(err_problem, NULL, r);
                gid = pw ? pw->pw_gid : (gid_t)num;
        } else {
                if (!is_name(user))
                        return user_fail(err_problem, malformed, -EINVAL);
                r = lookup_user(user, &uid, &gid);
                if (r < 0)
                        return user_fail(err_problem, r == -ENOENT ? "no such user" : NULL, r);
        }

        if (grp) {
                if (is_number(grp, strlen(grp))) {
                        r = parse_id(grp, strlen(grp), &num);
                        if (r < 0)
                                return user_fail(err_problem, r == -ERANGE ? range : malformed, r);
                        gid = num;
                } else {
                        if (!is_name(grp))
                                return user_fail(err_problem, malformed, -EINVAL);
                        r = lookup_group(grp, &gid);
                        if (r < 0)
                                return user_fail(err_problem, r == -ENOENT ? "no such group" : NULL,
                                                 r);
                }
        }

        *ret = (struct sbx_options){ .set_ids = true, .uid = uid, .gid = gid };
        return 0;
}

int sbx_parse_user(const char *spec, struct sbx_options *ret) {
        return sbx_resolve_user(spec, ret, NULL);
}

int sbx_drop_ids(uid_t uid, gid_t gid, const char **err_step) {
        uid_t ru, eu, su;
        gid_t rg, eg, sg;

        /* Groups first: after the uid change we could no longer shed the
         * supplementary groups root started with (disk, video, ...). */
        if (setgroups(0, NULL) < 0) {
                *err_step = "setgroups";
                return -errno;
        }
        /* gid before uid, for the same reason. Real, effective and saved
         * ids together, so no saved id can be switched back to later. */
        if (setresgid(gid, gid, gid) < 0) {
                *err_step = "setresgid";
                return -errno;
        }
        if (setresuid(uid, uid, uid) < 0) {
                *err_step = "setresuid";
                return -errno;
        }

        if (getresgid(&rg, &eg, &sg) < 0 || rg != gid || eg != gid || sg != gid ||
            getgroups(0, NULL) != 0) {
                *err_step = "verify gids";
                return -EPERM;
        }
        if (getresuid(&ru, &eu, &su) < 0 || ru != uid || eu != uid || su != uid) {
                *err_step = "verify uids";
                return -EPERM;
        }
        return 0;
}
