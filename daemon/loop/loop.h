/* SPDX-License-Identifier: Apache-2.0 */
/* loop: the daemon's one monotonic clock and its back-off formula. */
#pragma once

#include <stdint.h>

uint64_t dp_now_ms(void); /* CLOCK_MONOTONIC */
/* Exponential back-off: min_ms doubled once per earlier failure, at most
 * max_ms. */
uint64_t dp_backoff_ms(uint64_t min_ms, uint64_t max_ms, unsigned failures);
