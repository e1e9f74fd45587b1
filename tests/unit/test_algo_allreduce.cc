/*
 * Allreduce correctness over the in-memory fake network, one thread per rank
 * (test_algo_fake.hpp). Table-driven: every rank count in [lo, hi] (argv),
 * counts {0, 1, n-1, 1001, 100000}, six element types (1, 4, 8 and 12
 * bytes, integer sums that wrap and float sums), ring / recursive doubling /
 * auto, in place or not, default and 64-byte segments (the many-segment
 * path). Every element is checked against a reference, every rank's result
 * must be bitwise identical to rank 0's, and sendbuf must be left untouched.
 * Also: collectives back to back, and the same bits on every rank for ops
 * whose result depends on the operands' order in its bits (MAX/MIN with a
 * NaN or signed zeros).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <cmath>
#include <string>
#include <vector>

#include "algo/allreduce.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;
using namespace dualrail::test;
using fake::report;

namespace {

int g_lo = 1, g_hi = 16;
constexpr uint32_t kComm = 0x0abc;

uint64_t ival(int r, size_t i, uint64_t salt)
{
    return mix(((uint64_t)r + 1) * 0x9e3779b97f4a7c15ULL ^ (i * 0x2545f4914f6cdd1dULL + salt));
}

double fval(int r, size_t i, uint64_t salt)
{
    /* ±244 with 12 fractional bits: sums round differently in different orders */
    return ((double)(ival(r, i, salt) % 2000001) - 1000000.0) / 4096.0;
}

struct Type {
    const char *name;
    size_t esz;
    ReduceFn fn;
    int kind;    /* 0 integer lanes, 1 float, 2 double */
    size_t lane; /* bytes per integer lane */
};

const Type kTypes[] = {
    {"u8", 1, sum_t<uint8_t>, 0, 1},   {"u32", 4, sum_t<uint32_t>, 0, 4},
    {"f32", 4, sum_t<float>, 1, 4},  {"u64", 8, sum_t<uint64_t>, 0, 8},
    {"f64", 8, sum_t<double>, 2, 8}, {"u32x3", 12, sum_u32x3, 0, 4},
};

/* This rank's input: integer lanes or floats, a function of (rank, index, salt). */
void fill(const Type &t, void *buf, size_t count, int r, uint64_t salt)
{
    const size_t lanes = count * t.esz / t.lane;
    for (size_t i = 0; i < lanes; ++i) {
        if (t.kind == 1) {
            static_cast<float *>(buf)[i] = (float)fval(r, i, salt);
        } else if (t.kind == 2) {
            static_cast<double *>(buf)[i] = fval(r, i, salt);
        } else {
            const uint64_t v = ival(r, i, salt);
            memcpy(static_cast<char *>(buf) + i * t.lane, &v, t.lane); /* little endian */
        }
    }
}

/* Compare one rank's result with the exact sum (integers) or a tolerance (floats). */
bool check_reference(const Type &t, const void *res, size_t count, int n, uint64_t salt,
                     std::string *why)
{
    const size_t lanes = count * t.esz / t.lane;
    for (size_t i = 0; i < lanes; ++i) {
        if (t.kind == 0) {
            uint64_t want = 0, got = 0;
            for (int r = 0; r < n; ++r) {
                want += ival(r, i, salt);
            }
            if (t.lane < 8) {
                want &= (UINT64_C(1) << (8 * t.lane)) - 1;
            }
            memcpy(&got, static_cast<const char *>(res) + i * t.lane, t.lane);
            if (got != want) {
                *why = "lane " + std::to_string(i) + ": got " + std::to_string(got) + " want " +
                       std::to_string(want);
                return false;
            }
        } else {
            double want = 0, mag = 0;
            for (int r = 0; r < n; ++r) {
                want += fval(r, i, salt);
                mag += std::fabs(fval(r, i, salt));
            }
            const double got = t.kind == 1 ? (double)static_cast<const float *>(res)[i]
                                           : static_cast<const double *>(res)[i];
            const double tol = (t.kind == 1 ? 1e-5 : 1e-12) * mag + 1e-30;
            if (!(std::fabs(got - want) <= tol)) {
                *why = "element " + std::to_string(i) + ": got " + std::to_string(got) + " want " +
                       std::to_string(want);
                return false;
            }
        }
    }
    return true;
}

struct Config {
    size_t count;
    const Type *type;
    int algo;
    size_t seg;
    bool inplace;
};

std::string describe(int n, const Config &c)
{
    static const char *algos[] = {"auto", "ring", "rd"};
    char b[160];
    snprintf(b, sizeof(b), "n=%d count=%zu type=%s algo=%s seg=%zu %s", n, c.count, c.type->name,
             algos[c.algo], c.seg, c.inplace ? "in-place" : "out-of-place");
    return b;
}

