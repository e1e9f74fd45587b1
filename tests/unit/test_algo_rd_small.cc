/*
 * Recursive doubling without the engine's set-up (mpi_coll/algo/allreduce_rd_small.cc) over
 * the in-memory fake network (test_algo_fake.hpp), one thread per rank:
 *  - the same wire schedule as allreduce_rd.cc: with an op whose result shows the order of
 *    its operands (inout = 3 inout + in, wrapping), ranks on the small path, on the
 *    general one and mixed (every other rank on each) end with the general schedule's
 *    bits, sends copied at once (as ucx_mr's small sends) or completed on the receiver's
 *    acknowledgement (which sends the small path into slow mode), on power-of-two rank
 *    counts and on others (extra ranks folded in and out);
 *  - with copied sends and no delays calls run without building the engine; a late peer
 *    sends the waiting ranks into slow mode, with exact results;
 *  - errors as in the general schedule: a rank that cannot take part (Params::fail) gets
 *    every other rank an error long before the timeout; a peer that never comes gives
 *    DR_ERR_TIMEOUT; ranks that disagree on the count get DR_ERR_TRUNCATED; a failed link
 *    fails both its ends and hangs no rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "algo/allreduce.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;
using namespace dualrail::test;
using fake::report;

namespace {

constexpr uint32_t kComm = 0x0123;

/* Not commutative: the result shows which operand was `in`. */
void order_op(const void *in, void *inout, size_t count, void *)
{
    const uint64_t *a = static_cast<const uint64_t *>(in);
    uint64_t *b = static_cast<uint64_t *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] = b[i] * 3 + a[i];
    }
}

uint64_t input(int rank, size_t i, uint32_t seq)
{
    return mix(((uint64_t)rank + 1) * 0x9e3779b97f4a7c15ULL ^ (i * 0x2545f4914f6cdd1dULL + seq));
}

enum Path { kGeneral, kSmall, kMixed };

struct Call {
    size_t count;
    bool inplace;
};

/* One allreduce on this rank along path (kMixed: even ranks small) of the inputs of
 * `salt`; out gets the result. */
dr_status_t call(Path path, fake::FakeTransport &t, int rank, int n, uint32_t seq, const Call &c,
                 std::vector<uint64_t> &out, std::string *err, uint32_t salt)
{
    std::vector<uint64_t> send(c.count);
    out.assign(c.count, 0xa5a5a5a5a5a5a5a5ULL);
    std::vector<uint64_t> &mine = c.inplace ? out : send;
    for (size_t i = 0; i < c.count; ++i) {
        mine[i] = input(rank, i, salt);
    }
    Params p = fake::rank_params(kKindAllreduce, rank, n, t, kComm);
    p.sendbuf = c.inplace ? nullptr : send.data();
    p.recvbuf = out.data();
    p.count = c.count;
    p.elem_size = sizeof(uint64_t);
    p.reduce = order_op;
    p.seq = seq;
    p.algorithm = kAlgoRd;
    const Params q = normalized(p);
    Scratch scratch;
    const bool small = path == kSmall || (path == kMixed && rank % 2 == 0);
    assert_true(allreduce_rd_small_fits(q));
    const dr_status_t st =
        small ? allreduce_rd_small(t, q, scratch, err) : allreduce_rd(t, q, scratch, err);
    for (size_t i = 0; !c.inplace && i < c.count; ++i) {
        if (send[i] != input(rank, i, salt)) {
            *err = "sendbuf modified";
            return DR_ERR_INVALID;
        }
    }
    return st;
}

/* Every path, copied or acknowledged sends: the general path's bits on every rank. */
void test_same_schedule(void **state)
{
    (void)state;
    const std::vector<Call> calls = {{1, false},  {1, true},    {3, false},
                                     {257, true}, {257, false}, {kRdSmallMaxBytes / 8, false}};
    for (bool copy : {true, false}) {
        for (int n : {2, 3, 4, 5, 6, 7, 8, 12, 16}) {
            fake::Net net(n, kComm);
            net.copy_sends(copy);
            Failures fails;
            /* [path][call][rank] */
            std::vector<std::vector<std::vector<std::vector<uint64_t>>>> res(
                3, std::vector<std::vector<std::vector<uint64_t>>>(
                       calls.size(), std::vector<std::vector<uint64_t>>((size_t)n)));
            fake::run_ranks(
                n,
                [&](int rank) {
                    fake::FakeTransport t(net, rank);
                    uint32_t seq = 0;
                    for (Path path : {kGeneral, kSmall, kMixed}) {
                        for (size_t c = 0; c < calls.size(); ++c) {
                            std::string err;
                            const dr_status_t st =
                                call(path, t, rank, n, seq++, calls[c], res[path][c][(size_t)rank],
                                     &err, (uint32_t)c);
                            if (st != DR_OK) {
                                fails.add("n=" + std::to_string(n) + " path " +
                                          std::to_string(path) + " call " + std::to_string(c) +
                                          " rank " + std::to_string(rank) + ": " + err);
                            }
                        }
                    }
                },
                120, "same schedule");
            for (size_t c = 0; c < calls.size(); ++c) {
                for (int path : {kSmall, kMixed}) {
                    for (int r = 0; r < n; ++r) {
                        if (res[path][c][(size_t)r] != res[kGeneral][c][0]) {
                            fails.add("copy=" + std::to_string(copy) + " n=" + std::to_string(n) +
                                      " call " + std::to_string(c) + " path " +
                                      std::to_string(path) + " rank " + std::to_string(r) +
                                      ": not the general schedule's result");
                        }
                    }
                }
                for (int r = 1; r < n; ++r) {
                    if (res[kGeneral][c][(size_t)r] != res[kGeneral][c][0]) {
                        fails.add("n=" + std::to_string(n) + " call " + std::to_string(c) +
                                  ": the general schedule differs between ranks");
                    }
                }
            }
            report(fails, net);
        }
    }
}

