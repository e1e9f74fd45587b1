/*
 * OSU-style MPI_Allreduce benchmark: size, average latency, bus bandwidth.
 * Plain MPI: it measures whatever coll component the MCA parameters select,
 * so the same binary compares coll/dualrail with the stock paths.
 *
 *   dualrail-allreduce-bench [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-c] [-T SECONDS] [-d cuda] [-r]
 *                            [-s]
 *
 *   -m  message sizes in bytes, powers of two from MIN to MAX (default 8:16777216)
 *   -i  timed iterations per size (default: 200 up to 64 KiB, 50 up to 1 MiB, 20 above)
 *   -x  warm-up iterations per size (default: a tenth of -i, at least 2)
 *   -c  validate every result (like osu_allreduce -c); exit 1 on a wrong element
 *   -T  stop a size early after this many seconds (default 30; every loop is bounded)
 *   -d  buffer memory: host (default) or cuda (device memory of the current GPU, like
 *       osu_allreduce -d cuda; refuses to run when no GPU is usable). Only coll/dualrail
 *       takes device buffers: Debian's Open MPI is not built with CUDA, select the component)
 *   -r  message rate: per size, -i calls back to back after one barrier (no barrier between
 *       them); prints the slowest rank's calls per second instead of latency and bandwidth.
 *       Not with -c (in-place sums repeated back to back leave nothing simple to check)
 *   -s  split each timed call (latency mode) into the ranks' entry skew (the last rank's entry
 *       minus the first's: what the barrier before it left) and the time from the last
 *       entry to the last return (the collective's own critical path); two more columns,
 *       medians over the calls. The ranks must share one monotonic clock: processes on one
 *       host, as the lab's nodes are (network namespaces of one kernel); elsewhere the
 *       columns are meaningless
 *
 * Bus bandwidth = size / time x 2(n-1)/n, the convention of OSU and nccl-tests.
 * Data: MPI_FLOAT, MPI_SUM, as osu_allreduce. MB = 10^6 bytes.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/dr_gpu.h"

static void usage(void)
{
    fprintf(stderr, "usage: dualrail-allreduce-bench [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-c] "
                    "[-T SECONDS] [-d cuda] [-r] [-s]\n");
}

/* -s: one clock for every process of the host (MPI_Wtime need not be). */
static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * -s: from every rank's entry and return times of calls 0..done-1 (times[r * 2 * cap + 2k],
 * + 1), the medians of the entry skew and of last entry -> last return, in seconds. Sorts
 * into `work` (done doubles).
 */
static void split_medians(const double *times, int size, long cap, long done, double *work,
                          double *skew, double *crit)
{
    for (int pass = 0; pass < 2; ++pass) {
        for (long k = 0; k < done; ++k) {
            double first = times[2 * k], last = first, out = times[2 * k + 1];
            for (int r = 1; r < size; ++r) {
                const double e = times[(size_t)r * 2 * cap + 2 * k];
                const double x = times[(size_t)r * 2 * cap + 2 * k + 1];
                first = e < first ? e : first;
                last = e > last ? e : last;
                out = x > out ? x : out;
            }
            work[k] = pass == 0 ? last - first : out - last;
        }
        qsort(work, (size_t)done, sizeof(double), cmp_double);
        *(pass == 0 ? skew : crit) = work[done / 2];
    }
}

static void fill(float *b, size_t n, int rank, int iter)
{
    for (size_t i = 0; i < n; ++i) {
        b[i] = (float)((rank + 1) * ((int)(i % 7) + 1) + iter % 3);
    }
}

