/*
 * Bcast, barrier and allgather (mpi_coll/algo/collectives.hpp) over the
 * in-memory threaded transport: the peer math without a network, a table of
 * sizes 1..16 (non-powers of two included), counts 0, 1, odd and large,
 * every root, in place and not, each algorithm forced and auto; collectives
 * of every kind back to back with equal sequence numbers (only the key's kind
 * keeps them apart); and links failing mid-call (every rank returns, the
 * ones that lost data with an error naming the collective, nobody hangs).
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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/barrier_dissemination.hpp"
#include "algo/collectives.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/tree_math.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;
using dualrail::test::Failures;
using fake::report;

namespace {

constexpr uint32_t kComm = 0x4d;
int g_lo = 1, g_hi = 16;
/* The table tests run twice: sends completed on the receiver's acknowledgement, then
 * copied when posted (ucx_mr's small sends: the schedules' engines stay unbuilt, lazy_engine.hpp).
 */
bool g_copy = false;

unsigned char byte_of(int rank, size_t i, uint64_t salt)
{
    return (unsigned char)((rank + 1) * 131 + i * 7 + (i >> 8) * 13 + salt * 29);
}

Params params(int kind, int rank, int n, fake::FakeTransport &t)
{
    return fake::rank_params(kind, rank, n, t, kComm);
}

/* ---- peer math ---- */

void test_tree_math(void **state)
{
    (void)state;
    for (int n = 1; n <= 70; ++n) {
        /* binomial: every relative rank but 0 is exactly one parent's child, subtrees are
         * the contiguous runs the scatter sends, and depth is at most ceil(log2 n) */
        std::vector<int> seen((size_t)n, 0);
        for (int v = 0; v < n; ++v) {
            int ch[40];
            const int k = binomial_children(v, n, ch);
            int covered = 1;
            for (int i = 0; i < k; ++i) {
                assert_true(ch[i] > v && ch[i] < n);
                assert_int_equal(binomial_parent(ch[i]), v);
                assert_true(i == 0 || ch[i] < ch[i - 1]);
                ++seen[(size_t)ch[i]];
                covered += binomial_span(ch[i], n);
            }
            assert_int_equal(covered, binomial_span(v, n));
            /* listed largest first: the runs of the children, smallest first, tile
             * [v + 1, v + span) */
            int next = v + 1;
            for (int i = k - 1; i >= 0; --i) {
                assert_int_equal(ch[i], next);
                next += binomial_span(ch[i], n);
            }
            int depth = 0;
            for (int u = v; u != 0; u = binomial_parent(u)) {
                ++depth;
            }
            assert_true(depth <= log2_ceil(n));
        }
        for (int v = 1; v < n; ++v) {
            assert_int_equal(seen[(size_t)v], 1);
        }
        /* relative ranks round-trip for every root */
        for (int root = 0; root < n; ++root) {
            for (int r = 0; r < n; ++r) {
                assert_int_equal(abs_rank(rel_rank(r, root, n), root, n), r);
            }
            assert_int_equal(rel_rank(root, root, n), 0);
        }
        /* dissemination: after the rounds every rank has heard from every rank */
        std::vector<std::set<int>> heard((size_t)n);
        for (int r = 0; r < n; ++r) {
            heard[(size_t)r].insert(r);
        }
        for (int k = 0; k < log2_ceil(n); ++k) {
            std::vector<std::set<int>> next = heard;
            for (int r = 0; r < n; ++r) {
                assert_int_equal(dissem_from(dissem_to(r, n, k), n, k), r);
                next[(size_t)dissem_to(r, n, k)].insert(heard[(size_t)r].begin(),
                                                        heard[(size_t)r].end());
            }
            heard = next;
        }
        for (int r = 0; r < n; ++r) {
            assert_int_equal(heard[(size_t)r].size(), (size_t)n);
        }
        /* Bruck: tmp[i] of rank r is block (r + i) mod n after the rounds */
        std::vector<std::vector<int>> tmp((size_t)n);
        for (int r = 0; r < n; ++r) {
            tmp[(size_t)r].push_back(r);
        }
        for (int k = 0; k < log2_ceil(n); ++k) {
            std::vector<std::vector<int>> next = tmp;
            for (int r = 0; r < n; ++r) {
                const int from = bruck_from(r, n, k);
                assert_int_equal(bruck_to(from, n, k), r);
                assert_int_equal(tmp[(size_t)from].size(), (size_t)1 << k);
                for (int b = 0; b < bruck_blocks(n, k); ++b) {
                    next[(size_t)r].push_back(tmp[(size_t)from][(size_t)b]);
                }
            }
            tmp = next;
        }
        for (int r = 0; r < n; ++r) {
            assert_int_equal(tmp[(size_t)r].size(), (size_t)n);
            for (int i = 0; i < n; ++i) {
                assert_int_equal(tmp[(size_t)r][(size_t)i], (r + i) % n);
            }
        }
        /* recursive doubling (powers of two): partners agree, runs are adjacent */
        if (is_pow2(n)) {
            for (int r = 0; r < n; ++r) {
                for (int k = 0; k < log2_ceil(n); ++k) {
                    const int q = rd_ag_partner(r, k);
                    assert_int_equal(rd_ag_partner(q, k), r);
                    const int a = rd_ag_first_block(r, k), b = rd_ag_first_block(q, k);
                    assert_int_equal(a > b ? a - b : b - a, 1 << k);
                    assert_true(r >= a && r < a + (1 << k));
                }
            }
        }
        /* the even split covers every byte once */
        for (size_t bytes : {(size_t)0, (size_t)1, (size_t)n - 1, (size_t)70001}) {
            size_t sum = 0;
            for (int i = 0; i < n; ++i) {
                assert_int_equal(even_offset(bytes, n, i), sum);
                sum += even_len(bytes, n, i);
            }
            assert_int_equal(sum, bytes);
        }
    }
    assert_int_equal(pipeline_segments(0, 64), 1);
    assert_int_equal(pipeline_segments(65, 64), 2);
    assert_int_equal(pipeline_segments(1u << 30, 64), kMaxSegments);
}

