/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's clock and back-off. */
#include <time.h>

#include "loop.h"

uint64_t dp_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t dp_backoff_ms(uint64_t min_ms, uint64_t max_ms, unsigned failures) {
        uint64_t delay = min_ms;
        for (unsigned i = 0; i < failures && delay < max_ms; i++)
                delay *= 2;
        return delay < max_ms ? delay : max_ms;
}