std::vector<Config> configs(int n)
{
    std::vector<Config> out;
    const size_t counts[] = {0, 1, (size_t)(n - 1), 1001, 100000};
    for (size_t count : counts) {
        for (const Type &t : kTypes) {
            for (int algo : {kAlgoAuto, kAlgoRing, kAlgoRd}) {
                for (size_t seg : {(size_t)0, (size_t)64}) {
                    if (algo == kAlgoRd && seg != 0) {
                        continue; /* recursive doubling does not segment */
                    }
                    for (bool inplace : {false, true}) {
                        out.push_back(Config{count, &t, algo, seg, inplace});
                    }
                }
            }
        }
    }
    return out;
}

void run_table(int n)
{
    const std::vector<Config> cfgs = configs(n);
    fake::Net net(n, kComm);
    fake::Barrier barrier(n);
    Failures fails;
    std::vector<const unsigned char *> results((size_t)n);
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            for (size_t ci = 0; ci < cfgs.size(); ++ci) {
                const Config &c = cfgs[ci];
                const size_t bytes = c.count * c.type->esz;
                const uint64_t salt = ci * 7919;
                std::vector<unsigned char> send(bytes + 1), recv(bytes + 1), orig;
                if (c.inplace) {
                    fill(*c.type, recv.data(), c.count, rank, salt);
                } else {
                    fill(*c.type, send.data(), c.count, rank, salt);
                    memset(recv.data(), 0xa5, bytes);
                    orig = send;
                }
                recv[bytes] = 0x5a; /* guard byte */
                Params p;
                p.sendbuf = c.inplace ? (ci % 4 == 1 ? recv.data() : nullptr) : send.data();
                p.recvbuf = recv.data();
                p.count = c.count;
                p.elem_size = c.type->esz;
                p.reduce = c.type->fn;
                p.rank = rank;
                p.size = n;
                p.comm_id = kComm;
                p.seq = (uint32_t)ci;
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                p.timeout = 60;
                p.idle = fake::FakeTransport::idle;
                p.idle_arg = &t;
                barrier.wait();
                std::string err;
                const dr_status_t st = allreduce(t, p, nullptr, &err);
                results[(size_t)rank] = recv.data();
                barrier.wait();
                const std::string what = describe(n, c) + " rank " + std::to_string(rank);
                std::string why;
                if (st != DR_OK) {
                    fails.add(what + ": status " + std::to_string(st) + ": " + err);
                } else if (recv[bytes] != 0x5a) {
                    fails.add(what + ": wrote past the end of recvbuf");
                } else if (rank == 0 &&
                           !check_reference(*c.type, recv.data(), c.count, n, salt, &why)) {
                    fails.add(what + ": wrong result: " + why);
                } else if (rank != 0 && memcmp(recv.data(), results[0], bytes) != 0) {
                    fails.add(what + ": result differs from rank 0's");
                } else if (!c.inplace && memcmp(send.data(), orig.data(), bytes) != 0) {
                    fails.add(what + ": sendbuf was modified");
                }
                barrier.wait(); /* others read our recvbuf */
                if (rank == 0) {
                    net.forget_keys();
                }
                barrier.wait();
            }
        },
        280, "allreduce table");
    report(fails, net);
}

void test_table(void **state)
{
    (void)state;
    for (int n = g_lo; n <= g_hi; ++n) {
        run_table(n);
    }
}

/*
 * Collectives back to back with no barrier between them: fast ranks run
 * ahead into the next collective, so only the sequence number in the key
 * keeps their messages apart. The sequence wraps at 2^16 on the way, and a
 * caller-owned Scratch is reused across calls.
 */
void test_back_to_back(void **state)
{
    (void)state;
    if (g_lo > 1) {
        skip();
    }
    for (int n : {3, 5, 8}) {
        const int calls = 40;
        fake::Net net(n, kComm);
        Failures fails;
        std::vector<std::vector<std::vector<unsigned char>>> res((size_t)n);
        auto count_of = [](int c) {
            return (size_t)(c % 5 == 0 ? 20000 : c % 3 == 0 ? 1 : 333 + c);
        };
        fake::run_ranks(
            n,
            [&](int rank) {
                fake::FakeTransport t(net, rank);
                Scratch scratch;
                res[(size_t)rank].resize(calls);
                for (int c = 0; c < calls; ++c) {
                    const size_t count = count_of(c);
                    const Type &ty = kTypes[c % 2 == 0 ? 1 : 4]; /* u32 / f64 */
                    std::vector<unsigned char> &buf = res[(size_t)rank][(size_t)c];
                    buf.resize(count * ty.esz);
                    fill(ty, buf.data(), count, rank, (uint64_t)c);
                    Params p;
                    p.recvbuf = buf.data();
                    p.count = count;
                    p.elem_size = ty.esz;
                    p.reduce = ty.fn;
                    p.rank = rank;
                    p.size = n;
                    p.comm_id = kComm;
                    p.seq = (kSeqMask - 20 + (uint32_t)c) & kSeqMask;
                    p.algorithm = c % 3;
                    p.segment_size = c % 2 ? 256 : 0;
                    p.timeout = 60;
                    p.idle = fake::FakeTransport::idle;
                    p.idle_arg = &t;
                    if ((rank + c) % 4 == 0) {
                        std::this_thread::yield(); /* skew the ranks */
                    }
                    std::string err;
                    dr_status_t st = allreduce(t, p, &scratch, &err);
                    if (st != DR_OK) {
                        fails.add("n=" + std::to_string(n) + " call " + std::to_string(c) +
                                  " rank " + std::to_string(rank) + ": " + err);
                    }
                }
            },
            120, "back to back");
        for (int c = 0; c < calls; ++c) {
            const Type &ty = kTypes[c % 2 == 0 ? 1 : 4];
            std::string why;
            if (!check_reference(ty, res[0][(size_t)c].data(), count_of(c), n, (uint64_t)c, &why)) {
                fails.add("n=" + std::to_string(n) + " call " + std::to_string(c) + ": " + why);
            }
            for (int r = 1; r < n; ++r) {
                if (res[(size_t)r][(size_t)c] != res[0][(size_t)c]) {
                    fails.add("n=" + std::to_string(n) + " call " + std::to_string(c) + " rank " +
                              std::to_string(r) + " differs from rank 0");
                }
            }
        }
        report(fails, net);
    }
}

