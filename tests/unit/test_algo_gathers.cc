/*
 * Allgatherv (mpi_coll/algo/gathers.hpp) over the in-memory threaded
 * transport: tables of sizes 1..16 with every algorithm forced and auto,
 * equal, zero-for-some, skewed and all-on-one counts, blocks packed in rank
 * order or in reverse order with gaps (displacements anywhere in recvbuf;
 * the gaps must stay untouched), in place (nullptr and the rank's own place)
 * or not, small segments; and links failing mid-call.
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

#include "algo/gathers.hpp"
#include "algo/ring_math.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;
using dualrail::test::Failures;
using fake::report;

namespace {

constexpr uint32_t kComm = 0x4f;
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

/* Counts of pattern p (bytes): equal, zero every other rank, skewed, all on one. */
std::vector<size_t> counts_of(int p, int n, size_t c)
{
    std::vector<size_t> v((size_t)n);
    for (int r = 0; r < n; ++r) {
        v[(size_t)r] = p == 0   ? c
                       : p == 1 ? (r % 2 ? 0 : c + (size_t)r)
                       : p == 2 ? (size_t)r * c
                                : (r == n / 2 ? c * (size_t)n : 0);
    }
    return v;
}

/* Displacements: packed in rank order (layout 0) or reversed with a 5-byte gap before
 * every block (layout 1). Returns the bytes recvbuf needs. */
size_t displs_of(int layout, const std::vector<size_t> &c, std::vector<size_t> &d)
{
    const int n = (int)c.size();
    d.assign((size_t)n, 0);
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        const int r = layout == 0 ? i : n - 1 - i;
        at += layout == 0 ? 0 : 5;
        d[(size_t)r] = at;
        at += c[(size_t)r];
    }
    return at;
}

