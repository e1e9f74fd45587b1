/* Message key packing (include/dualrail/key.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dualrail/key.h"

static void test_roundtrip(void **state)
{
    (void)state;
    const dr_key_fields_t cases[] = {
        {0, 0, 0, 0, 0, 0},
        {1, 6, 2, 3, 4, 5},
        {0xffff, 0xf, 0xffff, 0xfff, 0xfff, 0xf},
        {0x1234, 0x9, 0x4321, 0x0ab, 0xcd0, 0x7},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        uint64_t k = 0;
        assert_true(dr_key_pack(&cases[i], &k));
        dr_key_fields_t f = dr_key_unpack(k);
        assert_int_equal(f.comm, cases[i].comm);
        assert_int_equal(f.kind, cases[i].kind);
        assert_int_equal(f.seq, cases[i].seq);
        assert_int_equal(f.step, cases[i].step);
        assert_int_equal(f.block, cases[i].block);
        assert_int_equal(f.seg, cases[i].seg);
    }
    dr_key_fields_t all = {0xffff, 0xf, 0xffff, 0xfff, 0xfff, 0xf};
    uint64_t k;
    assert_true(dr_key_pack(&all, &k));
    assert_int_equal(k, UINT64_MAX);
}

static void test_fields_do_not_alias(void **state)
{
    (void)state;
    /* Changing any one field by one changes the key: no two identities share a key. */
    dr_key_fields_t base = {7, 1, 9, 11, 13, 2};
    uint64_t k0;
    assert_true(dr_key_pack(&base, &k0));
    uint32_t *fields[] = {&base.comm, &base.kind, &base.seq, &base.step, &base.block, &base.seg};
    for (size_t i = 0; i < 6; ++i) {
        ++*fields[i];
        uint64_t k;
        assert_true(dr_key_pack(&base, &k));
        assert_int_not_equal(k, k0);
        --*fields[i];
    }
}

static void test_overflow_rejected(void **state)
{
    (void)state;
    const dr_key_fields_t bad[] = {
        {0x10000, 0, 0, 0, 0, 0}, {0, 0x10, 0, 0, 0, 0}, {0, 0, 0x10000, 0, 0, 0},
        {0, 0, 0, 0x1000, 0, 0},  {0, 0, 0, 0, 0x1000, 0}, {0, 0, 0, 0, 0, 0x10},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        uint64_t k = 42;
        assert_false(dr_key_pack(&bad[i], &k));
        assert_int_equal(k, 42);
    }
}

static void test_kinds_never_cross(void **state)
{
    (void)state;
    /* The same communicator, sequence, step, block and segment under every pair of
     * kinds: distinct keys, so an allgather's late message never completes a bcast's
     * receive. Also the largest sequence of one kind against sequence 0 of the next. */
    for (uint32_t a = 0; a < DR_KIND_COUNT; ++a) {
        for (uint32_t b = 0; b < DR_KIND_COUNT; ++b) {
            dr_key_fields_t fa = {3, a, 0xffff, 5, 6, 1}, fb = {3, b, 0xffff, 5, 6, 1};
            uint64_t ka, kb;
            assert_true(dr_key_pack(&fa, &ka));
            assert_true(dr_key_pack(&fb, &kb));
            assert_true((ka == kb) == (a == b));
            fb.seq = 0;
            fb.kind = a + 1;
            if (fb.kind < DR_KIND_COUNT) {
                assert_true(dr_key_pack(&fb, &kb));
                assert_int_not_equal(ka, kb);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_fields_do_not_alias),
        cmocka_unit_test(test_overflow_rejected),
        cmocka_unit_test(test_kinds_never_cross),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