/* ---- tables ---- */

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

std::vector<Cfg> bcast_configs(int n)
{
    std::vector<Cfg> v;
    for (int algo :
         {(int)kAlgoAuto, (int)kBcastBinomial, (int)kBcastScatterAllgather, (int)kBcastChain}) {
        for (size_t count : {(size_t)0, (size_t)1, (size_t)13, (size_t)1000, (size_t)70001}) {
            for (int root = 0; root < n; ++root) {
                if (count == 70001 && root != 0 && root != n / 2 && root != n - 1) {
                    continue;
                }
                /* small segments reach the many-segment pipelines with little data */
                v.push_back(Cfg{algo, count, root, false,
                                count >= 1000 && root % 2 ? (size_t)256 : (size_t)0});
            }
        }
    }
    return v;
}

void run_bcast_table(int n)
{
    const std::vector<Cfg> cfgs = bcast_configs(n);
    fake::Net net(n, kComm);
    net.copy_sends(g_copy);
    fake::Barrier bar(n);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            for (size_t ci = 0; ci < cfgs.size(); ++ci) {
                const Cfg &c = cfgs[ci];
                std::vector<unsigned char> buf(c.count + 1, 0xa5);
                if (rank == c.root) {
                    for (size_t i = 0; i < c.count; ++i) {
                        buf[i] = byte_of(c.root, i, ci);
                    }
                }
                buf[c.count] = 0x5a;
                Params p = params(kKindBcast, rank, n, t);
                p.recvbuf = buf.data();
                p.count = c.count;
                p.root = c.root;
                p.seq = (uint32_t)ci;
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                bar.wait();
                std::string err;
                const dr_status_t st = bcast(t, p, &err);
                const std::string what = describe("bcast", n, c) + " rank " + std::to_string(rank);
                bool ok = true;
                for (size_t i = 0; i < c.count && ok; ++i) {
                    ok = buf[i] == byte_of(c.root, i, ci);
                }
                if (st != DR_OK) {
                    fails.add(what + ": status " + std::to_string(st) + ": " + err);
                } else if (buf[c.count] != 0x5a) {
                    fails.add(what + ": wrote past the end of the buffer");
                } else if (!ok) {
                    fails.add(what + ": wrong data");
                } else if (!err.empty()) {
                    fails.add(what + ": success with a reason: " + err);
                }
                bar.wait();
                if (rank == 0) {
                    net.forget_keys();
                }
                bar.wait();
            }
        },
        280, "bcast table");
    report(fails, net);
}

