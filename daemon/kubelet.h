/* SPDX-License-Identifier: Apache-2.0 */
/* Registration with the kubelet and the retry timer (kubelet.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct dp_daemon;
struct dp_resource;

void dp_register(struct dp_resource *res);
void dp_register_due(struct dp_daemon *d);
void dp_register_cancel(struct dp_resource *res);
void dp_register_relistened(struct dp_resource *res);
bool dp_kubelet_present(const struct dp_daemon *d);
void dp_kubelet_channel_close(struct dp_daemon *d);
/* The timerfd set to the earliest retry any resource waits for. */
void dp_arm_timer(struct dp_daemon *d);
uint64_t dp_now_ms(void); /* CLOCK_MONOTONIC */
/* Exponential back-off: min_ms doubled once per earlier failure, at most
 * max_ms. */
uint64_t dp_backoff_ms(uint64_t min_ms, uint64_t max_ms, unsigned failures);
void dp_maybe_finish(struct dp_daemon *d);
