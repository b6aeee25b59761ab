/* SPDX-License-Identifier: Apache-2.0 */
/* cdi/names.c when memory runs out: every allocation in turn fails, and
 * each time the call returns -ENOMEM and leaves its ret_* output as the
 * caller had it (the convention every module keeps: outputs are written
 * only on success). malloc and strdup are wrapped at the link
 * (tests/cdi/extra.cmake), so the failures happen inside the library. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"

void *__real_malloc(size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
char *__wrap_strdup(const char *s);

/* Allocations left before one fails; -1: none fails. */
static int fail_in = -1;

static bool fail_now(void) {
        if (fail_in < 0)
                return false;
        if (fail_in-- > 0)
                return false;
        fail_in = -1;
        return true;
}

void *__wrap_malloc(size_t n) {
        if (fail_now()) {
                errno = ENOMEM;
                return NULL;
        }
        return __real_malloc(n);
}

char *__wrap_strdup(const char *s) {
        if (fail_now()) {
                errno = ENOMEM;
                return NULL;
        }
        return __real_strdup(s);
}

typedef int (*name_fn)(const char *in, char **ret);

static int qualified(const char *in, char **ret) {
        return cdi_qualified_name("example.com/serial", in, ret);
}

/* Fails the 1st, 2nd, ... allocation of fn(in) until it succeeds. */
static void each_failure_leaves_output(const char *what, name_fn fn, const char *in) {
        char sentinel[] = "untouched";
        for (int k = 0; k < 64; k++) {
                char *out = sentinel;
                fail_in = k;
                int r = fn(in, &out);
                bool failed = fail_in == -1; /* the k-th allocation happened */
                fail_in = -1;
                if (r == 0) {
                        cr_expect_neq(out, sentinel, "%s(\"%s\") succeeded without output", what,
                                      in);
                        free(out);
                        cr_expect(!failed, "%s(\"%s\") hid a failed allocation", what, in);
                        return;
                }
                cr_expect_eq(r, -ENOMEM, "%s(\"%s\"), allocation %d failing: %d", what, in, k, r);
                cr_expect_eq(out, sentinel,
                             "%s(\"%s\") wrote its output on failure (allocation %d)", what, in, k);
        }
        cr_assert_fail("%s(\"%s\") never succeeded", what, in);
}

Test(cdi_nomem, names_leave_their_output_on_enomem) {
        /* A name already valid as a kind, and one that must be rewritten:
         * each takes another allocation path. */
        each_failure_leaves_output("cdi_kind_from_resource", cdi_kind_from_resource,
                                   "example.com/serial");
        each_failure_leaves_output("cdi_kind_from_resource", cdi_kind_from_resource, "3com.com/9x");
        each_failure_leaves_output("cdi_annotation_key", cdi_annotation_key, "example.com/serial");
        each_failure_leaves_output("cdi_device_name", cdi_device_name, "ttyUSB0");
        each_failure_leaves_output("cdi_device_name", cdi_device_name, "/dev/ttyS0");
        each_failure_leaves_output("cdi_spec_file_name", cdi_spec_file_name, "example.com/serial");
        each_failure_leaves_output("cdi_qualified_name", qualified, "ttyUSB0");
}
