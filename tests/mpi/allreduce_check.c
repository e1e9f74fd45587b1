/*
 * MPI_Allreduce correctness, run across lab nodes with coll/dualrail selected.
 *
 * Every rank can generate every rank's input, so each rank computes the exact
 * expected result locally (MPI_Reduce_local over all ranks' inputs, or by hand
 * where Open MPI 4.1.4's own op engine is wrong: 8- and 16-bit integer sums
 * saturate in op/avx, upstream issue 8045, and MPI_UNSIGNED_LONG min and max
 * compare as signed, upstream issue 10525). Inputs are small integers, so float results are exact whatever
 * the reduction order. Every rank also checks that all ranks hold bitwise the
 * same result (a hash, allgathered), also for MPI_MAX/MPI_MIN with a NaN on one
 * rank and zeros of both signs, whose bits depend on the operands' order.
 *
 *   allreduce_check [--quick] [--big] [--wire] [--no-stock-op-bugs] [--device]
 *
 * --device: the buffers of the op x type matrix and of the communicator
 * rounds are "device" memory of the host stand-in for a GPU (dr_gpu.h; run
 * with coll_dualrail_gpu_standin 1): the component's device path end to end
 * (detection, per-communicator staging, kernels or the CPU for each op and
 * type) on machines without a GPU. The user-op fallbacks stay on the host.
 *
 * Prints "N passed, N failed" (rank 0) and exits non-zero on any failure.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <complex.h>
#include <math.h>
#include <stdbool.h>

#include "agree.h"
#include "gpu/dr_gpu.h"

static int rank, size;
/* --no-stock-op-bugs: skip the (op, type) pairs stock Open MPI 4.1.4 computes wrongly
 * (8/16-bit sums, unsigned long min/max): for runs where the previous module reduces. */
static bool no_stock_op_bugs;
static long passed, failed;
static const dr_mem_ops_t *dev_mem; /* --device: the stand-in; NULL: host buffers */
static void *dev_stream;

typedef struct tinfo {
    MPI_Datatype t;
    const char *name;
    int kind; /* 0 integer, 1 floating, 2 complex, 3 logical (C bool), 4 byte, 5 pair */
    int narrow; /* 8- or 16-bit integer: sums checked by hand (wrapping) */
} tinfo_t;

typedef struct oinfo {
    MPI_Op op;
    const char *name;
} oinfo_t;

static void note(bool ok, const char *what)
{
    const int all_ok = mpi_agree(ok, 901);
    if (all_ok) {
        ++passed;
    } else {
        ++failed;
        if (rank == 0) {
            printf("FAILED: %s\n", what);
            fflush(stdout);
        }
    }
}

