/*
 * Reduce, reduce_scatter_block and reduce_scatter (mpi_coll/algo/
 * reductions.hpp) over the in-memory threaded transport: the halving's
 * group math without a network; tables of sizes 1..16 (non-powers of two
 * included) with counts 0, 1, fewer than ranks, odd and large, every root,
 * in place and not, each algorithm forced and auto, unequal and zero counts;
 * a large reduce bitwise equal to the ring allreduce of the same floating
 * inputs; the reducing kinds back to back under one sequence number; and
 * links failing mid-call (every rank returns, the ends of the link with an
 * error naming the collective, nobody hangs).
 *
 * Inputs are 32-bit integers summed with wrap-around (exact in any order)
 * and a max on the high half of 64-bit ones, so a block reduced twice, a
 * contribution lost or a block put in the wrong place all show.
 *
 * Arguments: [lo hi] the rank counts of the table tests (default 1 16).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/rd_math.hpp"
#include "algo/reductions.hpp"
#include "algo/tree_math.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;
using dualrail::test::Failures;
using fake::report;

namespace {

constexpr uint32_t kComm = 0x4e;
int g_lo = 1, g_hi = 16;
/* The table tests run twice: sends completed on the receiver's acknowledgement, then
 * copied when posted (ucx_mr's small sends: the schedules' engines stay unbuilt, lazy_engine.hpp).
 */
bool g_copy = false;

uint32_t val(int rank, size_t i, uint64_t salt)
{
    return (uint32_t)((uint64_t)(rank + 1) * 2654435761u + i * 40503u + salt * 977u);
}

void sum_u32(const void *in, void *inout, size_t count, void *arg)
{
    if (arg != nullptr) {
        ++*static_cast<std::atomic<long> *>(arg);
    }
    for (size_t i = 0; i < count; ++i) {
        static_cast<uint32_t *>(inout)[i] += static_cast<const uint32_t *>(in)[i];
    }
}

void sum_f64(const void *in, void *inout, size_t count, void *)
{
    for (size_t i = 0; i < count; ++i) {
        static_cast<double *>(inout)[i] += static_cast<const double *>(in)[i];
    }
}

uint32_t want_sum(int n, size_t i, uint64_t salt)
{
    uint32_t s = 0;
    for (int r = 0; r < n; ++r) {
        s += val(r, i, salt);
    }
    return s;
}

Params params(int kind, int rank, int n, fake::FakeTransport &t)
{
    Params p = fake::rank_params(kind, rank, n, t, kComm);
    p.elem_size = 4;
    p.reduce = sum_u32;
    return p;
}

/* ---- the halving's math ---- */

void test_halving_math(void **state)
{
    (void)state;
    for (int n = 1; n <= 70; ++n) {
        const int pw = rd_pow2_floor(n), rounds = rd_rounds(n);
        /* groups tile the blocks in order, vrank v's group holds the blocks of the real
         * ranks it stands for */
        assert_int_equal(rh_group_first(0, n), 0);
        assert_int_equal(rh_group_first(pw, n), n);
        for (int v = 0; v < pw; ++v) {
            const int a = rh_group_first(v, n), b = rh_group_first(v + 1, n);
            const int real = rd_real_rank(v, n);
            assert_true(b > a);
            assert_true(real >= a && real < b);
            if (b - a == 2) {
                assert_int_equal(rd_fold_peer(real, n), a);
            }
        }
        /* simulated on group sets: after the rounds each vrank holds exactly the sum of
         * every vrank's contribution for its own group, and nothing was counted twice */
        std::vector<std::vector<int>> have((size_t)pw, std::vector<int>((size_t)pw, 1));
        for (int j = 0; j < rounds; ++j) {
            const int d = pw >> (j + 1);
            std::vector<std::vector<int>> next = have;
            for (int v = 0; v < pw; ++v) {
                const int q = v ^ d, keep = v & ~(d - 1), give = q & ~(d - 1);
                assert_int_equal(give ^ d, keep); /* the two halves of one window */
                for (int g = keep; g < keep + d; ++g) {
                    next[(size_t)v][(size_t)g] += have[(size_t)q][(size_t)g];
                }
            }
            have = next;
        }
        for (int v = 0; v < pw; ++v) {
            assert_int_equal(have[(size_t)v][(size_t)v], pw);
        }
    }
}

/* ---- reduce ---- */

