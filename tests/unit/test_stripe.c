/* Stripe and segment arithmetic (include/dualrail/stripe.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dualrail/stripe.h"

/* Stripes are contiguous, in plane order, cover [0, len), and inner boundaries are aligned. */
static void check_cover(uint64_t len, const dr_extent_t *out, int n, uint64_t align)
{
    uint64_t next = 0;
    for (int i = 0; i < n; ++i) {
        if (out[i].length == 0) {
            continue;
        }
        assert_int_equal(out[i].offset, next);
        if (out[i].offset != 0) {
            assert_int_equal(out[i].offset % align, 0);
        }
        next = out[i].offset + out[i].length;
    }
    assert_int_equal(next, len);
}

static void test_split_table(void **state)
{
    (void)state;
    static const struct {
        uint64_t len;
        uint32_t w[4];
        int n;
        uint64_t align, min_stripe;
        int want_used;
    } cases[] = {
        {0, {1, 1}, 2, 64, 0, 0},
        {1, {1, 1}, 2, 1, 0, 2 - 1}, /* 1 byte cannot be cut in two: plane 1 gets it */
        {2, {1, 1}, 2, 1, 0, 2},
        {1001, {1, 1}, 2, 8, 0, 2},
        {1 << 20, {1, 1}, 2, 64, 16384, 2},
        {1 << 20, {3, 1}, 2, 64, 0, 2},
        {1 << 20, {1, 0}, 2, 64, 0, 1},
        {1 << 20, {0, 5}, 2, 64, 0, 1},
        {(1 << 20) + 7, {1, 2, 3, 4}, 4, 64, 0, 4},
        {UINT64_MAX - 3, {UINT32_MAX, UINT32_MAX}, 2, 4096, 0, 2},
        {UINT64_MAX, {7, 0, 3, 1}, 4, 64, 0, 3},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        dr_extent_t out[4];
        int used = dr_stripe_split(cases[c].len, cases[c].w, cases[c].n, cases[c].align,
                                   cases[c].min_stripe, 0, out);
        assert_int_equal(used, cases[c].want_used);
        if (cases[c].len == 0) {
            continue;
        }
        check_cover(cases[c].len, out, cases[c].n, cases[c].align);
        /* Each stripe is within `align` of its exact proportional share. */
        unsigned __int128 total = 0;
        for (int i = 0; i < cases[c].n; ++i) {
            total += cases[c].w[i];
        }
        for (int i = 0; i < cases[c].n; ++i) {
            unsigned __int128 exact = (unsigned __int128)cases[c].len * cases[c].w[i] / total;
            unsigned __int128 got = out[i].length;
            unsigned __int128 diff = got > exact ? got - exact : exact - got;
            if (cases[c].w[i] == 0) {
                assert_int_equal(out[i].length, 0);
            }
            assert_true(diff <= cases[c].align + 1);
        }
    }
}

static void test_split_small_goes_whole(void **state)
{
    (void)state;
    uint32_t w[3] = {1, 0, 1};
    dr_extent_t out[3];
    /* At or below min_stripe: whole to one plane, starting from `first`, skipping weight 0. */
    assert_int_equal(dr_stripe_split(100, w, 3, 64, 100, 0, out), 1);
    assert_int_equal(out[0].length, 100);
    assert_int_equal(dr_stripe_split(100, w, 3, 64, 100, 1, out), 1);
    assert_int_equal(out[1].length, 0);
    assert_int_equal(out[2].length, 100);
    assert_int_equal(dr_stripe_split(100, w, 3, 64, 100, 5, out), 1); /* 5 % 3 = 2 */
    assert_int_equal(out[2].length, 100);
    /* One byte above: split. */
    assert_int_equal(dr_stripe_split(101 + 64, w, 3, 64, 100, 0, out), 2);
}

static void test_split_errors(void **state)
{
    (void)state;
    uint32_t w[2] = {0, 0};
    dr_extent_t out[2];
    assert_int_equal(dr_stripe_split(10, w, 2, 1, 0, 0, out), -1);
    w[0] = 1;
    assert_int_equal(dr_stripe_split(10, w, 0, 1, 0, 0, out), -1);
    assert_int_equal(dr_stripe_split(10, w, 2, 0, 0, 0, out), -1);
    assert_int_equal(dr_stripe_split(10, NULL, 2, 1, 0, 0, out), -1);
}

static void test_segments(void **state)
{
    (void)state;
    assert_int_equal(dr_segment_count(0, 4096), 0);
    assert_int_equal(dr_segment_count(1, 4096), 1);
    assert_int_equal(dr_segment_count(4096, 4096), 1);
    assert_int_equal(dr_segment_count(4097, 4096), 2);
    assert_int_equal(dr_segment_count(UINT64_MAX, 1), UINT64_MAX);
    assert_int_equal(dr_segment_count(10, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_table),
        cmocka_unit_test(test_split_small_goes_whole),
        cmocka_unit_test(test_split_errors),
        cmocka_unit_test(test_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
