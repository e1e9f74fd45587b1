/*
 * Several threads per process running collectives at once, each on its own
 * communicator, over thread-safe ucx_mr contexts (dr_mr_config_t.thread_safe):
 * what coll/dualrail does under MPI_THREAD_MULTIPLE, without MPI.
 *
 * Two "processes" (two contexts in this process, on the loopback device), two
 * communicators of both (the second with its ranks reversed), one thread per
 * (process, communicator). The threads enter their first collective in
 * opposite orders: process 0 starts on communicator 1 and process 1 on
 * communicator 2, each process's second thread only once its first is inside
 * its call. Then every thread runs random allreduces, bcasts, allgathers and
 * barriers (counts 0 .. 300000 words, random roots; the same random sequence
 * per communicator on both processes), every result checked exactly.
 *
 *   test_mr_threads                 must pass: no error, every result exact
 *   test_mr_threads --global-lock   the same with a per-process lock held
 *                                   around each whole collective (what this
 *                                   design must never do): must deadlock, seen
 *                                   as collectives failing on their timeout.
 *                                   It proves the first mode would catch such
 *                                   a lock.
 *
 * Bounded: at most kIters collectives per thread and kBudget seconds in all.
 */
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dr_coll.h"

namespace {

constexpr int kProcs = 2;
constexpr int kComms = 2;
constexpr int kIters = 120;
constexpr double kBudget = 60.0;

struct Proc {
    dr_mr_t *mr = nullptr;
    std::mutex global; /* --global-lock only */
    std::atomic<bool> first_inside{false};
};

Proc g_procs[kProcs];
const uint32_t kIds[kProcs] = {10, 11};
bool g_global_lock = false;
std::atomic<int> g_errors{0};
std::atomic<int> g_mismatches{0};
std::atomic<long> g_calls{0};

void sum_u64(const void *in, void *inout, size_t count, void *arg)
{
    (void)arg;
    const uint64_t *a = static_cast<const uint64_t *>(in);
    uint64_t *b = static_cast<uint64_t *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] += a[i];
    }
}

/* What rank r contributes at element i of collective number it (comm c). */
uint64_t value(int c, int it, int r, size_t i)
{
    return ((uint64_t)(c + 1) << 48) ^ ((uint64_t)it << 32) ^ ((uint64_t)(r + 1) << 24) ^ i;
}

struct Seq {
    uint32_t allreduce = 0, coll[3] = {0, 0, 0};
};

