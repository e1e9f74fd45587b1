/*
 * Alltoall and alltoallv (mpi_coll/algo/alltoall.hpp) over the in-memory
 * threaded transport: the pairwise and Bruck peer math as pure functions; a
 * table of sizes (non-powers of two included) with counts 0, 1, odd and
 * large, each algorithm forced and auto, windows of 1, 2 and all steps, in
 * place and not; alltoallv with skewed per-pair counts (zeros, one hot pair,
 * gaps between displacements) and in place; and links failing mid-call
 * (every rank returns, the link's ends with an error naming the collective,
 * nobody hangs, a rank that reports success holds the right data).
 *
 * Arguments: [lo hi] the rank counts of the table tests (default 1 12); or "many": only
 * alltoallv on 4097 ranks (pairwise steps past the key's step field).
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

#include "algo/alltoall.hpp"
#include "algo/alltoall_math.hpp"
#include "algo/engine.hpp"
#include "algo/tree_math.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;
using dualrail::test::Failures;
using fake::report;

namespace {

constexpr uint32_t kComm = 0x4e;
int g_lo = 1, g_hi = 12;

/* What rank src sends rank dst at byte i of their pair (an independent reference). */
unsigned char byte_of(int src, int dst, size_t i, uint64_t salt)
{
    return (unsigned char)((src + 1) * 131 + (dst + 3) * 71 + i * 7 + (i >> 8) * 13 + salt * 29);
}

Params params(int kind, int rank, int n, fake::FakeTransport &t)
{
    return fake::rank_params(kind, rank, n, t, kComm);
}

/* ---- peer math ---- */

void test_alltoall_math(void **state)
{
    (void)state;
    /* pairwise keys: every step of the largest communicator its own (step, block), the step
     * field never the abort step nor past 12 bits, the block field within 12 bits */
    for (long long s = 1; s <= kPairwiseMaxSteps; ++s) {
        const uint32_t ks = pairwise_key_step((int)s), kb = pairwise_key_block((int)s);
        if (ks < 1 || ks >= kAbortStep || kb > DR_KEY_MASK_(DR_KEY_BLOCK_BITS) ||
            (long long)kb * kPairwiseStepSpan + ks != s) {
            fail_msg("pairwise step %lld: key step %u block %u", s, ks, kb);
        }
    }
    assert_int_equal(kAlltoallMaxRanks - 1, kPairwiseMaxSteps);
    for (int n = 1; n <= 70; ++n) {
        /* pairwise: each step a permutation, every ordered pair met exactly once */
        std::vector<int> met((size_t)n * (size_t)n, 0);
        for (int s = 1; s < n; ++s) {
            std::vector<int> hit((size_t)n, 0);
            for (int r = 0; r < n; ++r) {
                const int to = pairwise_to(r, n, s);
                assert_int_not_equal(to, r);
                assert_int_equal(pairwise_from(to, n, s), r);
                ++hit[(size_t)to];
                ++met[(size_t)r * (size_t)n + (size_t)to];
            }
            for (int q = 0; q < n; ++q) {
                assert_int_equal(hit[(size_t)q], 1);
            }
        }
        for (int r = 0; r < n; ++r) {
            for (int q = 0; q < n; ++q) {
                assert_int_equal(met[(size_t)r * (size_t)n + (size_t)q], r == q ? 0 : 1);
            }
        }
        /* Bruck: track (source, destination) of every index through the rounds */
        const int rounds = log2_ceil(n);
        struct Blk {
            int src, dst;
        };
        std::vector<std::vector<Blk>> tmp((size_t)n);
        for (int r = 0; r < n; ++r) {
            for (int i = 0; i < n; ++i) {
                tmp[(size_t)r].push_back(Blk{r, (r + i) % n});
            }
        }
        int maxb = 0;
        for (int k = 0; k < rounds; ++k) {
            int count = 0;
            for (int i = 0; i < n; ++i) {
                count += (i >> k) & 1;
            }
            assert_int_equal(bruck_a2a_blocks(n, k), count);
            maxb = count > maxb ? count : maxb;
            std::vector<std::vector<Blk>> next = tmp;
            for (int r = 0; r < n; ++r) {
                const int from = bruck_a2a_from(r, n, k);
                assert_int_equal(bruck_a2a_to(from, n, k), r);
                for (int i = 0; i < n; ++i) {
                    if ((i >> k) & 1) {
                        next[(size_t)r][(size_t)i] = tmp[(size_t)from][(size_t)i];
                    }
                }
            }
            tmp = next;
        }
        assert_int_equal(bruck_a2a_max_blocks(n, rounds), maxb);
        for (int q = 0; q < n; ++q) {
            std::vector<int> placed((size_t)n, 0);
            for (int i = 0; i < n; ++i) {
                const Blk b = tmp[(size_t)q][(size_t)i];
                assert_int_equal(b.dst, q);
                assert_int_equal(bruck_a2a_final_block(q, n, i), b.src);
                ++placed[(size_t)b.src];
            }
            for (int s = 0; s < n; ++s) {
                assert_int_equal(placed[(size_t)s], 1);
            }
        }
    }
    Params p;
    p.size = 5;
    p.small_max_bytes = 0; /* alltoall's own default (Params' is the other kinds') */
    p.count = kDefaultAlltoallSmallMaxBytes;
    assert_int_equal(alltoall_choose(p), kAlltoallBruck);
    p.count = kDefaultAlltoallSmallMaxBytes + 1;
    assert_int_equal(alltoall_choose(p), kAlltoallPairwise);
    p.small_max_bytes = 1 << 20;
    assert_int_equal(alltoall_choose(p), kAlltoallBruck);
    p.algorithm = kAlltoallPairwise;
    assert_int_equal(alltoall_choose(p), kAlltoallPairwise);
}

