/* SPDX-License-Identifier: Apache-2.0 */
/* FNV-1a, byte-wise: the same value on every architecture and in every
 * run. Hashes end up in names that outlive the process (CDI device names,
 * socket file names, device IDs in the kubelet's checkpoint), so these
 * functions are fixed forever: changing one renames devices. */
#include <stdint.h>

#include "base.h"

uint32_t base_fnv1a32(const char *s) {
        uint32_t h = 2166136261u;

        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 16777619u;
        }
        return h;
}

uint64_t base_fnv1a64(const char *s) {
        uint64_t h = 0xcbf29ce484222325ULL;

        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 0x100000001b3ULL;
        }
        return h;
}
