/*
 * MPI_Reduce, MPI_Reduce_scatter_block and MPI_Reduce_scatter correctness
 * (part of coll_check, on the same communicators; run_coll.sh checks that
 * coll/dualrail ran them).
 *
 * Every rank can generate every rank's input, and the expected result is
 * computed here by hand, element by element, for each (type, op): not with
 * Open MPI's op engine (MPI_Reduce_local), which 4.1.4 gets wrong for 8- and
 * 16-bit sums (saturating) and MPI_UNSIGNED_LONG max/min (signed). Inputs
 * are small integers (products of 1..3), so floating results are exact in
 * any order, and the narrow sums wrap.
 *
 * Cases on each communicator:
 *   types x ops   every (type, op) pair below, counts 1 and 13, roots and
 *                 in place rotating; MPI_Reduce also against MPI_Allreduce of
 *                 the same inputs, bitwise at the root (the same rules)
 *   counts x roots  MPI_INT/MPI_SUM and MPI_DOUBLE/MPI_MAX: counts 0, 1, 7,
 *                 13, 1009 (and 70001 on MPI_COMM_WORLD without --quick),
 *                 every root, in place and not; a non-root recvbuf NULL or
 *                 poisoned (must stay untouched)
 *   v counts      MPI_Reduce_scatter with equal, zero-for-some, skewed and
 *                 all-on-one receive counts, in place and not
 * The fallbacks (reduce_fallbacks): a user-defined op (commutative and not)
 * and a derived datatype in each collective, run by the previous module.
 * With --device the send and receive buffers are stand-in device memory;
 * --no-stock-op-bugs leaves out the pairs stock Open MPI 4.1.4 computes
 * wrongly (for runs where the previous module reduces).
 */
#include <complex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"

enum {
    OP_SUM,
    OP_PROD,
    OP_MAX,
    OP_MIN,
    OP_BAND,
    OP_BOR,
    OP_BXOR,
    OP_LAND,
    OP_LOR,
    OP_LXOR,
    OP_MAXLOC,
    OP_MINLOC,
    NOPS
};
static const char *const op_names[NOPS] = {"MPI_SUM",  "MPI_PROD", "MPI_MAX",    "MPI_MIN",
                                           "MPI_BAND", "MPI_BOR",  "MPI_BXOR",   "MPI_LAND",
                                           "MPI_LOR",  "MPI_LXOR", "MPI_MAXLOC", "MPI_MINLOC"};
static MPI_Op mpi_op(int op)
{
    const MPI_Op ops[NOPS] = {MPI_SUM,  MPI_PROD, MPI_MAX, MPI_MIN,  MPI_BAND,   MPI_BOR,
                              MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_MAXLOC, MPI_MINLOC};
    return ops[op];
}

