/*
 * Striping weight estimator (include/dualrail/weights.h), driven with
 * synthetic time and bytes: no network, no clock.
 *
 * The model of a peer with two planes: 1 MiB messages back to back, each
 * split by the applied shares, the slowest stripe setting the pace; each
 * message reports per plane what the receiver's acknowledgement carries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dualrail/weights.h"

#define TICK_US 25000u
#define SEG     262144.0
#define MBPS    1e6 /* capacities in MB/s (10^6 bytes) */

typedef struct sim {
    dr_wlink_t l[2];
    double cap[2]; /* bytes/s; 0: the plane completes nothing */
    uint64_t now;
    double moved;       /* bytes of messages moved in the last interval */
    unsigned changes;   /* updates that changed the shares */
    unsigned noise_pct; /* each interval each capacity varies by up to +-noise_pct % */
    double carry;       /* time into the message in flight */
} sim_t;

static void sim_init(sim_t *s, double cap0, double cap1)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < 2; ++i) {
        dr_weights_link_init(&s->l[i]);
    }
    dr_weights_fixed_shares(s->l, 2, NULL); /* a new peer starts equal */
    s->cap[0] = cap0;
    s->cap[1] = cap1;
    s->now = 1000000;
    srand(12345);
}

/* One update interval of 1 MiB messages back to back; returns the payload rate the peer
 * achieved (bytes/s). Each message reports what the receiver's acknowledgement carries
 * (mr_weights.cc): per plane the bytes, those after its first segment and the span they
 * took (timed only past 128 KiB, as there), and the finish from the first arrival. */
static double sim_tick(sim_t *s)
{
    const double dt = TICK_US / 1e6;
    const double msg = 1048576;
    double cap[2], t = 0, first_arrival = 1e9;
    int stopped = 0;
    for (int i = 0; i < 2; ++i) {
        double f = 1.0;
        if (s->noise_pct != 0) {
            f += ((double)(rand() % (2 * (int)s->noise_pct + 1)) - s->noise_pct) / 100.0;
        }
        cap[i] = s->cap[i] * f;
        if (!s->l[i].up || s->l[i].share <= 0) {
            continue;
        }
        if (cap[i] <= 0) {
            stopped = 1; /* its stripes never arrive: no message completes, no ack */
            continue;
        }
        const double b = s->l[i].share * msg;
        t = b / cap[i] > t ? b / cap[i] : t; /* the slowest stripe sets the pace */
        const double first = (b < SEG ? b : SEG) / cap[i];
        first_arrival = first < first_arrival ? first : first_arrival;
    }
    const double total = stopped || t <= 0 ? 0 : dt / t * msg;
    /* Messages acknowledged in this interval (a slow one spans several). */
    int msgs = 0;
    if (!stopped && t > 0) {
        s->carry += dt;
        while (s->carry >= t && msgs < 50) {
            s->carry -= t;
            ++msgs;
        }
    }
    for (int m = 0; m < msgs; ++m) {
        for (int i = 0; i < 2; ++i) {
            dr_wlink_t *l = &s->l[i];
            if (!l->up || l->share <= 0) {
                continue;
            }
            const double b = l->share * msg;
            const double first = b < SEG ? b : SEG;
            const double timed = b - first >= 131072 ? b - first : 0;
            const uint64_t span = timed > 0 ? (uint64_t)(timed / cap[i] * 1e6) : 0;
            const uint64_t fin = (uint64_t)((b / cap[i] - first_arrival) * 1e6) + 1;
            dr_weights_link_delivered(l, (uint64_t)b, (uint64_t)timed, span, fin);
        }
    }
    s->now += TICK_US;
    s->changes += (unsigned)dr_weights_update(s->l, 2, TICK_US);
    s->moved = total;
    if (getenv("DR_TEST_TRACE") != NULL) {
        print_message("t %.3f rate %.1f MB/s | A r %.1f sh %.3f | B r %.1f sh %.3f\n", s->now / 1e6,
                      total / dt / 1e6, s->l[0].rate / 1e6, s->l[0].share, s->l[1].rate / 1e6,
                      s->l[1].share);
    }
    return total / dt;
}

