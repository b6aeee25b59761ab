/* SPDX-License-Identifier: Apache-2.0 */
/* NULL-terminated string vectors, as used for env, mount options and
 * file-name lists. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cdi-internal.h"

void cdi_strv_free(char **strv)
{
        if (!strv)
                return;
        for (char **s = strv; *s; s++)
                free(*s);
        free(strv);
}

size_t cdi_strv_length(char *const *strv)
{
        size_t n = 0;

        if (strv)
                while (strv[n])
                        n++;
        return n;
}

bool cdi_strv_contains(char *const *strv, const char *s)
{
        if (strv)
                for (; *strv; strv++)
                        if (strcmp(*strv, s) == 0)
                                return true;
        return false;
}

/* Appends a copy of s; *strv is left untouched on failure. */
int cdi_strv_push(char ***strv, const char *s)
{
        size_t n = cdi_strv_length(*strv);
        char **v, *copy;

        if (n > SIZE_MAX / sizeof(char *) - 2)
                return -ENOMEM;
        copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        v = realloc(*strv, (n + 2) * sizeof(char *));
        if (!v) {
                free(copy);
                return -ENOMEM;
        }
        v[n] = copy;
        v[n + 1] = NULL;
        *strv = v;
        return 0;
}
