/* Peer and chunk arithmetic of the allreduce algorithms (mpi_coll/algo/{ring,rd}_math.hpp). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <set>
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/chain_math.hpp"
#include "algo/engine.hpp"
#include "algo/rd_math.hpp"
#include "algo/ring_math.hpp"
#include "dualrail/key.h"

using namespace dualrail::coll;

static const size_t kCounts[] = {
    0, 1, 2, 3, 7, 15, 16, 17, 1001, 100000, (size_t)1 << 33, ((size_t)1 << 40) + 7};

static void check_partition(size_t count, size_t parts)
{
    size_t next = 0, lo = SIZE_MAX, hi = 0;
    for (size_t i = 0; i < parts; ++i) {
        Span s = partition(count, parts, i);
        assert_int_equal(s.offset, next); /* contiguous, in order */
        next += s.count;
        lo = s.count < lo ? s.count : lo;
        hi = s.count > hi ? s.count : hi;
        if (i > 0) {
            /* the first blocks are the larger ones */
            assert_true(partition(count, parts, i - 1).count >= s.count);
        }
    }
    assert_int_equal(next, count);
    assert_true(hi - lo <= 1);
    assert_int_equal(hi, ceil_div(count, parts));
}

static void test_block_partition(void **state)
{
    (void)state;
    for (size_t count : kCounts) {
        for (int n = 1; n <= 16; ++n) {
            check_partition(count, (size_t)n);
            assert_int_equal(ring_block_max(count, n), ceil_div(count, (size_t)n));
        }
        check_partition(count, 2048);
    }
    /* fewer elements than ranks: the first count blocks hold one element each */
    for (int b = 0; b < 8; ++b) {
        Span s = ring_block(5, 8, b);
        assert_int_equal(s.count, b < 5 ? 1 : 0);
    }
}

static void test_segments(void **state)
{
    (void)state;
    const size_t seg_sizes[] = {1, 64, 1000, 4096, 1 << 20, SIZE_MAX / 2};
    const size_t elem_sizes[] = {1, 4, 8, 12, 64};
    for (size_t count : kCounts) {
        for (size_t esz : elem_sizes) {
            for (size_t seg : seg_sizes) {
                for (int n : {2, 3, 5, 16}) {
                    const size_t bmax = ring_block_max(count, n);
                    const int ns = ring_segments(bmax, esz, seg);
                    assert_true(ns >= 1 && ns <= kMaxSegments);
                    if (bmax > 0 && ns < kMaxSegments) {
                        /* no more segments than needed... */
                        assert_true((size_t)ns == ceil_div(bmax, seg / esz == 0 ? 1 : seg / esz));
                    }
                    /* The plan both rings use: units cover every (step, segment) once and
                     * a slot holds the largest segment, 64-byte aligned. */
                    const RingPlan plan(count, n, esz, seg);
                    assert_int_equal(plan.nseg, ns);
                    assert_int_equal(plan.units, (size_t)ring_steps(n) * (size_t)ns);
                    assert_true(plan.slot_bytes % 64 == 0 &&
                                plan.slot_bytes >= ceil_div(bmax, (size_t)ns) * esz &&
                                plan.slot_bytes < ceil_div(bmax, (size_t)ns) * esz + 64);
                    assert_int_equal(plan.step_of(plan.units - 1), ring_steps(n) - 1);
                    assert_int_equal(plan.seg_of(plan.units - 1), ns - 1);
                    for (int b : {0, n - 1}) {
                        Span blk = ring_block(count, n, b);
                        size_t next = blk.offset;
                        for (int k = 0; k < ns; ++k) {
                            Span s = ring_segment(blk, ns, k);
                            assert_int_equal(s.offset, next);
                            assert_int_equal(plan.span(b, k).offset, s.offset);
                            assert_int_equal(plan.span(b, k).count, s.count);
                            next += s.count;
                        }
                        assert_int_equal(next, blk.offset + blk.count);
                    }
                }
            }
        }
    }
    /* the test knob: 64-byte segments of 8-byte elements on a 1000-element block */
    assert_int_equal(ring_segments(1000, 8, 64), 16);
    assert_int_equal(ring_segments(64, 8, 64), 8);
}

