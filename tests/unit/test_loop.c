/* SPDX-License-Identifier: Apache-2.0 */
/* The loop module alone: back-off, the timer list and its one timerfd. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <sys/timerfd.h>

#include "loop.h"

/* Which timers ran, in order. */
struct record {
        char order[8];
        size_t n;
};

struct owner {
        struct dp_timer timer;
        struct record *rec;
        char name;
        uint64_t again_ms; /* set the timer again this far out when run, 0: not */
};

static void fired(void *ctx) {
        struct owner *o = ctx;
        if (o->rec->n < sizeof(o->rec->order))
                o->rec->order[o->rec->n++] = o->name;
        if (o->again_ms)
                dp_timer_set(&o->timer, dp_now_ms() + o->again_ms);
}

/* Milliseconds until the timerfd fires; 0 when it is disarmed. */
static uint64_t armed_in_ms(const struct dp_loop *l) {
        struct itimerspec its;
        cr_assert_eq(timerfd_gettime(dp_loop_fd(l), &its), 0);
        return (uint64_t)its.it_value.tv_sec * 1000 + (uint64_t)its.it_value.tv_nsec / 1000000 +
               (its.it_value.tv_nsec % 1000000 != 0);
}

/* Waits (bounded) for the timerfd to fire: the test's outcome is decided
 * by what dispatch then runs, not by how long this takes. */
static void wait_fired(const struct dp_loop *l) {
        struct pollfd p = { .fd = dp_loop_fd(l), .events = POLLIN };
        cr_assert_eq(poll(&p, 1, 10000), 1, "the timerfd fired");
}

static void add(struct dp_loop *l, struct owner *o, struct record *rec, char name) {
        *o = (struct owner){ .rec = rec, .name = name };
        dp_timer_add(l, &o->timer, fired, o);
}

Test(loop, backoff_doubles_per_failure_up_to_the_max) {
        cr_expect_eq(dp_backoff_ms(100, 30000, 0), 100);
        cr_expect_eq(dp_backoff_ms(100, 30000, 1), 200);
        cr_expect_eq(dp_backoff_ms(100, 30000, 3), 800);
        cr_expect_eq(dp_backoff_ms(100, 30000, 9), 30000);
        cr_expect_eq(dp_backoff_ms(100, 30000, 4000000000u), 30000);
        cr_expect_eq(dp_backoff_ms(500, 100, 0), 100);
}

Test(loop, due_min_ignores_unset) {
        cr_expect_eq(dp_due_min(0, 0), 0);
        cr_expect_eq(dp_due_min(0, 7), 7);
        cr_expect_eq(dp_due_min(7, 0), 7);
        cr_expect_eq(dp_due_min(9, 7), 7);
        cr_expect_eq(dp_due_min(7, 9), 7);
}

Test(loop, clocks_agree) {
        uint64_t ms = dp_now_ms();
        double s = dp_mono_seconds();
        cr_expect_geq(s * 1000.0 + 1.0, (double)ms);
        cr_expect_lt(s * 1000.0, (double)ms + 1000.0);
}

Test(loop, timerfd_follows_the_earliest_timer) {
        struct dp_loop l = { .fd = -1 };
        struct record rec = { 0 };
        struct owner a, b;

        cr_assert_eq(dp_loop_init(&l), 0);
        add(&l, &a, &rec, 'a');
        add(&l, &b, &rec, 'b');
        cr_expect_eq(armed_in_ms(&l), 0, "nothing due: disarmed, no wake-ups");

        dp_timer_set(&a.timer, dp_now_ms() + 60000);
        cr_expect_gt(armed_in_ms(&l), 50000);
        dp_timer_set(&b.timer, dp_now_ms() + 20000);
        cr_expect_leq(armed_in_ms(&l), 20000, "b is earlier");
        cr_expect_gt(armed_in_ms(&l), 10000);
        dp_timer_set(&b.timer, 0);
        cr_expect_gt(armed_in_ms(&l), 50000, "b cancelled: a again");
        dp_timer_set(&a.timer, 0);
        cr_expect_eq(armed_in_ms(&l), 0);
        dp_loop_done(&l);
}

