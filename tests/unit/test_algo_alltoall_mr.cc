/*
 * The C API of alltoall and alltoallv (mpi_coll/dr_alltoall.h) end to end over
 * ucx_mr: four contexts in one process on the loopback device, one thread per
 * rank, process ids that differ from the comm ranks (so the rank -> peer_ids
 * mapping is exercised); both algorithms, in place, skewed alltoallv counts
 * with empty pairs, segments smaller than a pair; a rank that never comes
 * makes the others fail with a timeout, in bounded time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../support/mr_threads.hpp"
#include "dr_alltoall.h"

namespace {

constexpr int kRanks = dualrail::test::kWorldRanks;
using World = dualrail::test::MrWorld;

int setup(void **state)
{
    return dualrail::test::world_setup(state, 200, 5);
}

int teardown(void **state)
{
    return dualrail::test::world_teardown(state);
}

unsigned char byte_of(int src, int dst, size_t i, uint32_t seq)
{
    return (unsigned char)(src * 131 + dst * 71 + i * 7 + (i >> 10) * 3 + seq * 29);
}

/* Bytes s sends d in alltoallv case seq: skewed, some empty; symmetric when sym. */
size_t vcount(int s, int d, uint32_t seq, bool sym)
{
    if (sym && s > d) {
        const int t = s;
        s = d, d = t;
    }
    const unsigned h = (unsigned)(s * 7 + d * 13 + (int)seq * 5);
    return h % 4 == 0 ? 0 : h % 3 == 0 ? 300000 + h : 17 * h;
}

struct Case {
    bool v;
    size_t block; /* alltoall */
    int algo;
    bool inplace;
    size_t seg;
};

struct Result {
    dr_status_t st = DR_INPROGRESS;
    char err[512] = "";
    bool ok = false;
    std::vector<unsigned char> send, recv; /* outlive the threads */
    std::vector<size_t> sc, sd, rc, rd;
};

std::vector<Result> run(World *w, const Case &c, uint32_t seq, double timeout, int absent = -1)
{
    std::vector<Result> res(kRanks);
    std::vector<std::thread> th;
    dualrail::test::RanksLeft left(absent >= 0 && absent < kRanks ? kRanks - 1 : kRanks);
    for (int r = 0; r < kRanks; ++r) {
        if (r == absent) {
            continue;
        }
        th.emplace_back([&, r] {
            Result &o = res[(size_t)r];
            size_t so = 0, ro = 0;
            for (int q = 0; q < kRanks; ++q) {
                o.sc.push_back(c.v ? vcount(r, q, seq, c.inplace) : c.block);
                o.rc.push_back(c.v ? vcount(q, r, seq, c.inplace) : c.block);
                o.sd.push_back(so);
                o.rd.push_back(ro);
                so += o.sc.back();
                ro += o.rc.back();
            }
            o.send.assign(so + 1, 0);
            o.recv.assign(ro + 1, 0xa5);
            for (int q = 0; q < kRanks; ++q) {
                unsigned char *dst =
                    c.inplace ? o.recv.data() + o.rd[(size_t)q] : o.send.data() + o.sd[(size_t)q];
                for (size_t i = 0; i < o.sc[(size_t)q]; ++i) {
                    dst[i] = byte_of(r, q, i, seq);
                }
            }
            dr_alltoall_args_t a;
            memset(&a, 0, sizeof(a));
            a.c.sendbuf = c.inplace ? nullptr : o.send.data();
            a.c.recvbuf = o.recv.data();
            a.c.bytes = c.block;
            a.c.rank = r;
            a.c.size = kRanks;
            a.c.peer_ids = w->ids;
            a.c.comm_id = 9;
            a.c.seq = seq;
            a.c.algorithm = c.algo;
            a.c.segment_size = c.seg;
            a.c.timeout = timeout;
            a.sendcounts = o.sc.data();
            a.sdispls = o.sd.data();
            a.recvcounts = o.rc.data();
            a.rdispls = o.rd.data();
            o.st = c.v ? dr_alltoallv(w->mr[r], &a, o.err, sizeof(o.err))
                       : dr_alltoall(w->mr[r], &a, o.err, sizeof(o.err));
            left.done_then_progress(w->mr[r]);
            o.ok = o.recv[ro] == 0xa5;
            for (int q = 0; q < kRanks && o.ok; ++q) {
                for (size_t i = 0; i < o.rc[(size_t)q] && o.ok; ++i) {
                    o.ok = o.recv[o.rd[(size_t)q] + i] == byte_of(q, r, i, seq);
                }
            }
        });
    }
    for (std::thread &t : th) {
        t.join();
    }
    return res;
}