/* Run for `seconds`; returns the first time (s from the start) from which every later
 * interval's rate stayed >= frac * target, or -1 if the end was not reached so. */
static double sim_run(sim_t *s, double seconds, double target, double frac)
{
    const int n = (int)(seconds * 1e6 / TICK_US + 0.5);
    double since = -1;
    for (int k = 0; k < n; ++k) {
        const double r = sim_tick(s);
        if (r >= frac * target) {
            if (since < 0) {
                since = (k + 1) * TICK_US / 1e6;
            }
        } else {
            since = -1;
        }
    }
    return since;
}

static void test_equal_planes_stay_equal(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, 62.5 * MBPS, 62.5 * MBPS);
    double at = sim_run(&s, 3, 125 * MBPS, 0.99);
    assert_true(at >= 0 && at <= 0.1);
    /* No re-split at all: equal measurements sit inside the dead band. */
    assert_int_equal(s.changes, 0);
    assert_true(s.l[0].share == 0.5 && s.l[1].share == 0.5);
    assert_true(s.l[0].rate > 0 && s.l[1].rate > 0);
}

static void test_unequal_converges(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, 62.5 * MBPS, 31.25 * MBPS);
    double at = sim_run(&s, 4, 93.75 * MBPS, 0.9);
    assert_true(at >= 0 && at <= 1.0);
    assert_true(s.l[0].share > 0.6 && s.l[0].share < 0.74);
    assert_true(s.l[1].share > 0.26 && s.l[1].share < 0.4);
}

static void test_far_slower_plane_helps(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, 62.5 * MBPS, 6.25 * MBPS);
    /* Never worse than the fast plane alone, and the slow one still carries its part. */
    double at = sim_run(&s, 4, 62.5 * MBPS, 1.0);
    assert_true(at >= 0 && at <= 2.0);
    assert_true(s.l[1].share > 0.05 && s.l[1].share < 0.14);
}

static void test_trickle(void **state)
{
    (void)state;
    sim_t s;
    /* A plane at 1/100 of the other: a trickle of its own proportion, which holds no
     * message up (never worse than the fast plane alone). */
    sim_init(&s, 62.5 * MBPS, 0.625 * MBPS);
    /* Slow to learn by nature: the first (equal) split's message takes 0.8 s there. */
    double at = sim_run(&s, 8, 62.5 * MBPS, 0.95);
    assert_true(at >= 0 && at <= 6.0);
    assert_true(s.l[1].share > 0.002 && s.l[1].share < 0.03);
    /* Far below the floor (1/1000): kept at the floor, never dropped, so it stays
     * measured and can come back. */
    sim_init(&s, 62.5 * MBPS, 0.0625 * MBPS);
    s.l[0].rate = 62.5 * MBPS; /* learned already (the first split's message takes 8 s) */
    s.l[1].rate = 0.0625 * MBPS;
    dr_weights_reshare(s.l, 2);
    (void)sim_run(&s, 4, 0, 0);
    assert_true(s.l[1].share > 0.9 / (DR_WEIGHTS_TRICKLE + 1));
    assert_true(s.l[1].share < 1.6 / (DR_WEIGHTS_TRICKLE + 1));
    uint32_t w[2];
    dr_weights_to_u32(s.l, 2, w);
    assert_true(w[1] >= 1 && w[0] > 100 * w[1]);
}

