/* SPDX-License-Identifier: Apache-2.0 */
/* loop: the daemon's one monotonic clock, its back-off formula, and a
 * timer list in the spirit of sd-event's timers: each owner embeds a
 * dp_timer, registers it once, and sets its own due time; the loop arms one
 * timerfd to the earliest, and when it fires calls each due timer's owner.
 * Nobody reads another module's due times. Not thread-safe: the list is
 * used under the runtime's lock. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC, in milliseconds and in seconds: the one clock. */
uint64_t dp_now_ms(void);
double dp_mono_seconds(void);

/* Exponential back-off: min_ms doubled once per earlier failure, at most
 * max_ms. */
uint64_t dp_backoff_ms(uint64_t min_ms, uint64_t max_ms, unsigned failures);

/* The same with jitter, for waits many peers share (a fleet that lost its
 * API server at the same instant must not come back in one burst): a
 * time uniform in [d/2, d] of the delay d above, from the random value
 * rnd (dp_random). */
uint64_t dp_backoff_jitter_ms(uint64_t min_ms, uint64_t max_ms, unsigned failures, uint64_t rnd);

/* A fast generator for jitter (splitmix64), not for secrets: *state is
 * the caller's, seeded once per process from getrandom (dp_random_seed). */
uint64_t dp_random(uint64_t *state);
uint64_t dp_random_seed(void);

/* The earlier of two due times, 0 meaning none. */
static inline uint64_t dp_due_min(uint64_t a, uint64_t b) {
        return !a || (b && b < a) ? b : a;
}

struct dp_loop;

/* One owner's wake-up. A timer fires once: it is disarmed before fn runs,
 * and fn sets it again if its owner still has something due. */
struct dp_timer {
        struct dp_loop *loop;
        void (*fn)(void *ctx);
        void *ctx;
        uint64_t due_ms; /* dp_now_ms() time, 0: not armed */
        struct dp_timer *next;
};

struct dp_loop {
        int fd; /* the timerfd, or -1 */
        struct dp_timer *timers;
        struct dp_timer **tail; /* timers fire in the order they were added */
        uint64_t armed_ms;      /* what fd is set to, 0: disarmed */
};

/* A loop starts zeroed but for fd = -1; timers may be added before or
 * after dp_loop_init(), which makes the timerfd (close-on-exec,
 * non-blocking): 0 or a negative errno. */
int dp_loop_init(struct dp_loop *l);
/* Closes the timerfd; the timers stay their owners'. Accepts a loop whose
 * init failed or never ran. */
void dp_loop_done(struct dp_loop *l);
/* For poll(): readable when a timer may be due. */
int dp_loop_fd(const struct dp_loop *l);

/* Adds t, disarmed, to l; fn(ctx) is called when it is due. */
void dp_timer_add(struct dp_loop *l, struct dp_timer *t, void (*fn)(void *ctx), void *ctx);
/* Due at due_ms (dp_now_ms() time; 0 disarms), re-arming the timerfd. */
void dp_timer_set(struct dp_timer *t, uint64_t due_ms);

/* The timerfd was readable: consume it, and when run, call every timer
 * due by now in the order they were added, then arm the timerfd to the
 * earliest timer left (disarmed when none is: no wake-ups while idle).
 * Not run: the timerfd stays disarmed until a timer is set again. */
void dp_loop_dispatch(struct dp_loop *l, bool run);