static void test_ring_indices(void **state)
{
    (void)state;
    for (int n = 2; n <= 16; ++n) {
        assert_int_equal(ring_steps(n), 2 * (n - 1));
        for (int r = 0; r < n; ++r) {
            std::vector<int> rs(n, 0), ag(n, 0);
            for (int st = 0; st < ring_steps(n); ++st) {
                const int rb = ring_recv_block(r, n, st);
                assert_true(rb >= 0 && rb < n);
                (ring_is_reduce_step(n, st) ? rs : ag)[rb]++;
                /* what the left neighbour sends is what this rank receives */
                assert_int_equal(ring_send_block(ring_left(r, n), n, st), rb);
                /* a block received at one step is the one sent on at the next */
                if (st + 1 < ring_steps(n)) {
                    assert_int_equal(ring_send_block(r, n, st + 1), rb);
                }
            }
            for (int b = 0; b < n; ++b) {
                /* reduce-scatter: every block but our own, once; allgather: every block but
                 * the one we own, once */
                assert_int_equal(rs[b], b == r ? 0 : 1);
                assert_int_equal(ag[b], b == ring_owned_block(r, n) ? 0 : 1);
            }
            assert_int_equal(ring_recv_block(r, n, n - 2), ring_owned_block(r, n));
            assert_int_equal(ring_send_block(r, n, 0), r);
            assert_int_equal(ring_right(ring_left(r, n), n), r);
        }
        /* every block has exactly one owner */
        std::set<int> owned;
        for (int r = 0; r < n; ++r) {
            owned.insert(ring_owned_block(r, n));
        }
        assert_int_equal(owned.size(), (size_t)n);
    }
}

static void test_ring_keys_fit(void **state)
{
    (void)state;
    /* The largest ring: every (step, block, seg) packs, and no step reaches the abort step. */
    const int n = kRingMaxRanks;
    assert_true((uint32_t)(ring_steps(n) - 1) < kAbortStep);
    dr_key_fields_t f = {0xffff,          DR_KIND_COUNT - 1, 0xffff, (uint32_t)ring_steps(n) - 1,
                         (uint32_t)n - 1, kMaxSegments - 1};
    uint64_t k;
    assert_true(dr_key_pack(&f, &k));
    f.step = kAbortStep;
    assert_true(dr_key_pack(&f, &k));
    /* one more rank and the ring's last step would collide with the abort step */
    assert_false((uint32_t)(ring_steps(n + 1) - 1) < kAbortStep);
}

static void test_rd_folding(void **state)
{
    (void)state;
    for (int n :
         {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31, 33, 1000, 2049, 4097}) {
        const int p = rd_pow2_floor(n), rem = rd_rem(n), rounds = rd_rounds(n);
        assert_true(p <= n && 2 * p > n && (p & (p - 1)) == 0);
        assert_int_equal(1 << rounds, p);
        assert_int_equal(rem, n - p);
        int extras = 0;
        std::vector<int> seen(p, 0);
        for (int r = 0; r < n; ++r) {
            const RdRole role = rd_role(r, n);
            const int v = rd_vrank(r, n);
            if (role == RdRole::kExtra) {
                ++extras;
                assert_int_equal(v, -1);
                assert_int_equal(rd_fold_peer(r, n), r + 1);
                assert_true(rd_role(r + 1, n) == RdRole::kPartner);
                assert_int_equal(rd_fold_peer(r + 1, n), r);
                for (int j = 0; j < rounds; ++j) {
                    assert_int_equal(rd_partner(r, n, j), -1);
                }
                continue;
            }
            assert_true(v >= 0 && v < p);
            seen[v]++;
            assert_int_equal(rd_real_rank(v, n), r);
            if (role == RdRole::kPlain) {
                assert_int_equal(rd_fold_peer(r, n), -1);
            }
            std::set<int> partners;
            for (int j = 0; j < rounds; ++j) {
                const int q = rd_partner(r, n, j);
                assert_true(q >= 0 && q < n && q != r);
                assert_true(rd_role(q, n) != RdRole::kExtra);
                assert_int_equal(rd_partner(q, n, j), r); /* symmetric */
                partners.insert(q);
            }
            assert_int_equal(partners.size(), (size_t)rounds);
        }
        assert_int_equal(extras, rem);
        for (int v = 0; v < p; ++v) {
            assert_int_equal(seen[v], 1); /* virtual ranks: a bijection onto 0..p-1 */
        }
        /* fold, rounds and unfold steps are distinct and below the abort step */
        assert_int_equal(rd_step_fold(), 0);
        assert_int_equal(rd_step_round(0), 1);
        assert_int_equal(rd_step_unfold(n), rounds + 1);
        assert_true((uint32_t)rd_step_unfold(n) < kAbortStep);
    }
}

static void test_choose(void **state)
{
    (void)state;
    Params p;
    p.size = 8;
    p.elem_size = 8;
    p.count = 8192; /* 64 KiB: recursive doubling */
    assert_int_equal(allreduce_choose(p), kAlgoRd);
    p.count = 8193;
    assert_int_equal(allreduce_choose(p), kAlgoRing);
    p.rd_max_bytes = 0; /* 0 is the default */
    assert_int_equal(allreduce_choose(p), kAlgoRing);
    p.rd_max_bytes = 1 << 20;
    assert_int_equal(allreduce_choose(p), kAlgoRd);
    p.rd_max_bytes = 1;
    p.count = 7; /* fewer elements than ranks */
    assert_int_equal(allreduce_choose(p), kAlgoRd);
    p.count = 1 << 20;
    assert_int_equal(allreduce_choose(p), kAlgoRing);
    p.size = kRingMaxRanks + 1; /* the ring's steps would not fit a key */
    assert_int_equal(allreduce_choose(p), kAlgoRd);
    p.size = 8;
    p.algorithm = kAlgoRd;
    assert_int_equal(allreduce_choose(p), kAlgoRd);
    p.algorithm = kAlgoRing;
    p.count = 1;
    assert_int_equal(allreduce_choose(p), kAlgoRing);
}

