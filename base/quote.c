/* SPDX-License-Identifier: Apache-2.0 */
/* Text from outside (an environment variable, an API server's answer)
 * made safe to show: a control character in a message would reach a
 * terminal, a log line or the kubelet raw. */
#include <stdio.h>

#include "base.h"

void base_quote(const char *s, size_t max, char *out, size_t size) {
        size_t o = 0;

        if (size == 0)
                return;
        for (size_t i = 0; s[i] && i < max && o + 5 < size; i++) {
                unsigned char ch = (unsigned char)s[i];

                if (ch >= 0x20 && ch < 0x7f && ch != '\\')
                        out[o++] = (char)ch;
                else
                        o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
        }
        out[o] = '\0';
}
