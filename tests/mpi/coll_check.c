/*
 * MPI_Bcast, MPI_Barrier and MPI_Allgather correctness, run across lab nodes
 * with coll/dualrail selected (run_coll.sh checks that it ran them); the
 * reducing collectives (MPI_Reduce, MPI_Reduce_scatter_block,
 * MPI_Reduce_scatter) are checked by coll_check_reduce.c on the same
 * communicators, pair types with holes through every reduction by
 * coll_check_holes.c.
 *
 * Every rank can generate every rank's data (a byte pattern of rank, index
 * and case), so each result is checked against a reference computed here,
 * without Open MPI. Verdicts travel by point-to-point messages (pml ob1),
 * never through a collective of the component under test.
 *
 * Cases, on MPI_COMM_WORLD, a dup, an odd/even split and a reordered
 * communicator:
 *   bcast      every root; counts 0, 1, 7, 13, 1009 and 70001 (every root
 *              but on the largest: first, middle and last); MPI_BYTE,
 *              MPI_SHORT, MPI_INT, MPI_DOUBLE, MPI_C_DOUBLE_COMPLEX
 *   allgather  the same counts and types, in place and not
 *   barrier    no rank leaves before the last one entered (the last one
 *              enters 0.2 s late: the others' wait must cover it; a wait
 *              within one rank's clock, not across clocks)
 *   interleaved  allreduce, bcast, allgather and barrier back to back on one
 *              communicator, without anything between them
 *   fallbacks  a derived datatype (a vector with holes) in bcast and
 *              allgather: the previous module runs it, bytes between the
 *              elements are left alone
 *
 *   coll_check [--quick] [--device] [--no-stock-op-bugs] [--light]
 *
 * --quick: the two largest counts left out. --device: the bcast and allgather
 * buffers are "device" memory of the host stand-in for a GPU (dr_gpu.h; run
 * with coll_dualrail_gpu_standin 1), staged by the component; the
 * send buffer of allgather is on the device in odd cases, on the host in even
 * ones (mixed).
 *
 * Prints "N passed, N failed" (rank 0) and exits non-zero on any failure.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_check.h"
#include "agree.h"
#include "gpu/dr_gpu.h"

int rank, size;
bool no_stock_op_bugs;
bool light;
static long passed, failed;
typedef struct tinfo {
    MPI_Datatype t;
    const char *name;
    size_t esz;
} tinfo_t;

static unsigned char pattern(int r, size_t i, unsigned salt)
{
    return (unsigned char)((unsigned)(r + 1) * 131u + (unsigned)i * 7u + (unsigned)(i >> 8) * 13u +
                           salt * 29u);
}

/* All ranks of MPI_COMM_WORLD agree on ok, by point-to-point messages only. */
void note(bool ok, const char *what)
{
    const int all_ok = mpi_agree(ok, 801);
    if (all_ok) {
        ++passed;
    } else {
        ++failed;
    }
    if (!ok) {
        printf("FAILED on rank %d: %s\n", rank, what);
        fflush(stdout);
    }
}

static bool bcast_one(MPI_Comm comm, const char *cname, const tinfo_t *ti, size_t count, int root,
                      unsigned salt)
{
    int crank;
    MPI_Comm_rank(comm, &crank);
    const size_t bytes = count * ti->esz;
    unsigned char *buf = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; ++i) {
        buf[i] = crank == root ? pattern(root, i, salt) : 0xa5;
    }
    buf[bytes] = 0x5a;
    void *d = to_dev(buf, bytes + 1);
    int rc = MPI_Bcast(d, (int)count, ti->t, root, comm);
    from_dev(buf, d, bytes + 1);
    bool ok = rc == MPI_SUCCESS && buf[bytes] == 0x5a;
    for (size_t i = 0; ok && i < bytes; ++i) {
        ok = buf[i] == pattern(root, i, salt);
    }
    free(buf);
    if (!ok) {
        printf("FAILED on rank %d: bcast on %s: %zu x %s from root %d (rc %d)\n", rank, cname,
               count, ti->name, root, rc);
        fflush(stdout);
        return false;
    }
    return true;
}