struct Cfg {
    int algo;
    size_t count;
    int root;
    bool inplace;
    size_t seg;
};

std::string describe(const char *kind, int n, const Cfg &c)
{
    char s[160];
    snprintf(s, sizeof(s), "%s n=%d algo=%d count=%zu root=%d %s seg=%zu", kind, n, c.algo, c.count,
             c.root, c.inplace ? "in place" : "out of place", c.seg);
    return s;
}

void run_reduce_table(int n)
{
    std::vector<Cfg> cfgs;
    for (int algo :
         {(int)kAlgoAuto, (int)kReduceBinomial, (int)kReduceRabenseifner, (int)kReduceChain}) {
        for (size_t count : {(size_t)0, (size_t)1, (size_t)3, (size_t)517, (size_t)9001}) {
            for (int root = 0; root < n; ++root) {
                if (count >= 517 && root != 0 && root != n / 2 && root != n - 1) {
                    continue;
                }
                cfgs.push_back(Cfg{algo, count, root, (root + (int)count) % 2 == 1,
                                   count >= 517 && root % 2 == 0 ? (size_t)96 : (size_t)0});
            }
        }
    }
    fake::Net net(n, kComm);
    net.copy_sends(g_copy);
    fake::Barrier bar(n);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Scratch scratch;
            for (size_t ci = 0; ci < cfgs.size(); ++ci) {
                const Cfg &c = cfgs[ci];
                const bool root = rank == c.root;
                std::vector<uint32_t> send(c.count + 1), recv(c.count + 1, 0xa5a5a5a5u);
                uint32_t *mine = c.inplace && root ? recv.data() : send.data();
                for (size_t i = 0; i < c.count; ++i) {
                    mine[i] = val(rank, i, ci);
                }
                const std::vector<uint32_t> orig = send, orig_recv = recv;
                Params p = params(kKindReduce, rank, n, t);
                p.sendbuf = c.inplace && root ? (ci % 3 == 0 ? nullptr : recv.data()) : send.data();
                /* non-root recvbuf is not significant: nullptr in some cases */
                p.recvbuf = root || ci % 2 == 0 ? recv.data() : nullptr;
                p.count = c.count;
                p.root = c.root;
                p.seq = (uint32_t)ci;
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                p.small_max_bytes = ci % 4 == 0 ? 1 : 0; /* auto also picks rabenseifner */
                bar.wait();
                std::string err;
                const dr_status_t st = reduce(t, p, ci % 5 == 0 ? nullptr : &scratch, &err);
                const std::string what = describe("reduce", n, c) + " rank " + std::to_string(rank);
                bool ok = true;
                if (root) {
                    for (size_t i = 0; i < c.count && ok; ++i) {
                        ok = recv[i] == want_sum(n, i, ci);
                    }
                } else {
                    ok = recv == orig_recv;
                }
                if (st != DR_OK) {
                    fails.add(what + ": status " + std::to_string(st) + ": " + err);
                } else if (recv[c.count] != 0xa5a5a5a5u) {
                    fails.add(what + ": wrote past the end of recvbuf");
                } else if (!ok) {
                    fails.add(what + (root ? ": wrong result" : ": touched a non-root recvbuf"));
                } else if (send != orig && !(c.inplace && root)) {
                    fails.add(what + ": sendbuf was modified");
                }
                bar.wait();
                if (rank == 0) {
                    net.forget_keys();
                }
                bar.wait();
            }
        },
        280, "reduce table");
    report(fails, net);
}

void test_reduce_table(void **state)
{
    (void)state;
    for (bool copy : {false, true}) {
        g_copy = copy;
        for (int n = g_lo; n <= g_hi; ++n) {
            run_reduce_table(n);
        }
    }
    g_copy = false;
}

/*
 * Rabenseifner against the ring allreduce, floating sums of inputs that round: the
 * same bits at the root (the same blocks, segments and order of operations).
 */
