/* SPDX-License-Identifier: Apache-2.0 */
/* cdi/names.c against an independent reading of the reference CDI parser
 * (helpers/cdigrammar.c): every kubelet resource name gets a kind, spec
 * file name and annotation key that CDI consumers accept. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "cdigrammar.h"
#include "config.h"

static void split(const char *kind, char *vendor, char *class_) {
        const char *slash = strchr(kind, '/');
        cr_assert_not_null(slash, "\"%s\"", kind);
        memcpy(vendor, kind, (size_t)(slash - kind));
        vendor[slash - kind] = '\0';
        strcpy(class_, slash + 1);
}

/* The kind, file name and key of a kubelet-valid resource name, each
 * checked by the reference grammar; returns the kind (free()). */
static char *names_of(const char *resource) {
        char vendor[512], class_[512], *kind = NULL, *file = NULL, *key = NULL;
        const char *why;

        cr_assert_null(cfg_resource_name_problem(resource), "test bug: \"%s\" is no kubelet name",
                       resource);
        cr_assert_eq(cdi_kind_from_resource(resource, &kind), 0, "\"%s\"", resource);
        split(kind, vendor, class_);
        cr_expect_null(why = cdig_vendor(vendor), "\"%s\" -> vendor \"%s\": %s", resource, vendor,
                       why);
        cr_expect_null(why = cdig_class(class_, CDIG_LIB_06), "\"%s\" -> class \"%s\": %s",
                       resource, class_, why);
        if (!strchr(resource + strcspn(resource, "/"), '.'))
                cr_expect_null(why = cdig_class(class_, CDIG_LIB_05),
                               "\"%s\" -> class \"%s\" (0.5 library): %s", resource, class_, why);
        cr_expect(cdi_kind_is_valid(kind));

        cr_assert_eq(cdi_spec_file_name(kind, &file), 0, "\"%s\"", kind);
        cr_expect_leq(strlen(file), NAME_MAX, "%s", file);
        cr_expect_eq(strcmp(file + strlen(file) - 5, ".json"), 0, "%s", file);
        cr_expect_null(strchr(file, '/'), "%s", file);
        cr_expect_neq(file[0], '.', "%s", file);

        cr_assert_eq(cdi_annotation_key(resource, &key), 0, "\"%s\"", resource);
        cr_expect_eq(strncmp(key, "cdi.k8s.io/", 11), 0, "%s", key);
        cr_expect_null(why = cdig_annotation_name(key + 11), "%s: %s", key, why);
        free(file);
        free(key);
        return kind;
}

Test(cdi_names, valid_kinds_are_kept) {
        static const char *const keep[] = {
                "example.com/serial", "example.com/GPU", "a.b.c.d/x_y-z",
                "vendor.io/n1",       "ab/cd",           "example.com/gpu.a100",
        };
        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
                char *kind = names_of(keep[i]);
                cr_expect_str_eq(kind, keep[i]);
                free(kind);
        }
}

Test(cdi_names, names_without_a_valid_kind_are_derived_by_the_documented_rule) {
        static const struct {
                const char *resource, *kind;
        } rows[] = {
                { "example.com/9x", "example.com/cdi-9x" }, /* class starts with a digit */
                { "example.com/x", "example.com/cdi-x" },   /* one character: panics the parser */
                { "example.com/7", "example.com/cdi-7" },
                { "3com.com/serial", "cdi-3com.com/serial" }, /* vendor starts with a digit */
                { "a/bc", "cdi-a/bc" },                       /* one-character vendor */
                { "1/2", "cdi-1/cdi-2" },
                { "x.io/0.a_b", "x.io/cdi-0.a_b" },
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                char *kind = names_of(rows[i].resource);
                cr_expect_str_eq(kind, rows[i].kind, "\"%s\"", rows[i].resource);
                free(kind);
        }
}