/* ---- alltoall table ---- */

struct Cfg {
    int algo;
    size_t count;
    bool inplace;
    int window;
    size_t seg;
};

std::vector<Cfg> alltoall_configs()
{
    std::vector<Cfg> v;
    for (int algo : {(int)kAlgoAuto, (int)kAlltoallPairwise, (int)kAlltoallBruck}) {
        for (size_t count : {(size_t)0, (size_t)1, (size_t)7, (size_t)1000, (size_t)5003}) {
            for (bool inplace : {false, true}) {
                for (int window : {1, 2, 0, 64}) {
                    if (algo == kAlltoallBruck && window != 0) {
                        continue;
                    }
                    /* small segments reach the many-segment pipeline with little data */
                    v.push_back(Cfg{algo, count, inplace, window,
                                    count >= 1000 && window != 2 ? (size_t)300 : (size_t)0});
                }
            }
        }
    }
    return v;
}

void run_alltoall_table(int n)
{
    const std::vector<Cfg> cfgs = alltoall_configs();
    fake::Net net(n, kComm);
    fake::Barrier bar(n);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Scratch scratch;
            for (size_t ci = 0; ci < cfgs.size(); ++ci) {
                const Cfg &c = cfgs[ci];
                const size_t total = c.count * (size_t)n;
                std::vector<unsigned char> send(total + 1), recv(total + 1, 0xa5);
                unsigned char *src = c.inplace ? recv.data() : send.data();
                for (int q = 0; q < n; ++q) {
                    for (size_t i = 0; i < c.count; ++i) {
                        src[(size_t)q * c.count + i] = byte_of(rank, q, i, ci);
                    }
                }
                const std::vector<unsigned char> orig = send;
                recv[total] = 0x5a;
                Params p = params(kKindAlltoall, rank, n, t);
                /* MPI_IN_PLACE arrives as nullptr; sendbuf == recvbuf is in place too */
                p.sendbuf =
                    c.inplace ? (ci % 2 ? (const void *)recv.data() : nullptr) : send.data();
                p.recvbuf = recv.data();
                p.count = c.count;
                p.seq = (uint32_t)ci;
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                p.small_max_bytes = ci % 3 == 0 ? 1 : 0; /* auto picks either */
                bar.wait();
                std::string err;
                const dr_status_t st =
                    alltoall(t, p, c.window, ci % 4 == 0 ? nullptr : &scratch, &err);
                char what[160];
                snprintf(what, sizeof(what),
                         "alltoall n=%d algo=%d count=%zu %s window=%d seg=%zu rank %d", n, c.algo,
                         c.count, c.inplace ? "in place" : "out of place", c.window, c.seg, rank);
                bool ok = true;
                for (int q = 0; q < n && ok; ++q) {
                    for (size_t i = 0; i < c.count && ok; ++i) {
                        ok = recv[(size_t)q * c.count + i] == byte_of(q, rank, i, ci);
                    }
                }
                if (st != DR_OK) {
                    fails.add(std::string(what) + ": status " + std::to_string(st) + ": " + err);
                } else if (recv[total] != 0x5a) {
                    fails.add(std::string(what) + ": wrote past the end of recvbuf");
                } else if (!ok) {
                    fails.add(std::string(what) + ": wrong data");
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
        280, "alltoall table");
    report(fails, net);
}

void test_alltoall_table(void **state)
{
    (void)state;
    for (int n = g_lo; n <= g_hi; ++n) {
        run_alltoall_table(n);
    }
}

/* ---- alltoallv table ---- */

/* Bytes rank s sends rank d in pattern `pat` (every rank computes the same matrix). */
size_t vcount(int pat, int s, int d, int n, uint64_t salt)
{
    const uint64_t h = (uint64_t)(s * 7919 + d * 104729 + (int)salt * 31 + 17) * 2654435761u;
    switch (pat) {
    case 0: /* skewed: a few big pairs, many small, some empty */
        return h % 5 == 0 ? 0 : h % 7 == 0 ? 3000 + h % 2000 : h % 97;
    case 1: /* one hot destination (an expert every token routes to) */
        return d == (int)(salt % (uint64_t)n) ? 4000 + (size_t)s * 13 : (size_t)(h % 3);
    case 2: /* symmetric (in place needs counts[s][d] == counts[d][s]) */
        return vcount(0, s < d ? s : d, s < d ? d : s, n, salt);
    default: /* everything empty */
        return 0;
    }
}

void run_alltoallv_table(int n)
{
    constexpr int kCases = 12;
    fake::Net net(n, kComm);
    fake::Barrier bar(n);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Scratch scratch;
            for (int ci = 0; ci < kCases; ++ci) {
                const int pat = ci % 4;
                const bool inplace = pat == 2 && ci % 8 == 2;
                const int window = ci % 3 == 0 ? 1 : ci % 3 == 1 ? 0 : n;
                std::vector<size_t> sc((size_t)n), sd((size_t)n), rc((size_t)n), rd((size_t)n);
                /* gaps between the regions, and the send regions in reverse order */
                size_t so = 0, ro = 5;
                for (int q = n - 1; q >= 0; --q) {
                    sc[(size_t)q] = vcount(pat, rank, q, n, (uint64_t)ci);
                    sd[(size_t)q] = so;
                    so += sc[(size_t)q] + 3;
                }
                for (int q = 0; q < n; ++q) {
                    rc[(size_t)q] = vcount(pat, q, rank, n, (uint64_t)ci);
                    rd[(size_t)q] = ro;
                    ro += rc[(size_t)q] + (size_t)(q % 2) * 11;
                }
                if (inplace) {
                    sd = rd;
                }
                std::vector<unsigned char> send(so + 1), recv(ro + 1, 0xa5);
                unsigned char *src = inplace ? recv.data() : send.data();
                for (int q = 0; q < n; ++q) {
                    for (size_t i = 0; i < sc[(size_t)q]; ++i) {
                        src[sd[(size_t)q] + i] = byte_of(rank, q, i, (uint64_t)ci);
                    }
                }
                const std::vector<unsigned char> before = recv;
                const std::vector<unsigned char> orig = send;
                Params p = params(kKindAlltoallv, rank, n, t);
                p.sendbuf = inplace ? nullptr : send.data();
                p.recvbuf = recv.data();
                p.seq = (uint32_t)ci;
                p.segment_size = ci % 2 ? 512 : 0;
                /* in place, MPI ignores the send counts and displacements: pass garbage */
                const std::vector<size_t> junk((size_t)n, (size_t)1 << 40);
                VLayout v;
                v.scounts = inplace ? junk.data() : sc.data();
                v.sdispls = inplace ? junk.data() : sd.data();
                v.rcounts = rc.data();
                v.rdispls = rd.data();
                bar.wait();
                std::string err;
                const dr_status_t st = alltoallv(t, p, v, window, &scratch, &err);
                char what[160];
                snprintf(what, sizeof(what),
                         "alltoallv n=%d case %d pattern %d %s window=%d rank %d", n, ci, pat,
                         inplace ? "in place" : "out of place", window, rank);
                /* every received byte right, every gap byte untouched */
                std::vector<unsigned char> want = before;
                for (int q = 0; q < n; ++q) {
                    for (size_t i = 0; i < rc[(size_t)q]; ++i) {
                        want[rd[(size_t)q] + i] = byte_of(q, rank, i, (uint64_t)ci);
                    }
                }
                if (st != DR_OK) {
                    fails.add(std::string(what) + ": status " + std::to_string(st) + ": " + err);
                } else if (recv != want) {
                    fails.add(std::string(what) + ": wrong data");
                } else if (!inplace && send != orig) {
                    fails.add(std::string(what) + ": sendbuf was modified");
                }
                bar.wait();
                if (rank == 0) {
                    net.forget_keys();
                }
                bar.wait();
            }
        },
        200, "alltoallv table");
    report(fails, net);
}