std::vector<Cfg> allgather_configs(int n)
{
    std::vector<Cfg> v;
    for (int algo :
         {(int)kAlgoAuto, (int)kAllgatherRing, (int)kAllgatherRd, (int)kAllgatherBruck}) {
        if (algo == kAllgatherRd && !is_pow2(n)) {
            continue;
        }
        for (size_t count : {(size_t)0, (size_t)1, (size_t)3, (size_t)517, (size_t)9000}) {
            for (bool inplace : {false, true}) {
                v.push_back(Cfg{algo, count, 0, inplace,
                                count >= 517 && inplace ? (size_t)128 : (size_t)0});
            }
        }
    }
    return v;
}

void run_allgather_table(int n)
{
    const std::vector<Cfg> cfgs = allgather_configs(n);
    fake::Net net(n, kComm);
    net.copy_sends(g_copy);
    fake::Barrier bar(n);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            for (size_t ci = 0; ci < cfgs.size(); ++ci) {
                const Cfg &c = cfgs[ci];
                const size_t total = c.count * (size_t)n;
                std::vector<unsigned char> send(c.count + 1), recv(total + 1, 0xa5);
                unsigned char *mine =
                    c.inplace ? recv.data() + (size_t)rank * c.count : send.data();
                for (size_t i = 0; i < c.count; ++i) {
                    mine[i] = byte_of(rank, i, ci);
                }
                const std::vector<unsigned char> orig = send;
                recv[total] = 0x5a;
                Params p = params(kKindAllgather, rank, n, t);
                /* MPI_IN_PLACE arrives as nullptr; a pointer to the rank's own block is
                 * in place too */
                p.sendbuf = c.inplace ? (ci % 4 == 1 ? (const void *)mine : nullptr) : send.data();
                p.recvbuf = recv.data();
                p.count = c.count;
                p.seq = (uint32_t)ci;
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                p.small_max_bytes = ci % 3 == 0 ? 1 : 0; /* auto also picks the ring */
                bar.wait();
                std::string err;
                const dr_status_t st = allgather(t, p, nullptr, &err);
                const std::string what =
                    describe("allgather", n, c) + " rank " + std::to_string(rank);
                bool ok = true;
                for (int r = 0; r < n && ok; ++r) {
                    for (size_t i = 0; i < c.count && ok; ++i) {
                        ok = recv[(size_t)r * c.count + i] == byte_of(r, i, ci);
                    }
                }
                if (st != DR_OK) {
                    fails.add(what + ": status " + std::to_string(st) + ": " + err);
                } else if (recv[total] != 0x5a) {
                    fails.add(what + ": wrote past the end of recvbuf");
                } else if (!ok) {
                    fails.add(what + ": wrong data");
                } else if (!c.inplace && send != orig) {
                    fails.add(what + ": sendbuf was modified");
                }
                bar.wait();
                if (rank == 0) {
                    net.forget_keys();
                }
                bar.wait();
            }
        },
        280, "allgather table");
    report(fails, net);
}

/* No rank leaves a barrier before every rank entered it: ranks enter late by turns; with
 * copied sends (ucx_mr's small ones) the barrier runs without its engine until a wait is long
 * (barrier_dissemination.hpp), without them it builds it in every call. */
