/* SPDX-License-Identifier: Apache-2.0 */
/* The one string-vector API: lists travel as NULL-terminated char **, and
 * are built with a base_strvec, whose kept length and capacity make
 * appending amortised O(1) (a glob over 10,000 nodes). */
#include <string.h>

#include "base.h"

void base_strv_free(char **strv) {
        if (!strv)
                return;
        for (char **s = strv; *s; s++)
                free(*s);
        free(strv);
}

size_t base_strv_length(char *const *strv) {
        size_t n = 0;

        if (strv)
                while (strv[n])
                        n++;
        return n;
}

bool base_strv_contains(char *const *strv, const char *s) {
        if (strv)
                for (; *strv; strv++)
                        if (strcmp(*strv, s) == 0)
                                return true;
        return false;
}

int base_strv_copy(char *const *src, char ***ret) {
        _cleanup_strvec_ struct base_strvec sv = { 0 };
        int r;

        for (; src && *src; src++) {
                r = base_strvec_push_dup(&sv, *src);
                if (r < 0)
                        return r;
        }
        *ret = base_strvec_take(&sv);
        return 0;
}

int base_strvec_push(struct base_strvec *sv, char *s) {
        size_t cap;
        char **v;

        if (!s)
                return -ENOMEM;
        /* +2: the new string and the NULL terminator. */
        if (sv->n + 2 > sv->cap) {
                cap = sv->cap ? sv->cap : 16;
                while (cap < sv->n + 2) {
                        if (cap > SIZE_MAX / 2 / sizeof(char *)) {
                                free(s);
                                return -ENOMEM;
                        }
                        cap *= 2;
                }
                v = realloc(sv->v, cap * sizeof(char *));
                if (!v) {
                        free(s);
                        return -ENOMEM;
                }
                sv->v = v;
                sv->cap = cap;
        }
        sv->v[sv->n++] = s;
        sv->v[sv->n] = NULL;
        return 0;
}

int base_strvec_push_dup(struct base_strvec *sv, const char *s) {
        return base_strvec_push(sv, strdup(s));
}

void base_strvec_clear(struct base_strvec *sv) {
        for (size_t i = 0; i < sv->n; i++)
                free(sv->v[i]);
        free(sv->v);
        *sv = (struct base_strvec){ 0 };
}

char **base_strvec_take(struct base_strvec *sv) {
        char **v = sv->v;

        *sv = (struct base_strvec){ 0 };
        return v;
}