void test_alltoallv_table(void **state)
{
    (void)state;
    for (int n = g_lo; n <= g_hi; ++n) {
        run_alltoallv_table(n);
    }
}

/* ---- links failing mid-call ---- */

struct Outcome {
    dr_status_t st = DR_OK;
    std::string err;
    bool correct = false;
    /* outlive the rank's thread: a send abandoned after an error may still read them */
    std::vector<unsigned char> send, recv;
    std::vector<size_t> sc, sd, rc, rd;
    Scratch scratch;
};

void check_link_failure(int kind, int algo, int n, size_t count, int a, int b, long after,
                        int window)
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
            Outcome &o = out[(size_t)rank];
            o.send.assign(count * (size_t)n, 0);
            o.recv.assign(count * (size_t)n, 0);
            for (int q = 0; q < n; ++q) {
                for (size_t i = 0; i < count; ++i) {
                    o.send[(size_t)q * count + i] = byte_of(rank, q, i, 1);
                }
            }
            p.sendbuf = o.send.data();
            p.recvbuf = o.recv.data();
            if (kind == kKindAlltoall) {
                p.count = count;
                o.st = alltoall(t, p, window, &o.scratch, &o.err);
            } else {
                for (int q = 0; q < n; ++q) {
                    o.sc.push_back(count);
                    o.sd.push_back((size_t)q * count);
                }
                o.rc = o.sc;
                o.rd = o.sd;
                VLayout v;
                v.scounts = o.sc.data();
                v.sdispls = o.sd.data();
                v.rcounts = o.rc.data();
                v.rdispls = o.rd.data();
                o.st = alltoallv(t, p, v, window, &o.scratch, &o.err);
            }
            o.correct = true;
            for (int q = 0; q < n; ++q) {
                for (size_t i = 0; i < count; ++i) {
                    o.correct =
                        o.correct && o.recv[(size_t)q * count + i] == byte_of(q, rank, i, 1);
                }
            }
        },
        60, "link failure");
    int errors = 0;
    for (int r = 0; r < n; ++r) {
        const Outcome &o = out[(size_t)r];
        if (o.st != DR_OK) {
            ++errors;
            assert_true(o.err.find('\n') == std::string::npos);
            assert_true(o.err.find(std::string(kind_name(kind)) + ", rank " + std::to_string(r)) !=
                        std::string::npos);
            assert_true(o.err.find("peer rank") != std::string::npos);
        } else {
            assert_true(o.correct);
        }
        if (r == a || r == b) {
            assert_int_not_equal(o.st, DR_OK);
        }
    }
    print_message("%s algo %d n=%d link %d-%d after %ld window %d: %d of %d ranks failed; rank %d: "
                  "%s\n",
                  kind_name(kind), algo, n, a, b, after, window, errors, n, b,
                  out[(size_t)b].err.c_str());
    for (const std::string &v : net.violations()) {
        print_error("transport contract: %s\n", v.c_str());
    }
    assert_int_equal(net.violations().size(), 0);
}