/* n ranks run `calls` small allreduces (rank `late` starts each `late_ms` late), each
 * followed by the general path's on the same inputs, whose result it must equal; returns how
 * many of the small calls built the engine, and in *takes (if not null) how many receives
 * were taken without a request (Transport::take: only the small path's fast mode does). */
uint64_t run_calls(int n, int calls, int late, int late_ms, uint64_t *takes = nullptr)
{
    fake::Net net(n, kComm);
    net.copy_sends(true);
    Failures fails;
    const uint64_t before = allreduce_rd_small_slow_calls();
    uint64_t slow = 0;
    fake::Barrier barrier(n);
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            std::vector<uint64_t> small, general;
            for (int c = 0; c < calls; ++c) {
                const Call k{5, c % 2 == 0};
                std::string err;
                if (rank == late) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
                }
                dr_status_t st =
                    call(kSmall, t, rank, n, (uint32_t)(2 * c), k, small, &err, (uint32_t)c);
                barrier.wait(); /* every small call of round c is over: count them */
                if (rank == 0 && c == calls - 1) {
                    slow = allreduce_rd_small_slow_calls() - before;
                }
                if (st == DR_OK) {
                    st = call(kGeneral, t, rank, n, (uint32_t)(2 * c + 1), k, general, &err,
                              (uint32_t)c);
                }
                if (st != DR_OK) {
                    fails.add("call " + std::to_string(c) + " rank " + std::to_string(rank) + ": " +
                              err);
                } else if (small != general) {
                    fails.add("call " + std::to_string(c) + " rank " + std::to_string(rank) +
                              ": the small path's result is not the general one's");
                }
            }
        },
        120, "calls");
    report(fails, net);
    if (takes != nullptr) {
        *takes = net.takes();
    }
    return slow;
}

void test_fast_mode_taken(void **state)
{
    (void)state;
    for (int n : {4, 6}) {
        const int calls = 200;
        uint64_t takes = 0;
        const uint64_t slow = run_calls(n, calls, -1, 0, &takes);
        print_message("%d calls x %d ranks with copied sends: %llu in slow mode, %llu receives "
                      "taken without a request\n",
                      calls, n, (unsigned long long)slow, (unsigned long long)takes);
        /* Threads descheduled past kAbortListenAfter send some calls into slow mode on a
         * busy machine; a path that never runs fast sends all of them. */
        assert_true(slow < (uint64_t)calls * n);
        /* Every rank has at least one receive per call, and fast mode posts none of them
         * (LazyEngine's deferred receives): each call that stayed fast took one at least. */
        assert_true(takes + slow >= (uint64_t)calls * n);
    }
}

void test_late_peer(void **state)
{
    (void)state;
    const uint64_t slow = run_calls(4, 6, 3, 20);
    print_message("a peer 20 ms late, 6 calls x 4 ranks: %llu in slow mode\n",
                  (unsigned long long)slow);
    assert_true(slow >= 6); /* at least its partner waited that long in every call */
}

struct Outcome {
    dr_status_t st = DR_OK;
    std::string err;
    double secs = 0;
    std::vector<uint64_t> result;
};

/* n ranks call allreduce() (which sends the healthy ranks down the small path) with
 * `setup` adjusting each rank's Params; each rank's outcome. `skip` calls nothing. */
