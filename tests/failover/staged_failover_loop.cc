/*
 * Failover with device buffers: one rank of a validated allreduce loop on
 * device memory, run in a lab node while tests/failover/run_staged_failover.sh
 * cuts and heals planes under it.
 *
 * The device is the host stand-in (dr_gpu.h: "device" addresses fault on any
 * CPU access, copies and reductions complete late and in stream order), so
 * this runs in CI: what it checks is the staged path's own part of failover —
 * device work in flight while ucx_mr re-routes segments, a collective that
 * ends in an error with copies and reductions still queued, the staging
 * reused afterwards. Each rank has its own ucx_mr context on the lab planes
 * (ethA, ethB) and calls dr_allreduce_device(), the C API the component calls
 * for device buffers; addresses go through files (tests/support/oob_file.c).
 *
 * Data: float sums of integer values (exact): rank r's element i in iteration
 * k is a(i,k) + r * b(i,k). Sizes cycle through 4 MiB and 3000004 bytes (the
 * staged ring; the odd count gives uneven blocks) and 8 KiB (recursive
 * doubling: the whole-message path). Layouts cycle too: both buffers on the
 * device, in place on the device, and on odd ranks host buffers (host and
 * device ranks in one collective). The receive buffer is poisoned before each
 * call and every element is checked.
 *
 * After each allreduce the ranks exchange verdicts (wrong, error) and rank
 * 0's stop decision through files in the shared directory, never over the
 * planes, so every rank makes the same calls and leaves together, also when
 * some of them got an error (as failover_loop does through the management
 * network).
 *
 *   staged_failover_loop --rank R --size N --dir D [--planes LIST]
 *                        [--seconds S] [--max-iters N] [--peer-timeout S]
 *                        [--after-error N] [--lag POLLS]
 *
 *   --after-error N  when a call failed on any rank, every rank makes N more
 *                    calls (8 KiB and 4 MiB alternately) that must each
 *                    return, exact or with an error, and never fault or
 *                    hang; then it stops
 *   --lag POLLS      stand-in events complete only after this many polls
 *                    (default 2): device work lags behind the network
 *
 * Output (one line each, prefixed "staged_loop: rank R:"):
 *   start EPOCH                           rank 0, when the loop starts
 *   ERROR at iteration K after T s: ...   a call that failed (this rank's)
 *   WRONG RESULT at iteration K ...       a wrong element
 *   after-error call J: ok|error ...      with --after-error
 *   plane P: errors E readmissions A tx_bytes B tx_after_readmit C
 *   done: K iterations, every result exact | N wrong
 *
 * Exit status: 0 every result exact and no error; 1 a wrong result; 2 bad
 * arguments, set-up failure or a broken verdict exchange; 3 an allreduce
 * returned an error.
 */
#include <algorithm>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dr_coll.h"
#include "dr_coll_gpu.h"
#include "gpu/dr_gpu.h"
#include "oob_file.h"
#include "test_helpers.hpp"

namespace {

constexpr int kMaxRanks = 16;
constexpr size_t kSizes[] = {4u << 20, 3000004, 8u << 10};
constexpr size_t kMaxBytes = 4u << 20;

struct Opts {
    int rank = -1, size = 0;
    const char *dir = nullptr;
    const char *planes = "ethA,ethB";
    double seconds = 12, peer_timeout = 30;
    long max_iters = 100000;
    int after_error = 0;
    unsigned lag = 2;
};

double wall()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

double mono()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/* Small integers: every partial sum of up to 16 ranks is exact in float. */
float a_of(size_t i, long k)
{
    return (float)((int)((i * 31 + (size_t)k * 7) % 2001) - 1000);
}
float b_of(size_t i, long k)
{
    return (float)((int)((i + (size_t)k * 13) % 63) - 31);
}

constexpr uint32_t kFlagStop = 1, kFlagWrong = 2, kFlagError = 4;

struct Loop {
    Opts o;
    const dr_mem_ops_t *mem = dr_mem_standin();
    dr_mr_t *mr = nullptr;
    dr_staging_t *staging = nullptr;
    void *stream = nullptr;
    uint32_t ids[kMaxRanks];
    uint32_t seq = 0;
    void *dsend = nullptr, *drecv = nullptr;
    std::vector<float> hsend, hrecv, want;
    char err[1024] = "";