void run_allgatherv_table(int n)
{
    struct Case {
        int algo, pattern, layout;
        size_t count;
        bool inplace;
        size_t seg;
    };
    std::vector<Case> cases;
    for (int algo : {(int)kAlgoAuto, (int)kAllgathervRing, (int)kAllgathervBruck}) {
        for (int pattern = 0; pattern < 4; ++pattern) {
            for (size_t count : {(size_t)0, (size_t)1, (size_t)13, (size_t)2100}) {
                for (int layout = 0; layout < 2; ++layout) {
                    cases.push_back(Case{algo, pattern, layout, count, (pattern + layout) % 2 == 1,
                                         count >= 2100 && layout ? (size_t)100 : (size_t)0});
                }
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
            for (size_t ci = 0; ci < cases.size(); ++ci) {
                const Case &c = cases[ci];
                const std::vector<size_t> cnt = counts_of(c.pattern, n, c.count);
                std::vector<size_t> dsp;
                const size_t len = displs_of(c.layout, cnt, dsp);
                const size_t mine = cnt[(size_t)rank];
                std::vector<unsigned char> send(mine + 1), recv(len + 1, 0xa5);
                unsigned char *src = c.inplace ? recv.data() + dsp[(size_t)rank] : send.data();
                for (size_t i = 0; i < mine; ++i) {
                    src[i] = byte_of(rank, i, ci);
                }
                const std::vector<unsigned char> orig = send;
                Params p = params(kKindAllgatherv, rank, n, t);
                p.sendbuf = c.inplace ? (ci % 4 == 1 ? (const void *)src : nullptr) : send.data();
                p.recvbuf = recv.data();
                p.counts = cnt.data();
                p.displs = dsp.data();
                p.seq = (uint32_t)ci;
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                p.small_max_bytes = ci % 3 == 0 ? 1 : 0;
                bar.wait();
                std::string err;
                const dr_status_t st = allgatherv(t, p, ci % 5 == 0 ? nullptr : &scratch, &err);
                char what[200];
                snprintf(
                    what, sizeof(what),
                    "allgatherv n=%d algo=%d pattern=%d layout=%d count=%zu %s seg=%zu rank %d", n,
                    c.algo, c.pattern, c.layout, c.count, c.inplace ? "in place" : "out of place",
                    c.seg, rank);
                /* every block in its place, every gap byte untouched */
                std::vector<unsigned char> want(len + 1, 0xa5);
                for (int r = 0; r < n; ++r) {
                    for (size_t i = 0; i < cnt[(size_t)r]; ++i) {
                        want[dsp[(size_t)r] + i] = byte_of(r, i, ci);
                    }
                }
                if (st != DR_OK) {
                    fails.add(std::string(what) + ": status " + std::to_string(st) + ": " + err);
                } else if (recv != want) {
                    fails.add(std::string(what) + ": wrong data or a gap written");
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
        280, "allgatherv table");
    report(fails, net);
}

void test_allgatherv_table(void **state)
{
    (void)state;
    for (bool copy : {false, true}) {
        g_copy = copy;
        for (int n = g_lo; n <= g_hi; ++n) {
            run_allgatherv_table(n);
        }
    }
    g_copy = false;
}

/*
 * Gather, scatter (count bytes per rank) and gatherv, scatterv (the patterns and
 * layouts above), every root, in place at the root or not; the root's buffer checked
 * byte by byte (gaps untouched), a non-root's receive buffer too.
 */
void run_rooted_table(int n, int kind)
{
    const bool v = kind == kKindGatherv || kind == kKindScatterv;
    const bool gath = kind == kKindGather || kind == kKindGatherv;
    struct Case {
        int pattern, layout, root;
        size_t count;
        bool inplace;
    };
    std::vector<Case> cases;
    for (int pattern = 0; pattern < (v ? 4 : 1); ++pattern) {
        for (size_t count : {(size_t)0, (size_t)1, (size_t)13, (size_t)3000}) {
            for (int root = 0; root < n; ++root) {
                if (count >= 3000 && root != 0 && root != n - 1) {
                    continue;
                }
                const int layout = v ? (root + pattern) % 2 : 0;
                cases.push_back(Case{pattern, layout, root, count, (root + (int)count) % 2 == 1});
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
            for (size_t ci = 0; ci < cases.size(); ++ci) {
                const Case &c = cases[ci];
                const bool root = rank == c.root;
                const std::vector<size_t> cnt = counts_of(c.pattern, n, c.count);
                std::vector<size_t> dsp;
                const size_t len = displs_of(c.layout, cnt, dsp);
                const size_t mine = cnt[(size_t)rank];
                /* the root's big buffer (gathered into or scattered from) and a small one */
                std::vector<unsigned char> big(len + 1, 0xa5), small(mine + 1, 0xa5);
                std::vector<unsigned char> want_big = big, want_small = small;
                for (int r = 0; r < n; ++r) {
                    for (size_t i = 0; i < cnt[(size_t)r]; ++i) {
                        want_big[dsp[(size_t)r] + i] = byte_of(r, i, ci);
                    }
                }
                for (size_t i = 0; i < mine; ++i) {
                    want_small[i] = byte_of(rank, i, ci);
                }
                Params p = params(kind, rank, n, t);
                p.root = c.root;
                p.count = mine;
                p.seq = (uint32_t)ci;
                if (v && root) {
                    p.counts = cnt.data();
                    p.displs = dsp.data();
                }
                const bool inplace = c.inplace && root;
                if (gath) {
                    small = want_small;
                    if (inplace) {
                        memcpy(big.data() + dsp[(size_t)rank], small.data(), mine);
                    }
                    p.sendbuf = inplace ? nullptr : small.data();
                    p.recvbuf = root ? big.data() : nullptr;
                } else {
                    if (root) {
                        big = want_big;
                    }
                    p.sendbuf = root ? big.data() : nullptr;
                    p.recvbuf = inplace ? (ci % 2 ? nullptr : big.data() + dsp[(size_t)rank])
                                        : small.data();
                }
                bar.wait();
                std::string err;
                Scratch *s = ci % 3 == 0 ? nullptr : &scratch;
                const dr_status_t st = kind == kKindGather    ? gather(t, p, s, &err)
                                       : kind == kKindScatter ? scatter(t, p, s, &err)
                                       : kind == kKindGatherv ? gatherv(t, p, &err)
                                                              : scatterv(t, p, &err);
                char what[200];
                snprintf(what, sizeof(what),
                         "%s n=%d pattern=%d layout=%d count=%zu root=%d%s rank %d",
                         kind_name(kind), n, c.pattern, c.layout, c.count, c.root,
                         inplace ? " in place" : "", rank);
                const bool ok =
                    gath ? (!root || big == want_big) && small == want_small
                         : (!root || big == want_big) &&
                               (inplace ? small == std::vector<unsigned char>(mine + 1, 0xa5)
                                        : small == want_small);
                if (st != DR_OK) {
                    fails.add(std::string(what) + ": status " + std::to_string(st) + ": " + err);
                } else if (!ok) {
                    fails.add(std::string(what) +
                              ": wrong data, a gap written or a buffer changed");
                }
                bar.wait();
                if (rank == 0) {
                    net.forget_keys();
                }
                bar.wait();
            }
        },
        280, kind_name(kind));
    report(fails, net);
}

void test_rooted_tables(void **state)
{
    (void)state;
    for (bool copy : {false, true}) {
        g_copy = copy;
        for (int n = g_lo; n <= g_hi; ++n) {
            for (int kind :
                 {(int)kKindGather, (int)kKindScatter, (int)kKindGatherv, (int)kKindScatterv}) {
                run_rooted_table(n, kind);
            }
        }
    }
    g_copy = false;
}

struct Outcome {
    dr_status_t st = DR_OK;
    std::string err;
    bool correct = false;
    std::vector<unsigned char> buf; /* outlives the thread: an abandoned send may read it */
    Scratch scratch;
};

void check_link_failure(int algo, int n, size_t count, int a, int b, long after)
{
    fake::Net net(n, kComm);
    net.fail_link(a, b, after);
    std::vector<Outcome> out((size_t)n);
    const std::vector<size_t> cnt = counts_of(2, n, count);
    std::vector<size_t> dsp;
    const size_t len = displs_of(1, cnt, dsp);
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Params p = params(kKindAllgatherv, rank, n, t);
            p.timeout = -1;
            p.algorithm = algo;
            p.segment_size = 64;
            Outcome &o = out[(size_t)rank];
            o.buf.assign(len, 0);
            for (size_t i = 0; i < cnt[(size_t)rank]; ++i) {
                o.buf[dsp[(size_t)rank] + i] = byte_of(rank, i, 1);
            }
            p.recvbuf = o.buf.data();
            p.counts = cnt.data();
            p.displs = dsp.data();
            o.st = allgatherv(t, p, &o.scratch, &o.err);
            o.correct = true;
            for (int r = 0; r < n; ++r) {
                for (size_t i = 0; i < cnt[(size_t)r]; ++i) {
                    o.correct = o.correct && o.buf[dsp[(size_t)r] + i] == byte_of(r, i, 1);
                }
            }
        },
        60, "link failure");
    int errors = 0;
    for (int r = 0; r < n; ++r) {
        const Outcome &o = out[(size_t)r];
        if (o.st != DR_OK) {
            ++errors;
            assert_true(o.err.find("allgatherv, rank " + std::to_string(r)) != std::string::npos);
            assert_true(o.err.find("peer rank") != std::string::npos);
        } else {
            assert_true(o.correct);
        }
        if (r == a || r == b) {
            assert_int_not_equal(o.st, DR_OK);
        }
    }
    print_message("allgatherv algo %d n=%d link %d-%d after %ld: %d of %d ranks failed; rank %d: "
                  "%s\n",
                  algo, n, a, b, after, errors, n, b, out[(size_t)b].err.c_str());
    assert_int_equal(net.violations().size(), 0);
}

void test_allgatherv_link_failure(void **state)
{
    (void)state;
    check_link_failure(kAllgathervRing, 5, 700, 1, 2, 0);
    check_link_failure(kAllgathervRing, 5, 700, 3, 4, 40);
    check_link_failure(kAllgathervBruck, 6, 50, 0, 1, 0);
    check_link_failure(kAllgathervBruck, 6, 50, 2, 4, 1);
}

/* Gather/scatter(v) with a link failing: its ends get an error, nobody hangs. */
void check_rooted_failure(int kind, int n, int root, int a, int b, long after)
{
    fake::Net net(n, kComm);
    net.fail_link(a, b, after);
    std::vector<Outcome> out((size_t)n);
    const size_t bs = 100;
    std::vector<size_t> cnt((size_t)n, bs), dsp((size_t)n);
    for (int r = 0; r < n; ++r) {
        dsp[(size_t)r] = (size_t)r * bs;
    }
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Params p = params(kind, rank, n, t);
            p.timeout = -1;
            p.root = root;
            p.count = bs;
            p.counts = cnt.data();
            p.displs = dsp.data();
            Outcome &o = out[(size_t)rank];
            o.buf.assign(bs * (size_t)n * 2, 7);
            p.sendbuf = o.buf.data();
            p.recvbuf = o.buf.data() + bs * (size_t)n;
            o.st = kind == kKindGather    ? gather(t, p, &o.scratch, &o.err)
                   : kind == kKindScatter ? scatter(t, p, &o.scratch, &o.err)
                   : kind == kKindGatherv ? gatherv(t, p, &o.err)
                                          : scatterv(t, p, &o.err);
        },
        60, "rooted link failure");
    int errors = 0;
    for (int r = 0; r < n; ++r) {
        const Outcome &o = out[(size_t)r];
        if (o.st != DR_OK) {
            ++errors;
            assert_true(o.err.find(std::string(kind_name(kind)) + ", rank " + std::to_string(r)) !=
                        std::string::npos);
        }
        if (r == a || r == b) {
            assert_int_not_equal(o.st, DR_OK);
        }
    }
    print_message("%s n=%d root %d link %d-%d after %ld: %d of %d ranks failed; rank %d: %s\n",
                  kind_name(kind), n, root, a, b, after, errors, n, b, out[(size_t)b].err.c_str());
    assert_int_equal(net.violations().size(), 0);
}

void test_rooted_link_failure(void **state)
{
    (void)state;
    /* binomial root 0 on 6: the edge 0-4 carries the subtree {4, 5} */
    check_rooted_failure(kKindGather, 6, 0, 0, 4, 0);
    check_rooted_failure(kKindGather, 6, 2, 0, 2, 0); /* relative 4 -> 0: the subtree {4, 5} */
    check_rooted_failure(kKindScatter, 6, 0, 0, 4, 0);
    check_rooted_failure(kKindScatter, 7, 3, 3, 5, 0);
    check_rooted_failure(kKindGatherv, 5, 1, 1, 3, 0);
    check_rooted_failure(kKindScatterv, 5, 4, 4, 0, 0);
}

void test_invalid_args(void **state)
{
    (void)state;
    unsigned char buf[64] = {0};
    size_t counts[6] = {4, 4, 4, 4, 4, 4}, displs[6] = {0, 4, 8, 12, 16, 20};
    fake::Net net(6, kComm);
    fake::FakeTransport t(net, 1);
    struct Case {
        const char *what;
        void (*edit)(Params &);
    } cases[] = {
        {"unknown algorithm", [](Params &p) { p.algorithm = 3; }},
        {"no counts", [](Params &p) { p.counts = nullptr; }},
        {"no displacements", [](Params &p) { p.displs = nullptr; }},
        {"no buffer", [](Params &p) { p.recvbuf = nullptr; }},
        {"displacement overflow", [](Params &p) { const_cast<size_t *>(p.displs)[3] = SIZE_MAX; }},
        {"forced ring on 2049",
         [](Params &p) {
             static const std::vector<size_t> many((size_t)kRingMaxRanks + 1, 1);
             p.size = kRingMaxRanks + 1;
             p.counts = many.data();
             p.displs = many.data();
             p.algorithm = kAllgathervRing;
         }},
    };
    for (const Case &c : cases) {
        Params p = params(kKindAllgatherv, 1, 6, t);
        displs[3] = 12;
        p.recvbuf = buf;
        p.counts = counts;
        p.displs = displs;
        c.edit(p);
        std::string err;
        assert_int_equal(allgatherv(t, p, nullptr, &err), DR_ERR_INVALID);
        assert_false(err.empty());
        print_message("%-30s -> %s\n", c.what, err.c_str());
    }
    assert_int_equal(net.messages(), 0);
    Params p;
    p.size = 6;
    assert_int_equal(allgatherv_choose(p, 100), kAllgathervBruck);
    assert_int_equal(allgatherv_choose(p, 1u << 20), kAllgathervRing);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 3) {
        g_lo = atoi(argv[1]);
        g_hi = atoi(argv[2]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_allgatherv_table),
        cmocka_unit_test(test_allgatherv_link_failure),
        cmocka_unit_test(test_rooted_tables),
        cmocka_unit_test(test_rooted_link_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