void run_barrier_table(int n, bool copy)
{
    constexpr int kRounds = 6;
    fake::Net net(n, kComm);
    net.copy_sends(copy);
    Failures fails;
    std::vector<std::atomic<int>> entered(kRounds);
    for (auto &e : entered) {
        e = 0;
    }
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            for (int i = 0; i < kRounds; ++i) {
                if ((rank + i) % n == 0) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                }
                ++entered[(size_t)i];
                Params p = params(kKindBarrier, rank, n, t);
                p.seq = (uint32_t)i;
                std::string err;
                const dr_status_t st = barrier(t, p, &err);
                char what[96];
                snprintf(what, sizeof(what), "barrier n=%d copy=%d round %d rank %d", n, copy, i,
                         rank);
                if (st != DR_OK) {
                    fails.add(std::string(what) + ": " + err);
                } else if (entered[(size_t)i] != n) {
                    fails.add(std::string(what) + ": left before every rank entered");
                }
            }
        },
        120, "barrier table");
    report(fails, net);
}

void test_bcast_table(void **state)
{
    (void)state;
    for (bool copy : {false, true}) {
        g_copy = copy;
        for (int n = g_lo; n <= g_hi; ++n) {
            run_bcast_table(n);
        }
    }
    g_copy = false;
}

void test_allgather_table(void **state)
{
    (void)state;
    for (bool copy : {false, true}) {
        g_copy = copy;
        for (int n = g_lo; n <= g_hi; ++n) {
            run_allgather_table(n);
        }
    }
    g_copy = false;
}

void test_barrier_table(void **state)
{
    (void)state;
    for (int n = g_lo; n <= g_hi; ++n) {
        run_barrier_table(n, false);
        run_barrier_table(n, true);
    }
}

/*
 * Every kind back to back, no barrier between them, all under the same sequence
 * number: fast ranks run ahead into the next collective, and only the key's kind
 * keeps an allgather's messages from matching a bcast's receives.
 */
void sum_u64(const void *in, void *inout, size_t count, void *)
{
    for (size_t i = 0; i < count; ++i) {
        static_cast<uint64_t *>(inout)[i] += static_cast<const uint64_t *>(in)[i];
    }
}

void test_kinds_interleaved(void **state)
{
    (void)state;
    for (int n : {2, 3, 5, 8, 13}) {
        constexpr int kOps = 16;
        constexpr size_t kCount = 600; /* bytes (bcast, allgather) or u64 (allreduce) */
        fake::Net net(n, kComm);
        Failures fails;
        fake::run_ranks(
            n,
            [&](int rank) {
                fake::FakeTransport t(net, rank);
                for (int op = 0; op < kOps; ++op) {
                    Params p = params(op % 4, rank, n, t);
                    /* each kind counts its own calls: the four kinds of a round share a
                     * sequence number, and only the kind tells them apart */
                    p.seq = (uint32_t)(op / 4);
                    p.segment_size = 64;
                    p.algorithm = (op / 4) % 2 + 1; /* ring / rd; binomial / scatter-allgather */
                    std::string err;
                    dr_status_t st = DR_OK;
                    bool ok = true;
                    if (p.kind == kKindAllreduce) {
                        std::vector<uint64_t> v(kCount, (uint64_t)rank + (uint64_t)op);
                        p.recvbuf = v.data();
                        p.count = kCount;
                        p.elem_size = 8;
                        p.reduce = sum_u64;
                        st = allreduce(t, p, nullptr, &err);
                        const uint64_t want =
                            (uint64_t)n * (uint64_t)(n - 1) / 2 + (uint64_t)(op * n);
                        for (uint64_t x : v) {
                            ok = ok && x == want;
                        }
                    } else if (p.kind == kKindBcast) {
                        std::vector<unsigned char> b(kCount, 0);
                        p.root = op % n;
                        if (rank == p.root) {
                            for (size_t i = 0; i < kCount; ++i) {
                                b[i] = byte_of(p.root, i, (uint64_t)op);
                            }
                        }
                        p.recvbuf = b.data();
                        p.count = kCount;
                        st = bcast(t, p, &err);
                        for (size_t i = 0; i < kCount; ++i) {
                            ok = ok && b[i] == byte_of(p.root, i, (uint64_t)op);
                        }
                    } else if (p.kind == kKindBarrier) {
                        st = barrier(t, p, &err);
                    } else {
                        std::vector<unsigned char> b(kCount * (size_t)n, 0);
                        for (size_t i = 0; i < kCount; ++i) {
                            b[(size_t)rank * kCount + i] = byte_of(rank, i, (uint64_t)op);
                        }
                        p.recvbuf = b.data();
                        p.count = kCount;
                        p.algorithm = is_pow2(n) || p.algorithm != kAllgatherRd ? p.algorithm
                                                                                : kAllgatherBruck;
                        st = allgather(t, p, nullptr, &err);
                        for (int r = 0; r < n; ++r) {
                            for (size_t i = 0; i < kCount; ++i) {
                                ok = ok && b[(size_t)r * kCount + i] == byte_of(r, i, (uint64_t)op);
                            }
                        }
                    }
                    char what[96];
                    snprintf(what, sizeof(what), "n=%d op %d (%s) rank %d", n, op,
                             kind_name(op % 4), rank);
                    if (st != DR_OK || !ok) {
                        fails.add(std::string(what) + (st != DR_OK ? ": " + err : ": wrong data"));
                    }
                }
            },
            120, "kinds interleaved");
        report(fails, net);
    }
}

