/*
 * Params::fail, every algorithm: a rank that cannot take part (the glue could not stage its
 * buffers) runs its collective in fail mode. Over the in-memory transport, n ranks, one of
 * them (the root or another rank) failing, no timeout set: every rank must return (run_ranks
 * aborts on a hang), the failing rank with its own status and reason, without a data transfer
 * and without touching its buffers (they lie in memory with no access at all: a read or a
 * write kills the test), and every rank that reports success must hold the right data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

extern "C" {
#include <cmocka.h>
}

#include <string>
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/alltoall.hpp"
#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/gathers.hpp"
#include "algo/reductions.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;

namespace {

constexpr uint32_t kComm = 0x5a;
constexpr size_t kBlock = 3000; /* bytes per rank's block: 47 segments of 64 */
constexpr const char *kWhy = "staging failed (test)";

void sum_u64(const void *in, void *inout, size_t count, void *)
{
    const uint64_t *a = static_cast<const uint64_t *>(in);
    uint64_t *b = static_cast<uint64_t *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] += a[i];
    }
}

/* Counts the failing rank's transfers other than its abort messages. */
class Counting final : public Transport {
  public:
    explicit Counting(Transport &t) : t_(t) {}
    int data = 0;
    dr_status_t isend(int peer, uint64_t key, const void *buf, size_t len, Req *req) override
    {
        data += dr_key_unpack(key).step == kAbortStep ? 0 : 1;
        return t_.isend(peer, key, buf, len, req);
    }
    dr_status_t irecv(int peer, uint64_t key, void *buf, size_t cap, Req *req) override
    {
        data += dr_key_unpack(key).step == kAbortStep ? 0 : 1;
        return t_.irecv(peer, key, buf, cap, req);
    }
    dr_status_t test(Req req, size_t *len) override { return t_.test(req, len); }
    dr_status_t cancel(Req req) override { return t_.cancel(req); }
    void release(Req req) override { t_.release(req); }
    int progress() override { return t_.progress(); }
    void peer_name(int peer, char *buf, size_t len) const override { t_.peer_name(peer, buf, len); }
    const char *last_error() const override { return t_.last_error(); }

  private:
    Transport &t_;
};

