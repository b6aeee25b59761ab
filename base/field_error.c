/* SPDX-License-Identifier: Apache-2.0 */
/* The one error a refused document gives a person: which field, and what
 * is wrong with it (the config, its selectors). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"

void base_field_error_clear(struct base_field_error *e) {
        if (!e)
                return;
        free(e->field);
        free(e->msg);
        e->field = e->msg = NULL;
}

int base_field_error_set(struct base_field_error *e, const char *field, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = base_field_error_setv(e, field, fmt, ap);
        va_end(ap);
        return r;
}

int base_field_error_setv(struct base_field_error *e, const char *field, const char *fmt,
                          va_list ap) {
        _cleanup_free_ char *f = strdup(field), *msg = NULL;
        int r = vasprintf(&msg, fmt, ap);

        if (r < 0)
                msg = NULL; /* vasprintf leaves it undefined */
        base_field_error_clear(e);
        if (!f || !msg)
                return -ENOMEM;
        e->field = TAKE_PTR(f);
        e->msg = TAKE_PTR(msg);
        return -EINVAL;
}
