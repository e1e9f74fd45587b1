/*
 * Messages above 2 GiB through every collective coll/dualrail takes (issue 13: "sizes
 * above 2 GiB"): MPI counts are ints, but count x extent, the offsets of blocks and
 * segments and the byte counts on the wire are not. A 32-bit product or offset anywhere
 * on the path (glue, engine, algorithm, ucx_mr) either wraps to a small or negative size
 * or lands a block at the wrong place; every element is checked against a value computed
 * from its index, so both show.
 *
 * One buffer of a little over 2 GiB per rank and collective (in place where the standard
 * allows it, so that the test needs about 2.1 GiB per rank, not twice that), freed before
 * the next. The first element past 2^31 bytes and the last one are in every buffer.
 *
 *   large_check [--only NAME[,NAME...]]   (allreduce allreduce_double bcast reduce
 *                                allgather allgatherv
 *                                reduce_scatter_block reduce_scatter gather gatherv
 *                                scatter scatterv alltoall imbalance pauses)
 *
 * Prints "N passed, 0 failed" on rank 0 when every collective gave exact results on
 * every rank. The verdicts travel by point-to-point messages, not by a collective under
 * test.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agree.h"

static int rank, size, passed, failed;

/* Just above 2 GiB of 4-byte elements: 2^29 + 2^29/64 (2 GiB + 32 MiB), so that every rank's
 * share in the gathers and scatters and every block of the alltoall is itself large. */
static const size_t kInts = (1ul << 29) + (1ul << 23);

/* Rank r's value at element i: below 2^27, so a sum over up to 16 ranks fits in an int;
 * depends on both, so a block from the wrong rank or at the wrong offset shows. */
static inline int32_t val(size_t i, int r)
{
    return (int32_t)(((uint64_t)i * 2654435761u + (uint64_t)r * 40503u + 17u) & 0x7ffffff);
}

static inline int32_t sum_val(size_t i)
{
    int32_t s = 0;
    for (int r = 0; r < size; ++r)
        s += val(i, r);
    return s;
}

/* All ranks agree on ok, by point-to-point messages only. */
static void note(bool ok, const char *what, double secs, size_t bytes)
{
    const int all_ok = mpi_agree(ok, 901);
    if (rank == 0) {
        printf("%-22s %6.2f GiB  %6.2f s  %s\n", what, (double)bytes / (1 << 30), secs,
               all_ok ? "ok" : "FAILED");
        fflush(stdout);
    }
    if (all_ok) {
        ++passed;
    } else {
        ++failed;
    }
}