void test_alltoall_link_failure(void **state)
{
    (void)state;
    check_link_failure(kKindAlltoall, kAlltoallPairwise, 5, 2000, 1, 2, 0, 1);
    check_link_failure(kKindAlltoall, kAlltoallPairwise, 5, 2000, 1, 2, 20, 4); /* mid-pipeline */
    check_link_failure(kKindAlltoall, kAlltoallPairwise, 2, 2000, 0, 1, 10, 0);
    check_link_failure(kKindAlltoall, kAlltoallBruck, 6, 100, 0, 1, 0, 0);
    /* 7 ranks: 2 -> 4 is round 1's only message over that link */
    check_link_failure(kKindAlltoall, kAlltoallBruck, 7, 100, 2, 4, 0, 0);
    check_link_failure(kKindAlltoall, kAlltoallBruck, 7, 100, 2, 3, 1, 0);
}

void test_alltoallv_link_failure(void **state)
{
    (void)state;
    check_link_failure(kKindAlltoallv, kAlgoAuto, 4, 3000, 0, 3, 0, 2);
    check_link_failure(kKindAlltoallv, kAlgoAuto, 6, 3000, 2, 5, 30, 5);
}

/*
 * More ranks than the key's step field has steps (4097: pairwise steps up to 4096, past the
 * abort step 4095): alltoallv with only a few pairs non-empty (empty pairs post nothing, so
 * the 4097 rank threads exchange 4 messages), among them steps 4095 and 4096. Before the
 * steps continued in the block field the call was refused (at most 4095 ranks); step 4095
 * would have been taken for the abort key and 4096 would not fit. Every rank must finish
 * with DR_OK, the receivers with the right bytes.
 */