enum { C_INT, C_FLOAT, C_COMPLEX, C_PAIR };
typedef struct rtype {
    MPI_Datatype t;
    const char *name;
    size_t esz;
    int cls;
    int id; /* which C type (see ref_reduce) */
} rtype_t;
enum {
    T_I8,
    T_U8,
    T_I16,
    T_U16,
    T_I32,
    T_U32,
    T_LONG,
    T_ULONG,
    T_U64,
    T_F32,
    T_F64,
    T_C64,
    T_2INT
};
static const rtype_t rtypes[] = {
    {MPI_INT8_T, "MPI_INT8_T", 1, C_INT, T_I8},
    {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, C_INT, T_U8},
    {MPI_SHORT, "MPI_SHORT", 2, C_INT, T_I16},
    {MPI_UINT16_T, "MPI_UINT16_T", 2, C_INT, T_U16},
    {MPI_INT, "MPI_INT", 4, C_INT, T_I32},
    {MPI_UNSIGNED, "MPI_UNSIGNED", 4, C_INT, T_U32},
    {MPI_LONG, "MPI_LONG", 8, C_INT, T_LONG},
    {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", 8, C_INT, T_ULONG},
    {MPI_UINT64_T, "MPI_UINT64_T", 8, C_INT, T_U64},
    {MPI_FLOAT, "MPI_FLOAT", 4, C_FLOAT, T_F32},
    {MPI_DOUBLE, "MPI_DOUBLE", 8, C_FLOAT, T_F64},
    {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 16, C_COMPLEX, T_C64},
    {MPI_2INT, "MPI_2INT", 8, C_PAIR, T_2INT},
};
#define NRTYPES (sizeof(rtypes) / sizeof(rtypes[0]))

static bool op_applies(const rtype_t *t, int op)
{
    /* stock Open MPI 4.1.4 saturates these sums and compares unsigned long as signed */
    if (no_stock_op_bugs && ((op == OP_SUM && t->esz <= 2 && t->cls == C_INT) ||
                             (t->id == T_ULONG && (op == OP_MAX || op == OP_MIN)))) {
        return false;
    }
    switch (t->cls) {
    case C_INT:
        return op <= OP_LXOR;
    case C_FLOAT:
        return op <= OP_MIN;
    case C_COMPLEX:
        return op <= OP_PROD;
    default:
        return op == OP_MAXLOC || op == OP_MINLOC;
    }
}

/* Element i of rank r's input. Narrow types get values whose sums wrap; products of
 * 1..3 stay exact; unsigned long sets the top bit (a signed compare gets it wrong). */
static void gen(const rtype_t *t, int op, int r, size_t i, void *p)
{
    const int v = op == OP_PROD ? (int)((r + i) % 3) + 1 : (int)((r * 7 + i * 3) % 5) + 1;
    const int z = op >= OP_BAND && op <= OP_LXOR && (r + i) % 4 == 0 ? 0 : v; /* logical zeros */
    switch (t->id) {
    case T_I8:
        *(int8_t *)p = (int8_t)(op == OP_SUM ? z * 37 : z);
        break;
    case T_U8:
        *(uint8_t *)p = (uint8_t)(op == OP_SUM ? z * 53 : z);
        break;
    case T_I16:
        *(int16_t *)p = (int16_t)(op == OP_SUM ? z * 13000 - 20000 : z);
        break;
    case T_U16:
        *(uint16_t *)p = (uint16_t)(op == OP_SUM ? z * 21000 : z);
        break;
    case T_I32:
        *(int32_t *)p = op == OP_PROD ? v : z * 100000 - 250000;
        break;
    case T_U32:
        *(uint32_t *)p = op == OP_PROD ? (uint32_t)v : (uint32_t)z * 900000000u;
        break;
    case T_LONG:
        *(long *)p = op == OP_PROD ? v : (long)z * 3000000000L - 7;
        break;
    case T_ULONG:
        *(unsigned long *)p =
            op == OP_PROD ? (unsigned long)v : (unsigned long)z << 61 | (unsigned long)r;
        break;
    case T_U64:
        *(uint64_t *)p = op == OP_PROD ? (uint64_t)v : (uint64_t)z << 60 | (uint64_t)i;
        break;
    case T_F32:
        *(float *)p = (float)v;
        break;
    case T_F64:
        *(double *)p = (double)v - (op == OP_SUM ? 2.5 : 0);
        break;
    case T_C64:
        *(double complex *)p = (double)v + (double)(v % 2) * I;
        break;
    default: {
        int x[2] = {v, r}; /* value, index */
        memcpy(p, x, sizeof(x));
    }
    }
}

#define INT_CASE(ID, T, U)                                                                         \
    case ID: {                                                                                     \
        const T *a = in;                                                                           \
        T *b = inout;                                                                              \
        for (size_t i = 0; i < n; ++i) {                                                           \
            const T x = a[i], y = b[i];                                                            \
            T z;                                                                                   \
            switch (op) {                                                                          \
            case OP_SUM:                                                                           \
                z = (T)(U)((U)x + (U)y);                                                           \
                break;                                                                             \
            case OP_PROD:                                                                          \
                z = (T)(U)((U)x * (U)y);                                                           \
                break;                                                                             \
            case OP_MAX:                                                                           \
                z = x > y ? x : y;                                                                 \
                break;                                                                             \
            case OP_MIN:                                                                           \
                z = x < y ? x : y;                                                                 \
                break;                                                                             \
            case OP_BAND:                                                                          \
                z = (T)(x & y);                                                                    \
                break;                                                                             \
            case OP_BOR:                                                                           \
                z = (T)(x | y);                                                                    \
                break;                                                                             \
            case OP_BXOR:                                                                          \
                z = (T)(x ^ y);                                                                    \
                break;                                                                             \
            case OP_LAND:                                                                          \
                z = (T)(x && y);                                                                   \
                break;                                                                             \
            case OP_LOR:                                                                           \
                z = (T)(x || y);                                                                   \
                break;                                                                             \
            default:                                                                               \
                z = (T)(!x != !y);                                                                 \
                break;                                                                             \
            }                                                                                      \
            b[i] = z;                                                                              \
        }                                                                                          \
        return;                                                                                    \
    }

#define FLOAT_CASE(ID, T)                                                                          \
    case ID: {                                                                                     \
        const T *a = in;                                                                           \
        T *b = inout;                                                                              \
        for (size_t i = 0; i < n; ++i) {                                                           \
            b[i] = op == OP_SUM    ? a[i] + b[i]                                                   \
                   : op == OP_PROD ? a[i] * b[i]                                                   \
                   : op == OP_MAX  ? (a[i] > b[i] ? a[i] : b[i])                                   \
                                   : (a[i] < b[i] ? a[i] : b[i]);                                   \
        }                                                                                          \
        return;                                                                                    \
    }

/* inout = in op inout, the MPI definition of each pair. */
static void ref_reduce(const rtype_t *t, int op, const void *in, void *inout, size_t n)
{
    switch (t->id) {
        INT_CASE(T_I8, int8_t, uint8_t)
        INT_CASE(T_U8, uint8_t, uint8_t)
        INT_CASE(T_I16, int16_t, uint16_t)
        INT_CASE(T_U16, uint16_t, uint16_t)
        INT_CASE(T_I32, int32_t, uint32_t)
        INT_CASE(T_U32, uint32_t, uint32_t)
        INT_CASE(T_LONG, long, unsigned long)
        INT_CASE(T_ULONG, unsigned long, unsigned long)
        INT_CASE(T_U64, uint64_t, uint64_t)
        FLOAT_CASE(T_F32, float)
        FLOAT_CASE(T_F64, double)
    case T_C64: {
        const double complex *a = in;
        double complex *b = inout;
        for (size_t i = 0; i < n; ++i) {
            b[i] = op == OP_SUM ? a[i] + b[i] : a[i] * b[i];
        }
        return;
    }
    default: {
        const int *a = in;
        int *b = inout;
        for (size_t i = 0; i < n; ++i) {
            const int av = a[2 * i], bv = b[2 * i], ai = a[2 * i + 1], bi = b[2 * i + 1];
            const bool take = op == OP_MAXLOC ? av > bv : av < bv;
            if (take || (av == bv && ai < bi)) {
                b[2 * i] = av;
                b[2 * i + 1] = ai;
            }
        }
    }
    }
}

/* The expected result of elements [first, first + n) of the whole input, into exp. */
static void expect(const rtype_t *t, int op, int csize, size_t first, size_t n, unsigned char *exp)
{
    unsigned char *tmp = malloc(n * t->esz + 1);
    for (int r = 0; r < csize; ++r) {
        for (size_t i = 0; i < n; ++i) {
            gen(t, op, r, first + i, (r == 0 ? exp : tmp) + i * t->esz);
        }
        if (r > 0) {
            ref_reduce(t, op, tmp, exp, n);
        }
    }
    free(tmp);
}

static void fill(const rtype_t *t, int op, int r, size_t n, unsigned char *buf)
{
    for (size_t i = 0; i < n; ++i) {
        gen(t, op, r, i, buf + i * t->esz);
    }
}

static void fail_line(const char *what, MPI_Comm comm, const char *cname, const rtype_t *t, int op,
                      size_t count, int root, bool inplace, int rc, const char *why)
{
    (void)comm;
    printf("FAILED on rank %d: %s on %s: %zu x %s, %s, root %d%s (rc %d): %s\n", rank, what, cname,
           count, t->name, op_names[op], root, inplace ? ", in place" : "", rc, why);
    fflush(stdout);
}

/* One MPI_Reduce; with vs_allreduce also MPI_Allreduce of the same inputs, compared
 * bitwise at the root. */
static bool reduce_one(MPI_Comm comm, const char *cname, const rtype_t *t, int op, size_t count,
                       int root, bool inplace, bool vs_allreduce, bool null_recv)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    const bool at_root = crank == root;
    inplace = inplace && at_root;
    const size_t bytes = count * t->esz;
    unsigned char *in = malloc(bytes + 1), *out = malloc(bytes + 1), *exp = malloc(bytes + 1);
    fill(t, op, crank, count, in);
    memset(out, 0xa5, bytes + 1);
    if (inplace) {
        memcpy(out, in, bytes);
    }
    void *din = to_dev(in, bytes + 1), *dout = to_dev(out, bytes + 1);
    const bool no_recv = !at_root && null_recv;
    int rc = MPI_Reduce(inplace ? MPI_IN_PLACE : din, no_recv ? NULL : dout, (int)count, t->t,
                        mpi_op(op), root, comm);
    from_dev(out, dout, bytes + 1);
    from_dev(in, din, bytes + 1);
    bool ok = rc == MPI_SUCCESS && out[bytes] == 0xa5;
    const char *why = "wrote past the end";
    if (ok && at_root) {
        expect(t, op, csize, 0, count, exp);
        ok = memcmp(out, exp, bytes) == 0;
        why = "differs from the reference";
    } else if (ok) {
        for (size_t i = 0; ok && i < bytes; ++i) {
            ok = out[i] == 0xa5;
        }
        why = "a non-root recvbuf was written";
    }
    if (ok && vs_allreduce) {
        unsigned char *all = malloc(bytes + 1);
        rc = MPI_Allreduce(in, all, (int)count, t->t, mpi_op(op), comm);
        ok = rc == MPI_SUCCESS && (!at_root || memcmp(all, out, bytes) == 0);
        why = "differs from MPI_Allreduce of the same inputs";
        free(all);
    }
    if (!ok) {
        fail_line("reduce", comm, cname, t, op, count, root, inplace, rc, why);
    }
    free(in);
    free(out);
    free(exp);
    return ok;
}

