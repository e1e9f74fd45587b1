/*
 * The C API (mpi_coll/dr_coll.h) end to end over ucx_mr: four contexts in one
 * process on the loopback device, one thread per rank, process ids that
 * differ from the comm ranks (so the rank -> peer_ids mapping is exercised):
 * allreduce (its small calls' direct entry included), barrier, and the scratch the
 * reduce-scatter keeps between calls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../support/mr_threads.hpp"
#include "dr_coll.h"
#include "mr_transport.hpp"

namespace {

constexpr int kRanks = dualrail::test::kWorldRanks;
using World = dualrail::test::MrWorld;

int setup(void **state)
{
    return dualrail::test::world_setup(state, 100, 7);
}

int teardown(void **state)
{
    return dualrail::test::world_teardown(state);
}

void sum_u64(const void *in, void *inout, size_t count, void *arg)
{
    (void)arg;
    const uint64_t *a = static_cast<const uint64_t *>(in);
    uint64_t *b = static_cast<uint64_t *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] += a[i];
    }
}

void sum_f64(const void *in, void *inout, size_t count, void *arg)
{
    (void)arg;
    const double *a = static_cast<const double *>(in);
    double *b = static_cast<double *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] += a[i];
    }
}

struct Case {
    size_t count;
    int algo;
    bool inplace;
    size_t seg;
    bool f64;
};

struct Result {
    dr_status_t st = DR_INPROGRESS;
    char err[512] = "";
    std::vector<uint64_t> buf; /* u64 or f64 bits */
};

uint64_t val(int r, size_t i)
{
    return (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ULL + i * 31;
}
double fval(int r, size_t i)
{
    return (double)((val(r, i) >> 20) % 100000) / 7.0 - 5000.0;
}

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
            std::vector<uint64_t> send(c.count);
            o.buf.assign(c.count, 0);
            std::vector<uint64_t> &mine = c.inplace ? o.buf : send;
            for (size_t i = 0; i < c.count; ++i) {
                if (c.f64) {
                    const double d = fval(r, i);
                    memcpy(&mine[i], &d, 8);
                } else {
                    mine[i] = val(r, i);
                }
            }
            dr_allreduce_args_t a;
            memset(&a, 0, sizeof(a)); /* zero-filled: defaults */
            a.sendbuf = c.inplace ? nullptr : send.data();
            a.recvbuf = o.buf.data();
            a.count = c.count;
            a.elem_size = 8;
            a.reduce = c.f64 ? sum_f64 : sum_u64;
            a.rank = r;
            a.size = kRanks;
            a.peer_ids = w->ids;
            a.comm_id = 3;
            a.seq = seq;
            a.algorithm = c.algo;
            a.segment_size = c.seg;
            a.timeout = timeout;
            o.st = dr_allreduce(w->mr[r], &a, o.err, sizeof(o.err));
            left.done_then_progress(w->mr[r]);
        });
    }
    for (auto &t : th) {
        t.join();
    }
    return res;
}

void test_allreduce_over_mr(void **state)
{
    World *w = static_cast<World *>(*state);
    const Case cases[] = {
        {1, DR_ALGO_AUTO, false, 0, false},       {3, DR_ALGO_RING, true, 0, false},
        {1000, DR_ALGO_AUTO, true, 0, true},      {5000, DR_ALGO_RD, false, 0, false},
        {300001, DR_ALGO_AUTO, false, 0, false},  {300001, DR_ALGO_RING, true, 4096, true},
        {100000, DR_ALGO_RING, false, 64, false}, {40000, DR_ALGO_RD, true, 0, true},
    };
    uint32_t seq = 0;
    for (const Case &c : cases) {
        std::vector<Result> res = run(w, c, seq++, 30);
        for (int r = 0; r < kRanks; ++r) {
            if (res[(size_t)r].st != DR_OK) {
                print_error("count %zu algo %d rank %d: %s\n", c.count, c.algo, r,
                            res[(size_t)r].err);
            }
            assert_int_equal(res[(size_t)r].st, DR_OK);
            assert_string_equal(res[(size_t)r].err, "");
            /* bitwise identical everywhere */
            assert_memory_equal(res[(size_t)r].buf.data(), res[0].buf.data(), c.count * 8);
        }
        for (size_t i = 0; i < c.count; ++i) {
            if (c.f64) {
                double want = 0, got;
                for (int r = 0; r < kRanks; ++r) {
                    want += fval(r, i);
                }
                memcpy(&got, &res[0].buf[i], 8);
                assert_true(got > want - 1e-6 && got < want + 1e-6);
            } else {
                uint64_t want = 0;
                for (int r = 0; r < kRanks; ++r) {
                    want += val(r, i);
                }
                assert_int_equal(res[0].buf[i], want);
            }
        }
    }
}