static bool allgather_one(MPI_Comm comm, const char *cname, const tinfo_t *ti, size_t count,
                          int in_place, unsigned salt)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    const size_t bytes = count * ti->esz, total = bytes * (size_t)csize;
    unsigned char *out = malloc(total + 1), *in = malloc(bytes + 1);
    memset(out, 0xa5, total);
    out[total] = 0x5a;
    unsigned char *mine = in_place ? out + (size_t)crank * bytes : in;
    for (size_t i = 0; i < bytes; ++i) {
        mine[i] = pattern(crank, i, salt);
    }
    int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : in, (int)count, ti->t, out, (int)count, ti->t,
                           comm);
    bool ok = rc == MPI_SUCCESS && out[total] == 0x5a;
    for (int r = 0; ok && r < csize; ++r) {
        for (size_t i = 0; ok && i < bytes; ++i) {
            ok = out[(size_t)r * bytes + i] == pattern(r, i, salt);
        }
    }
    for (size_t i = 0; ok && !in_place && i < bytes; ++i) {
        ok = in[i] == pattern(crank, i, salt);
    }
    free(out);
    free(in);
    if (!ok) {
        printf("FAILED on rank %d: allgather on %s: %zu x %s%s (rc %d)\n", rank, cname, count,
               ti->name, in_place ? " in place" : "", rc);
        fflush(stdout);
        return false;
    }
    return true;
}

static const tinfo_t types[] = {
    {MPI_BYTE, "MPI_BYTE", 1},
    {MPI_SHORT, "MPI_SHORT", sizeof(short)},
    {MPI_INT, "MPI_INT", sizeof(int)},
    {MPI_DOUBLE, "MPI_DOUBLE", sizeof(double)},
    {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 2 * sizeof(double)},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static void matrix(MPI_Comm comm, const char *cname, const size_t *counts, int ncounts)
{
    int csize;
    MPI_Comm_size(comm, &csize);
    unsigned salt = 1;
    bool ok = true;
    for (size_t t = 0; t < NTYPES; ++t) {
        for (int c = 0; c < ncounts; ++c) {
            const bool big = counts[c] > 10000;
            for (int root = 0; root < csize; ++root) {
                if (big && root != 0 && root != csize / 2 && root != csize - 1) {
                    continue;
                }
                ok &= bcast_one(comm, cname, &types[t], counts[c], root, salt++);
            }
            for (int in_place = 0; in_place < 2; ++in_place) {
                if (big && types[t].esz > 8) {
                    continue; /* the result would be 1 MiB per rank */
                }
                ok &= allgather_one(comm, cname, &types[t], counts[c], in_place, salt++);
            }
        }
    }
    char what[96];
    snprintf(what, sizeof(what), "bcast and allgather matrix on %s", cname);
    note(ok, what);
}

/* The last rank enters 0.2 s late; the others' wait in the barrier must cover it. */
static void barrier_check(MPI_Comm comm, const char *cname)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    bool ok = true;
    for (int round = 0; round < 3; ++round) {
        const int late = (csize - 1 + round) % csize;
        if (crank == late) {
            usleep(200000);
        }
        const double t0 = MPI_Wtime();
        int rc = MPI_Barrier(comm);
        const double waited = MPI_Wtime() - t0;
        if (rc != MPI_SUCCESS || (crank != late && waited < 0.15)) {
            printf("rank %d: barrier on %s round %d: rc %d, left after %.3f s while rank %d "
                   "entered 0.2 s late\n",
                   rank, cname, round, rc, waited, late);
            ok = false;
        }
    }
    char what[96];
    snprintf(what, sizeof(what), "barrier on %s", cname);
    note(ok, what);
}