Test(loop, dispatch_runs_what_is_due_once_in_order_added) {
        struct dp_loop l = { .fd = -1 };
        struct record rec = { 0 };
        struct owner a, b, c;

        cr_assert_eq(dp_loop_init(&l), 0);
        add(&l, &a, &rec, 'a');
        add(&l, &b, &rec, 'b');
        add(&l, &c, &rec, 'c');
        /* Set in the other order: added order decides who runs first. */
        dp_timer_set(&c.timer, dp_now_ms() + 60000);
        dp_timer_set(&b.timer, dp_now_ms() - 1);
        dp_timer_set(&a.timer, dp_now_ms() - 1);
        wait_fired(&l);
        dp_loop_dispatch(&l, true);
        cr_expect_eq(rec.n, 2);
        cr_expect_eq(rec.order[0], 'a');
        cr_expect_eq(rec.order[1], 'b');
        cr_expect_eq(a.timer.due_ms, 0, "one-shot");
        cr_expect_eq(b.timer.due_ms, 0, "one-shot");
        cr_expect_gt(armed_in_ms(&l), 50000, "re-armed to c, not yet due");

        /* Nothing due: dispatching again runs nothing. */
        dp_loop_dispatch(&l, true);
        cr_expect_eq(rec.n, 2);
        dp_loop_done(&l);
}

Test(loop, a_timer_set_again_by_its_owner_stays_armed) {
        struct dp_loop l = { .fd = -1 };
        struct record rec = { 0 };
        struct owner a;

        cr_assert_eq(dp_loop_init(&l), 0);
        add(&l, &a, &rec, 'a');
        a.again_ms = 30000;
        dp_timer_set(&a.timer, dp_now_ms() - 1);
        wait_fired(&l);
        dp_loop_dispatch(&l, true);
        cr_expect_eq(rec.n, 1);
        cr_expect_neq(a.timer.due_ms, 0);
        cr_expect_gt(armed_in_ms(&l), 20000);
        dp_loop_done(&l);
}

Test(loop, not_run_while_stopping_and_left_disarmed) {
        struct dp_loop l = { .fd = -1 };
        struct record rec = { 0 };
        struct owner a;

        cr_assert_eq(dp_loop_init(&l), 0);
        add(&l, &a, &rec, 'a');
        dp_timer_set(&a.timer, dp_now_ms() - 1);
        wait_fired(&l);
        dp_loop_dispatch(&l, false);
        cr_expect_eq(rec.n, 0);
        cr_expect_eq(armed_in_ms(&l), 0, "no wake-up every millisecond while stopping");
        dp_loop_done(&l);
}

Test(loop, timers_set_before_the_timerfd_are_armed_by_init) {
        struct dp_loop l = { .fd = -1 };
        struct record rec = { 0 };
        struct owner a;

        add(&l, &a, &rec, 'a');
        dp_timer_set(&a.timer, dp_now_ms() + 40000);
        cr_assert_eq(dp_loop_init(&l), 0);
        cr_expect_gt(armed_in_ms(&l), 30000);
        cr_expect_leq(armed_in_ms(&l), 40000);
        dp_loop_done(&l);
        dp_loop_done(&l); /* twice is harmless */
}

Test(loop, jittered_backoff_stays_within_half_to_whole_of_the_delay) {
        uint64_t state = 42, lo = UINT64_MAX, hi = 0;

        for (int i = 0; i < 10000; i++) {
                uint64_t d = dp_backoff_jitter_ms(250, 30000, 3, dp_random(&state));
                cr_assert(d >= 1000 && d <= 2000, "%" PRIu64 " ms", d);
                lo = d < lo ? d : lo;
                hi = d > hi ? d : hi;
        }
        /* Spread over the range, not one value. */
        cr_expect_lt(lo, 1100);
        cr_expect_gt(hi, 1900);
        cr_expect_eq(dp_backoff_jitter_ms(250, 30000, 0, 0), 125);
        cr_expect_eq(dp_backoff_jitter_ms(250, 30000, 40, UINT64_MAX) <= 30000, true);
}

Test(loop, random_seeds_differ_between_calls) {
        /* getrandom: two seeds alike would make a fleet's jitter alike. */
        cr_expect_neq(dp_random_seed(), dp_random_seed());
}