/* The small schedules take (dr_mr_take, no posted receive) what the transport says a peer
 * sends whole: a message longer than a context's min_stripe is striped over its planes and
 * arrives in pieces, which only a posted receive takes, so a schedule that waited with
 * dr_mr_take alone sat out kAbortListenAfter (2 ms) per receive before posting one. With
 * min_stripe 512, MrTransport::take_max() said 1952 (DR_MR_TAKE_MAX) before the fix. */
void test_take_max_follows_settings(void **state)
{
    (void)state;
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    const uint32_t ids[1] = {5};
    char err[256];
    for (uint64_t min_stripe :
         {(uint64_t)16384, (uint64_t)DR_MR_TAKE_MAX, (uint64_t)512, (uint64_t)0}) {
        cfg.min_stripe = min_stripe;
        dr_mr_t *m = nullptr;
        assert_int_equal(dr_mr_create(&cfg, 1, &m, err, sizeof(err)), DR_OK);
        const size_t want = min_stripe < DR_MR_TAKE_MAX ? (size_t)min_stripe : DR_MR_TAKE_MAX;
        assert_int_equal(dr_mr_take_max(m), want);
        dualrail::coll::MrTransport t(m, ids);
        assert_int_equal(t.take_max(), want);
        dr_mr_destroy(m);
    }
    assert_int_equal(dr_mr_take_max(nullptr), 0);
}

void test_choose_c_api(void **state)
{
    (void)state;
    dr_allreduce_args_t a;
    memset(&a, 0, sizeof(a));
    a.size = 4;
    a.elem_size = 8;
    a.count = DR_ALLREDUCE_RD_MAX_DEFAULT / 8;
    assert_int_equal(dr_allreduce_choose(&a), DR_ALGO_RD);
    a.count++;
    assert_int_equal(dr_allreduce_choose(&a), DR_ALGO_RING);
    a.algorithm = DR_ALGO_RD;
    assert_int_equal(dr_allreduce_choose(&a), DR_ALGO_RD);

    char err[128];
    assert_int_equal(dr_allreduce(nullptr, nullptr, err, sizeof(err)), DR_ERR_INVALID);
    a.algorithm = DR_ALGO_AUTO;
    a.reduce = sum_u64;
    uint64_t x = 0;
    a.recvbuf = &x;
    a.count = 1;
    assert_int_equal(dr_allreduce(nullptr, &a, err, sizeof(err)), DR_ERR_INVALID); /* no ids */
    print_message("%s\n", err);
    a.count = 0; /* count 0 needs nothing at all */
    assert_int_equal(dr_allreduce(nullptr, &a, err, sizeof(err)), DR_OK);

    /* Fail mode where no peer waits (count 0, one rank): no transfer, still the failure and
     * its reason; the reason may be the error buffer itself (the glue's staging message). */
    a.fail = DR_ERR_GPU;
    a.fail_why = "staging failed";
    assert_int_equal(dr_allreduce(nullptr, &a, err, sizeof(err)), DR_ERR_GPU);
    assert_string_equal(err, "staging failed");
    dr_coll_args_t c;
    memset(&c, 0, sizeof(c));
    c.size = 1;
    c.recvbuf = &x;
    c.bytes = sizeof(x);
    snprintf(err, sizeof(err), "no host memory to stage 8 bytes");
    c.fail = DR_ERR_NO_MEMORY;
    c.fail_why = err;
    assert_int_equal(dr_bcast(nullptr, &c, err, sizeof(err)), DR_ERR_NO_MEMORY);
    assert_string_equal(err, "no host memory to stage 8 bytes");
}