/* Every kind back to back on one communicator, nothing between them. */
static void interleaved(MPI_Comm comm, const char *cname)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    bool ok = true;
    for (int round = 0; round < 8; ++round) {
        long v[301], want = 0;
        for (int i = 0; i < 301; ++i) {
            v[i] = crank * 1000 + i + round;
        }
        for (int r = 0; r < csize; ++r) {
            want += r * 1000 + round;
        }
        ok &= MPI_Allreduce(MPI_IN_PLACE, v, 301, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS;
        for (int i = 0; i < 301; ++i) {
            ok &= v[i] == want + (long)i * csize;
        }
        ok &= bcast_one(comm, cname, &types[2], 1000 + (size_t)round, round % csize, 500u + round);
        ok &= allgather_one(comm, cname, &types[3], 77, round % 2, 600u + round);
        ok &= MPI_Barrier(comm) == MPI_SUCCESS;
        ok &= bcast_one(comm, cname, &types[0], 70001, (round + 1) % csize, 700u + round);
        /* the kinds of coll_check_reduce.c and coll_check_v.c in the same run of calls */
        long r1[301], r2[301], blk[64];
        const int n1 = csize <= 64 ? 301 / csize : 0, root = (round + 2) % csize;
        for (int i = 0; i < 301; ++i) {
            r1[i] = crank * 1000 + i + round;
        }
        ok &= MPI_Reduce(r1, r2, 301, MPI_LONG, MPI_SUM, root, comm) == MPI_SUCCESS;
        for (int i = 0; crank == root && i < 301; ++i) {
            ok &= r2[i] == want + (long)i * csize;
        }
        ok &= MPI_Reduce_scatter_block(r1, blk, n1, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS;
        for (int i = 0; i < n1; ++i) {
            ok &= blk[i] == want + (long)(crank * n1 + i) * csize;
        }
        ok &= MPI_Gather(&r1[0], 1, MPI_LONG, r2, 1, MPI_LONG, root, comm) == MPI_SUCCESS;
        for (int r = 0; crank == root && r < csize && r < 301; ++r) {
            ok &= r2[r] == r * 1000 + round;
        }
    }
    char what[96];
    snprintf(what, sizeof(what), "interleaved kinds on %s", cname);
    note(ok, what);
}

/* Derived datatypes go to the previous module; holes stay untouched. */
static void fallbacks(void)
{
    MPI_Datatype vec;
    MPI_Type_vector(50, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int buf[100], all[100 * 16];
    bool ok = size <= 16;
    for (int i = 0; i < 100; ++i) {
        buf[i] = rank == 1 % size ? 7 * i : -1;
    }
    ok &= MPI_Bcast(buf, 1, vec, 1 % size, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int i = 0; i < 100; ++i) {
        ok &= buf[i] == (i % 2 == 0 ? 7 * i : rank == 1 % size ? 7 * i : -1);
    }
    for (int i = 0; i < 100; ++i) {
        buf[i] = rank * 1000 + i;
    }
    for (int i = 0; ok && i < 100 * size; ++i) {
        all[i] = -1;
    }
    if (ok) {
        ok &= MPI_Allgather(buf, 1, vec, all, 1, vec, MPI_COMM_WORLD) == MPI_SUCCESS;
        MPI_Aint lb, extent;
        MPI_Type_get_extent(vec, &lb, &extent);
        const int stride = (int)(extent / (MPI_Aint)sizeof(int));
        for (int r = 0; r < size; ++r) {
            for (int i = 0; i < 99; ++i) {
                ok &= all[r * stride + i] == (i % 2 == 0 ? r * 1000 + i : -1);
            }
        }
    }
    MPI_Type_free(&vec);
    note(ok, "derived datatypes through the previous module");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--no-stock-op-bugs") == 0) {
            no_stock_op_bugs = true;
        } else if (strcmp(argv[i], "--light") == 0) {
            light = true;
        } else if (strcmp(argv[i], "--device") == 0) {
            standin_open("coll_check");
        }
    }
    const size_t counts[] = {0, 1, 7, 13, 1009, 70001};
    const int ncounts = quick ? 4 : 6;

    MPI_Comm dup, split, rev;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    MPI_Comm_set_name(dup, "dup");
    MPI_Comm_set_name(split, "split");
    MPI_Comm_set_name(rev, "reversed");
    const MPI_Comm comms[] = {MPI_COMM_WORLD, dup, split, rev};
    const char *names[] = {"MPI_COMM_WORLD", "dup", "split", "reversed"};
    for (int c = 0; c < 4; ++c) {
        matrix(comms[c], names[c], counts, c == 0 ? ncounts : (ncounts < 5 ? ncounts : 5));
        barrier_check(comms[c], names[c]);
        interleaved(comms[c], names[c]);
        /* each section's time on rank 0: what a slow path costs the CI run */
        double t0 = MPI_Wtime();
        reduce_checks(comms[c], names[c], quick || c != 0);
        holes_checks(comms[c], names[c], quick || c != 0);
        double t1 = MPI_Wtime();
        allgatherv_checks(comms[c], names[c], quick || c != 0);
        double t2 = MPI_Wtime();
        rooted_checks(comms[c], names[c], quick || c != 0);
        if (rank == 0) {
            printf("coll_check: %s: reductions %.2f s, allgatherv %.2f s, gather/scatter %.2f s\n",
                   names[c], t1 - t0, t2 - t1, MPI_Wtime() - t2);
        }
    }
    fallbacks();
    reduce_fallbacks();
    allgatherv_fallbacks();
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
    MPI_Comm_free(&rev);
    if (rank == 0) {
        if (dev_mem != NULL) {
            printf("bcast and allgather on device buffers (%s)\n", dev_mem->name);
        }
        printf("%ld passed, %ld failed\n", passed, failed);
    }
    standin_close();
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
