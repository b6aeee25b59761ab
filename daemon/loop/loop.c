/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's clock, back-off and timer list. */
#include <errno.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"

static struct timespec mono(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts;
}

uint64_t dp_now_ms(void) {
        struct timespec ts = mono();
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double dp_mono_seconds(void) {
        struct timespec ts = mono();
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t dp_backoff_ms(uint64_t min_ms, uint64_t max_ms, unsigned failures) {
        uint64_t delay = min_ms;
        for (unsigned i = 0; i < failures && delay < max_ms; i++)
                delay *= 2;
        return delay < max_ms ? delay : max_ms;
}

uint64_t dp_backoff_jitter_ms(uint64_t min_ms, uint64_t max_ms, unsigned failures, uint64_t rnd) {
        uint64_t d = dp_backoff_ms(min_ms, max_ms, failures), half = d / 2;

        return half + rnd % (d - half + 1);
}

uint64_t dp_random(uint64_t *state) {
        uint64_t z = (*state += 0x9e3779b97f4a7c15u);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        return z ^ (z >> 31);
}

uint64_t dp_random_seed(void) {
        uint64_t seed = 0;
        struct timespec ts;

        /* Never blocks for long (the pool is ready soon after boot); a
         * failure falls back on the clock and pid, which still differ
         * between the instances of a fleet. */
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
                return seed;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
}

static void arm(struct dp_loop *l);

int dp_loop_init(struct dp_loop *l) {
        l->armed_ms = 0;
        l->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (l->fd < 0)
                return -errno;
        /* Timers set before there was a timerfd. */
        arm(l);
        return 0;
}

void dp_loop_done(struct dp_loop *l) {
        if (l->fd >= 0)
                close(l->fd);
        l->fd = -1;
}

int dp_loop_fd(const struct dp_loop *l) {
        return l->fd;
}

void dp_timer_add(struct dp_loop *l, struct dp_timer *t, void (*fn)(void *ctx), void *ctx) {
        *t = (struct dp_timer){ .loop = l, .fn = fn, .ctx = ctx };
        if (!l->tail)
                l->tail = &l->timers;
        *l->tail = t;
        l->tail = &t->next;
}

/* The timerfd set to the earliest due timer. A time already past still
 * gets a wake-up 1 ms from now, as an all-zero value would disarm. */
static void arm(struct dp_loop *l) {
        struct itimerspec its = { 0 };
        uint64_t next = 0, now;

        for (const struct dp_timer *t = l->timers; t; t = t->next)
                if (t->due_ms && (!next || t->due_ms < next))
                        next = t->due_ms;
        if (next == l->armed_ms)
                return;
        l->armed_ms = next;
        if (next) {
                now = dp_now_ms();
                uint64_t in = next > now ? next - now : 1;
                its.it_value.tv_sec = (time_t)(in / 1000);
                its.it_value.tv_nsec = (long)(in % 1000) * 1000000;
        }
        timerfd_settime(l->fd, 0, &its, NULL);
}

void dp_timer_set(struct dp_timer *t, uint64_t due_ms) {
        t->due_ms = due_ms;
        arm(t->loop);
}

void dp_loop_dispatch(struct dp_loop *l, bool run) {
        uint64_t expirations;

        (void)!read(l->fd, &expirations, sizeof(expirations));
        /* The timerfd fired and is now disarmed (one-shot). */
        l->armed_ms = 0;
        /* Not run (shutting down): left disarmed, or what is due would
         * wake the loop every millisecond until it ends. */
        if (!run)
                return;
        uint64_t now = dp_now_ms();
        for (struct dp_timer *t = l->timers; t; t = t->next)
                if (t->due_ms && t->due_ms <= now) {
                        t->due_ms = 0;
                        t->fn(t->ctx);
                }
        arm(l);
}
