/*
 * Error paths of the allreduce algorithms: argument checks (no traffic),
 * out of memory, a link that fails mid-collective (every rank returns, the
 * ones that lost data return an error, none hangs: no timeout is set, the
 * abort messages alone must reach everyone), a missing rank (timeout), and
 * ranks that disagree on the count.
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
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/engine.hpp"
#include "algo/ring_math.hpp"
#include "test_algo_fake.hpp"

using namespace dualrail::coll;

namespace {

constexpr uint32_t kComm = 0x77;

void sum_u64(const void *in, void *inout, size_t count, void *)
{
    const uint64_t *a = static_cast<const uint64_t *>(in);
    uint64_t *b = static_cast<uint64_t *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] += a[i];
    }
}

uint64_t val(int r, size_t i)
{
    return (uint64_t)(r + 1) * 1000003u + i * 7u;
}

/* A transport that records every call: the argument checks must not communicate. */
class NoComm final : public Transport {
  public:
    int data_calls = 0, abort_sends = 0;
    dr_status_t isend(int, uint64_t key, const void *, size_t, Req *) override
    {
        (dr_key_unpack(key).step == kAbortStep ? abort_sends : data_calls)++;
        return DR_ERR_INVALID;
    }
    dr_status_t irecv(int, uint64_t, void *, size_t, Req *) override
    {
        ++data_calls;
        return DR_ERR_INVALID;
    }
    dr_status_t test(Req, size_t *) override { return DR_ERR_INVALID; }
    dr_status_t cancel(Req) override { return DR_OK; }
    void release(Req) override {}
    int progress() override { return 0; }
    void peer_name(int peer, char *buf, size_t len) const override
    {
        snprintf(buf, len, "peer rank %d", peer);
    }
    const char *last_error() const override { return "none"; }
};

Params base_params(int rank, int size, void *buf, size_t count)
{
    Params p;
    p.recvbuf = buf;
    p.count = count;
    p.elem_size = 8;
    p.reduce = sum_u64;
    p.rank = rank;
    p.size = size;
    p.comm_id = kComm;
    return p;
}

void test_invalid_args(void **state)
{
    (void)state;
    uint64_t buf[4] = {1, 2, 3, 4};
    struct Case {
        const char *what;
        void (*edit)(Params &);
    } cases[] = {
        {"element size 0", [](Params &p) { p.elem_size = 0; }},
        {"element size 65", [](Params &p) { p.elem_size = 65; }},
        {"no reduce", [](Params &p) { p.reduce = nullptr; }},
        {"rank too big", [](Params &p) { p.rank = p.size; }},
        {"negative rank", [](Params &p) { p.rank = -1; }},
        {"size 0", [](Params &p) { p.size = 0; }},
        {"comm id > 16 bits", [](Params &p) { p.comm_id = 0x10000; }},
        {"unknown algorithm", [](Params &p) { p.algorithm = 3; }},
        {"count overflows", [](Params &p) { p.count = SIZE_MAX / 4; }},
        {"no recvbuf", [](Params &p) { p.recvbuf = nullptr; }},
        {"forced ring on 2049 ranks",
         [](Params &p) {
             p.size = kRingMaxRanks + 1;
             p.algorithm = kAlgoRing;
         }},
    };
    for (const Case &c : cases) {
        NoComm t;
        Params p = base_params(1, 4, buf, 4);
        c.edit(p);
        std::string err;
        assert_int_equal(allreduce(t, p, nullptr, &err), DR_ERR_INVALID);
        assert_int_equal(t.data_calls + t.abort_sends, 0);
        assert_false(err.empty());
        assert_true(err.find('\n') == std::string::npos);
        print_message("%-26s -> %s\n", c.what, err.c_str());
    }
    /* the seq field wraps instead of failing */
    NoComm t;
    Params p = base_params(0, 1, buf, 4);
    p.seq = 0xffffffffu;
    assert_int_equal(allreduce(t, p, nullptr, nullptr), DR_OK);
}

void test_trivial_cases(void **state)
{
    (void)state;
    NoComm t;
    /* count 0: nothing moves, even with no buffers */
    Params p = base_params(2, 8, nullptr, 0);
    std::string err = "stale";
    assert_int_equal(allreduce(t, p, nullptr, &err), DR_OK);
    assert_true(err.empty());
    assert_int_equal(t.data_calls, 0);
    /* one rank: a copy */
    uint64_t in[3] = {7, 8, 9}, out[3] = {0, 0, 0};
    p = base_params(0, 1, out, 3);
    p.sendbuf = in;
    assert_int_equal(allreduce(t, p, nullptr, &err), DR_OK);
    assert_memory_equal(in, out, sizeof(in));
    p.sendbuf = nullptr; /* in place: untouched */
    assert_int_equal(allreduce(t, p, nullptr, &err), DR_OK);
    assert_memory_equal(in, out, sizeof(in));
    assert_int_equal(t.data_calls, 0);
}