/* Memory nobody may read or write (the failing rank's "device" buffers). */
class NoAccess {
  public:
    explicit NoAccess(size_t bytes) : len_(bytes == 0 ? 1 : bytes)
    {
        p_ = mmap(nullptr, len_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        assert_true(p_ != MAP_FAILED);
    }
    ~NoAccess() { munmap(p_, len_); }
    NoAccess(const NoAccess &) = delete;
    NoAccess &operator=(const NoAccess &) = delete;
    char *get() const { return static_cast<char *>(p_); }

  private:
    void *p_;
    size_t len_;
};

struct Cfg {
    int kind, algo, n, root, failing;
};

std::string describe(const Cfg &c)
{
    return std::string(kind_name(c.kind)) + " algo " + std::to_string(c.algo) +
           " n=" + std::to_string(c.n) + " root " + std::to_string(c.root) + ", rank " +
           std::to_string(c.failing) + " failing";
}

uint64_t word(int rank, size_t i)
{
    return (uint64_t)(rank + 1) * 0x100000001ull + i;
}

struct Outcome {
    dr_status_t st = DR_INPROGRESS;
    std::string err;
    bool correct = false;
    int data = 0;
};

/* One rank's part: buffers (host ones filled; the failing rank's with no access), the
 * call, and whether a success left the right data. */
void one_rank(const Cfg &c, Transport &t, Params p, int rank, Outcome &o)
{
    const int n = c.n;
    const bool failing = rank == c.failing;
    const size_t words = kBlock / 8, all = kBlock * (size_t)n;
    std::vector<uint64_t> in(all / 8), out(all / 8, 0);
    for (size_t i = 0; i < in.size(); ++i) {
        in[i] = word(rank, i);
    }
    NoAccess none_in(all), none_out(all);
    char *s = failing ? none_in.get() : reinterpret_cast<char *>(in.data());
    char *r = failing ? none_out.get() : reinterpret_cast<char *>(out.data());
    std::vector<size_t> counts((size_t)n, kBlock), displs((size_t)n);
    for (int q = 0; q < n; ++q) {
        displs[(size_t)q] = (size_t)q * kBlock;
    }
    p.algorithm = c.algo;
    p.root = c.root;
    p.segment_size = 64;
    p.timeout = -1; /* only the fail mode's abort messages may bring the peers out */
    if (failing) {
        p.fail = DR_ERR_GPU;
        p.fail_why = kWhy;
    }
    Scratch scratch;
    auto expect_sum = [&](const uint64_t *got, size_t first, size_t count) {
        for (size_t i = 0; i < count; ++i) {
            uint64_t want = 0;
            for (int q = 0; q < n; ++q) {
                want += word(q, first + i);
            }
            if (got[i] != want) {
                return false;
            }
        }
        return true;
    };
    auto expect_blocks = [&](int from_self_offset) {
        /* out holds every rank's first block (block q from rank q) */
        for (int q = 0; q < n; ++q) {
            for (size_t i = 0; i < words; ++i) {
                if (out[(size_t)q * words + i] !=
                    word(q, i + (size_t)(from_self_offset ? rank : 0) * words)) {
                    return false;
                }
            }
        }
        return true;
    };
    /* Every kind's buffers and counts; a case sets what differs. */
    p.sendbuf = s;
    p.recvbuf = r;
    p.count = kBlock;
    if (c.kind == kKindReduce || c.kind == kKindReduceScatterBlock || c.kind == kKindAllreduce) {
        p.elem_size = 8;
        p.count = words;
        p.reduce = sum_u64;
    }
    switch (c.kind) {
    case kKindBcast:
        p.sendbuf = nullptr;
        p.recvbuf = rank == c.root ? s : r;
        o.st = bcast(t, p, &o.err);
        o.correct = true;
        for (size_t i = 0; rank != c.root && i < words; ++i) {
            o.correct = o.correct && out[i] == word(c.root, i);
        }
        break;
    case kKindAllgather:
        o.st = allgather(t, p, &scratch, &o.err);
        o.correct = expect_blocks(0);
        break;
    case kKindAllgatherv:
        p.counts = counts.data();
        p.displs = displs.data();
        o.st = allgatherv(t, p, &scratch, &o.err);
        o.correct = expect_blocks(0);
        break;
    case kKindGather:
        p.recvbuf = rank == c.root ? r : nullptr;
        o.st = gather(t, p, &scratch, &o.err);
        o.correct = rank != c.root || expect_blocks(0);
        break;
    case kKindScatter:
        p.sendbuf = rank == c.root ? s : nullptr;
        o.st = scatter(t, p, &scratch, &o.err);
        o.correct = true;
        for (size_t i = 0; i < words; ++i) {
            o.correct = o.correct && out[i] == word(c.root, (size_t)rank * words + i);
        }
        break;
    case kKindGatherv:
        p.recvbuf = rank == c.root ? r : nullptr;
        p.counts = counts.data();
        p.displs = displs.data();
        o.st = gatherv(t, p, &o.err);
        o.correct = rank != c.root || expect_blocks(0);
        break;
    case kKindReduce:
        o.st = reduce(t, p, &scratch, &o.err);
        o.correct = rank != c.root || expect_sum(out.data(), 0, words);
        break;
    case kKindReduceScatterBlock:
        o.st = reduce_scatter_block(t, p, &scratch, &o.err);
        o.correct = expect_sum(out.data(), (size_t)rank * words, words);
        break;
    case kKindAllreduce:
        o.st = allreduce(t, p, &scratch, &o.err);
        o.correct = expect_sum(out.data(), 0, words);
        break;
    case kKindAlltoall:
        o.st = alltoall(t, p, 0, &scratch, &o.err);
        o.correct = expect_blocks(1);
        break;
    default:
        fail_msg("no such kind %d", c.kind);
    }
}

void run(const Cfg &c, dualrail::test::Failures &f)
{
    fake::Net net(c.n, kComm);
    std::vector<Outcome> out((size_t)c.n);
    fake::run_ranks(
        c.n,
        [&](int rank) {
            fake::FakeTransport ft(net, rank);
            Counting t(ft);
            one_rank(c, t, fake::rank_params(c.kind, rank, c.n, ft, kComm), rank,
                     out[(size_t)rank]);
            out[(size_t)rank].data = t.data;
        },
        60, "fail mode");
    const std::string what = describe(c);
    int errors = 0;
    for (int rank = 0; rank < c.n; ++rank) {
        const Outcome &o = out[(size_t)rank];
        errors += o.st != DR_OK;
        if (rank == c.failing) {
            if (o.st != DR_ERR_GPU || o.err.find(kWhy) == std::string::npos || o.data != 0) {
                f.add(what + ": the failing rank returned " + dr_status_str(o.st) + " (" + o.err +
                      ") after " + std::to_string(o.data) + " transfers");
            }
        } else if (o.st == DR_OK && !o.correct) {
            f.add(what + ": rank " + std::to_string(rank) + " succeeded with wrong data");
        } else if (o.st != DR_OK && o.err.find("gave up") == std::string::npos &&
                   o.err.find("peer rank") == std::string::npos) {
            f.add(what + ": rank " + std::to_string(rank) + ": " + o.err);
        }
    }
    if (errors < 2) {
        /* every configuration below has a rank that needs the failing rank's data */
        f.add(what + ": nobody but the failing rank noticed");
    }
    print_message("%s: %d of %d ranks failed\n", what.c_str(), errors, c.n);
}

void test_every_algorithm(void **state)
{
    (void)state;
    const std::vector<Cfg> cfgs = {
        {kKindBcast, kBcastBinomial, 5, 0, 0},
        {kKindBcast, kBcastBinomial, 5, 3, 3},
        {kKindBcast, kBcastScatterAllgather, 5, 1, 1},
        {kKindBcast, kBcastScatterAllgather, 5, 1, 4}, /* a non-root: the allgather needs it */
        {kKindBcast, kBcastChain, 5, 2, 2},
        {kKindAllgather, kAllgatherRing, 5, 0, 3},
        {kKindAllgather, kAllgatherRd, 4, 0, 1},
        {kKindAllgather, kAllgatherBruck, 5, 0, 2},
        {kKindAllgatherv, kAllgathervRing, 5, 0, 4},
        {kKindAllgatherv, kAllgathervBruck, 5, 0, 0},
        {kKindGather, kGatherBinomial, 5, 0, 2},
        {kKindGather, kGatherBinomial, 5, 2, 2},
        {kKindScatter, kGatherBinomial, 5, 1, 1},
        {kKindGatherv, kGathervLinear, 5, 3, 0},
        {kKindReduce, kReduceBinomial, 5, 0, 3},
        {kKindReduce, kReduceRabenseifner, 5, 1, 4},
        {kKindReduce, kReduceChain, 5, 4, 0},
        {kKindReduceScatterBlock, kReduceScatterRing, 5, 0, 2},
        {kKindReduceScatterBlock, kReduceScatterHalving, 5, 0, 4},
        {kKindAllreduce, kAlgoRing, 5, 0, 1},
        {kKindAllreduce, kAlgoRd, 5, 0, 0}, /* 0 folds into 1 */
        {kKindAllreduce, kAlgoRd, 5, 0, 3},
        {kKindAlltoall, kAlltoallPairwise, 5, 0, 1},
        {kKindAlltoall, kAlltoallBruck, 5, 0, 3},
    };
    dualrail::test::Failures f;
    for (const Cfg &c : cfgs) {
        run(c, f);
    }
    for (const std::string &l : f.lines) {
        print_error("%s\n", l.c_str());
    }
    assert_int_equal(f.lines.size(), 0);
}

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_algorithm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