    dr_allreduce_args_t args(const void *send, void *recv, size_t count, dr_reduce_fn fn)
    {
        dr_allreduce_args_t a;
        memset(&a, 0, sizeof(a));
        a.sendbuf = send;
        a.recvbuf = recv;
        a.count = count;
        a.elem_size = 4;
        a.reduce = fn;
        a.rank = o.rank;
        a.size = o.size;
        a.peer_ids = ids;
        a.comm_id = 11;
        a.seq = seq++;
        a.timeout = 60; /* a bound, far above any failover: the peer timeout ends a cut first */
        return a;
    }

    /* One validated allreduce. 0 exact, 1 wrong, 3 error (reason printed). */
    int call(long k, size_t bytes, int layout, double t0)
    {
        const size_t count = bytes / 4;
        const bool host = layout == 2 && (o.rank % 2) == 1;
        const bool inplace = layout == 1;
        for (size_t i = 0; i < count; ++i) {
            hsend[i] = a_of(i, k) + (float)o.rank * b_of(i, k);
        }
        std::fill(hrecv.begin(), hrecv.begin() + (long)count, -12345.0f);
        void *send = nullptr, *recv = nullptr;
        if (host) {
            send = hsend.data();
            recv = hrecv.data();
        } else {
            recv = drecv;
            if (mem->copy_async(drecv, inplace ? (void *)hsend.data() : (void *)hrecv.data(), bytes,
                                stream) != DR_OK ||
                (!inplace && mem->copy_async(dsend, hsend.data(), bytes, stream) != DR_OK) ||
                mem->stream_sync(stream) != DR_OK) {
                printf("staged_loop: rank %d: stand-in copy failed: %s\n", o.rank,
                       mem->last_error());
                return 3;
            }
            send = inplace ? nullptr : dsend;
        }
        dr_allreduce_args_t a = args(send, recv, count, dualrail::test::sum_t<float>);
        const dr_status_t st =
            dr_allreduce_device(mr, &a, DR_GPU_SUM, DR_GPU_F32, staging, err, sizeof(err));
        if (st != DR_OK) {
            printf("staged_loop: rank %d: ERROR at iteration %ld after %.3f s (%zu B, layout %d, "
                   "%s): %s: %s\n",
                   o.rank, k, mono() - t0, bytes, layout,
                   dr_allreduce_device_path(&a, DR_GPU_SUM, DR_GPU_F32, staging), dr_status_str(st),
                   err);
            return 3;
        }
        if (!host && (mem->copy_async(hrecv.data(), drecv, bytes, stream) != DR_OK ||
                      mem->stream_sync(stream) != DR_OK)) {
            printf("staged_loop: rank %d: stand-in copy failed: %s\n", o.rank, mem->last_error());
            return 3;
        }
        const float n = (float)o.size, tri = (float)(o.size * (o.size - 1) / 2);
        for (size_t i = 0; i < count; ++i) {
            const float w = n * a_of(i, k) + tri * b_of(i, k);
            if (hrecv[i] != w) {
                printf("staged_loop: rank %d: WRONG RESULT at iteration %ld (%zu B, layout %d): "
                       "element %zu is %g, expected %g\n",
                       o.rank, k, bytes, layout, i, (double)hrecv[i], (double)w);
                return 1;
            }
        }
        return 0;
    }

    /*
     * The verdicts and the stop decision of iteration k, or-ed over every rank,
     * through files in the shared directory (the lab's nodes share a
     * filesystem): never through the planes under test, so a rank whose call
     * failed still tells the others, and every rank makes the same calls.
     */
    int agree(long k, uint32_t mine, uint32_t *all)
    {
        char path[512], tmp[520];
        snprintf(path, sizeof(path), "%s/v.%ld.%d", o.dir, k, o.rank);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (f == nullptr || fprintf(f, "%u\n", mine) < 0 || fclose(f) != 0 ||
            rename(tmp, path) != 0) {
            printf("staged_loop: rank %d: cannot write %s\n", o.rank, path);
            return 2;
        }
        if (k >= 2) { /* every rank has read iteration k - 2's verdicts: it wrote k - 1 */
            snprintf(tmp, sizeof(tmp), "%s/v.%ld.%d", o.dir, k - 2, o.rank);
            remove(tmp);
        }
        *all = 0;
        const double end = mono() + 120;
        for (int r = 0; r < o.size; ++r) {
            snprintf(path, sizeof(path), "%s/v.%ld.%d", o.dir, k, r);
            unsigned v = 0;
            for (;;) {
                f = fopen(path, "r");
                if (f != nullptr) {
                    const int n = fscanf(f, "%u", &v);
                    fclose(f);
                    if (n == 1) {
                        break;
                    }
                }
                if (mono() > end) {
                    printf("staged_loop: rank %d: no verdict from rank %d for iteration %ld in "
                           "120 s\n",
                           o.rank, r, k);
                    return 2;
                }
                /* Keep the planes progressing while waiting, as opal_progress does for
                 * coll/dualrail inside any MPI call: this rank's last sends may be copied
                 * ones still in flight on the plane that just died, and only this rank's
                 * watchdog re-sends them and answers the others' probes. Without it a
                 * black hole that caught them left every other rank waiting for TCP to
                 * retransmit after the heal (3.5 s and more), no plane ever declared
                 * lost (3 runs in 18 failed so on Debian 13). */
                dr_mr_progress(mr);
                usleep(1000);
            }
            *all |= v;
        }
        return 0;
    }