static void test_step_down_and_up(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, 62.5 * MBPS, 62.5 * MBPS);
    (void)sim_run(&s, 1, 0, 0);
    s.cap[1] = 6.25 * MBPS; /* plane B cut to a tenth */
    double at = sim_run(&s, 3, 68.75 * MBPS, 0.9);
    assert_true(at >= 0 && at <= 2.0);
    assert_true(s.l[1].share < 0.15);
    s.cap[1] = 62.5 * MBPS; /* and raised back */
    at = sim_run(&s, 4, 125 * MBPS, 0.9);
    assert_true(at >= 0 && at <= 3.0);
    assert_true(s.l[1].share > 0.42 && s.l[1].share < 0.58);
}

static void test_noise_no_oscillation(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, 62.5 * MBPS, 31.25 * MBPS);
    s.noise_pct = 15;
    (void)sim_run(&s, 2, 0, 0);
    const unsigned before = s.changes;
    double lo = 1, hi = 0;
    for (int k = 0; k < 400; ++k) { /* 10 s */
        (void)sim_tick(&s);
        lo = s.l[1].share < lo ? s.l[1].share : lo;
        hi = s.l[1].share > hi ? s.l[1].share : hi;
    }
    /* Damped: the share stays near 1/3 and is re-split on a minority of updates. */
    assert_true(lo > 0.2 && hi < 0.46);
    assert_true(s.changes - before < 100);
}

static void test_plane_crawls_or_stops(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, 62.5 * MBPS, 62.5 * MBPS);
    (void)sim_run(&s, 1, 0, 0);
    s.cap[1] = 0.625 * MBPS; /* crawls at 1/100, though nobody declared it down */
    double at = sim_run(&s, 8, 62.5 * MBPS, 0.9);
    assert_true(at >= 0 && at <= 6.0);
    assert_true(s.l[1].up);
    assert_true(s.l[1].share > 0 && s.l[1].share < 0.03);
    /* Stops: no message completes, nothing is learned, nothing is divided by zero; the
     * watchdog, not the weights, declares it down. */
    const double before = s.l[1].share;
    s.cap[1] = 0;
    (void)sim_run(&s, 1, 0, 0);
    assert_true(s.l[1].share == before && s.l[0].rate > 0);
}

static void test_plane_returns(void **state)
{
    (void)state;
    sim_t s;
    sim_init(&s, 62.5 * MBPS, 62.5 * MBPS);
    (void)sim_run(&s, 1, 0, 0);
    dr_weights_link_down(&s.l[1]);
    dr_weights_reshare(s.l, 2);
    assert_true(s.l[1].share == 0 && s.l[0].share == 1.0);
    (void)sim_run(&s, 1, 0, 0);
    dr_weights_link_readmit(&s.l[1], s.l, 2);
    dr_weights_reshare(s.l, 2);
    /* Cautious: back at a small share, not at its old half. */
    assert_true(s.l[1].share > 0 && s.l[1].share < 1.6 / (DR_WEIGHTS_READMIT + 1));
    double at = sim_run(&s, 3, 125 * MBPS, 0.9);
    assert_true(at >= 0 && at <= 1.5);
    assert_true(s.l[1].share > 0.42 && s.l[1].share < 0.58);
}

static void test_untimed_learns_nothing(void **state)
{
    (void)state;
    dr_wlink_t l[2];
    dr_weights_link_init(&l[0]);
    dr_weights_link_init(&l[1]);
    dr_weights_fixed_shares(l, 2, NULL);
    /* Stripes too short to time, finishing together: no sample, no growth, no re-split. */
    for (int k = 0; k < 100; ++k) {
        dr_weights_link_delivered(&l[0], 65536, 0, 0, 1000);
        dr_weights_link_delivered(&l[1], 65536, 0, 0, 1000);
        assert_int_equal(dr_weights_update(l, 2, TICK_US), 0);
    }
    assert_true(l[0].rate == 0 && l[1].rate == 0 && l[0].share == 0.5);
}