/* Element i of rank r's input, written as type ti into p. */
static void gen(const tinfo_t *ti, int r, size_t i, void *p, int op_is_prod)
{
    int v = (int)((r * 7 + i * 3) % 5) + 1; /* 1..5 */
    if (op_is_prod) {
        v = (int)((r + i) % 3) + 1;          /* 1..3: products stay exact */
    }
    MPI_Datatype t = ti->t;
    if (t == MPI_CHAR || t == MPI_SIGNED_CHAR || t == MPI_INT8_T) *(int8_t *)p = (int8_t)(v * 37);
    else if (t == MPI_UNSIGNED_CHAR || t == MPI_UINT8_T) *(uint8_t *)p = (uint8_t)(v * 53);
    else if (t == MPI_BYTE) *(uint8_t *)p = (uint8_t)(0x11 * v + r);
    else if (t == MPI_SHORT || t == MPI_INT16_T) *(int16_t *)p = (int16_t)(v * 1000 - 2500);
    else if (t == MPI_UNSIGNED_SHORT || t == MPI_UINT16_T) *(uint16_t *)p = (uint16_t)(v * 9000);
    else if (t == MPI_INT || t == MPI_INT32_T) *(int32_t *)p = v * 100000 - 250000;
    else if (t == MPI_UNSIGNED || t == MPI_UINT32_T) *(uint32_t *)p = (uint32_t)v * 900000000u;
    else if (t == MPI_LONG || t == MPI_INT64_T || t == MPI_LONG_LONG) *(int64_t *)p = (int64_t)v * 3000000000LL - 7;
    else if (t == MPI_UNSIGNED_LONG || t == MPI_UINT64_T || t == MPI_UNSIGNED_LONG_LONG) *(uint64_t *)p = (uint64_t)v << 61 | (uint64_t)r;
    else if (t == MPI_FLOAT) *(float *)p = (float)v;
    else if (t == MPI_DOUBLE) *(double *)p = (double)v;
    else if (t == MPI_LONG_DOUBLE) { long double x = (long double)v; memset(p, 0, sizeof(x)); memcpy(p, &x, sizeof(x)); }
    else if (t == MPI_C_FLOAT_COMPLEX) *(float complex *)p = (float)v + (float)(v % 2) * I;
    else if (t == MPI_C_DOUBLE_COMPLEX) *(double complex *)p = (double)v + (double)(v % 2) * I;
    else if (t == MPI_C_BOOL) *(bool *)p = (v % 2) != 0;
    else if (t == MPI_FLOAT_INT) { struct { float a; int b; } x = {(float)v, r}; memcpy(p, &x, sizeof(x)); }
    else if (t == MPI_DOUBLE_INT) { struct { double a; int b; } x = {(double)v, r}; memset(p, 0, sizeof(x)); memcpy(p, &x, sizeof(x)); }
    else if (t == MPI_LONG_INT) { struct { long a; int b; } x = {(long)v, r}; memset(p, 0, sizeof(x)); memcpy(p, &x, sizeof(x)); }
    else if (t == MPI_2INT) { struct { int a; int b; } x = {v, r}; memcpy(p, &x, sizeof(x)); }
    else if (t == MPI_SHORT_INT) { struct { short a; int b; } x; memset(&x, 0, sizeof(x)); x.a = (short)v; x.b = r; memcpy(p, &x, sizeof(x)); }
    else if (t == MPI_LONG_DOUBLE_INT) { struct { long double a; int b; } x; memset(&x, 0, sizeof(x)); x.a = v; x.b = r; memcpy(p, &x, sizeof(x)); }
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

/* Compare only the meaningful bytes of an element (pair types carry padding). */
static size_t meaningful(const tinfo_t *ti, MPI_Aint extent)
{
    MPI_Datatype t = ti->t;
    if (t == MPI_LONG_DOUBLE) return 10;          /* x87: 80 bits used of 16 */
    if (t == MPI_SHORT_INT) return 2;             /* check value; index below */
    if (t == MPI_LONG_DOUBLE_INT) return 10;
    if (t == MPI_DOUBLE_INT || t == MPI_LONG_INT) return 8;
    return (size_t)extent;
}

static size_t index_offset(const tinfo_t *ti)
{
    MPI_Datatype t = ti->t;
    if (t == MPI_SHORT_INT) return 4;
    if (t == MPI_LONG_DOUBLE_INT) return 16;
    if (t == MPI_DOUBLE_INT || t == MPI_LONG_INT) return 8;
    return 0;
}

static void one(MPI_Comm comm, const tinfo_t *ti, const oinfo_t *oi, size_t count, int in_place)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(ti->t, &lb, &extent);
    size_t bytes = count * (size_t)extent;
    unsigned char *in = calloc(bytes + 1, 1), *out = calloc(bytes + 1, 1);
    unsigned char *exp = calloc(bytes + 1, 1), *tmp = calloc(bytes + 1, 1);
    int prod = oi->op == MPI_PROD;
    /* Inputs depend on the rank in comm, so reordered communicators are checked too. */
    for (size_t i = 0; i < count; ++i) {
        gen(ti, crank, i, in + i * (size_t)extent, prod);
    }
    for (int r = 0; r < csize; ++r) {
        for (size_t i = 0; i < count; ++i) {
            gen(ti, r, i, (r == 0 ? exp : tmp) + i * (size_t)extent, prod);
        }
        if (r == 0) {
            continue;
        }
        if (ti->narrow == 1 && oi->op == MPI_SUM) {
            for (size_t i = 0; i < count; ++i) {
                exp[i] = (unsigned char)(exp[i] + tmp[i]);
            }
        } else if (ti->narrow == 2 && oi->op == MPI_SUM) {
            for (size_t i = 0; i < count; ++i) {
                uint16_t x, y;
                memcpy(&x, exp + 2 * i, 2);
                memcpy(&y, tmp + 2 * i, 2);
                x = (uint16_t)(x + y);
                memcpy(exp + 2 * i, &x, 2);
            }
        } else if (ti->t == MPI_UNSIGNED_LONG && (oi->op == MPI_MAX || oi->op == MPI_MIN)) {
            for (size_t i = 0; i < count; ++i) {
                unsigned long x, y;
                memcpy(&x, exp + i * sizeof(x), sizeof(x));
                memcpy(&y, tmp + i * sizeof(y), sizeof(y));
                x = (oi->op == MPI_MAX) == (y > x) ? y : x;
                memcpy(exp + i * sizeof(x), &x, sizeof(x));
            }
        } else if (count > 0) {
            MPI_Reduce_local(tmp, exp, (int)count, ti->t, oi->op);
        }
    }
    int rc;
    if (in_place) {
        memcpy(out, in, bytes);
    } else {
        out[bytes] = 0x5a;
    }
    void *din = NULL, *dout = NULL; /* --device: the same buffers in stand-in device memory */
    bool moved = true;
    if (dev_mem != NULL) {
        moved = dev_mem->device_alloc(&din, bytes + 1) == DR_OK &&
                dev_mem->device_alloc(&dout, bytes + 1) == DR_OK &&
                dev_mem->copy_async(din, in, bytes, dev_stream) == DR_OK &&
                dev_mem->copy_async(dout, out, bytes + 1, dev_stream) == DR_OK &&
                dev_mem->stream_sync(dev_stream) == DR_OK;
    }
    const void *sb = in_place ? MPI_IN_PLACE : (din != NULL ? din : (void *)in);
    rc = MPI_Allreduce(sb, dout != NULL ? dout : (void *)out, (int)count, ti->t, oi->op, comm);
    if (dev_mem != NULL) {
        moved = moved && dev_mem->copy_async(out, dout, bytes + 1, dev_stream) == DR_OK &&
                dev_mem->stream_sync(dev_stream) == DR_OK;
        dev_mem->device_free(din);
        dev_mem->device_free(dout);
    }
    bool ok = moved && rc == MPI_SUCCESS && (in_place || out[bytes] == 0x5a);
    size_t m = meaningful(ti, extent), io = index_offset(ti);
    for (size_t i = 0; ok && i < count; ++i) {
        const unsigned char *a = out + i * (size_t)extent, *b = exp + i * (size_t)extent;
        if (memcmp(a, b, m) != 0 || (io && memcmp(a + io, b + io, sizeof(int)) != 0)) {
            if (crank == 0) {
                printf("  %s %s count %zu%s: element %zu differs from the reference\n", ti->name,
                       oi->name, count, in_place ? " in place" : "", i);
            }
            ok = false;
        }
    }
    /* Bitwise identical on every rank (meaningful bytes). */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < count; ++i) {
        h ^= fnv(out + i * (size_t)extent, m);
        h *= 31;
    }
    uint64_t *hs = malloc(sizeof(uint64_t) * (size_t)csize);
    MPI_Allgather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, comm);
    for (int r = 0; r < csize; ++r) {
        ok &= hs[r] == hs[0];
    }
    free(hs);
    char what[256];
    snprintf(what, sizeof(what), "%s %s count %zu%s on a %d-rank communicator", ti->name,
             oi->name, count, in_place ? " in place" : "", csize);
    note(ok, what);
    free(in);
    free(out);
    free(exp);
    free(tmp);
}