/* A rank that never comes: the others fail with a timeout naming a peer, in bounded time. */
void test_missing_rank(void **state)
{
    World *w = static_cast<World *>(*state);
    for (int algo : {DR_ALGO_RING, DR_ALGO_RD}) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<Result> res =
            run(w, Case{20000, algo, false, 0, false}, 100 + (uint32_t)algo, 0.5, 2);
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (int r = 0; r < kRanks; ++r) {
            if (r == 2) {
                continue;
            }
            assert_int_equal(res[(size_t)r].st, DR_ERR_TIMEOUT);
            assert_non_null(strstr(res[(size_t)r].err, "peer rank"));
        }
        assert_true(took < 15);
        print_message("algo %d, %.2f s: rank 1: %s\n", algo, took, res[1].err);
    }
}

/*
 * dr_allreduce hands small calls straight to allreduce_rd_small (allreduce_small_direct),
 * past allreduce()'s checks: every argument those checks reject must still be rejected at
 * once, with the same error, not run (a run here, alone, would wait for the other ranks and
 * time out). And a small call the direct way takes runs and times out like any other when
 * its peers never come.
 */
void test_small_direct_checks(void **state)
{
    World *w = static_cast<World *>(*state);
    uint64_t in = 1, out = 0;
    auto args = [&] {
        dr_allreduce_args_t a;
        memset(&a, 0, sizeof(a));
        a.sendbuf = &in;
        a.recvbuf = &out;
        a.count = 1;
        a.elem_size = 8;
        a.reduce = sum_u64;
        a.rank = 0;
        a.size = kRanks;
        a.peer_ids = w->ids;
        a.comm_id = 5;
        a.seq = 9;
        a.timeout = 0.3;
        return a;
    };
    struct Bad {
        const char *what, *says;
        void (*spoil)(dr_allreduce_args_t *);
    };
    const Bad bad[] = {
        {"rank", "out of range", [](dr_allreduce_args_t *a) { a->rank = a->size; }},
        {"negative rank", "out of range", [](dr_allreduce_args_t *a) { a->rank = -1; }},
        {"communicator id", "16 bits", [](dr_allreduce_args_t *a) { a->comm_id = 0x10000; }},
        {"element size 0", "element size", [](dr_allreduce_args_t *a) { a->elem_size = 0; }},
        {"element size 65", "element size", [](dr_allreduce_args_t *a) { a->elem_size = 65; }},
        {"no function", "reduction function", [](dr_allreduce_args_t *a) { a->reduce = nullptr; }},
        {"no receive buffer", "receive buffer",
         [](dr_allreduce_args_t *a) { a->recvbuf = nullptr; }},
        {"algorithm", "unknown algorithm", [](dr_allreduce_args_t *a) { a->algorithm = 7; }},
    };
    for (const Bad &b : bad) {
        dr_allreduce_args_t a = args();
        b.spoil(&a);
        char err[256] = "";
        const auto t0 = std::chrono::steady_clock::now();
        const dr_status_t st = dr_allreduce(w->mr[0], &a, err, sizeof(err));
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        print_message("%s: %s (%.3f s)\n", b.what, err, took);
        assert_int_equal(st, DR_ERR_INVALID);
        assert_non_null(strstr(err, b.says)); /* rejected, not run (that times out) */
    }
    /* The direct way's own run: no peer comes, a timeout naming one, in bounded time. */
    dr_allreduce_args_t a = args();
    char err[256] = "";
    const auto t0 = std::chrono::steady_clock::now();
    assert_int_equal(dr_allreduce(w->mr[0], &a, err, sizeof(err)), DR_ERR_TIMEOUT);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_message("alone: %s (%.3f s)\n", err, took);
    assert_non_null(strstr(err, "peer rank"));
    assert_true(took < 10);
}