/* ---- links failing mid-call ---- */

struct Outcome {
    dr_status_t st = DR_OK;
    std::string err;
    bool correct = false;
    /* outlives the rank's thread: a send abandoned after an error may still read it */
    std::vector<unsigned char> buf;
};

/*
 * One collective of `kind` on n ranks with link a-b failing after `after`
 * messages, no timeout: every rank must return (run_ranks aborts on a hang),
 * the link's ends with an error naming the collective and a peer, and any
 * rank that reports success must hold the right data.
 */
void check_link_failure(int kind, int algo, int n, size_t count, int root, int a, int b, long after,
                        bool copy = false)
{
    fake::Net net(n, kComm);
    net.copy_sends(copy);
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
            Outcome &o = out[(size_t)rank];
            o.buf.assign(count * (size_t)n, 0);
            std::vector<unsigned char> &buf = o.buf;
            if (kind == kKindBcast) {
                if (rank == root) {
                    for (size_t i = 0; i < count; ++i) {
                        buf[i] = byte_of(root, i, 1);
                    }
                }
                p.recvbuf = buf.data();
                p.count = count;
                o.st = bcast(t, p, &o.err);
                o.correct = true;
                for (size_t i = 0; i < count; ++i) {
                    o.correct = o.correct && buf[i] == byte_of(root, i, 1);
                }
            } else if (kind == kKindAllgather) {
                for (size_t i = 0; i < count; ++i) {
                    buf[(size_t)rank * count + i] = byte_of(rank, i, 1);
                }
                p.recvbuf = buf.data();
                p.count = count;
                o.st = allgather(t, p, nullptr, &o.err);
                o.correct = true;
                for (int r = 0; r < n; ++r) {
                    for (size_t i = 0; i < count; ++i) {
                        o.correct = o.correct && buf[(size_t)r * count + i] == byte_of(r, i, 1);
                    }
                }
            } else {
                o.st = barrier(t, p, &o.err);
                o.correct = true;
            }
        },
        60, "link failure");
    fake::check_link_outcomes(out, kind, algo, n, a, b, after, net);
}

void test_bcast_link_failure(void **state)
{
    (void)state;
    /* binomial, root 0 on 6: 0 -> 4 -> 5 loses the subtree {4, 5} */
    check_link_failure(kKindBcast, kBcastBinomial, 6, 3000, 0, 0, 4, 0);
    check_link_failure(kKindBcast, kBcastBinomial, 6, 3000, 0, 4, 5, 8); /* mid-pipeline */
    /* scatter-allgather, root 3 on 7: a scatter edge, then a ring edge mid-pipeline */
    check_link_failure(kKindBcast, kBcastScatterAllgather, 7, 7000, 3, 3, 4, 0);
    check_link_failure(kKindBcast, kBcastScatterAllgather, 7, 7000, 3, 5, 6, 30);
    check_link_failure(kKindBcast, kBcastScatterAllgather, 2, 7000, 1, 0, 1, 5);
    /* chain, root 2 on 5 (chain 2 -> 3 -> 4 -> 0 -> 1): its first edge, then a later one
     * mid-pipeline (7000 bytes in check_link_failure's 64-byte segments) */
    check_link_failure(kKindBcast, kBcastChain, 5, 7000, 2, 2, 3, 0);
    check_link_failure(kKindBcast, kBcastChain, 5, 7000, 2, 4, 0, 20);
    check_link_failure(kKindBcast, kBcastChain, 2, 7000, 1, 0, 1, 5);
}