void test_alltoallv_many_ranks(void **state)
{
    (void)state;
    const int n = 4097;
    struct Pair {
        int from, to; /* step (to - from) mod n */
        size_t len;
    } pairs[] = {{0, 4095, 7}, {0, 4096, 11}, {1, 0, 5}, {4096, 4094, 3}};
    fake::Net net(n, kComm);
    Failures fails;
    const std::vector<size_t> zeros((size_t)n, 0);
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Scratch scratch;
            std::vector<size_t> sc, sd, rc, rd; /* only where this rank has a pair */
            size_t sbytes = 0, rbytes = 0;
            for (const Pair &pr : pairs) {
                if (pr.from == rank || pr.to == rank) {
                    sc.assign((size_t)n, 0), sd.assign((size_t)n, 0);
                    rc.assign((size_t)n, 0), rd.assign((size_t)n, 0);
                    break;
                }
            }
            for (const Pair &pr : pairs) {
                if (pr.from == rank) {
                    sd[(size_t)pr.to] = sbytes, sc[(size_t)pr.to] = pr.len, sbytes += pr.len;
                }
                if (pr.to == rank) {
                    rd[(size_t)pr.from] = rbytes, rc[(size_t)pr.from] = pr.len, rbytes += pr.len;
                }
            }
            std::vector<unsigned char> send(sbytes + 1), recv(rbytes + 1, 0xa5);
            for (const Pair &pr : pairs) {
                for (size_t i = 0; pr.from == rank && i < pr.len; ++i) {
                    send[sd[(size_t)pr.to] + i] = byte_of(rank, pr.to, i, 4097);
                }
            }
            Params p = params(kKindAlltoallv, rank, n, t);
            p.sendbuf = send.data();
            p.recvbuf = recv.data();
            p.algorithm = kAlltoallPairwise;
            VLayout v;
            v.scounts = sc.empty() ? zeros.data() : sc.data();
            v.sdispls = sd.empty() ? zeros.data() : sd.data();
            v.rcounts = rc.empty() ? zeros.data() : rc.data();
            v.rdispls = rd.empty() ? zeros.data() : rd.data();
            std::string err;
            const dr_status_t st = alltoallv(t, p, v, 0, &scratch, &err);
            if (st != DR_OK) {
                fails.add("alltoallv on 4097 ranks: rank " + std::to_string(rank) + ": status " +
                          std::to_string(st) + ": " + err);
                return;
            }
            for (const Pair &pr : pairs) {
                for (size_t i = 0; pr.to == rank && i < pr.len; ++i) {
                    if (recv[rd[(size_t)pr.from] + i] != byte_of(pr.from, rank, i, 4097)) {
                        fails.add("alltoallv on 4097 ranks: rank " + std::to_string(rank) +
                                  ": wrong byte from rank " + std::to_string(pr.from));
                        break;
                    }
                }
            }
        },
        200, "alltoallv on 4097 ranks");
    report(fails, net);
    assert_int_equal(net.data_messages(), sizeof(pairs) / sizeof(pairs[0]));
}