#define T(t, k, i8) {t, #t, k, i8}
static const oinfo_t arith_ops[] = {{MPI_SUM, "MPI_SUM"}, {MPI_PROD, "MPI_PROD"}, {MPI_MAX, "MPI_MAX"}, {MPI_MIN, "MPI_MIN"}};
static const oinfo_t int_extra[] = {{MPI_BAND, "MPI_BAND"}, {MPI_BOR, "MPI_BOR"}, {MPI_BXOR, "MPI_BXOR"},
                                    {MPI_LAND, "MPI_LAND"}, {MPI_LOR, "MPI_LOR"}, {MPI_LXOR, "MPI_LXOR"}};
static const oinfo_t logical_ops[] = {{MPI_LAND, "MPI_LAND"}, {MPI_LOR, "MPI_LOR"}, {MPI_LXOR, "MPI_LXOR"}};
static const oinfo_t byte_ops[] = {{MPI_BAND, "MPI_BAND"}, {MPI_BOR, "MPI_BOR"}, {MPI_BXOR, "MPI_BXOR"}};
static const oinfo_t loc_ops[] = {{MPI_MAXLOC, "MPI_MAXLOC"}, {MPI_MINLOC, "MPI_MINLOC"}};
static const oinfo_t cplx_ops[] = {{MPI_SUM, "MPI_SUM"}, {MPI_PROD, "MPI_PROD"}};