/* One MPI_Reduce_scatter (counts != NULL, element counts per rank) or
 * MPI_Reduce_scatter_block (counts NULL, count per rank). */
static bool rs_one(MPI_Comm comm, const char *cname, const rtype_t *t, int op, size_t count,
                   const int *counts, bool inplace)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    size_t total = 0, first = 0, mine = counts == NULL ? count : (size_t)counts[crank];
    for (int r = 0; r < csize; ++r) {
        const size_t c = counts == NULL ? count : (size_t)counts[r];
        first += r < crank ? c : 0;
        total += c;
    }
    const size_t tb = total * t->esz, mb = mine * t->esz, rb = inplace ? tb : mb;
    unsigned char *in = malloc(tb + 1), *out = malloc(rb + 1), *exp = malloc(mb + 1);
    fill(t, op, crank, total, inplace ? out : in);
    memset(inplace ? out + tb : out, 0xa5, inplace ? 1 : rb + 1);
    void *din = inplace ? NULL : to_dev(in, tb + 1), *dout = to_dev(out, rb + 1);
    const int rc = counts == NULL ? MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : din, dout,
                                                             (int)count, t->t, mpi_op(op), comm)
                                  : MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : din, dout, counts,
                                                       t->t, mpi_op(op), comm);
    from_dev(out, dout, rb + 1);
    if (!inplace) {
        from_dev(in, din, tb + 1);
    }
    bool ok = rc == MPI_SUCCESS && out[rb] == 0xa5;
    if (ok) {
        expect(t, op, csize, first, mine, exp);
        ok = memcmp(out, exp, mb) == 0;
    }
    if (!ok) {
        fail_line(counts == NULL ? "reduce_scatter_block" : "reduce_scatter", comm, cname, t, op,
                  count, -1, inplace, rc, out[rb] != 0xa5 ? "wrote past the end" : "wrong block");
    }
    free(in);
    free(out);
    free(exp);
    return ok;
}