static int check(const float *b, size_t n, int size, int iter)
{
    for (size_t i = 0; i < n; ++i) {
        /* sum over r of (r+1)*(i%7+1) + iter%3: small integers, exact in float */
        float want = (float)(size * (size + 1) / 2 * ((int)(i % 7) + 1) + size * (iter % 3));
        if (b[i] != want) {
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t min = 8, max = 16u << 20;
    long iters = -1, warmup = -1;
    int validate = 0, rate = 0, split = 0;
    double limit = 30;
    int device = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%zu:%zu", &min, &max) != 2 || min < 4 || min > max) {
                if (rank == 0) usage();
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        } else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            iters = atol(argv[++i]);
        } else if (strcmp(argv[i], "-x") == 0 && i + 1 < argc) {
            warmup = atol(argv[++i]);
        } else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
            limit = atof(argv[++i]);
        } else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) {
            ++i;
            if (strcmp(argv[i], "cuda") == 0) {
                device = 1;
            } else if (strcmp(argv[i], "host") != 0) {
                if (rank == 0) usage();
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        } else if (strcmp(argv[i], "-c") == 0) {
            validate = 1;
        } else if (strcmp(argv[i], "-r") == 0) {
            rate = 1;
        } else if (strcmp(argv[i], "-s") == 0) {
            split = 1;
        } else {
            if (rank == 0) usage();
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (rate && validate) {
        if (rank == 0) {
            fprintf(stderr, "dualrail-allreduce-bench: -r and -c do not combine\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rate && split) {
        if (rank == 0) {
            fprintf(stderr,
                    "dualrail-allreduce-bench: -s splits the latency mode's calls, not -r's\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *buf = malloc(max);
    if (buf == NULL) {
        fprintf(stderr, "dualrail-allreduce-bench: cannot allocate %zu bytes\n", max);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* -d cuda: the collective sees device memory; host copies only to fill and check. */
    const dr_mem_ops_t *mem = dr_mem_cuda();
    void *dbuf = NULL, *stream = NULL;
    if (device) {
        if (!mem->available()) {
            fprintf(stderr, "dualrail-allreduce-bench: rank %d: -d cuda: no usable GPU (no CUDA "
                    "driver or device, or a build without CUDA)\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (mem->device_alloc(&dbuf, max) != DR_OK || mem->stream_create(&stream) != DR_OK) {
            fprintf(stderr, "dualrail-allreduce-bench: rank %d: -d cuda: %s\n", rank,
                    mem->last_error());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    void *cbuf = device ? dbuf : (void *)buf; /* what MPI_Allreduce gets */
    if (rank == 0) {
        printf("# DualRail allreduce benchmark (MPI_FLOAT, MPI_SUM), %d ranks, %s buffers\n",
               size, device ? "device (cuda)" : "host");
        if (rate) {
            printf("# %-10s %16s\n", "Size", "Calls/s");
        } else {
            printf("# %-10s %16s %14s%s%s\n", "Size", "Avg Latency(us)", "Bus BW(MB/s)",
                   split ? "   Skew(us) LastIn->Out(us)" : "", validate ? "   Validation" : "");
        }
        fflush(stdout);
    }
    int failures = 0;
    for (size_t bytes = min; bytes <= max; bytes *= 2) {
        const size_t n = bytes / sizeof(float);
        long it = iters > 0 ? iters : bytes <= (64u << 10) ? 200 : bytes <= (1u << 20) ? 50 : 20;
        long wu = warmup >= 0 ? warmup : (it / 10 > 2 ? it / 10 : 2);
        fill(buf, n, rank, 0);
        if (device) {
            mem->copy_async(dbuf, buf, bytes, stream);
            mem->stream_sync(stream);
        }
        for (long k = 0; k < wu; ++k) {
            MPI_Allreduce(MPI_IN_PLACE, cbuf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        double total = 0;
        long done = 0;
        int bad = 0, stop = 0;
        /* -s: this rank's entry and return per call; rank 0 gathers every rank's. */
        double *times = NULL, *all = NULL;
        if (split) {
            times = calloc(2 * (size_t)it, sizeof(double));
            all = rank == 0 ? malloc(sizeof(double) * 2 * (size_t)it * (size_t)size) : NULL;
            if (times == NULL || (rank == 0 && all == NULL)) {
                fprintf(stderr, "dualrail-allreduce-bench: -s: cannot hold %ld calls' times\n", it);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
        if (rate) {
            /* Back to back, as a solver's dot products: one barrier, then the calls. Bounded
             * by the count and by the time, which rank 0 checks every 1024 calls for all.
             * (Every 64 put a broadcast per 64 calls into the figure: 0.8 us a call where
             * the broadcast goes to the previous component on another network, as the
             * dualrail runs of perf/latency_compare.sh have it, 0.3 us with pml ucx.) */
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            for (long k = 0; k < it && !stop; ++k) {
                MPI_Allreduce(MPI_IN_PLACE, cbuf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                ++done;
                if ((k & 1023) == 1023) {
                    int s = MPI_Wtime() - t0 > limit;
                    MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
                    stop = s;
                }
            }
            total = MPI_Wtime() - t0;
        }
        for (long k = 0; k < it && !stop && !rate; ++k) {
            if (validate) {
                fill(buf, n, rank, (int)k);
                if (device) {
                    mem->copy_async(dbuf, buf, bytes, stream);
                    mem->stream_sync(stream);
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = split ? mono_s() : MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, cbuf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            const double t1 = split ? mono_s() : MPI_Wtime();
            total += t1 - t0;
            if (split) {
                times[2 * done] = t0;
                times[2 * done + 1] = t1;
            }
            ++done;
            if (validate && device) {
                mem->copy_async(buf, dbuf, bytes, stream);
                mem->stream_sync(stream);
            }
            if (validate && check(buf, n, size, (int)k) != 0) {
                bad = 1;
            }
            /* Every rank stops at the same iteration: decide on rank 0's clock. */
            int s = total > limit;
            MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
            stop = s;
        }
        double avg = total / (double)done, max_avg;
        MPI_Reduce(&avg, &max_avg, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        int any_bad;
        MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        failures += any_bad;
        char split_cols[64] = "";
        if (split) {
            /* Every rank made `done` calls (the stop flag is rank 0's, broadcast). */
            MPI_Gather(times, (int)(2 * it), MPI_DOUBLE, all, (int)(2 * it), MPI_DOUBLE, 0,
                       MPI_COMM_WORLD);
            if (rank == 0) {
                double skew = 0, crit = 0;
                split_medians(all, size, it, done, times, &skew, &crit);
                snprintf(split_cols, sizeof(split_cols), " %10.2f %16.2f", skew * 1e6, crit * 1e6);
            }
            free(times);
            free(all);
        }
        if (rank == 0 && rate) {
            printf("%-12zu %16.0f\n", bytes, 1.0 / max_avg);
            fflush(stdout);
        } else if (rank == 0) {
            double busbw = (double)bytes / max_avg * 2.0 * (size - 1) / size / 1e6;
            printf("%-12zu %16.2f %14.2f%s%s\n", bytes, max_avg * 1e6, busbw, split_cols,
                   validate ? (any_bad ? "   FAIL" : "   Pass") : "");
            fflush(stdout);
        }
    }
    if (device) {
        mem->device_free(dbuf);
        mem->stream_destroy(stream);
    }
    free(buf);
    MPI_Finalize();
    return failures ? 1 : 0;
}