static void matrix(MPI_Comm comm, const size_t *counts, int ncounts)
{
    tinfo_t types[] = {
        T(MPI_CHAR, 0, 1), T(MPI_SIGNED_CHAR, 0, 1), T(MPI_UNSIGNED_CHAR, 0, 1), T(MPI_INT8_T, 0, 1),
        T(MPI_UINT8_T, 0, 1), T(MPI_SHORT, 0, 2), T(MPI_UNSIGNED_SHORT, 0, 2), T(MPI_INT, 0, 0),
        T(MPI_UNSIGNED, 0, 0), T(MPI_LONG, 0, 0), T(MPI_UNSIGNED_LONG, 0, 0), T(MPI_LONG_LONG, 0, 0),
        T(MPI_UNSIGNED_LONG_LONG, 0, 0), T(MPI_INT16_T, 0, 2), T(MPI_UINT16_T, 0, 2),
        T(MPI_INT32_T, 0, 0), T(MPI_UINT32_T, 0, 0), T(MPI_INT64_T, 0, 0), T(MPI_UINT64_T, 0, 0),
        T(MPI_FLOAT, 1, 0), T(MPI_DOUBLE, 1, 0), T(MPI_LONG_DOUBLE, 1, 0),
        T(MPI_C_FLOAT_COMPLEX, 2, 0), T(MPI_C_DOUBLE_COMPLEX, 2, 0), T(MPI_C_BOOL, 3, 0),
        T(MPI_BYTE, 4, 0), T(MPI_FLOAT_INT, 5, 0), T(MPI_DOUBLE_INT, 5, 0), T(MPI_LONG_INT, 5, 0),
        T(MPI_2INT, 5, 0), T(MPI_SHORT_INT, 5, 0), T(MPI_LONG_DOUBLE_INT, 5, 0),
    };
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); ++t) {
        const oinfo_t *ops[2] = {NULL, NULL};
        size_t nops[2] = {0, 0};
        switch (types[t].kind) {
        case 0: ops[0] = arith_ops; nops[0] = 4; ops[1] = int_extra; nops[1] = 6; break;
        case 1: ops[0] = arith_ops; nops[0] = 4; break;
        case 2: ops[0] = cplx_ops; nops[0] = 2; break;
        case 3: ops[0] = logical_ops; nops[0] = 3; break;
        case 4: ops[0] = byte_ops; nops[0] = 3; break;
        case 5: ops[0] = loc_ops; nops[0] = 2; break;
        }
        for (int g = 0; g < 2; ++g) {
            for (size_t o = 0; o < nops[g]; ++o) {
                for (int c = 0; c < ncounts; ++c) {
                    const MPI_Op op = ops[g][o].op;
                    if (no_stock_op_bugs && ((types[t].narrow && op == MPI_SUM) ||
                                             (types[t].t == MPI_UNSIGNED_LONG &&
                                              (op == MPI_MAX || op == MPI_MIN)))) {
                        continue;
                    }
                    one(comm, &types[t], &ops[g][o], counts[c], c % 2);
                }
            }
        }
    }
}