/* Receive counts of pattern p: equal, zero on odd ranks, skewed (r * c), all on one. */
static void pattern_counts(int p, int csize, int c, int *counts)
{
    for (int r = 0; r < csize; ++r) {
        counts[r] = p == 0   ? c
                    : p == 1 ? (r % 2 ? 0 : c + r)
                    : p == 2 ? r * c
                             : (r == csize / 2 ? c * csize : 0);
    }
}

void reduce_checks(MPI_Comm comm, const char *cname, bool quick)
{
    int csize;
    MPI_Comm_size(comm, &csize);
    char what[128];
    bool ok = true;
    unsigned turn = 0;
    /* every (type, op) pair, two counts, roots and in place rotating */
    for (size_t ti = 0; ti < NRTYPES; ++ti) {
        for (int op = 0; op < NOPS; ++op) {
            if (!op_applies(&rtypes[ti], op)) {
                continue;
            }
            for (size_t count = light ? 13 : 1; count <= 13; count += 12, ++turn) {
                ok &= reduce_one(comm, cname, &rtypes[ti], op, count, (int)(turn % (unsigned)csize),
                                 turn % 2, true, turn % 3 == 0);
                ok &= rs_one(comm, cname, &rtypes[ti], op, count, NULL, turn % 2);
            }
        }
    }
    snprintf(what, sizeof(what), "reduce and reduce_scatter_block types x ops on %s", cname);
    note(ok, what);
    /* counts x every root x in place */
    const size_t counts[] = {0, 1, 7, 13, 1009, 70001};
    const int ncounts = quick ? 5 : 6;
    const rtype_t *pick[2] = {&rtypes[T_I32], &rtypes[T_F64]};
    const int pick_op[2] = {OP_SUM, OP_MAX};
    ok = true;
    for (int k = 0; k < (light ? 1 : 2); ++k) {
        for (int c = 0; c < (light ? 4 : ncounts); ++c) {
            for (int root = 0; root < csize; ++root) {
                for (int inplace = 0; inplace < 2; ++inplace) {
                    ok &= reduce_one(comm, cname, pick[k], pick_op[k], counts[c], root, inplace,
                                     counts[c] > 10000 && root == 0, (root + inplace) % 2);
                }
            }
            for (int inplace = 0; inplace < 2; ++inplace) {
                ok &= rs_one(comm, cname, pick[k], pick_op[k], counts[c], NULL, inplace);
            }
        }
    }
    snprintf(what, sizeof(what), "reduce and reduce_scatter_block counts x roots on %s", cname);
    note(ok, what);
    /* reduce_scatter with equal, zero, skewed and one-rank counts */
    ok = true;
    int *rc = malloc(sizeof(int) * (size_t)csize);
    const int vcounts[] = {0, 1, 13, 1009, 30011};
    for (int p = 0; p < 4; ++p) {
        for (int c = 0; c < (light ? 3 : quick ? 4 : 5); ++c) {
            pattern_counts(p, csize, vcounts[c], rc);
            for (int inplace = 0; inplace < 2; ++inplace) {
                ok &= rs_one(comm, cname, pick[(p + c) % 2], pick_op[(p + c) % 2], 0, rc, inplace);
            }
        }
    }
    for (size_t ti = 0; ti < NRTYPES; ++ti) {
        const int op = rtypes[ti].cls == C_PAIR ? OP_MINLOC : OP_SUM;
        if (op_applies(&rtypes[ti], op)) {
            pattern_counts((int)ti % 4, csize, 5, rc);
            ok &= rs_one(comm, cname, &rtypes[ti], op, 0, rc, ti % 2);
        }
    }
    free(rc);
    snprintf(what, sizeof(what), "reduce_scatter counts on %s", cname);
    note(ok, what);
}