/* One thread: process p's member of communicator c. */
void run(int p, int c)
{
    Proc &pr = g_procs[p];
    /* Communicator 1 is (P0, P1); communicator 2 is (P1, P0): ranks differ from processes. */
    const uint32_t ids[kProcs] = {c == 0 ? kIds[0] : kIds[1], c == 0 ? kIds[1] : kIds[0]};
    const int rank = c == 0 ? p : 1 - p;
    /* Process 0 starts on communicator 1 first, process 1 on communicator 2: opposite orders. */
    const bool first = (p == 0) == (c == 0);
    if (!first) {
        for (int i = 0; i < 2000 && !pr.first_inside.load(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::mt19937_64 rng(1000 + (uint64_t)c); /* same on both processes */
    static const size_t kCounts[] = {0, 1, 3, 1000, 8191, 65536, 300000};
    const int iters = g_global_lock ? 1 : kIters;
    Seq seq;
    const auto start = std::chrono::steady_clock::now();
    std::vector<uint64_t> buf, ref, out;
    for (int it = 0; it < iters; ++it) {
        const double spent =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (spent > kBudget) {
            std::printf("thread p%d c%d: time budget spent after %d collectives\n", p, c, it);
            break;
        }
        /* The global-lock run uses a large allreduce first: it must be the deadlock case. */
        const int kind = g_global_lock ? 0 : (int)(rng() % 4);
        const size_t count = g_global_lock ? 300000 : kCounts[rng() % 7];
        const int root = (int)(rng() % kProcs);
        char err[512] = "";
        dr_status_t st;
        std::unique_lock<std::mutex> lk(pr.global, std::defer_lock);
        if (g_global_lock) {
            lk.lock();
        }
        if (first && it == 0) {
            pr.first_inside.store(true);
        }
        const double timeout = g_global_lock ? 1.5 : 30.0;
        if (kind == 0) {
            buf.assign(count, 0);
            for (size_t i = 0; i < count; ++i) {
                buf[i] = value(c, it, rank, i);
            }
            dr_allreduce_args_t a;
            std::memset(&a, 0, sizeof(a));
            a.recvbuf = buf.data();
            a.count = count;
            a.elem_size = 8;
            a.reduce = sum_u64;
            a.rank = rank;
            a.size = kProcs;
            a.peer_ids = ids;
            a.comm_id = (uint32_t)(c + 1);
            a.seq = seq.allreduce++;
            a.timeout = timeout;
            st = dr_allreduce(pr.mr, &a, err, sizeof(err));
            for (size_t i = 0; st == DR_OK && i < count; ++i) {
                if (buf[i] != value(c, it, 0, i) + value(c, it, 1, i)) {
                    ++g_mismatches;
                    std::printf("p%d c%d it %d: allreduce element %zu wrong\n", p, c, it, i);
                    break;
                }
            }
        } else {
            dr_coll_args_t a;
            std::memset(&a, 0, sizeof(a));
            a.rank = rank;
            a.size = kProcs;
            a.peer_ids = ids;
            a.comm_id = (uint32_t)(c + 1);
            a.timeout = timeout;
            a.root = root;
            if (kind == 1) {
                buf.assign(count, 0);
                if (rank == root) {
                    for (size_t i = 0; i < count; ++i) {
                        buf[i] = value(c, it, root, i);
                    }
                }
                a.recvbuf = buf.data();
                a.bytes = count * 8;
                a.seq = seq.coll[0]++;
                st = dr_bcast(pr.mr, &a, err, sizeof(err));
                for (size_t i = 0; st == DR_OK && i < count; ++i) {
                    if (buf[i] != value(c, it, root, i)) {
                        ++g_mismatches;
                        std::printf("p%d c%d it %d: bcast element %zu wrong\n", p, c, it, i);
                        break;
                    }
                }
            } else if (kind == 2) {
                buf.assign(count, 0);
                for (size_t i = 0; i < count; ++i) {
                    buf[i] = value(c, it, rank, i);
                }
                out.assign(count * kProcs, 0);
                a.sendbuf = buf.data();
                a.recvbuf = out.data();
                a.bytes = count * 8;
                a.seq = seq.coll[1]++;
                st = dr_allgather(pr.mr, &a, err, sizeof(err));
                for (size_t i = 0; st == DR_OK && i < count * kProcs; ++i) {
                    if (out[i] != value(c, it, (int)(i / count), i % count)) {
                        ++g_mismatches;
                        std::printf("p%d c%d it %d: allgather element %zu wrong\n", p, c, it, i);
                        break;
                    }
                }
            } else {
                a.seq = seq.coll[2]++;
                st = dr_barrier(pr.mr, &a, err, sizeof(err));
            }
        }
        ++g_calls;
        if (st != DR_OK) {
            ++g_errors;
            std::printf("p%d c%d it %d: kind %d count %zu failed: %s\n", p, c, it, kind, count,
                        err);
            break; /* the communicator is unusable after an error (dr_coll.h) */
        }
    }
}

} // namespace

int main(int argc, char **argv)
{
    g_global_lock = argc > 1 && std::strcmp(argv[1], "--global-lock") == 0;
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = "lo";
    cfg.transports = "tcp";
    cfg.segment_size = 64 * 1024;
    cfg.thread_safe = 1;
    char err[256];
    for (int p = 0; p < kProcs; ++p) {
        if (dr_mr_create(&cfg, kIds[p], &g_procs[p].mr, err, sizeof(err)) != DR_OK) {
            std::printf("create: %s\n", err);
            return 1;
        }
    }
    for (int a = 0; a < kProcs; ++a) {
        const void *addr;
        size_t len;
        dr_mr_address(g_procs[1 - a].mr, &addr, &len);
        if (dr_mr_add_peer(g_procs[a].mr, kIds[1 - a], addr, len, err, sizeof(err)) != DR_OK) {
            std::printf("add peer: %s\n", err);
            return 1;
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int p = 0; p < kProcs; ++p) {
        for (int c = 0; c < kComms; ++c) {
            threads.emplace_back(run, p, c);
        }
    }
    for (auto &t : threads) {
        t.join();
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto &pr : g_procs) {
        dr_mr_destroy(pr.mr);
    }
    std::printf("%ld collectives in %.2f s on %d threads: %d failed, %d wrong results\n",
                g_calls.load(), secs, kProcs * kComms, g_errors.load(), g_mismatches.load());
    if (g_mismatches != 0) {
        return 1;
    }
    if (g_global_lock) {
        /* The lock around whole collectives must have deadlocked (broken by the timeout). */
        if (g_errors == 0) {
            std::printf("FAIL: a process-wide lock around collectives did not deadlock: the test "
                        "does not exercise opposite orders\n");
            return 1;
        }
        std::printf("ok: a process-wide lock around whole collectives deadlocks, as expected\n");
        return 0;
    }
    return g_errors == 0 ? 0 : 1;
}