void test_reduce_matches_allreduce(void **state)
{
    (void)state;
    for (int n : {2, 3, 5, 8}) {
        for (size_t seg : {(size_t)0, (size_t)200}) {
            constexpr size_t kCount = 7001;
            fake::Net net(n, kComm);
            Failures fails;
            fake::run_ranks(
                n,
                [&](int rank) {
                    fake::FakeTransport t(net, rank);
                    std::vector<double> in(kCount), red(kCount, -1.0), all(kCount, -2.0);
                    for (size_t i = 0; i < kCount; ++i) {
                        in[i] = 1.0 / (double)(1 + rank * 31 + (int)(i % 997)) + (double)i * 1e-7;
                    }
                    for (int root : {0, n - 1}) {
                        Params p = params(kKindAllreduce, rank, n, t);
                        p.elem_size = 8;
                        p.reduce = sum_f64;
                        p.count = kCount;
                        p.segment_size = seg;
                        p.seq = (uint32_t)root;
                        p.sendbuf = in.data();
                        p.recvbuf = all.data();
                        p.algorithm = kAlgoRing;
                        std::string err;
                        dr_status_t st = allreduce(t, p, nullptr, &err);
                        p.kind = kKindReduce;
                        p.root = root;
                        p.recvbuf = red.data();
                        p.algorithm = kReduceRabenseifner;
                        if (st == DR_OK) {
                            st = reduce(t, p, nullptr, &err);
                        }
                        if (st != DR_OK) {
                            fails.add("rank " + std::to_string(rank) + ": " + err);
                        } else if (rank == root &&
                                   memcmp(red.data(), all.data(), kCount * 8) != 0) {
                            fails.add("n=" + std::to_string(n) + " root " + std::to_string(root) +
                                      ": reduce differs from allreduce");
                        }
                    }
                },
                60, "reduce vs allreduce");
            report(fails, net);
        }
    }
}

/* ---- reduce_scatter_block and reduce_scatter ---- */

/* Rank counts per test case: equal (block), or patterns with zeros and skew. */
std::vector<size_t> rs_counts(int pattern, int n, size_t count)
{
    std::vector<size_t> c((size_t)n, count);
    for (int r = 0; r < n; ++r) {
        switch (pattern) {
        case 1: /* skewed: rank r gets r * count, rank 0 nothing */
            c[(size_t)r] = (size_t)r * count;
            break;
        case 2: /* one rank holds everything */
            c[(size_t)r] = r == n / 2 ? count * (size_t)n : 0;
            break;
        case 3: /* zeros every other rank, odd sizes */
            c[(size_t)r] = r % 2 ? 0 : count + (size_t)r;
            break;
        default:
            break;
        }
    }
    return c;
}

void run_rs_table(int n, bool block)
{
    struct Case {
        int algo, pattern;
        size_t count;
        bool inplace;
        size_t seg;
    };
    std::vector<Case> cases;
    for (int algo : {(int)kAlgoAuto, (int)kReduceScatterRing, (int)kReduceScatterHalving}) {
        for (int pattern = 0; pattern < (block ? 1 : 4); ++pattern) {
            for (size_t count : {(size_t)0, (size_t)1, (size_t)7, (size_t)1300}) {
                for (bool inplace : {false, true}) {
                    cases.push_back(Case{algo, pattern, count, inplace,
                                         count >= 1300 && inplace ? (size_t)128 : (size_t)0});
                }
            }
        }
    }
    const int kind = block ? kKindReduceScatterBlock : kKindReduceScatter;
    fake::Net net(n, kComm);
    net.copy_sends(g_copy);
    fake::Barrier bar(n);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Scratch scratch;
            for (size_t ci = 0; ci < cases.size(); ++ci) {
                const Case &c = cases[ci];
                const std::vector<size_t> cnt = rs_counts(c.pattern, n, c.count);
                std::vector<size_t> off((size_t)n + 1, 0), bytes((size_t)n);
                for (int r = 0; r < n; ++r) {
                    off[(size_t)r + 1] = off[(size_t)r] + cnt[(size_t)r];
                    bytes[(size_t)r] = cnt[(size_t)r] * 4;
                }
                const size_t total = off[(size_t)n], mine = cnt[(size_t)rank];
                std::vector<uint32_t> send(total + 1),
                    recv((c.inplace ? total : mine) + 1, 0xa5a5a5a5u);
                uint32_t *in = c.inplace ? recv.data() : send.data();
                for (size_t i = 0; i < total; ++i) {
                    in[i] = val(rank, i, ci);
                }
                const std::vector<uint32_t> orig = send;
                const size_t end = c.inplace ? total : mine;
                Params p = params(kind, rank, n, t);
                p.sendbuf = c.inplace ? nullptr : send.data();
                p.recvbuf = recv.data();
                p.count = c.count;
                p.counts = block ? nullptr : bytes.data();
                p.seq = (uint32_t)ci;
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                p.small_max_bytes = ci % 3 == 0 ? 1 : 0;
                bar.wait();
                std::string err;
                Scratch *s = ci % 4 == 0 ? nullptr : &scratch;
                const dr_status_t st =
                    block ? reduce_scatter_block(t, p, s, &err) : reduce_scatter(t, p, s, &err);
                char what[200];
                snprintf(what, sizeof(what),
                         "%s n=%d algo=%d pattern=%d count=%zu %s seg=%zu rank %d", kind_name(kind),
                         n, c.algo, c.pattern, c.count, c.inplace ? "in place" : "out of place",
                         c.seg, rank);
                bool ok = true;
                for (size_t i = 0; i < mine && ok; ++i) {
                    ok = recv[i] == want_sum(n, off[(size_t)rank] + i, ci);
                }
                if (st != DR_OK) {
                    fails.add(std::string(what) + ": status " + std::to_string(st) + ": " + err);
                } else if (recv[end] != 0xa5a5a5a5u) {
                    fails.add(std::string(what) + ": wrote past the end of recvbuf");
                } else if (!ok) {
                    fails.add(std::string(what) + ": wrong result");
                } else if (!c.inplace && send != orig) {
                    fails.add(std::string(what) + ": sendbuf was modified");
                }
                bar.wait();
                if (rank == 0) {
                    net.forget_keys();
                }
                bar.wait();
            }
        },
        280, block ? "reduce_scatter_block table" : "reduce_scatter table");
    report(fails, net);
}