void test_no_memory(void **state)
{
    (void)state;
    /* Scratch for 2^44 elements cannot be had: both algorithms say so before any traffic. */
    for (int algo : {kAlgoRing, kAlgoRd}) {
        NoComm t;
        uint64_t dummy;
        Params p = base_params(1, 4, &dummy, (size_t)1 << 44);
        p.sendbuf = &dummy + 1; /* never read: the allocation fails first */
        p.algorithm = algo;
        std::string err;
        assert_int_equal(allreduce(t, p, nullptr, &err), DR_ERR_NO_MEMORY);
        assert_int_equal(t.data_calls, 0);
        assert_true(err.find("out of memory") != std::string::npos);
        /* the peers waiting for this rank are told */
        assert_true(t.abort_sends > 0);
        print_message("%s\n", err.c_str());
    }
}

struct Outcome {
    dr_status_t st = DR_INPROGRESS;
    std::string err;
    std::vector<uint64_t> buf;
};

/*
 * Run one allreduce on n ranks over net; rank `absent` (if >= 0) never calls.
 * counts[r] lets ranks disagree. Returns every rank's outcome.
 */
std::vector<Outcome> run(fake::Net &net, int n, int algo, std::vector<size_t> counts,
                         double timeout, int absent = -1, size_t seg = 64)
{
    std::vector<Outcome> out((size_t)n);
    fake::run_ranks(
        n,
        [&](int rank) {
            if (rank == absent) {
                return;
            }
            fake::FakeTransport t(net, rank);
            Outcome &o = out[(size_t)rank];
            o.buf.resize(counts[(size_t)rank]);
            for (size_t i = 0; i < o.buf.size(); ++i) {
                o.buf[i] = val(rank, i);
            }
            Params p = base_params(rank, n, o.buf.data(), o.buf.size());
            p.algorithm = algo;
            p.segment_size = seg;
            p.timeout = timeout;
            p.idle = fake::FakeTransport::idle;
            p.idle_arg = &t;
            o.st = allreduce(t, p, nullptr, &o.err);
        },
        60, "fault run");
    return out;
}

bool correct(const Outcome &o, int n)
{
    for (size_t i = 0; i < o.buf.size(); ++i) {
        uint64_t want = 0;
        for (int r = 0; r < n; ++r) {
            want += val(r, i);
        }
        if (o.buf[i] != want) {
            return false;
        }
    }
    return true;
}

/*
 * Link a-b fails after `after` messages. The ranks at its ends must fail; the
 * others either fail too or (when the link died after they had all they
 * needed) hold the right result; nobody hangs (no timeout is set).
 */
void check_link_failure(int n, int algo, size_t count, int a, int b, long after, bool all_fail)
{
    fake::Net net(n, kComm);
    net.fail_link(a, b, after);
    std::vector<Outcome> out = run(net, n, algo, std::vector<size_t>((size_t)n, count), -1);
    int errors = 0;
    for (int r = 0; r < n; ++r) {
        const Outcome &o = out[(size_t)r];
        if (o.st != DR_OK) {
            ++errors;
            assert_false(o.err.empty());
            assert_true(o.err.find('\n') == std::string::npos);
            assert_true(o.err.find("peer rank") != std::string::npos);
        } else {
            assert_true(correct(o, n));
        }
        if (r == a || r == b || all_fail) {
            if (o.st == DR_OK) {
                print_error("n=%d algo=%d link %d-%d after %ld: rank %d succeeded\n", n, algo, a, b,
                            after, r);
            }
            assert_int_not_equal(o.st, DR_OK);
        }
    }
    print_message("n=%d algo=%d link %d-%d after %ld: %d of %d ranks failed; rank %d: %s\n", n,
                  algo, a, b, after, errors, n, b, out[(size_t)b].err.c_str());
    for (const std::string &v : net.violations()) {
        print_error("transport contract: %s\n", v.c_str());
    }
    assert_int_equal(net.violations().size(), 0);
}