/* The engine's slot arrays: inline up to N, on the heap beyond, contents kept across growth. */
static void test_inline_array(void **state)
{
    (void)state;
    struct Rec {
        int a = -1;
        long b = 7;
    };
    InlineArray<Rec, 4> v;
    assert_int_equal(v.capacity(), 4);
    v.assign_zero(3);
    assert_int_equal(v.size(), 3);
    v.push_back(Rec{9, 10});
    assert_int_equal(v.size(), 4);
    const Rec *inline_data = v.begin();
    v.reserve(4); /* within capacity: stays where it is */
    assert_ptr_equal(v.begin(), inline_data);
    v.reserve(10);
    assert_true(v.capacity() >= 10);
    assert_ptr_not_equal(v.begin(), inline_data);
    assert_int_equal(v.size(), 4);
    assert_int_equal(v[0].a, 0);
    assert_int_equal(v[2].b, 0);
    assert_int_equal(v[3].a, 9);
    assert_int_equal(v[3].b, 10);
    for (int i = 0; i < 6; ++i) {
        v.push_back(Rec{100 + i, i});
    }
    assert_int_equal(v.size(), 10);
    long sum = 0;
    for (const Rec &r : v) {
        sum += r.b;
    }
    assert_int_equal(sum, 10 + (0 + 1 + 2 + 3 + 4 + 5));
    v.assign_zero(20); /* grows again, every element zero bytes */
    assert_int_equal(v.size(), 20);
    assert_int_equal(v[19].a, 0);
    assert_int_equal(v[19].b, 0);
    assert_int_equal(v[3].a, 0);
}

/*
 * Chain segments: they tile the message exactly, never exceed the configured
 * segment_size unless the key runs out of segment numbers, number at most
 * kChainMaxSegments, and the window stays within [1, 16] and the segment count.
 */
void test_chain_plan(void **state)
{
    (void)state;
    const size_t counts[] = {
        1, 7, 1000, 70001, (size_t)1 << 20, ((size_t)1 << 24) + 3, (size_t)5 << 30};
    const size_t sizes[] = {1, 4, 8, 12};
    const size_t segs[] = {0, 64, 96, 4096, (size_t)1 << 20};
    for (size_t count : counts) {
        for (size_t esz : sizes) {
            for (size_t seg : segs) {
                const ChainPlan c = chain_plan(count, esz, seg);
                assert_true(c.seg_elems >= 1);
                assert_true(c.nseg >= 1 && c.nseg <= kChainMaxSegments);
                assert_true(c.window >= 1 && c.window <= 16 && c.window <= c.nseg);
                /* the last segment ends at count, every other one is full */
                const Span last = chain_segment(c, count, c.nseg - 1);
                assert_int_equal(last.offset + last.count, count);
                assert_true(last.count >= 1 && last.count <= c.seg_elems);
                assert_int_equal(chain_segment(c, count, 0).offset, 0);
                if (c.nseg > 1) {
                    assert_int_equal(chain_segment(c, count, c.nseg - 2).count, c.seg_elems);
                }
                const bool key_bound = count * esz > seg * kChainMaxSegments;
                if (seg != 0 && seg >= esz && !key_bound) {
                    assert_true(c.seg_elems * esz <= seg);
                }
                /* every segment number fits the key's block and segment fields */
                assert_true(chain_key_block(c.nseg - 1) < (1u << DR_KEY_BLOCK_BITS));
                assert_true(chain_key_seg(c.nseg - 1) < (1u << DR_KEY_SEG_BITS));
            }
        }
    }
    /* 16 MiB with the default 1 MiB segments: 64 segments of 256 KiB */
    const ChainPlan c = chain_plan((size_t)16 << 20, 1, (size_t)1 << 20);
    assert_int_equal(c.seg_elems, 256 * 1024);
    assert_int_equal(c.nseg, 64);
    assert_true(chain_wins((size_t)16 << 20, 1, 4, (size_t)1 << 20));
    assert_false(chain_wins((size_t)100 << 10, 1, 4, (size_t)1 << 20)); /* 2 segments */
    assert_true(chain_wins(100, 1, 2, 0));                              /* 2 ranks: always */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_partition), cmocka_unit_test(test_segments),
        cmocka_unit_test(test_ring_indices),    cmocka_unit_test(test_ring_keys_fit),
        cmocka_unit_test(test_rd_folding),      cmocka_unit_test(test_choose),
        cmocka_unit_test(test_inline_array),    cmocka_unit_test(test_chain_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