void test_rsb_table(void **state)
{
    (void)state;
    for (bool copy : {false, true}) {
        g_copy = copy;
        for (int n = g_lo; n <= g_hi; ++n) {
            run_rs_table(n, true);
        }
    }
    g_copy = false;
}

void test_rs_table(void **state)
{
    (void)state;
    for (bool copy : {false, true}) {
        g_copy = copy;
        for (int n = g_lo; n <= g_hi; ++n) {
            run_rs_table(n, false);
        }
    }
    g_copy = false;
}

/* The three reducing kinds and allreduce back to back under one sequence number, no
 * barrier: only the key's kind keeps them apart. */
void test_kinds_interleaved(void **state)
{
    (void)state;
    for (int n : {2, 3, 5, 8}) {
        constexpr int kOps = 16;
        constexpr size_t kCount = 300;
        fake::Net net(n, kComm);
        Failures fails;
        fake::run_ranks(
            n,
            [&](int rank) {
                fake::FakeTransport t(net, rank);
                const int kinds[4] = {kKindReduce, kKindReduceScatterBlock, kKindAllreduce,
                                      kKindReduceScatter};
                std::vector<size_t> bytes((size_t)n, kCount * 4);
                for (int op = 0; op < kOps; ++op) {
                    Params p = params(kinds[op % 4], rank, n, t);
                    p.seq = (uint32_t)(op / 4);
                    p.segment_size = 64;
                    p.algorithm = (op / 4) % 2 + 1;
                    p.root = op % n;
                    p.count = kCount;
                    p.counts = bytes.data();
                    const size_t total = p.kind == kKindReduce || p.kind == kKindAllreduce
                                             ? kCount
                                             : kCount * (size_t)n;
                    std::vector<uint32_t> in(total), out(total, 0);
                    for (size_t i = 0; i < total; ++i) {
                        in[i] = val(rank, i, (uint64_t)op);
                    }
                    p.sendbuf = in.data();
                    p.recvbuf = out.data();
                    std::string err;
                    dr_status_t st;
                    size_t first = 0, len = kCount;
                    bool check = true;
                    if (p.kind == kKindReduce) {
                        st = reduce(t, p, nullptr, &err);
                        check = rank == p.root;
                    } else if (p.kind == kKindAllreduce) {
                        p.algorithm = p.algorithm == 1 ? kAlgoRing : kAlgoRd;
                        st = allreduce(t, p, nullptr, &err);
                    } else {
                        st = p.kind == kKindReduceScatter
                                 ? reduce_scatter(t, p, nullptr, &err)
                                 : reduce_scatter_block(t, p, nullptr, &err);
                        first = (size_t)rank * kCount;
                    }
                    bool ok = true;
                    for (size_t i = 0; check && i < len; ++i) {
                        ok = ok && out[i] == want_sum(n, first + i, (uint64_t)op);
                    }
                    if (st != DR_OK || !ok) {
                        fails.add("n=" + std::to_string(n) + " op " + std::to_string(op) + " (" +
                                  kind_name(p.kind) + ") rank " + std::to_string(rank) + ": " +
                                  (st != DR_OK ? err : "wrong data"));
                    }
                }
            },
            120, "reducing kinds interleaved");
        report(fails, net);
    }
}