static int32_t *alloc_ints(size_t n)
{
    int32_t *p = malloc(n * sizeof(int32_t));
    if (p == NULL) {
        fprintf(stderr, "large_check: rank %d: out of memory for %zu bytes\n", rank,
                n * sizeof(int32_t));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

/* First mismatch of buf[lo, hi) against want(i), reported; true when none. */
#define CHECK_RANGE(buf, lo, hi, want, what)                                                       \
    ({                                                                                             \
        bool ok_ = true;                                                                           \
        for (size_t i = (lo); i < (hi); ++i) {                                                     \
            int32_t w_ = (want);                                                                   \
            if ((buf)[i] != w_) {                                                                  \
                fprintf(stderr,                                                                    \
                        "large_check: rank %d: %s: element %zu (byte %zu) is %d, "                 \
                        "want %d\n",                                                               \
                        rank, (what), i, i * 4, (int)(buf)[i], (int)w_);                           \
                ok_ = false;                                                                       \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
        ok_;                                                                                       \
    })

static double now(void)
{
    return MPI_Wtime();
}

static void t_allreduce(void)
{
    const size_t n = kInts;
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = val(i, rank);
    double t = now();
    int rc = MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS && CHECK_RANGE(b, 0, n, sum_val(i), "allreduce");
    free(b);
    note(ok, "allreduce (in place)", t, n * 4);
}

/* A double allreduce too: the 8-byte element path, another extent in the products. */
static void t_allreduce_double(void)
{
    const size_t n = kInts / 2 + 3;
    double *b = malloc(n * sizeof(double));
    if (b == NULL)
        MPI_Abort(MPI_COMM_WORLD, 3);
    for (size_t i = 0; i < n; ++i)
        b[i] = (double)val(i, rank);
    double t = now();
    int rc = MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS;
    for (size_t i = 0; ok && i < n; ++i) {
        double w = 0;
        for (int r = 0; r < size; ++r)
            w = (double)val(i, r) > w ? (double)val(i, r) : w;
        if (b[i] != w) {
            fprintf(stderr, "large_check: rank %d: allreduce double: element %zu is %g, want %g\n",
                    rank, i, b[i], w);
            ok = false;
        }
    }
    free(b);
    note(ok, "allreduce double max", t, n * 8);
}

static void t_bcast(void)
{
    const size_t n = kInts;
    const int root = size - 1;
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = rank == root ? val(i, root) : -1;
    double t = now();
    int rc = MPI_Bcast(b, (int)n, MPI_INT32_T, root, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS && CHECK_RANGE(b, 0, n, val(i, root), "bcast");
    free(b);
    note(ok, "bcast", t, n * 4);
}

static void t_reduce(void)
{
    const size_t n = kInts;
    const int root = size - 1;
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = val(i, rank);
    double t = now();
    int rc = rank == root
                 ? MPI_Reduce(MPI_IN_PLACE, b, (int)n, MPI_INT32_T, MPI_SUM, root, MPI_COMM_WORLD)
                 : MPI_Reduce(b, NULL, (int)n, MPI_INT32_T, MPI_SUM, root, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS;
    if (ok && rank == root)
        ok = CHECK_RANGE(b, 0, n, sum_val(i), "reduce");
    if (ok && rank != root)
        ok = CHECK_RANGE(b, 0, n, val(i, rank), "reduce (send buffer kept)");
    free(b);
    note(ok, "reduce (root in place)", t, n * 4);
}

/* Rank r's block of the even collectives: elements [r * c, (r + 1) * c), c = kInts / size + 1
 * (odd shares). */
static size_t block(void)
{
    return kInts / (size_t)size + 1;
}

static void t_allgather(void)
{
    const size_t c = block(), n = c * (size_t)size;
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = i / c == (size_t)rank ? val(i, rank) : -1;
    double t = now();
    int rc =
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, (int)c, MPI_INT32_T, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS && CHECK_RANGE(b, 0, n, val(i, (int)(i / c)), "allgather");
    free(b);
    note(ok, "allgather (in place)", t, n * 4);
}

static void t_reduce_scatter_block(void)
{
    const size_t c = block(), n = c * (size_t)size;
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = val(i, rank);
    double t = now();
    int rc =
        MPI_Reduce_scatter_block(MPI_IN_PLACE, b, (int)c, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    t = now() - t;
    const size_t base = (size_t)rank * c;
    bool ok = rc == MPI_SUCCESS && CHECK_RANGE(b, 0, c, sum_val(base + i), "reduce_scatter_block");
    free(b);
    note(ok, "reduce_scatter_block", t, n * 4);
}

/* The v variants: rank 0 a small share, the others the rest (skewed, the last one odd). */
static void v_layout(int *counts, int *displs)
{
    const size_t small = 5, rest = (kInts - small) / (size_t)(size - 1);
    size_t off = 0;
    for (int r = 0; r < size; ++r) {
        counts[r] = (int)(r == 0 ? small : rest + (size_t)r);
        displs[r] = (int)off;
        off += (size_t)counts[r];
    }
}

static size_t v_total(const int *counts)
{
    size_t n = 0;
    for (int r = 0; r < size; ++r)
        n += (size_t)counts[r];
    return n;
}

/* The owner of element i in the v layout. */
static int v_owner(const int *displs, size_t i)
{
    int r = size - 1;
    while (r > 0 && (size_t)displs[r] > i)
        --r;
    return r;
}

static void t_allgatherv(void)
{
    int counts[64] = {0}, displs[64] = {0};
    v_layout(counts, displs);
    const size_t n = v_total(counts), lo = (size_t)displs[rank], hi = lo + (size_t)counts[rank];
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = i >= lo && i < hi ? val(i, rank) : -1;
    double t = now();
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, counts, displs, MPI_INT32_T,
                            MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS && CHECK_RANGE(b, 0, n, val(i, v_owner(displs, i)), "allgatherv");
    free(b);
    note(ok, "allgatherv (skewed)", t, n * 4);
}

static void t_reduce_scatter(void)
{
    int counts[64] = {0}, displs[64] = {0};
    v_layout(counts, displs);
    const size_t n = v_total(counts), base = (size_t)displs[rank];
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = val(i, rank);
    double t = now();
    int rc = MPI_Reduce_scatter(MPI_IN_PLACE, b, counts, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS &&
              CHECK_RANGE(b, 0, (size_t)counts[rank], sum_val(base + i), "reduce_scatter");
    free(b);
    note(ok, "reduce_scatter (skewed)", t, n * 4);
}

static void t_gather(void)
{
    const size_t c = block(), n = c * (size_t)size;
    const int root = 0;
    int32_t *b = alloc_ints(rank == root ? n : c);
    if (rank == root) {
        for (size_t i = 0; i < n; ++i)
            b[i] = i / c == (size_t)root ? val(i, root) : -1;
    } else {
        for (size_t i = 0; i < c; ++i)
            b[i] = val((size_t)rank * c + i, rank);
    }
    double t = now();
    int rc = rank == root ? MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, (int)c, MPI_INT32_T,
                                       root, MPI_COMM_WORLD)
                          : MPI_Gather(b, (int)c, MPI_INT32_T, NULL, 0, MPI_DATATYPE_NULL, root,
                                       MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS;
    if (ok && rank == root)
        ok = CHECK_RANGE(b, 0, n, val(i, (int)(i / c)), "gather");
    free(b);
    note(ok, "gather (root in place)", t, n * 4);
}

static void t_scatter(void)
{
    const size_t c = block(), n = c * (size_t)size;
    const int root = size - 1;
    int32_t *b = alloc_ints(rank == root ? n : c);
    if (rank == root) {
        for (size_t i = 0; i < n; ++i)
            b[i] = val(i, (int)(i / c));
    } else {
        for (size_t i = 0; i < c; ++i)
            b[i] = -1;
    }
    double t = now();
    int rc = rank == root ? MPI_Scatter(b, (int)c, MPI_INT32_T, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                                        root, MPI_COMM_WORLD)
                          : MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, b, (int)c, MPI_INT32_T, root,
                                        MPI_COMM_WORLD);
    t = now() - t;
    const size_t base = (size_t)rank * c;
    bool ok = rc == MPI_SUCCESS;
    if (ok && rank != root)
        ok = CHECK_RANGE(b, 0, c, val(base + i, rank), "scatter");
    if (ok && rank == root)
        ok = CHECK_RANGE(b, 0, n, val(i, (int)(i / c)), "scatter (root kept)");
    free(b);
    note(ok, "scatter (root in place)", t, n * 4);
}

static void t_gatherv(void)
{
    int counts[64] = {0}, displs[64] = {0};
    v_layout(counts, displs);
    const int root = size - 1;
    const size_t n = v_total(counts), lo = (size_t)displs[rank], mine = (size_t)counts[rank];
    int32_t *b = alloc_ints(rank == root ? n : mine);
    if (rank == root) {
        for (size_t i = 0; i < n; ++i)
            b[i] = v_owner(displs, i) == root ? val(i, root) : -1;
    } else {
        for (size_t i = 0; i < mine; ++i)
            b[i] = val(lo + i, rank);
    }
    double t = now();
    int rc = rank == root ? MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, counts, displs,
                                        MPI_INT32_T, root, MPI_COMM_WORLD)
                          : MPI_Gatherv(b, (int)mine, MPI_INT32_T, NULL, NULL, NULL,
                                        MPI_DATATYPE_NULL, root, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS;
    if (ok && rank == root)
        ok = CHECK_RANGE(b, 0, n, val(i, v_owner(displs, i)), "gatherv");
    free(b);
    note(ok, "gatherv (skewed)", t, n * 4);
}

static void t_scatterv(void)
{
    int counts[64] = {0}, displs[64] = {0};
    v_layout(counts, displs);
    const int root = 0;
    const size_t n = v_total(counts), lo = (size_t)displs[rank], mine = (size_t)counts[rank];
    int32_t *b = alloc_ints(rank == root ? n : mine);
    if (rank == root) {
        for (size_t i = 0; i < n; ++i)
            b[i] = val(i, v_owner(displs, i));
    } else {
        for (size_t i = 0; i < mine; ++i)
            b[i] = -1;
    }
    double t = now();
    int rc = rank == root ? MPI_Scatterv(b, counts, displs, MPI_INT32_T, MPI_IN_PLACE, 0,
                                         MPI_DATATYPE_NULL, root, MPI_COMM_WORLD)
                          : MPI_Scatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, b, (int)mine,
                                         MPI_INT32_T, root, MPI_COMM_WORLD);
    t = now() - t;
    bool ok = rc == MPI_SUCCESS;
    if (ok && rank != root)
        ok = CHECK_RANGE(b, 0, mine, val(lo + i, rank), "scatterv");
    free(b);
    note(ok, "scatterv (skewed)", t, n * 4);
}

/* In place: block j of rank r holds what r sends to j, then what j sent to r; the value of
 * element k of the block from s to d is val(d * c + k, s). */
static void t_alltoall(void)
{
    const size_t c = block(), n = c * (size_t)size;
    int32_t *b = alloc_ints(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = val(i, rank);
    double t = now();
    int rc =
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, (int)c, MPI_INT32_T, MPI_COMM_WORLD);
    t = now() - t;
    const size_t me = (size_t)rank * c;
    bool ok = rc == MPI_SUCCESS && CHECK_RANGE(b, 0, n, val(me + i % c, (int)(i / c)), "alltoall");
    free(b);
    note(ok, "alltoall (in place)", t, n * 4);
}

/* A rank that computes between calls while the other waits in the next one: the last rank
 * sleeps (no MPI, no progress) before each of a few small allreduces. Its peer's watchdog
 * pings both planes while it waits; the call finishes on the one plane small messages take,
 * so the sleeper leaves without reading the other, and the stall rule must not take that
 * for the other plane's death. */
static void t_imbalance(void)
{
    bool ok = true;
    double t = now();
    for (int k = 0; k < 6; ++k) {
        if (rank == size - 1) {
            struct timespec ts = {1, 0}; /* 1 s */
            nanosleep(&ts, NULL);
        }
        int32_t v = rank + k, w = 0;
        int rc = MPI_Allreduce(&v, &w, 1, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        ok = ok && rc == MPI_SUCCESS && w == size * (size - 1) / 2 + size * k;
    }
    note(ok, "6 x 4 B, one rank late", now() - t, 24);
}

/* One rank out of MPI between short calls, as an application computing between two dot
 * products, while the other waits in them: 20 pauses of 0.15 s, then 20 of 0.3 s, each
 * before a 4-byte allreduce (the pausing rank sleeps: out of MPI either way). The waiting
 * rank pings both planes; the late one, back for microseconds at a time, must answer on
 * the plane its small messages never use too: no plane may be declared down. Before the
 * fix the unused plane was declared down in every run, and at 0.3 s UCX 1.13 asserted in
 * the re-admission that followed or an allreduce failed. */
static void t_pauses(void)
{
    bool ok = true;
    double t = now();
    for (int k = 0; k < 40; ++k) {
        if (rank == size - 1) {
            struct timespec ts = {0, k < 20 ? 150000000 : 300000000};
            nanosleep(&ts, NULL);
        }
        int32_t v = rank + k, w = 0;
        int rc = MPI_Allreduce(&v, &w, 1, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        ok = ok && rc == MPI_SUCCESS && w == size * (size - 1) / 2 + size * k;
    }
    note(ok, "40 x 4 B, one rank pausing", now() - t, 160);
}

/* name is one of the comma-separated names in list */
static bool listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; p != NULL; p = strchr(p, ','), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    }
    return false;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *only = NULL;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            if (rank == 0)
                fprintf(stderr, "large_check: unknown argument %s\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (size < 2 || size > 64) {
        if (rank == 0)
            fprintf(stderr, "large_check: needs 2 to 64 ranks\n");
        MPI_Finalize();
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {{"allreduce", t_allreduce},
                 {"allreduce_double", t_allreduce_double},
                 {"bcast", t_bcast},
                 {"reduce", t_reduce},
                 {"allgather", t_allgather},
                 {"allgatherv", t_allgatherv},
                 {"reduce_scatter_block", t_reduce_scatter_block},
                 {"reduce_scatter", t_reduce_scatter},
                 {"gather", t_gather},
                 {"gatherv", t_gatherv},
                 {"scatter", t_scatter},
                 {"scatterv", t_scatterv},
                 {"alltoall", t_alltoall},
                 {"imbalance", t_imbalance},
                 {"pauses", t_pauses}};
    int ran = 0;
    for (size_t k = 0; k < sizeof(tests) / sizeof(tests[0]); ++k) {
        /* the late ranks are checks of their own (--only imbalance,pauses), not large
         * messages */
        const bool opt_in =
            strcmp(tests[k].name, "imbalance") == 0 || strcmp(tests[k].name, "pauses") == 0;
        if (only == NULL ? !opt_in : listed(only, tests[k].name)) {
            tests[k].fn();
            ++ran;
        }
    }
    if (ran == 0) {
        if (rank == 0)
            fprintf(stderr, "large_check: no collective named %s\n", only);
        ++failed;
    }
    if (rank == 0) {
        printf("%d passed, %d failed\n", passed, failed);
        fflush(stdout);
    }
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