void test_ring_link_failure(void **state)
{
    (void)state;
    /* 3000 u64 on 6 ranks, 64-byte segments: 16 segments x 10 steps = 160 messages per link */
    for (long after : {0L, 1L, 40L, 150L}) {
        check_link_failure(6, kAlgoRing, 3000, 2, 3, after, after == 0);
    }
    check_link_failure(2, kAlgoRing, 3000, 0, 1, 0, true);
    check_link_failure(7, kAlgoRing, 5, 6, 0, 0, false); /* count < n: empty blocks */

    /* the first error names the peer and the transport's reason */
    fake::Net net(4, kComm);
    net.fail_link(1, 2, 0);
    std::vector<Outcome> out = run(net, 4, kAlgoRing, std::vector<size_t>(4, 100), -1);
    assert_int_equal(out[2].st, DR_ERR_PEER_UNREACHABLE);
    assert_true(out[2].err.find("peer rank 1") != std::string::npos);
    assert_true(out[2].err.find("injected") != std::string::npos);
    for (const Outcome &o : out) {
        assert_int_not_equal(o.st, DR_OK);
    }
}

void test_rd_link_failure(void **state)
{
    (void)state;
    /* 6 ranks: 0 and 2 fold into 1 and 3; rounds 1<>3, 4<>5 then 1<>4, 3<>5 */
    check_link_failure(6, kAlgoRd, 100, 0, 1, 0, true); /* fold */
    check_link_failure(6, kAlgoRd, 100, 1, 3, 0, true); /* round 0 */
    /* round 1 between 3 and 5: 1 and 4 still exchange full sums, so 0, 1 and 4 may finish */
    check_link_failure(6, kAlgoRd, 100, 3, 5, 0, false);
    check_link_failure(6, kAlgoRd, 100, 0, 1, 1, false); /* unfold: only the pair loses */
    check_link_failure(8, kAlgoRd, 100, 0, 1, 0, true);  /* first round: everyone loses */
    check_link_failure(8, kAlgoRd, 100, 0, 4, 0, false); /* last round: only the pair */
    check_link_failure(3, kAlgoRd, 100, 1, 2, 0, true);
}

void test_missing_rank_timeout(void **state)
{
    (void)state;
    for (int algo : {kAlgoRing, kAlgoRd}) {
        fake::Net net(5, kComm);
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<Outcome> out = run(net, 5, algo, std::vector<size_t>(5, 1000), 0.3, 3);
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        int named = 0;
        for (int r = 0; r < 5; ++r) {
            if (r == 3) {
                continue;
            }
            assert_int_equal(out[(size_t)r].st, DR_ERR_TIMEOUT);
            named += out[(size_t)r].err.find("no progress") != std::string::npos;
        }
        assert_true(named >= 1);
        assert_true(took < 10);
        print_message("algo %d: %.2f s; rank 2: %s\n", algo, took, out[2].err.c_str());
    }
}

void test_count_mismatch(void **state)
{
    (void)state;
    fake::Net net(2, kComm);
    std::vector<Outcome> out = run(net, 2, kAlgoRd, {10, 11}, 5);
    assert_int_equal(out[0].st, DR_ERR_TRUNCATED);
    assert_int_equal(out[1].st, DR_ERR_TRUNCATED);
    print_message("%s\n%s\n", out[0].err.c_str(), out[1].err.c_str());
}

/*
 * Recursive doubling sends from scratch after its first round. When a rank
 * fails while such a send is still running (its partner never came), the
 * transport keeps reading that memory, so the scratch must be abandoned, not
 * freed or reused.
 */
void test_scratch_abandoned(void **state)
{
    (void)state;
    const int n = 4, absent = 2; /* rank 0: round 0 with 1, round 1 with 2 (absent) */
    fake::Net net(n, kComm);
    size_t cap_after[n] = {};
    const void *scratch_before[n] = {};
    dr_status_t st[n];
    fake::run_ranks(
        n,
        [&](int rank) {
            if (rank == absent) {
                return;
            }
            fake::FakeTransport t(net, rank);
            Scratch scratch;
            std::vector<uint64_t> buf(64, (uint64_t)rank);
            Params p = base_params(rank, n, buf.data(), buf.size());
            p.algorithm = kAlgoRd;
            p.timeout = 0.2;
            p.idle = fake::FakeTransport::idle;
            p.idle_arg = &t;
            scratch_before[rank] = scratch.reserve(4096);
            st[rank] = allreduce(t, p, &scratch, nullptr);
            cap_after[rank] = scratch.capacity();
        },
        30, "scratch abandoned");
    assert_int_not_equal(st[0], DR_OK);
    assert_int_equal(cap_after[0], 0); /* rank 0's round-1 send from scratch is still running */
    (void)scratch_before;
}

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_args),    cmocka_unit_test(test_trivial_cases),
        cmocka_unit_test(test_no_memory),       cmocka_unit_test(test_ring_link_failure),
        cmocka_unit_test(test_rd_link_failure), cmocka_unit_test(test_missing_rank_timeout),
        cmocka_unit_test(test_count_mismatch),  cmocka_unit_test(test_scratch_abandoned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