/* ---- links failing mid-call ---- */

struct Outcome {
    dr_status_t st = DR_OK;
    std::string err;
    bool correct = false;
    /* outlive the rank's thread: a send abandoned after an error may still read them */
    std::vector<uint32_t> in, out;
    Scratch scratch;
};

void check_link_failure(int kind, int algo, int n, size_t count, int root, int a, int b, long after)
{
    fake::Net net(n, kComm);
    net.fail_link(a, b, after);
    std::vector<Outcome> out((size_t)n);
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Params p = params(kind, rank, n, t);
            p.timeout = -1; /* only the abort messages may bring everyone out */
            p.algorithm = algo;
            p.segment_size = 64;
            p.root = root;
            p.count = count;
            Outcome &o = out[(size_t)rank];
            const size_t total = kind == kKindReduce ? count : count * (size_t)n;
            o.in.resize(total);
            o.out.assign(total, 0);
            for (size_t i = 0; i < total; ++i) {
                o.in[i] = val(rank, i, 3);
            }
            p.sendbuf = o.in.data();
            p.recvbuf = o.out.data();
            size_t first = 0;
            bool check = true;
            if (kind == kKindReduce) {
                o.st = reduce(t, p, &o.scratch, &o.err);
                check = rank == root;
            } else {
                o.st = reduce_scatter_block(t, p, &o.scratch, &o.err);
                first = (size_t)rank * count;
            }
            o.correct = true;
            for (size_t i = 0; check && i < count; ++i) {
                o.correct = o.correct && o.out[i] == want_sum(n, first + i, 3);
            }
        },
        60, "link failure");
    fake::check_link_outcomes(out, kind, algo, n, a, b, after, net);
}

void test_reduce_link_failure(void **state)
{
    (void)state;
    /* binomial, root 0 on 6: 5 -> 4 -> 0 loses the subtree {4, 5} */
    check_link_failure(kKindReduce, kReduceBinomial, 6, 3000, 0, 0, 4, 0);
    check_link_failure(kKindReduce, kReduceBinomial, 6, 3000, 0, 4, 5, 8); /* mid-pipeline */
    /* rabenseifner, root 3 on 7: a ring edge mid-pipeline, then a gather edge */
    check_link_failure(kKindReduce, kReduceRabenseifner, 7, 7000, 3, 5, 6, 30);
    check_link_failure(kKindReduce, kReduceRabenseifner, 7, 7000, 3, 1, 3, 6);
    check_link_failure(kKindReduce, kReduceRabenseifner, 2, 7000, 1, 0, 1, 5);
    /* chain, root 2 on 5 (partials 1 -> 0 -> 4 -> 3 -> 2): its last edge into the root,
     * then an earlier one mid-pipeline */
    check_link_failure(kKindReduce, kReduceChain, 5, 7000, 2, 3, 2, 0);
    check_link_failure(kKindReduce, kReduceChain, 5, 7000, 2, 0, 4, 20);
    check_link_failure(kKindReduce, kReduceChain, 2, 7000, 1, 0, 1, 5);
}

void test_rsb_link_failure(void **state)
{
    (void)state;
    check_link_failure(kKindReduceScatterBlock, kReduceScatterRing, 5, 2000, 0, 1, 2, 0);
    check_link_failure(kKindReduceScatterBlock, kReduceScatterRing, 5, 2000, 0, 1, 2, 40);
    check_link_failure(kKindReduceScatterBlock, kReduceScatterHalving, 8, 100, 0, 0, 4, 0);
    /* 6 ranks: 0 folds into 1, then 1 exchanges with 5 (vranks 0 and 3... 0 ^ 2) */
    check_link_failure(kKindReduceScatterBlock, kReduceScatterHalving, 6, 100, 0, 0, 1, 0);
    check_link_failure(kKindReduceScatterBlock, kReduceScatterHalving, 6, 100, 0, 1, 4, 0);
}