/* Join the rank threads, then every rank's error printed; none allowed. */
void join_ok(std::vector<std::thread> &th, const std::vector<std::string> &errors)
{
    for (auto &t : th) {
        t.join();
    }
    for (int r = 0; r < kRanks; ++r) {
        if (!errors[(size_t)r].empty()) {
            print_error("rank %d: %s\n", r, errors[(size_t)r].c_str());
        }
        assert_true(errors[(size_t)r].empty());
    }
}

/*
 * dr_barrier over ucx_mr (its own entry, the barrier's fast mode over MrTransport): rounds of
 * barriers in which no rank leaves before every rank entered (each rank enters late by
 * turns); then the checks its entry makes before any traffic, and a barrier alone, whose
 * wait for a peer that never comes times out naming one.
 */
void test_barrier_over_mr(void **state)
{
    World *w = static_cast<World *>(*state);
    constexpr int kCalls = 12;
    std::vector<std::atomic<int>> entered(kCalls);
    for (auto &e : entered) {
        e = 0;
    }
    auto args = [w](int rank, uint32_t seq, double timeout) {
        dr_coll_args_t a;
        memset(&a, 0, sizeof(a));
        a.rank = rank;
        a.size = kRanks;
        a.peer_ids = w->ids;
        a.comm_id = 6;
        a.seq = seq;
        a.timeout = timeout;
        return a;
    };
    std::vector<std::string> errors(kRanks);
    std::vector<std::thread> th;
    dualrail::test::RanksLeft left(kRanks);
    for (int r = 0; r < kRanks; ++r) {
        th.emplace_back([&, r] {
            for (int i = 0; i < kCalls && errors[(size_t)r].empty(); ++i) {
                if ((r + i) % kRanks == 0) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                }
                ++entered[(size_t)i];
                const dr_coll_args_t a = args(r, (uint32_t)i, 20);
                char err[256] = "";
                if (dr_barrier(w->mr[r], &a, err, sizeof(err)) != DR_OK) {
                    errors[(size_t)r] = err;
                } else if (entered[(size_t)i] != kRanks) {
                    errors[(size_t)r] = "left barrier " + std::to_string(i) + " early";
                }
            }
            left.done_then_progress(w->mr[r]);
        });
    }
    join_ok(th, errors);
    char err[256] = "";
    assert_int_equal(dr_barrier(w->mr[0], nullptr, err, sizeof(err)), DR_ERR_INVALID);
    assert_non_null(strstr(err, "no arguments"));
    dr_coll_args_t a = args(kRanks, kCalls, 0.3);
    assert_int_equal(dr_barrier(w->mr[0], &a, err, sizeof(err)), DR_ERR_INVALID);
    assert_non_null(strstr(err, "out of range"));
    a.rank = 0;
    const auto t0 = std::chrono::steady_clock::now();
    assert_int_equal(dr_barrier(w->mr[0], &a, err, sizeof(err)), DR_ERR_TIMEOUT);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_message("alone: %s (%.3f s)\n", err, took);
    assert_non_null(strstr(err, "peer rank"));
    assert_true(took >= 0.3 && took < 10);
}

/* Minor page faults of the calling thread so far. */
long thread_faults()
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

/*
 * The scratch of the blocking collectives is kept between calls up to
 * dr_coll_set_keep_scratch (coll.hpp, kDefaultKeepScratch): after each ring
 * reduce_scatter_block of 1 MiB blocks a rank thread still holds its 7 MiB of scratch
 * (partial results and slots), and a fifth call with the keep at 1 MiB gives it back. The
 * page faults of calls 2-4 are printed: none here with the scratch kept, 2564 on rank 0
 * with it given back after each call (as before); the transport's own buffers may add some
 * under load, so they are not what is asserted.
 */
