/* SPDX-License-Identifier: Apache-2.0 */
/* The one field error (base/field_error.c) the config and the selectors
 * fill. */
#include <criterion/criterion.h>
#include <errno.h>

#include "base.h"

Test(field_error, set_replaces_what_it_held_and_says_einval) {
        struct base_field_error e = { 0 };

        cr_assert_eq(base_field_error_set(&e, "usb.vendor", "\"%s\" is not %d hex digits", "zz", 4),
                     -EINVAL);
        cr_expect_str_eq(e.field, "usb.vendor");
        cr_expect_str_eq(e.msg, "\"zz\" is not 4 hex digits");
        cr_assert_eq(base_field_error_set(&e, "", "must be an object"), -EINVAL);
        cr_expect_str_eq(e.field, "");
        cr_expect_str_eq(e.msg, "must be an object");
        base_field_error_clear(&e);
        cr_expect_null(e.field);
        cr_expect_null(e.msg);
        base_field_error_clear(&e); /* twice, and NULL: nothing to do */
        base_field_error_clear(NULL);
}
