/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox/: sbx_parse_user(), the --user option. Expectations come from
 * the machine's own passwd database where names are involved, so the test
 * holds on any distribution that has root and nobody. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pwd.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "sandbox.h"

/* Outputs are written only on success: start from a marker. */
static const struct sbx_options marker = { .set_ids = false, .uid = 4242, .gid = 4343 };

static void assert_parses(const char *spec, uid_t uid, gid_t gid) {
        struct sbx_options o = marker;
        int r = sbx_parse_user(spec, &o);

        cr_assert_eq(r, 0, "'%s': %s", spec, strerror(-r));
        cr_assert(o.set_ids, "'%s': set_ids", spec);
        cr_assert_eq(o.uid, uid, "'%s': uid %u, want %u", spec, o.uid, uid);
        cr_assert_eq(o.gid, gid, "'%s': gid %u, want %u", spec, o.gid, gid);
}

static void assert_refused(const char *spec, int want) {
        struct sbx_options o = marker;
        int r = sbx_parse_user(spec, &o);

        cr_assert_eq(r, want, "'%s': got %d (%s), want %d (%s)", spec ? spec : "(null)", r,
                     strerror(-r), want, strerror(-want));
        cr_assert(o.set_ids == marker.set_ids && o.uid == marker.uid && o.gid == marker.gid,
                  "'%s': output written on failure", spec);
}

Test(sbx_parse_user, names_use_their_primary_group) {
        struct passwd *pw = getpwnam("nobody");

        /* getpwnam() reuses its buffer: take the values out first. */
        cr_assert_not_null(pw);
        uid_t uid = pw->pw_uid;
        gid_t gid = pw->pw_gid;
        assert_parses("root", 0, 0);
        assert_parses("nobody", uid, gid);
}

Test(sbx_parse_user, numbers) {
        assert_parses("0", 0, 0);
        assert_parses("1000:2000", 1000, 2000);
        assert_parses("65534:65534", 65534, 65534);
        assert_parses("4294967294:4294967294", 4294967294u, 4294967294u);
        assert_parses("007:08", 7, 8);
}

/* A bare uid with a passwd entry takes that entry's group; without one,
 * the same number (ids from a container image often have no entry). */
Test(sbx_parse_user, bare_uid_group) {
        struct passwd *pw = getpwnam("nobody");
        uid_t unused = 3999999;

        cr_assert_not_null(pw);
        while (getpwuid(unused))
                unused++;
        gid_t nobody_gid = getpwuid(65534) ? getpwuid(65534)->pw_gid : 65534;
        gid_t root_gid = getpwuid(0)->pw_gid;
        assert_parses("65534", 65534, nobody_gid);
        assert_parses("0", 0, root_gid);
        char spec[16];
        snprintf(spec, sizeof(spec), "%u", unused);
        assert_parses(spec, unused, unused);
}

Test(sbx_parse_user, names_with_groups) {
        struct group *gr = getgrgid(0);

        cr_assert_not_null(gr);
        uid_t nobody = getpwnam("nobody")->pw_uid;
        assert_parses("nobody:0", nobody, 0);
        assert_parses("65534:root", 65534, 0);
        char spec[300];
        snprintf(spec, sizeof(spec), "root:%s", gr->gr_name);
        assert_parses(spec, 0, 0);
}

Test(sbx_parse_user, malformed_input) {
        static const char *const bad[] = {
                "",    ":",  "1:",    ":1",    "1:2:3", "root:", ":root", "-1",   "+1",
                " 1",  "1 ", "root ", "ro ot", "r\too", "-root", "1:-1",  "1:+2", "nobody:no group",
                "a/b",
        };

        assert_refused(NULL, -EINVAL);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_refused(bad[i], -EINVAL);
}

Test(sbx_parse_user, out_of_range) {
        /* (id_t)-1 means "unchanged" to setresuid(): never a real id. */
        assert_refused("4294967295", -ERANGE);
        assert_refused("99999999999", -EINVAL);
        assert_refused("1:4294967295", -ERANGE);
        assert_refused("4294967296", -ERANGE);
}

Test(sbx_parse_user, unknown_names) {
        assert_refused("no-such-user-cdiplug", -ENOENT);
        /* Not numbers, so names: just ones nobody has. */
        assert_refused("0x10", -ENOENT);
        assert_refused("1.5", -ENOENT);
        assert_refused("root:no-such-group-cdiplug", -ENOENT);
        assert_refused("1000:no-such-group-cdiplug", -ENOENT);
}

/* What check and serve tell the operator: in words, user apart from group. */
Test(sbx_parse_user, problems_in_words) {
        static const struct {
                const char *spec, *problem;
                int r;
        } cases[] = {
                { "no-such-cdiplug-user", "no such user", -ENOENT },
                { "nobody:no-such-cdiplug-group", "no such group", -ENOENT },
                { "65534:no-such-cdiplug-group", "no such group", -ENOENT },
                { "a b", "must be NAME|UID[:GROUP|GID]", -EINVAL },
                { "4294967295", "an id must be below 4294967295", -ERANGE },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct sbx_options o = marker;
                const char *problem = NULL;
                int r = sbx_resolve_user(cases[i].spec, &o, &problem);
                cr_assert_eq(r, cases[i].r, "'%s': %d", cases[i].spec, r);
                cr_assert_not_null(problem, "'%s'", cases[i].spec);
                cr_assert_str_eq(problem, cases[i].problem, "'%s'", cases[i].spec);
                cr_assert_eq(o.uid, marker.uid, "'%s': output written on failure", cases[i].spec);
        }
}