Test(cdi_names, longest_names_are_cut_with_a_hash) {
        char res[400], *kind = NULL, *other = NULL;
        char label[64];

        /* 63-character name part starting with a digit: "cdi-" would make 67. */
        memset(label, 'a', 63);
        label[0] = '9';
        label[63] = '\0';
        snprintf(res, sizeof(res), "example.com/%s", label);
        kind = names_of(res);
        cr_expect_eq(strlen(strchr(kind, '/') + 1), 63, "%s", kind);
        cr_expect_eq(strncmp(strchr(kind, '/') + 1, "cdi-9aaa", 8), 0, "%s", kind);
        label[62] = 'b';
        snprintf(res, sizeof(res), "example.com/%s", label);
        other = names_of(res);
        cr_expect_str_neq(kind, other, "names that differ only past the cut stay apart");
        free(kind);
        free(other);

        /* A 253-character domain starting with a digit, 63-character name:
         * the kind is too long for one file name. */
        char domain[254];
        for (size_t i = 0; i < 253; i++)
                domain[i] = (i % 10 == 9) ? '.' : (char)('0' + i % 9);
        domain[253] = '\0';
        memset(label, 'z', 63);
        snprintf(res, sizeof(res), "%s/%s", domain, label);
        kind = names_of(res);
        cr_expect_eq(strncmp(kind, "cdi-0123", 8), 0, "%s", kind);
        free(kind);
}

Test(cdi_names, one_character_vendor_or_class_is_never_valid) {
        /* The reference parser panics on these (name[1:0]). */
        cr_expect_not(cdi_kind_is_valid("example.com/x"));
        cr_expect_not(cdi_kind_is_valid("a/serial"));
        cr_expect_str_eq(cdig_class("x", CDIG_LIB_06), "panic: slice bounds out of range [1:0]");
        cr_expect_not(cdi_device_name_is_valid(""));
        cr_expect(cdi_device_name_is_valid("x"), "a one-character device name is fine");
}

Test(cdi_names, not_resource_names_are_refused) {
        static const char *const bad[] = {
                "serial",         "a/b/c",           "/x", "x/", "ex ample.com/x",
                "example.com/x-", "example.com/a:b", ""
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *kind = (char *)0x1;
                cr_expect_eq(cdi_kind_from_resource(bad[i], &kind), -EINVAL, "\"%s\"", bad[i]);
                cr_expect_eq(kind, (char *)0x1);
        }
}

Test(cdi_names, annotation_keys_stay_as_they_were_and_valid) {
        char *key = NULL;
        char res[128];

        cr_assert_eq(cdi_annotation_key("example.com/serial", &key), 0);
        cr_expect_str_eq(key, "cdi.k8s.io/cdiplug_example.com-serial");
        free(key);
        memset(res, 'a', sizeof(res));
        memcpy(res, "example.com/", 12);
        res[12 + 63] = '\0';
        cr_assert_eq(cdi_annotation_key(res, &key), 0);
        cr_expect_eq(strlen(key), 11 + 63, "%s", key);
        cr_expect_null(cdig_annotation_name(key + 11), "%s", key);
        free(key);
}

/* Random kubelet-valid names: every one gets a kind the reference accepts,
 * and the only kinds shared are a derived one with its "cdi-" twin. */
static uint64_t rng = 0x9e3779b97f4a7c15u;
static unsigned next(unsigned n) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (unsigned)(rng % n);
}

Test(cdi_names, random_kubelet_names_all_get_valid_names) {
        static const char dns[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        static const char name_chars[] = "abcXYZ0189-_.";
        char res[400];

        for (int round = 0; round < 3000; round++) {
                size_t n = 0, labels = 1 + next(3), nlen = 1 + next(63);
                for (size_t l = 0; l < labels; l++) {
                        size_t llen = 1 + next(l == 0 ? 63 : 8);
                        for (size_t i = 0; i < llen; i++)
                                res[n++] = (i == 0 || i + 1 == llen)
                                                   ? dns[next(36)]
                                                   : (next(5) ? dns[next(36)] : '-');
                        res[n++] = l + 1 < labels ? '.' : '/';
                }
                for (size_t i = 0; i < nlen; i++)
                        res[n++] = (i == 0 || i + 1 == nlen)
                                           ? dns[next(36)]
                                           : name_chars[next(sizeof(name_chars) - 1)];
                res[n] = '\0';
                if (cfg_resource_name_problem(res))
                        continue;
                free(names_of(res));
        }
}