void test_allgather_link_failure(void **state)
{
    (void)state;
    check_link_failure(kKindAllgather, kAllgatherRing, 5, 2000, 0, 1, 2, 0);
    check_link_failure(kKindAllgather, kAllgatherRing, 5, 2000, 0, 1, 2, 50);
    check_link_failure(kKindAllgather, kAllgatherRd, 8, 100, 0, 0, 4, 0);
    check_link_failure(kKindAllgather, kAllgatherBruck, 6, 100, 0, 0, 1, 0);
    check_link_failure(kKindAllgather, kAllgatherBruck, 6, 100, 0, 2, 4, 1);
}

void test_barrier_link_failure(void **state)
{
    (void)state;
    check_link_failure(kKindBarrier, kAlgoAuto, 5, 0, 0, 0, 1, 0);
    check_link_failure(kKindBarrier, kAlgoAuto, 7, 0, 0, 2, 6, 0);
    check_link_failure(kKindBarrier, kAlgoAuto, 2, 0, 0, 0, 1, 0);
    /* Copied sends (the barrier's fast mode): a lost token fails its receiver only, so the
     * links where both ends wait for the other: 0-1 on 5 (rounds 0 and 2) and on 2. */
    check_link_failure(kKindBarrier, kAlgoAuto, 5, 0, 0, 0, 1, 0, true);
    check_link_failure(kKindBarrier, kAlgoAuto, 2, 0, 0, 0, 1, 0, true);
}

/* n ranks run `calls` barriers (rank `late` enters each `late_ms` late, -1: none) over a
 * network that copies sends or not; how many calls built the engine. */
uint64_t barrier_slow_run(int n, int calls, bool copy, int late, int late_ms)
{
    fake::Net net(n, kComm);
    net.copy_sends(copy);
    Failures fails;
    const uint64_t before = lazy_slow_calls();
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            for (int i = 0; i < calls; ++i) {
                if (rank == late) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
                }
                Params p = params(kKindBarrier, rank, n, t);
                p.seq = (uint32_t)i;
                std::string err;
                if (barrier(t, p, &err) != DR_OK) {
                    fails.add("barrier " + std::to_string(i) + " rank " + std::to_string(rank) +
                              ": " + err);
                }
            }
        },
        120, "barrier slow run");
    report(fails, net);
    return lazy_slow_calls() - before;
}

/* Which barriers build the engine: with copied sends few (a thread descheduled past
 * kAbortListenAfter sends some into slow mode), a late rank's partners every time, and every
 * call above 16 ranks (the engine's inline storage). (Without copies a send completes at once
 * when the peer's receive is posted already, slow mode otherwise: no fixed count.) */
void test_barrier_modes(void **state)
{
    (void)state;
    constexpr int kCalls = 40;
    for (int n : {2, 5, 16}) {
        const uint64_t fast = barrier_slow_run(n, kCalls, true, -1, 0);
        const uint64_t slow = barrier_slow_run(n, kCalls, false, -1, 0);
        print_message("n=%d: %llu of %d calls built the engine with copied sends, %llu without\n",
                      n, (unsigned long long)fast, kCalls * n, (unsigned long long)slow);
        assert_true(fast < (uint64_t)kCalls * (uint64_t)n);
    }
    const uint64_t late = barrier_slow_run(4, 6, true, 3, 20);
    print_message("a rank 20 ms late, 6 calls x 4 ranks: %llu built the engine\n",
                  (unsigned long long)late);
    assert_true(late >= 6 * 3); /* every other rank waited that long in every call */
    assert_int_equal(barrier_slow_run(17, 3, true, -1, 0), 3 * 17);
}

/* Small bcasts (binomial) and allgathers (recursive doubling, Bruck) over copied sends run
 * without building their engines (lazy_engine.hpp), exact; a thread descheduled past
 * kAbortListenAfter may send a few into slow mode, a path that never runs fast sends all. */