/* Argument checks answer without any traffic. */
void test_invalid_args(void **state)
{
    (void)state;
    unsigned char buf[64] = {0};
    size_t counts[6] = {1, 1, 1, 1, 1, 1}, displs[6] = {0, 1, 2, 3, 4, 5};
    fake::Net net(6, kComm);
    fake::FakeTransport t(net, 1);
    struct Case {
        const char *what;
        int kind;
        void (*edit)(Params &);
    } cases[] = {
        {"alltoall unknown algorithm", kKindAlltoall, [](Params &p) { p.algorithm = 3; }},
        {"alltoall overflow", kKindAlltoall, [](Params &p) { p.count = SIZE_MAX / 2; }},
        {"alltoall no buffer", kKindAlltoall, [](Params &p) { p.recvbuf = nullptr; }},
        {"alltoall too many ranks", kKindAlltoall,
         [](Params &p) { p.size = kAlltoallMaxRanks + 1; }},
        {"alltoall wrong kind", kKindBcast, [](Params &) {}},
        {"alltoallv bruck", kKindAlltoallv, [](Params &p) { p.algorithm = kAlltoallBruck; }},
        {"alltoallv no buffer", kKindAlltoallv, [](Params &p) { p.recvbuf = nullptr; }},
    };
    for (const Case &c : cases) {
        Params p = params(c.kind, 1, 6, t);
        p.sendbuf = buf + 32;
        p.recvbuf = buf;
        p.count = 4;
        c.edit(p);
        std::string err;
        const bool v = strstr(c.what, "alltoallv") != nullptr;
        VLayout lay;
        lay.scounts = lay.rcounts = counts;
        lay.sdispls = lay.rdispls = displs;
        const dr_status_t st =
            v ? alltoallv(t, p, lay, 0, nullptr, &err) : alltoall(t, p, 0, nullptr, &err);
        assert_int_equal(st, DR_ERR_INVALID);
        assert_false(err.empty());
        print_message("%-40s -> %s\n", c.what, err.c_str());
    }
    Params p = params(kKindAlltoallv, 1, 6, t);
    p.sendbuf = buf + 32;
    p.recvbuf = buf;
    VLayout lay;
    std::string err;
    assert_int_equal(alltoallv(t, p, lay, 0, nullptr, &err), DR_ERR_INVALID);
    print_message("%-40s -> %s\n", "alltoallv no counts", err.c_str());
    size_t big[6] = {SIZE_MAX, 0, 0, 0, 0, 0};
    lay.scounts = lay.rcounts = counts;
    lay.sdispls = displs;
    lay.rdispls = big;
    assert_int_equal(alltoallv(t, p, lay, 0, nullptr, &err), DR_ERR_INVALID);
    print_message("%-40s -> %s\n", "alltoallv displacement overflow", err.c_str());
    assert_int_equal(net.violations().size(), 0);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "many") == 0) {
        const struct CMUnitTest many[] = {cmocka_unit_test(test_alltoallv_many_ranks)};
        return cmocka_run_group_tests(many, NULL, NULL);
    }
    if (argc == 3) {
        g_lo = atoi(argv[1]);
        g_hi = atoi(argv[2]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alltoall_math),         cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_alltoall_table),        cmocka_unit_test(test_alltoallv_table),
        cmocka_unit_test(test_alltoall_link_failure), cmocka_unit_test(test_alltoallv_link_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