static void test_fixed_and_shares_for_rates(void **state)
{
    (void)state;
    dr_wlink_t l[3];
    for (int i = 0; i < 3; ++i) {
        dr_weights_link_init(&l[i]);
    }
    const uint32_t r[3] = {2, 1, 1};
    dr_weights_fixed_shares(l, 3, r);
    assert_true(l[0].share == 0.5 && l[1].share == 0.25);
    l[2].up = 0;
    dr_weights_fixed_shares(l, 3, r);
    assert_true(l[0].share > 0.66 && l[0].share < 0.67 && l[2].share == 0);
    uint32_t w[3];
    dr_weights_to_u32(l, 3, w);
    assert_true(w[2] == 0 && w[1] > 0);
    assert_true(w[0] >= 2 * w[1] - 1 && w[0] <= 2 * w[1] + 1);

    double rates[2] = {62.5e6, 31.25e6}, sh[2];
    dr_weights_shares_for_rates(rates, 2, sh);
    assert_true(sh[0] > 0.66 && sh[0] < 0.67);
    rates[1] = 1e3; /* far slower: the floor */
    dr_weights_shares_for_rates(rates, 2, sh);
    assert_true(sh[1] > 0.9 / (DR_WEIGHTS_TRICKLE + 1) && sh[1] < 1.1 / (DR_WEIGHTS_TRICKLE + 1));
}

static void test_parse(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int nplanes;
        dr_status_t st;
        dr_weights_mode_t mode;
        uint32_t r0, r1;
    } cases[] = {
        {NULL, 2, DR_OK, DR_WEIGHTS_ADAPTIVE, 0, 0},
        {"", 2, DR_OK, DR_WEIGHTS_ADAPTIVE, 0, 0},
        {"adaptive", 2, DR_OK, DR_WEIGHTS_ADAPTIVE, 0, 0},
        {"equal", 2, DR_OK, DR_WEIGHTS_EQUAL, 0, 0},
        {"2:1", 2, DR_OK, DR_WEIGHTS_FIXED, 2, 1},
        {"10:3", 2, DR_OK, DR_WEIGHTS_FIXED, 10, 3},
        {"2:1", 3, DR_ERR_INVALID, 0, 0, 0},
        {"2:1:1", 2, DR_ERR_INVALID, 0, 0, 0},
        {"2", 2, DR_ERR_INVALID, 0, 0, 0},
        {"0:1", 2, DR_ERR_INVALID, 0, 0, 0},
        {"2:", 2, DR_ERR_INVALID, 0, 0, 0},
        {"2:x", 2, DR_ERR_INVALID, 0, 0, 0},
        {"-1:2", 2, DR_ERR_INVALID, 0, 0, 0},
        {"fast", 2, DR_ERR_INVALID, 0, 0, 0},
        {"Adaptive", 2, DR_ERR_INVALID, 0, 0, 0},
        {"2000000:1", 2, DR_ERR_INVALID, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        dr_weights_mode_t mode = (dr_weights_mode_t)99;
        uint32_t r[DR_MAX_PLANES] = {0};
        char err[256] = "";
        dr_status_t st =
            dr_weights_parse(cases[i].text, cases[i].nplanes, &mode, r, err, sizeof(err));
        assert_int_equal(st, cases[i].st);
        if (st == DR_OK) {
            assert_int_equal(mode, cases[i].mode);
            assert_int_equal(r[0], cases[i].r0);
            assert_int_equal(r[1], cases[i].r1);
        } else {
            /* The reason names the value. */
            assert_non_null(strstr(err, cases[i].text));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_planes_stay_equal),
        cmocka_unit_test(test_unequal_converges),
        cmocka_unit_test(test_far_slower_plane_helps),
        cmocka_unit_test(test_trickle),
        cmocka_unit_test(test_step_down_and_up),
        cmocka_unit_test(test_noise_no_oscillation),
        cmocka_unit_test(test_plane_crawls_or_stops),
        cmocka_unit_test(test_plane_returns),
        cmocka_unit_test(test_untimed_learns_nothing),
        cmocka_unit_test(test_fixed_and_shares_for_rates),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