void test_small_lazy(void **state)
{
    (void)state;
    for (int n : {4, 5}) {
        constexpr int kCalls = 30;
        constexpr size_t kCount = 8;
        fake::Net net(n, kComm);
        net.copy_sends(true);
        Failures fails;
        const uint64_t before = lazy_slow_calls();
        fake::run_ranks(
            n,
            [&](int rank) {
                fake::FakeTransport t(net, rank);
                for (int c = 0; c < kCalls; ++c) {
                    std::string err;
                    Params p = params(kKindBcast, rank, n, t);
                    p.seq = (uint32_t)c;
                    p.root = c % n;
                    std::vector<unsigned char> b(kCount * (size_t)n, 0);
                    for (size_t i = 0; rank == p.root && i < kCount; ++i) {
                        b[i] = byte_of(p.root, i, (uint64_t)c);
                    }
                    p.recvbuf = b.data();
                    p.count = kCount;
                    bool ok = bcast(t, p, &err) == DR_OK;
                    for (size_t i = 0; ok && i < kCount; ++i) {
                        ok = b[i] == byte_of(p.root, i, (uint64_t)c);
                    }
                    Params q = params(kKindAllgather, rank, n, t);
                    q.seq = (uint32_t)c;
                    std::fill(b.begin(), b.end(), 0);
                    for (size_t i = 0; i < kCount; ++i) {
                        b[(size_t)rank * kCount + i] = byte_of(rank, i, (uint64_t)c);
                    }
                    q.recvbuf = b.data();
                    q.count = kCount;
                    ok = ok && allgather(t, q, nullptr, &err) == DR_OK;
                    for (int r = 0; ok && r < n; ++r) {
                        for (size_t i = 0; i < kCount; ++i) {
                            ok = ok && b[(size_t)r * kCount + i] == byte_of(r, i, (uint64_t)c);
                        }
                    }
                    if (!ok) {
                        fails.add("n=" + std::to_string(n) + " call " + std::to_string(c) +
                                  " rank " + std::to_string(rank) + ": " +
                                  (err.empty() ? "wrong data" : err));
                        return;
                    }
                }
            },
            120, "small lazy");
        report(fails, net);
        const uint64_t slow = lazy_slow_calls() - before;
        print_message("n=%d: %llu of %d calls built their engine\n", n, (unsigned long long)slow,
                      2 * kCalls * n);
        assert_true(slow < (uint64_t)(2 * kCalls * n));
    }
}

/* A rank that never comes: the others time out in fast mode's wait, not hang. */
void test_barrier_timeout(void **state)
{
    (void)state;
    fake::Net net(3, kComm);
    net.copy_sends(true);
    std::vector<dr_status_t> st(3, DR_OK);
    std::vector<std::string> err(3);
    const auto t0 = std::chrono::steady_clock::now();
    fake::run_ranks(
        3,
        [&](int rank) {
            if (rank == 2) {
                return;
            }
            fake::FakeTransport t(net, rank);
            Params p = params(kKindBarrier, rank, 3, t);
            p.timeout = 0.3;
            st[(size_t)rank] = barrier(t, p, &err[(size_t)rank]);
        },
        60, "barrier timeout");
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int r = 0; r < 2; ++r) {
        print_message("rank %d: %s: %s\n", r, dr_status_str(st[(size_t)r]), err[(size_t)r].c_str());
        assert_int_not_equal(st[(size_t)r], DR_OK);
    }
    /* both wait for rank 2 (rounds 0 and 1): the first to time out names it, the other may
     * learn of it from that rank's abort (whose status is the timeout too) */
    const int first = err[0].find("no progress") != std::string::npos ? 0 : 1;
    assert_int_equal(st[0], DR_ERR_TIMEOUT);
    assert_int_equal(st[1], DR_ERR_TIMEOUT);
    assert_true(err[(size_t)first].find("no progress") != std::string::npos);
    assert_true(err[(size_t)first].find("peer rank 2") != std::string::npos);
    assert_true(secs >= 0.3 && secs < 10);
}