static void big(MPI_Comm comm)
{
    static const tinfo_t d = T(MPI_DOUBLE, 1, 0), i32 = T(MPI_INT, 0, 0), u8 = T(MPI_UINT8_T, 0, 1);
    static const oinfo_t sum = {MPI_SUM, "MPI_SUM"}, mx = {MPI_MAX, "MPI_MAX"};
    const size_t mib = 1 << 20;
    one(comm, &d, &sum, mib / 8 + 3, 0);             /* ~1 MiB, odd */
    one(comm, &i32, &mx, 4 * mib / 4 + 1, 1);        /* 4 MiB in place */
    one(comm, &u8, &sum, 16 * mib + 7, 0);           /* 16 MiB of wrapping 8-bit sums */
    one(comm, &d, &sum, 64 * mib / 8, 1);            /* 64 MiB */
}

static uint64_t counter(const char *ifname, const char *what)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", ifname, what);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (f != NULL) {
        if (fscanf(f, "%llu", &v) != 1) {
            v = 0;
        }
        fclose(f);
    }
    return v;
}

/* The wire proof: 16 MiB allreduces move their bytes over ethA and ethB, not ethM. */
static void wire(void)
{
    const size_t n = (16u << 20) / sizeof(double);
    double *buf = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0;
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t a0 = counter("ethA", "tx_bytes"), b0 = counter("ethB", "tx_bytes");
    uint64_t m0 = counter("ethM", "tx_bytes");
    const int iters = 4;
    for (int k = 0; k < iters; ++k) {
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    uint64_t d[3] = {counter("ethA", "tx_bytes") - a0, counter("ethB", "tx_bytes") - b0,
                     counter("ethM", "tx_bytes") - m0};
    uint64_t tot[3];
    MPI_Reduce(d, tot, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    /* Ring allreduce: every rank sends 2(n-1)/n of the buffer per call. */
    double expect = 2.0 * (size - 1) / size * (double)(n * sizeof(double)) * iters * size;
    bool ok = true;
    if (rank == 0) {
        printf("wire: %d ranks, %d x 16 MiB: ethA %.1f MiB, ethB %.1f MiB, ethM %.2f MiB "
               "(ring payload %.1f MiB)\n", size, iters, tot[0] / 1048576.0, tot[1] / 1048576.0,
               tot[2] / 1048576.0, expect / 1048576.0);
        ok = tot[0] > 0.4 * expect && tot[1] > 0.4 * expect && tot[0] < 0.7 * expect &&
             tot[1] < 0.7 * expect && tot[2] < 0.02 * expect;
    }
    note(ok, "wire proof: data on ethA and ethB in equal shares, not on ethM");
    free(buf);
}

static void user_op_fn(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    for (int i = 0; i < *len; ++i) ((int *)inout)[i] += ((int *)in)[i];
}

static void user_pair_fn(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    for (int i = 0; i < 2 * *len; ++i) ((int *)inout)[i] += ((int *)in)[i];
}

/* Cases that must reach the previous module (and still give the right answer). */
static void fallbacks(void)
{
    MPI_Op uop, nc;
    MPI_Op_create(user_op_fn, 1, &uop);
    MPI_Op_create(user_op_fn, 0, &nc);
    int v[4] = {rank, rank, rank, rank}, r[4];
    int want = size * (size - 1) / 2;
    MPI_Allreduce(v, r, 4, MPI_INT, uop, MPI_COMM_WORLD);
    note(r[0] == want && r[3] == want, "user-defined commutative op");
    MPI_Allreduce(v, r, 4, MPI_INT, nc, MPI_COMM_WORLD);
    note(r[0] == want && r[3] == want, "user-defined non-commutative op");
    /* MPI defines predefined ops on predefined types only: a derived type takes a user op. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op pop;
    MPI_Op_create(user_pair_fn, 1, &pop);
    MPI_Allreduce(v, r, 2, pair, pop, MPI_COMM_WORLD);
    note(r[0] == want && r[3] == want, "derived datatype (contiguous 2 x MPI_INT)");
    MPI_Op_free(&pop);
    MPI_Type_free(&pair);
    MPI_Op_free(&uop);
    MPI_Op_free(&nc);
}

/*
 * MPI_MAX and MPI_MIN of doubles with a NaN on one rank (each in turn) and zeros of both
 * signs: Open MPI's ops keep their `in` operand when the comparison fails, so the result's
 * bits depend on the operands' order; every rank must still hold the same bits (a job that
 * branches on an allreduced maximum must take the same branch everywhere).
 */
static void unordered_bits(void)
{
    bool ok = true;
    for (int nan_at = 0; nan_at < size; ++nan_at) {
        for (int k = 0; k < 2; ++k) {
            const double z = rank % 2 == 0 ? 0.0 : -0.0;
            double v[4] = {rank == nan_at ? NAN : 1.0, z, -z, (double)rank}, r[4];
            int rc = MPI_Allreduce(v, r, 4, MPI_DOUBLE, k == 0 ? MPI_MAX : MPI_MIN,
                                   MPI_COMM_WORLD);
            uint64_t h = fnv((const unsigned char *)r, sizeof(r));
            uint64_t *hs = malloc(sizeof(uint64_t) * (size_t)size);
            MPI_Allgather(&h, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
            bool same = rc == MPI_SUCCESS;
            for (int q = 0; q < size; ++q) {
                same &= hs[q] == hs[0];
            }
            free(hs);
            if (!same && rank == 0) {
                printf("  MPI_DOUBLE %s with a NaN on rank %d: ranks hold different bits\n",
                       k == 0 ? "MPI_MAX" : "MPI_MIN", nan_at);
            }
            ok &= same;
        }
    }
    note(ok, "MPI_MAX/MPI_MIN with a NaN and signed zeros: the same bits on every rank");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bool quick = false, do_big = false, do_wire = false;
    for (int i = 1; i < argc; ++i) {
        quick |= strcmp(argv[i], "--quick") == 0;
        do_big |= strcmp(argv[i], "--big") == 0;
        do_wire |= strcmp(argv[i], "--wire") == 0;
        no_stock_op_bugs |= strcmp(argv[i], "--no-stock-op-bugs") == 0;
        if (strcmp(argv[i], "--device") == 0) {
            dev_mem = dr_mem_standin();
            if (dev_mem->stream_create(&dev_stream) != DR_OK) {
                fprintf(stderr, "allreduce_check: stand-in stream: %s\n", dev_mem->last_error());
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
    }
    size_t counts[] = {0, 1, (size_t)size - 1 > 0 ? (size_t)size - 1 : 2, 1001, 70001};
    int ncounts = quick ? 3 : 5;

    matrix(MPI_COMM_WORLD, counts, ncounts);
    /* A dup, an odd/even split, and a reordered communicator, interleaved. */
    MPI_Comm dup, split, rev;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    static const tinfo_t d = T(MPI_DOUBLE, 1, 0), l = T(MPI_LONG, 0, 0);
    static const oinfo_t sum = {MPI_SUM, "MPI_SUM"}, mn = {MPI_MIN, "MPI_MIN"};
    for (int round = 0; round < 3; ++round) {
        one(dup, &d, &sum, 1000 + (size_t)round, round % 2);
        one(rev, &l, &mn, 70001, 0);
        one(split, &d, &sum, 333, 1);
        one(MPI_COMM_WORLD, &l, &sum, 5, 0);
        one(rev, &d, &sum, 200000, 1);
    }
    /* One process, out of place: coll/self's memcpy would crash on a device buffer. */
    one(MPI_COMM_SELF, &d, &sum, 333, 0);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
    MPI_Comm_free(&rev);
    unordered_bits();
    fallbacks();
    if (do_big) big(MPI_COMM_WORLD);
    if (do_wire) wire();
    if (rank == 0) {
        if (dev_mem != NULL) {
            printf("matrix and communicator rounds on device buffers (%s)\n", dev_mem->name);
        }
        printf("%ld passed, %ld failed\n", passed, failed);
    }
    if (dev_stream != NULL) {
        dev_mem->stream_destroy(dev_stream);
    }
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
