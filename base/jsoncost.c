/* SPDX-License-Identifier: Apache-2.0 */
/* What a JSON text costs once parsed, counted before it is: a tree node
 * (cJSON's is 64 bytes plus the allocator's overhead) for a text of two
 * bytes ("0,") makes a 16 MiB answer a 600 MiB tree. A linear scan that
 * allocates nothing bounds that first. */
#include "base.h"

size_t base_json_values(const char *s, size_t len) {
        size_t n = 1;
        bool in_str = false;

        for (size_t i = 0; i < len; i++) {
                char c = s[i];

                if (in_str) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                in_str = false;
                        continue;
                }
                /* Every value but the first follows one of these, and an
                 * object's or array's own node is counted at its opening. */
                if (c == '"')
                        in_str = true;
                else if (c == ',' || c == '[' || c == '{')
                        n++;
        }
        return n;
}