void test_alltoall_over_mr(void **state)
{
    World *w = static_cast<World *>(*state);
    const Case cases[] = {
        {false, 1, DR_ALLTOALL_AUTO, false, 0},             /* Bruck */
        {false, 777, DR_ALLTOALL_BRUCK, true, 0},           /* Bruck in place */
        {false, 5000, DR_ALLTOALL_AUTO, false, 0},          /* pairwise */
        {false, 200001, DR_ALLTOALL_PAIRWISE, true, 65536}, /* in place, segments */
        {false, 0, DR_ALLTOALL_AUTO, false, 0},             /* count 0 */
        {true, 0, DR_ALLTOALL_AUTO, false, 0},              /* skewed, empty pairs */
        {true, 0, DR_ALLTOALL_AUTO, false, 100000},         /* segments */
        {true, 0, DR_ALLTOALL_AUTO, true, 0},               /* in place, symmetric */
    };
    uint32_t seq = 0;
    for (const Case &c : cases) {
        const std::vector<Result> res = run(w, c, seq++, 30);
        for (int r = 0; r < kRanks; ++r) {
            if (res[(size_t)r].st != DR_OK || !res[(size_t)r].ok) {
                print_error("%s block %zu algo %d%s rank %d: status %d (%s), %s\n",
                            c.v ? "alltoallv" : "alltoall", c.block, c.algo,
                            c.inplace ? " in place" : "", r, res[(size_t)r].st, res[(size_t)r].err,
                            res[(size_t)r].ok ? "data right" : "WRONG DATA");
            }
            assert_int_equal(res[(size_t)r].st, DR_OK);
            assert_true(res[(size_t)r].ok);
            assert_string_equal(res[(size_t)r].err, "");
        }
    }
    dr_alltoall_args_t a;
    memset(&a, 0, sizeof(a));
    a.c.size = kRanks;
    a.c.bytes = 100;
    assert_int_equal(dr_alltoall_choose(&a), DR_ALLTOALL_BRUCK);
    a.c.bytes = DR_ALLTOALL_SMALL_MAX_DEFAULT + 1;
    assert_int_equal(dr_alltoall_choose(&a), DR_ALLTOALL_PAIRWISE);
    char err[128];
    assert_int_equal(dr_alltoall(w->mr[0], nullptr, err, sizeof(err)), DR_ERR_INVALID);
    assert_int_equal(dr_alltoallv(w->mr[0], nullptr, err, sizeof(err)), DR_ERR_INVALID);
}

/* A rank that never comes: the others fail with a timeout naming a peer, in bounded time. */
void test_missing_rank(void **state)
{
    World *w = static_cast<World *>(*state);
    for (bool v : {false, true}) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<Result> res =
            run(w, Case{v, 50000, DR_ALLTOALL_AUTO, false, 0}, 100, 0.5, 2);
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (int r = 0; r < kRanks; ++r) {
            if (r == 2) {
                continue;
            }
            assert_int_not_equal(res[(size_t)r].st, DR_OK);
            assert_non_null(strstr(res[(size_t)r].err, v ? "alltoallv" : "alltoall"));
            assert_non_null(strstr(res[(size_t)r].err, "peer rank"));
            print_message("%s rank %d: %s\n", v ? "alltoallv" : "alltoall", r, res[(size_t)r].err);
        }
        assert_true(took < 10);
    }
}

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alltoall_over_mr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_rank, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