template <class Setup> std::vector<Outcome> outcomes(fake::Net &net, int n, int skip, Setup setup)
{
    std::vector<Outcome> out((size_t)n);
    fake::run_ranks(
        n,
        [&](int rank) {
            if (rank == skip) {
                return;
            }
            fake::FakeTransport t(net, rank);
            std::vector<uint64_t> buf(8, (uint64_t)rank);
            Params p = fake::rank_params(kKindAllreduce, rank, n, t, kComm);
            p.recvbuf = buf.data();
            p.count = 4;
            p.elem_size = sizeof(uint64_t);
            p.reduce = order_op;
            setup(rank, p);
            const auto t0 = std::chrono::steady_clock::now();
            Outcome &o = out[(size_t)rank];
            o.st = allreduce(t, p, nullptr, &o.err);
            o.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            o.result.assign(buf.begin(), buf.begin() + (long)p.count);
        },
        120, "outcomes");
    return out;
}

/* A rank that cannot take part: every other rank learns it from the aborts (slow mode). */
void test_rank_fails(void **state)
{
    (void)state;
    for (int n : {2, 3, 4, 6, 8}) {
        for (int failing : {0, n - 1}) {
            fake::Net net(n, kComm);
            net.copy_sends(true);
            const uint64_t before = allreduce_rd_small_slow_calls();
            const std::vector<Outcome> out = outcomes(net, n, -1, [&](int rank, Params &p) {
                if (rank == failing) {
                    p.fail = DR_ERR_NO_MEMORY;
                    p.fail_why = "staging failed (test)";
                }
            });
            for (int r = 0; r < n; ++r) {
                const Outcome &o = out[(size_t)r];
                print_message("n=%d rank %d fails: rank %d: %s (%.3f s): %s\n", n, failing, r,
                              dr_status_str(o.st), o.secs, o.err.c_str());
                assert_int_not_equal(o.st, DR_OK);
                assert_true(o.secs < 10); /* the timeout is 60 s */
                if (r == failing) {
                    assert_int_equal(o.st, DR_ERR_NO_MEMORY);
                } else {
                    assert_true(o.err.find("rank " + std::to_string(r)) != std::string::npos);
                }
            }
            /* the healthy ranks heard of it only by listening, which is slow mode's */
            assert_true(allreduce_rd_small_slow_calls() - before >= (uint64_t)(n - 1));
            assert_int_equal(net.violations().size(), 0);
        }
    }
}

/* A peer that never comes: the timeout, not a hang. */
void test_timeout(void **state)
{
    (void)state;
    fake::Net net(2, kComm);
    net.copy_sends(true);
    const std::vector<Outcome> out = outcomes(net, 2, 1, [](int, Params &p) { p.timeout = 0.3; });
    print_message("rank 0: %s (%.3f s): %s\n", dr_status_str(out[0].st), out[0].secs,
                  out[0].err.c_str());
    assert_int_equal(out[0].st, DR_ERR_TIMEOUT);
    assert_true(out[0].secs >= 0.3 && out[0].secs < 10);
}

/* Ranks that disagree on the count: both ends see the mismatch. */
void test_truncated(void **state)
{
    (void)state;
    for (bool copy : {true, false}) {
        fake::Net net(2, kComm);
        net.copy_sends(copy);
        const std::vector<Outcome> out =
            outcomes(net, 2, -1, [](int rank, Params &p) { p.count = rank == 0 ? 4 : 5; });
        for (const Outcome &o : out) {
            print_message("copy=%d: %s: %s\n", copy, dr_status_str(o.st), o.err.c_str());
            assert_int_equal(o.st, DR_ERR_TRUNCATED);
        }
    }
}

/* A link lost in the first round: every rank fails or has the right result, the link's
 * ends fail where nothing crossed it (a copied send that was lost fails only its receiver,
 * as over ucx_mr), no rank hangs. */
void test_link_fails(void **state)
{
    (void)state;
    fake::Net clean(4, kComm);
    const std::vector<Outcome> ref = outcomes(clean, 4, -1, [](int, Params &) {});
    for (long after : {0L, 1L}) {
        fake::Net net(4, kComm);
        net.copy_sends(true);
        net.fail_link(0, 1, after);
        const std::vector<Outcome> out = outcomes(net, 4, -1, [](int, Params &) {});
        for (int r = 0; r < 4; ++r) {
            const Outcome &o = out[(size_t)r];
            print_message("link 0-1 after %ld: rank %d: %s (%.3f s): %s\n", after, r,
                          dr_status_str(o.st), o.secs, o.err.c_str());
            assert_true(o.secs < 10);
            if (o.st == DR_OK) {
                assert_true(ref[(size_t)r].st == DR_OK && o.result == ref[(size_t)r].result);
            } else {
                assert_true(o.err.find("peer rank") != std::string::npos);
            }
            if (r < 2 && after == 0) {
                assert_int_not_equal(o.st, DR_OK);
            }
        }
        assert_true(out[0].st != DR_OK || out[1].st != DR_OK);
        assert_int_equal(net.violations().size(), 0);
    }
}

} // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_schedule), cmocka_unit_test(test_fast_mode_taken),
        cmocka_unit_test(test_late_peer),     cmocka_unit_test(test_rank_fails),
        cmocka_unit_test(test_timeout),       cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_link_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