/* Argument checks answer without any traffic, alike on every rank. */
void test_invalid_args(void **state)
{
    (void)state;
    uint32_t buf[64] = {0};
    size_t counts[6] = {4, 4, 4, 4, 4, 4};
    struct Case {
        const char *what;
        int kind;
        void (*edit)(Params &);
    } cases[] = {
        {"reduce root out of range", kKindReduce, [](Params &p) { p.root = p.size; }},
        {"reduce unknown algorithm", kKindReduce, [](Params &p) { p.algorithm = 4; }},
        {"reduce no reduction", kKindReduce, [](Params &p) { p.reduce = nullptr; }},
        {"reduce element size 0", kKindReduce, [](Params &p) { p.elem_size = 0; }},
        {"reduce in place off the root", kKindReduce, [](Params &p) { p.sendbuf = nullptr; }},
        {"reduce no recvbuf at the root", kKindReduce,
         [](Params &p) {
             p.root = p.rank;
             p.recvbuf = nullptr;
         }},
        {"reduce overflow", kKindReduce, [](Params &p) { p.count = SIZE_MAX / 2; }},
        {"reduce forced rabenseifner on 2049", kKindReduce,
         [](Params &p) {
             p.size = kRingMaxRanks + 1;
             p.algorithm = kReduceRabenseifner;
         }},
        {"rsb unknown algorithm", kKindReduceScatterBlock, [](Params &p) { p.algorithm = 3; }},
        {"rsb overflow", kKindReduceScatterBlock, [](Params &p) { p.count = SIZE_MAX / 8; }},
        {"rsb no recvbuf", kKindReduceScatterBlock, [](Params &p) { p.recvbuf = nullptr; }},
        {"rs no counts", kKindReduceScatter, [](Params &p) { p.counts = nullptr; }},
        {"rs counts not whole elements", kKindReduceScatter,
         [](Params &p) { const_cast<size_t *>(p.counts)[2] = 5; }},
        {"rs forced ring on 2049", kKindReduceScatter,
         [](Params &p) {
             p.size = kRingMaxRanks + 1;
             p.algorithm = kReduceScatterRing;
             static const std::vector<size_t> many((size_t)kRingMaxRanks + 1, 4);
             p.counts = many.data();
         }},
    };
    fake::Net net(6, kComm);
    fake::FakeTransport t(net, 1);
    for (const Case &c : cases) {
        Params p = params(c.kind, 1, 6, t);
        for (size_t &x : counts) {
            x = 4;
        }
        p.sendbuf = buf;
        p.recvbuf = buf;
        p.count = 8;
        p.counts = counts;
        c.edit(p);
        std::string err;
        const dr_status_t st = c.kind == kKindReduce ? reduce(t, p, nullptr, &err)
                               : c.kind == kKindReduceScatterBlock
                                   ? reduce_scatter_block(t, p, nullptr, &err)
                                   : reduce_scatter(t, p, nullptr, &err);
        assert_int_equal(st, DR_ERR_INVALID);
        assert_false(err.empty());
        print_message("%-40s -> %s\n", c.what, err.c_str());
    }
    assert_int_equal(net.violations().size(), 0);
    assert_int_equal(net.messages(), 0);
    /* auto choices */
    Params p;
    p.size = 6;
    p.elem_size = 4;
    p.count = 100;
    assert_int_equal(reduce_choose(p), kReduceBinomial);
    p.count = 1u << 20; /* 4 MiB: 64 chain segments of 64 KiB on 6 ranks */
    assert_int_equal(reduce_choose(p), kReduceChain);
    p.count = 75000; /* 300000 bytes, under 6 segments of 64 KiB */
    assert_int_equal(reduce_choose(p), kReduceRabenseifner);
    p.count = 1u << 20;
    assert_int_equal(reduce_scatter_choose(p, 4096), kReduceScatterHalving);
    assert_int_equal(reduce_scatter_choose(p, 1u << 22), kReduceScatterRing);
    p.size = kRingMaxRanks + 1;
    assert_int_equal(reduce_choose(p), kReduceBinomial);
    assert_int_equal(reduce_scatter_choose(p, 1u << 22), kReduceScatterHalving);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 3) {
        g_lo = atoi(argv[1]);
        g_hi = atoi(argv[2]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_halving_math),      cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_reduce_table),      cmocka_unit_test(test_reduce_matches_allreduce),
        cmocka_unit_test(test_rsb_table),         cmocka_unit_test(test_rs_table),
        cmocka_unit_test(test_kinds_interleaved), cmocka_unit_test(test_reduce_link_failure),
        cmocka_unit_test(test_rsb_link_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