    int setup()
    {
        dr_mr_config_t cfg;
        dr_mr_config_default(&cfg);
        cfg.planes = o.planes;
        cfg.peer_timeout = o.peer_timeout;
        char name[32];
        snprintf(name, sizeof(name), "rank %d", o.rank);
        cfg.name = name;
        if (dr_mr_create(&cfg, (uint32_t)o.rank, &mr, err, sizeof(err)) != DR_OK) {
            printf("staged_loop: rank %d: dr_mr_create(%s): %s\n", o.rank, o.planes, err);
            return 2;
        }
        for (int r = 0; r < o.size; ++r) {
            ids[r] = (uint32_t)r;
            if (r != o.rank && dr_oob_connect(mr, o.dir, (unsigned)o.rank, (unsigned)r, 60, err,
                                              sizeof(err)) != 0) {
                printf("staged_loop: rank %d: %s\n", o.rank, err);
                return 2;
            }
        }
        dr_mem_standin_set_lag(o.lag);
        if (dr_staging_create(mem, 0, &staging, err, sizeof(err)) != DR_OK ||
            mem->stream_create(&stream) != DR_OK || mem->device_alloc(&dsend, kMaxBytes) != DR_OK ||
            mem->device_alloc(&drecv, kMaxBytes) != DR_OK) {
            printf("staged_loop: rank %d: stand-in set-up: %s %s\n", o.rank, err,
                   mem->last_error());
            return 2;
        }
        hsend.resize(kMaxBytes / 4);
        hrecv.resize(kMaxBytes / 4);
        return 0;
    }