/* Open MPI's MPI_MAX and MPI_MIN of doubles (op_base_functions.c: inout = inout > in ? inout :
 * in): commutative in value, not in bits, since a failed comparison keeps `in`. */
void max_ompi(const void *in, void *inout, size_t count, void *)
{
    const double *a = static_cast<const double *>(in);
    double *b = static_cast<double *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] = b[i] > a[i] ? b[i] : a[i];
    }
}

void min_ompi(const void *in, void *inout, size_t count, void *)
{
    const double *a = static_cast<const double *>(in);
    double *b = static_cast<double *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] = b[i] < a[i] ? b[i] : a[i];
    }
}

/*
 * Every rank ends with the same bits even where the op's operand order decides them: one rank
 * holds a NaN (each rank in turn), the signs of zeros alternate. Recursive doubling's two
 * partners of a round compute the pair's result each on its own; with the operands swapped
 * on one side, 2 ranks under MPI_MAX ended NaN on one and 1.0 on the other.
 */
void test_same_bits_everywhere(void **state)
{
    (void)state;
    if (g_lo > 1) {
        skip();
    }
    const size_t count = 6;
    for (int n = 2; n <= 9; ++n) {
        fake::Net net(n, kComm);
        fake::Barrier barrier(n);
        Failures fails;
        std::vector<std::vector<double>> res((size_t)n);
        fake::run_ranks(
            n,
            [&](int rank) {
                fake::FakeTransport t(net, rank);
                uint32_t seq = 0;
                for (int nan_at = 0; nan_at < n; ++nan_at) {
                    for (int c = 0; c < 12; ++c) {
                        const bool is_max = c % 2 == 0, inplace = c % 4 >= 2;
                        const int algo = c / 4 == 0 ? kAlgoRd : c / 4 == 1 ? kAlgoRing : kAlgoAuto;
                        const double z = rank % 2 == 0 ? 0.0 : -0.0;
                        std::vector<double> send = {
                            rank == nan_at ? NAN : 1.0, z,  -z, rank == nan_at ? NAN : -1.0,
                            (double)((rank * 7) % n),   2.5};
                        std::vector<double> &recv = res[(size_t)rank];
                        recv.assign(count, 99.0);
                        if (inplace) {
                            recv = send;
                        }
                        Params p = fake::rank_params(kKindAllreduce, rank, n, t, kComm);
                        p.sendbuf = inplace ? nullptr : send.data();
                        p.recvbuf = recv.data();
                        p.count = count;
                        p.elem_size = sizeof(double);
                        p.reduce = is_max ? max_ompi : min_ompi;
                        p.seq = seq++;
                        p.algorithm = algo;
                        std::string err;
                        const dr_status_t st = allreduce(t, p, nullptr, &err);
                        barrier.wait();
                        const std::string what =
                            "n=" + std::to_string(n) + " NaN at " + std::to_string(nan_at) +
                            " case " + std::to_string(c) + " rank " + std::to_string(rank);
                        if (st != DR_OK) {
                            fails.add(what + ": " + err);
                        } else if (!std::isnan(recv[0]) && !std::isnan(recv[3]) && recv[0] != 1.0 &&
                                   recv[3] != -1.0) {
                            fails.add(what + ": neither a NaN nor the others' value");
                        } else if (rank != 0 && memcmp(recv.data(), res[0].data(),
                                                       count * sizeof(double)) != 0) {
                            fails.add(what + ": result differs from rank 0's in its bits");
                        }
                        barrier.wait(); /* others read rank 0's result */
                    }
                }
            },
            120, "same bits");
        report(fails, net);
    }
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 3) {
        g_lo = atoi(argv[1]);
        g_hi = atoi(argv[2]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_same_bits_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
