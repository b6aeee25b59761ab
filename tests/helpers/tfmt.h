/* SPDX-License-Identifier: Apache-2.0 */
/* tfmt: printf into a new string (free it), for the paths and config text
 * tests build; out of memory fails the test. */
#pragma once

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>

static inline char *tfmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static inline char *tfmt(const char *f, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, f);
        int r = vasprintf(&s, f, ap);
        va_end(ap);
        cr_assert_geq(r, 0);
        return s;
}