    void teardown()
    {
        if (mem != nullptr) {
            mem->device_free(dsend);
            mem->device_free(drecv);
            if (stream != nullptr) {
                mem->stream_destroy(stream);
            }
        }
        dr_staging_destroy(staging);
        dr_mr_destroy(mr);
    }
};

/* Plane p's transmitted bytes when one of its links last came back into service. */
struct Readmit {
    bool down[kMaxRanks] = {};
    uint64_t tx_at = 0;
    bool seen = false;
};

void watch(Loop &l, int p, Readmit *ra)
{
    for (int r = 0; r < l.o.size; ++r) {
        if (r == l.o.rank) {
            continue;
        }
        const bool down = dr_mr_link_state(l.mr, (uint32_t)r, p) == DR_LINK_DOWN;
        if (ra->down[r] && !down) {
            dr_mr_plane_stats_t s;
            if (dr_mr_plane_stats(l.mr, p, &s) == DR_OK) {
                ra->tx_at = s.tx_bytes;
                ra->seen = true;
            }
        }
        ra->down[r] = down;
    }
}

int run(Loop &l)
{
    const Opts &o = l.o;
    int rc = l.setup();
    if (rc != 0) {
        return rc;
    }
    const int np = dr_mr_num_planes(l.mr);
    std::vector<Readmit> ra((size_t)np);
    const double t0 = mono();
    if (o.rank == 0) {
        printf("staged_loop: rank 0: start %.6f: %d ranks, planes %s, %.1f s\n", wall(), o.size,
               o.planes, o.seconds);
        fflush(stdout);
    }
    long k = 0;
    int wrong = 0, failed = 0;
    bool any_error = false; /* some rank's call failed: every rank carries on alike */
    for (; k < o.max_iters; ++k) {
        const size_t bytes = kSizes[(size_t)k % 3];
        const int layout = (int)((k / 3) % 3);
        rc = l.call(k, bytes, layout, t0);
        for (int p = 0; p < np; ++p) {
            watch(l, p, &ra[(size_t)p]);
        }
        wrong += rc == 1;
        failed |= rc == 3;
        uint32_t all = 0;
        const uint32_t mine = (rc == 1 ? kFlagWrong : 0u) | (rc == 3 ? kFlagError : 0u) |
                              (o.rank == 0 && mono() - t0 >= o.seconds ? kFlagStop : 0u);
        if (l.agree(k, mine, &all) != 0) {
            l.teardown();
            return 2; /* the verdict exchange itself broke: no statement about the allreduce */
        }
        if (all != 0) {
            any_error = (all & kFlagError) != 0;
            ++k;
            break;
        }
    }
    fflush(stdout);
    if (any_error && o.after_error > 0) {
        /* An application that carries on: each call returns, and the stand-in faults on
         * any CPU access to device memory, so a slot still being written would show. */
        for (int j = 0; j < o.after_error; ++j) {
            const size_t bytes = j % 2 == 0 ? 8u << 10 : kMaxBytes;
            const double c0 = mono();
            const int r = l.call(1000000 + j, bytes, 0, t0);
            printf("staged_loop: rank %d: after-error call %d (%zu B): %s in %.3f s\n", o.rank, j,
                   bytes,
                   r == 0   ? "ok"
                   : r == 1 ? "WRONG"
                            : "error",
                   mono() - c0);
            wrong += r == 1;
            fflush(stdout);
        }
    }
    for (int p = 0; p < np; ++p) {
        dr_mr_plane_stats_t s;
        memset(&s, 0, sizeof(s));
        dr_mr_plane_stats(l.mr, p, &s);
        const Readmit &r = ra[(size_t)p];
        printf("staged_loop: rank %d: plane %d: errors %llu readmissions %llu tx_bytes %llu "
               "tx_after_readmit %llu\n",
               o.rank, p, (unsigned long long)s.errors, (unsigned long long)s.readmissions,
               (unsigned long long)s.tx_bytes,
               (unsigned long long)(r.seen ? s.tx_bytes - r.tx_at : 0));
    }
    printf("staged_loop: rank %d: done: %ld iterations in %.1f s, %s\n", o.rank, k, mono() - t0,
           wrong       ? "WRONG RESULTS"
           : failed    ? "stopped by an error"
           : any_error ? "stopped by another rank's error"
                       : "every result exact");
    fflush(stdout);
    l.teardown();
    return wrong ? 1 : failed ? 3 : 0;
}

int usage()
{
    fprintf(stderr, "usage: staged_failover_loop --rank R --size N --dir D [--planes LIST] "
                    "[--seconds S] [--max-iters N] [--peer-timeout S] [--after-error N] "
                    "[--lag POLLS]\n");
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    Loop l;
    Opts &o = l.o;
    for (int i = 1; i < argc; ++i) {
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (v == nullptr) {
            return usage();
        }
        if (strcmp(argv[i], "--rank") == 0) {
            o.rank = atoi(v);
        } else if (strcmp(argv[i], "--size") == 0) {
            o.size = atoi(v);
        } else if (strcmp(argv[i], "--dir") == 0) {
            o.dir = v;
        } else if (strcmp(argv[i], "--planes") == 0) {
            o.planes = v;
        } else if (strcmp(argv[i], "--seconds") == 0) {
            o.seconds = atof(v);
        } else if (strcmp(argv[i], "--max-iters") == 0) {
            o.max_iters = atol(v);
        } else if (strcmp(argv[i], "--peer-timeout") == 0) {
            o.peer_timeout = atof(v);
        } else if (strcmp(argv[i], "--after-error") == 0) {
            o.after_error = atoi(v);
        } else if (strcmp(argv[i], "--lag") == 0) {
            o.lag = (unsigned)atoi(v);
        } else {
            return usage();
        }
        ++i;
    }
    if (o.size < 2 || o.size > kMaxRanks || o.rank < 0 || o.rank >= o.size || o.dir == nullptr ||
        o.seconds <= 0 || o.seconds > 600 || o.max_iters < 1 || o.after_error < 0 ||
        o.after_error > 100) {
        return usage();
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    return run(l);
}