void test_scratch_kept_between_calls(void **state)
{
    World *w = static_cast<World *>(*state);
    constexpr size_t kBlock = 131072; /* u64 per rank: 1 MiB blocks */
    constexpr int kCalls = 5;
    std::vector<std::string> errors(kRanks);
    std::vector<long> later_faults(kRanks, 0);
    std::vector<size_t> held(kRanks * kCalls, 0);
    /* Every rank past call 4 before the keep drops (a rank still in it would give back) */
    dualrail::test::RanksLeft before_last(kRanks);
    std::vector<std::thread> th;
    dualrail::test::RanksLeft left(kRanks);
    for (int r = 0; r < kRanks; ++r) {
        th.emplace_back([&, r] {
            std::vector<uint64_t> in(kBlock * kRanks), out(kBlock, 0);
            for (size_t i = 0; i < in.size(); ++i) {
                in[i] = val(r, i);
            }
            for (int c = 0; c < kCalls && errors[(size_t)r].empty(); ++c) {
                dr_coll_args_t a;
                memset(&a, 0, sizeof(a));
                a.sendbuf = in.data();
                a.recvbuf = out.data();
                a.bytes = kBlock * 8;
                a.rank = r;
                a.size = kRanks;
                a.peer_ids = w->ids;
                a.comm_id = 9;
                a.seq = (uint32_t)c;
                a.algorithm = DR_REDUCE_SCATTER_RING;
                a.timeout = 20;
                a.elem_size = 8;
                a.reduce = sum_u64;
                char err[256] = "";
                const long f0 = thread_faults();
                if (dr_reduce_scatter_block(w->mr[r], &a, err, sizeof(err)) != DR_OK) {
                    errors[(size_t)r] = err;
                }
                if (c > 0 && c < kCalls - 1) {
                    later_faults[(size_t)r] += thread_faults() - f0;
                }
                held[(size_t)(r * kCalls + c)] = dr_coll_scratch_held();
                if (c == kCalls - 2) {
                    before_last.done_then_progress(w->mr[r], 20);
                    if (r == 0) {
                        dr_coll_set_keep_scratch(1u << 20); /* the last call gives it back */
                    }
                }
                const uint64_t want = val(0, (size_t)r * kBlock) + val(1, (size_t)r * kBlock) +
                                      val(2, (size_t)r * kBlock) + val(3, (size_t)r * kBlock);
                if (errors[(size_t)r].empty() && out[0] != want) {
                    errors[(size_t)r] = "wrong first element";
                }
            }
            left.done_then_progress(w->mr[r]);
        });
    }
    join_ok(th, errors);
    dr_coll_set_keep_scratch(DR_COLL_KEEP_SCRATCH_DEFAULT);
    for (int r = 0; r < kRanks; ++r) {
        print_message("rank %d: %ld page faults in calls 2-4; held after each call:", r,
                      later_faults[(size_t)r]);
        for (int c = 0; c < kCalls; ++c) {
            print_message(" %zu", held[(size_t)(r * kCalls + c)]);
        }
        print_message("\n");
        for (int c = 0; c < kCalls - 1; ++c) {
            assert_true(held[(size_t)(r * kCalls + c)] >= kBlock * 8 * kRanks);
        }
        assert_int_equal(held[(size_t)(r * kCalls + kCalls - 1)], 0);
    }
}

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_allreduce_over_mr, setup, teardown),
        cmocka_unit_test(test_choose_c_api),
        cmocka_unit_test(test_take_max_follows_settings),
        cmocka_unit_test_setup_teardown(test_missing_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_direct_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_barrier_over_mr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scratch_kept_between_calls, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