/* Argument checks answer without any traffic, alike on every rank. */
void test_invalid_args(void **state)
{
    (void)state;
    unsigned char buf[64] = {0};
    struct Case {
        const char *what;
        int kind;
        void (*edit)(Params &);
    } cases[] = {
        {"bcast root out of range", kKindBcast, [](Params &p) { p.root = p.size; }},
        {"bcast negative root", kKindBcast, [](Params &p) { p.root = -1; }},
        {"bcast unknown algorithm", kKindBcast, [](Params &p) { p.algorithm = 4; }},
        {"bcast no buffer", kKindBcast, [](Params &p) { p.recvbuf = nullptr; }},
        {"bcast forced scatter-allgather on 2049", kKindBcast,
         [](Params &p) {
             p.size = kRingMaxRanks + 1;
             p.algorithm = kBcastScatterAllgather;
         }},
        {"allgather rd on 6 ranks", kKindAllgather, [](Params &p) { p.algorithm = kAllgatherRd; }},
        {"allgather unknown algorithm", kKindAllgather, [](Params &p) { p.algorithm = 4; }},
        {"allgather overflow", kKindAllgather, [](Params &p) { p.count = SIZE_MAX / 2; }},
        {"allgather no buffer", kKindAllgather, [](Params &p) { p.recvbuf = nullptr; }},
        {"barrier rank out of range", kKindBarrier, [](Params &p) { p.rank = 6; }},
        {"comm id > 16 bits", kKindBarrier, [](Params &p) { p.comm_id = 0x10000; }},
        {"unknown kind", 9, [](Params &) {}},
    };
    fake::Net net(6, kComm);
    fake::FakeTransport t(net, 1);
    for (const Case &c : cases) {
        Params p = params(c.kind, 1, 6, t);
        p.recvbuf = buf;
        p.count = 8;
        c.edit(p);
        std::string err;
        const int k = c.kind == 9 ? kKindBcast : c.kind;
        p.kind = c.kind;
        const dr_status_t st = k == kKindBcast     ? bcast(t, p, &err)
                               : k == kKindBarrier ? barrier(t, p, &err)
                                                   : allgather(t, p, nullptr, &err);
        assert_int_equal(st, DR_ERR_INVALID);
        assert_false(err.empty());
        print_message("%-40s -> %s\n", c.what, err.c_str());
    }
    /* nothing was sent: a rank that posts first would leave rank 1's mailbox non-empty */
    assert_int_equal(net.violations().size(), 0);
    /* auto choices */
    Params p;
    p.size = 6;
    p.count = 100;
    assert_int_equal(bcast_choose(p), kBcastBinomial);
    p.count = 1u << 20; /* 16 chain segments of 64 KiB on 6 ranks: the chain */
    assert_int_equal(bcast_choose(p), kBcastChain);
    p.count = 300000; /* under 6 segments of 64 KiB */
    assert_int_equal(bcast_choose(p), kBcastScatterAllgather);
    p.segment_size = 4096; /* segments capped: the chain again */
    assert_int_equal(bcast_choose(p), kBcastChain);
    p.segment_size = 0;
    p.size = kRingMaxRanks + 1; /* chain fill too long, ring steps too many: the tree */
    assert_int_equal(bcast_choose(p), kBcastBinomial);
    p.size = 6;
    p.count = 100;
    assert_int_equal(allgather_choose(p), kAllgatherBruck);
    p.size = 8;
    assert_int_equal(allgather_choose(p), kAllgatherRd);
    p.count = 1u << 20;
    assert_int_equal(allgather_choose(p), kAllgatherRing);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 3) {
        g_lo = atoi(argv[1]);
        g_hi = atoi(argv[2]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_math),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_bcast_table),
        cmocka_unit_test(test_allgather_table),
        cmocka_unit_test(test_barrier_table),
        cmocka_unit_test(test_kinds_interleaved),
        cmocka_unit_test(test_bcast_link_failure),
        cmocka_unit_test(test_allgather_link_failure),
        cmocka_unit_test(test_barrier_link_failure),
        cmocka_unit_test(test_barrier_modes),
        cmocka_unit_test(test_barrier_timeout),
        cmocka_unit_test(test_small_lazy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