/* A commutative user op on MPI_INT or on a pair of ints (the derived type below). */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int n = *dt == MPI_INT ? *len : 2 * *len;
    for (int i = 0; i < n; ++i) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

/* A user op and a derived datatype in each reducing collective: the previous module. */
void reduce_fallbacks(void)
{
    MPI_Op uop, nop;
    MPI_Op_create(user_sum, 1, &uop);
    MPI_Op_create(user_sum, 0, &nop); /* declared non-commutative: the previous module too */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    enum { N = 64 };
    int in[N * 16], out[N * 16], counts[16];
    bool ok = size <= 16;
    long want = (long)size * (size - 1) / 2;
    for (int i = 0; ok && i < N * size; ++i) {
        in[i] = rank + i;
    }
    for (int variant = 0; ok && variant < 3; ++variant) {
        /* variant 0: the user op on MPI_INT; 1: on a derived pair of ints (MPI allows
         * predefined ops on predefined types only); 2: a non-commutative user op */
        MPI_Datatype t = variant == 1 ? pair : MPI_INT;
        MPI_Op op = variant == 2 ? nop : uop;
        const int n = variant == 1 ? N / 2 : N;
        memset(out, 0, sizeof(out));
        ok &= MPI_Reduce(in, out, n, t, op, size - 1, MPI_COMM_WORLD) == MPI_SUCCESS;
        for (int i = 0; rank == size - 1 && i < N; ++i) {
            ok &= out[i] == want + (long)i * size;
        }
        memset(out, 0, sizeof(out));
        ok &= MPI_Reduce_scatter_block(in, out, n, t, op, MPI_COMM_WORLD) == MPI_SUCCESS;
        for (int i = 0; i < N; ++i) {
            ok &= out[i] == want + (long)(rank * N + i) * size;
        }
        for (int r = 0; r < size; ++r) {
            counts[r] = n;
        }
        memset(out, 0, sizeof(out));
        ok &= MPI_Reduce_scatter(in, out, counts, t, op, MPI_COMM_WORLD) == MPI_SUCCESS;
        for (int i = 0; i < N; ++i) {
            ok &= out[i] == want + (long)(rank * N + i) * size;
        }
    }
    MPI_Type_free(&pair);
    MPI_Op_free(&uop);
    MPI_Op_free(&nop);
    note(ok, "user ops and derived datatypes in the reductions through the previous module");
}
