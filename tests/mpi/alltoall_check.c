/*
 * MPI_Alltoall and MPI_Alltoallv correctness, randomized, run across lab
 * nodes with coll/dualrail selected (run_alltoall.sh checks that it ran
 * them).
 *
 * Every rank can generate every pair's data (a byte pattern of source,
 * destination, index and case) and every pair's count (a hash of the seed,
 * the case and the pair), so each result is checked against a reference
 * computed here, without Open MPI; bytes of recvbuf outside the received
 * blocks must be left alone. Verdicts travel by point-to-point messages
 * (pml ob1), never through a collective of the component under test.
 *
 * Cases, on MPI_COMM_WORLD, a dup, an odd/even split and a reordered
 * communicator, drawn from the seed (the same draws on every rank):
 *   alltoall   MPI_BYTE, MPI_SHORT, MPI_INT, MPI_DOUBLE,
 *              MPI_C_DOUBLE_COMPLEX; counts 0, 1, odd, small (Bruck) and
 *              large (pairwise, several pipeline segments); in place and not
 *   alltoallv  the same types; per-pair counts skewed (Zipf-like by
 *              destination, many zeros, one hot destination, all zero for
 *              some ranks), displacements in reverse order with gaps; in
 *              place with symmetric counts
 *   interleaved  alltoall, alltoallv, allreduce, bcast back to back
 *   receive_only  alltoallv where one rank at a time only receives and passes
 *              NULL as its send buffer (not MPI_IN_PLACE), its own (empty)
 *              block's displacement far outside its buffer
 *   fallbacks  a derived datatype (a vector with holes) in both: the
 *              previous module runs it, the holes are left alone
 *
 *   alltoall_check [--quick] [--device] [--seed N]
 *
 * --quick: fewer random cases. --device: every buffer is "device" memory of
 * the host stand-in for a GPU (dr_gpu.h; run with coll_dualrail_gpu_standin
 * 1), staged by the component.
 *
 * Prints "N passed, N failed" (rank 0) and exits non-zero on any failure.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "standin_buffers.h"

static int rank, size;
static long passed, failed;
static uint64_t seed = 20261201;

typedef struct tinfo {
    MPI_Datatype t;
    const char *name;
    size_t esz;
} tinfo_t;

static const tinfo_t types[] = {
    {MPI_BYTE, "MPI_BYTE", 1},
    {MPI_SHORT, "MPI_SHORT", sizeof(short)},
    {MPI_INT, "MPI_INT", sizeof(int)},
    {MPI_DOUBLE, "MPI_DOUBLE", sizeof(double)},
    {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 2 * sizeof(double)},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The same draw on every rank: a function of the seed, the case and a tag. */
static uint64_t draw(unsigned c, uint64_t tag)
{
    return mix(seed ^ mix((uint64_t)c * 1000003u + tag));
}

static unsigned char pattern(int src, int dst, size_t i, unsigned salt)
{
    return (unsigned char)((unsigned)(src + 1) * 131u + (unsigned)(dst + 3) * 71u +
                           (unsigned)i * 7u + (unsigned)(i >> 8) * 13u + salt * 29u);
}

/* All ranks of MPI_COMM_WORLD agree on ok, by point-to-point messages only. */
static void note(bool ok, const char *what)
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

static bool alltoall_one(MPI_Comm comm, const char *cname, const tinfo_t *ti, size_t count,
                         int in_place, unsigned salt)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    const size_t bytes = count * ti->esz, total = bytes * (size_t)csize;
    unsigned char *out = malloc(total + 1), *in = malloc(total + 1);
    memset(out, 0xa5, total);
    out[total] = 0x5a;
    unsigned char *src = in_place ? out : in;
    for (int q = 0; q < csize; ++q) {
        for (size_t i = 0; i < bytes; ++i) {
            src[(size_t)q * bytes + i] = pattern(crank, q, i, salt);
        }
    }
    void *dout = to_dev(out, total + 1), *din = in_place ? NULL : to_dev(in, total + 1);
    int rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : din, (int)count, ti->t, dout, (int)count, ti->t,
                          comm);
    from_dev(out, dout, total + 1);
    if (!in_place) {
        from_dev(in, din, total + 1);
    }
    bool ok = rc == MPI_SUCCESS && out[total] == 0x5a;
    for (int q = 0; ok && q < csize; ++q) {
        for (size_t i = 0; ok && i < bytes; ++i) {
            ok = out[(size_t)q * bytes + i] == pattern(q, crank, i, salt);
        }
    }
    for (int q = 0; ok && !in_place && q < csize; ++q) {
        for (size_t i = 0; ok && i < bytes; ++i) {
            ok = in[(size_t)q * bytes + i] == pattern(crank, q, i, salt);
        }
    }
    free(out);
    free(in);
    if (!ok) {
        printf("FAILED on rank %d: alltoall on %s: %zu x %s%s (rc %d)\n", rank, cname, count,
               ti->name, in_place ? " in place" : "", rc);
        fflush(stdout);
    }
    return ok;
}

/*
 * Elements rank s sends rank d in case c (pattern p): Zipf-like by destination
 * (a popular destination gets far more), some pairs empty; symmetric ones for in
 * place; one hot destination; everything from some ranks empty.
 */
static int vcount(unsigned c, int p, int s, int d, int n, int maxc)
{
    if (p == 1) {
        const int lo = s < d ? s : d, hi = s < d ? d : s;
        return vcount(c, 0, lo, hi, n, maxc);
    }
    const uint64_t h = draw(c, (uint64_t)s * 4099u + (uint64_t)d + 7);
    if (p == 2) {
        return d == (int)(draw(c, 1) % (uint64_t)n) ? maxc : (int)(h % 3);
    }
    if (p == 3 && s % 2 == 1) {
        return 0;
    }
    if (h % 4 == 0) {
        return 0;
    }
    /* rank of d in this case's popularity order, then ~ maxc / (rank + 1)^1.2 */
    const int pop = (int)((uint64_t)(d + (int)(draw(c, 2) % (uint64_t)n)) % (uint64_t)n);
    double w = 1.0;
    for (int i = 0; i < pop; ++i) {
        w *= 0.6;
    }
    return (int)((double)maxc * w * (double)(h % 1000) / 1000.0);
}

static bool alltoallv_one(MPI_Comm comm, const char *cname, const tinfo_t *ti, unsigned c, int pat,
                          int maxc, unsigned salt)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    const int in_place = pat == 1;
    int *sc = malloc(sizeof(int) * 4 * (size_t)csize), *sd = sc + csize, *rc = sd + csize,
        *rd = rc + csize;
    /* send blocks in reverse order with gaps, receive blocks in order with gaps */
    size_t so = 0, ro = 3;
    for (int q = csize - 1; q >= 0; --q) {
        sc[q] = vcount(c, pat, crank, q, csize, maxc);
        sd[q] = (int)so;
        so += (size_t)sc[q] + 2;
    }
    for (int q = 0; q < csize; ++q) {
        rc[q] = vcount(c, pat, q, crank, csize, maxc);
        rd[q] = (int)ro;
        ro += (size_t)rc[q] + (size_t)(q % 2) * 5;
    }
    const size_t e = ti->esz, sbytes = so * e, rbytes = ro * e;
    unsigned char *in = malloc(sbytes + 1), *out = malloc(rbytes + 1), *want = malloc(rbytes + 1);
    memset(in, 0x3c, sbytes + 1);
    memset(out, 0xa5, rbytes + 1);
    for (int q = 0; q < csize; ++q) {
        unsigned char *dst = in_place ? out + (size_t)rd[q] * e : in + (size_t)sd[q] * e;
        const size_t n = (size_t)(in_place ? rc[q] : sc[q]) * e;
        for (size_t i = 0; i < n; ++i) {
            dst[i] = pattern(crank, q, i, salt);
        }
    }
    memcpy(want, out, rbytes + 1);
    for (int q = 0; q < csize; ++q) {
        for (size_t i = 0; i < (size_t)rc[q] * e; ++i) {
            want[(size_t)rd[q] * e + i] = pattern(q, crank, i, salt);
        }
    }
    void *dout = to_dev(out, rbytes + 1), *din = in_place ? NULL : to_dev(in, sbytes + 1);
    int r = MPI_Alltoallv(in_place ? MPI_IN_PLACE : din, sc, sd, ti->t, dout, rc, rd, ti->t, comm);
    from_dev(out, dout, rbytes + 1);
    if (!in_place) {
        from_dev(in, din, sbytes + 1);
    }
    bool ok = r == MPI_SUCCESS && memcmp(out, want, rbytes + 1) == 0;
    for (int q = 0; ok && !in_place && q < csize; ++q) {
        for (size_t i = 0; ok && i < (size_t)sc[q] * e; ++i) {
            ok = in[(size_t)sd[q] * e + i] == pattern(crank, q, i, salt);
        }
    }
    if (!ok) {
        printf("FAILED on rank %d: alltoallv on %s: case %u pattern %d, %s, %zu bytes in (rc %d)\n",
               rank, cname, c, pat, ti->name, rbytes, r);
        fflush(stdout);
    }
    free(in);
    free(out);
    free(want);
    free(sc);
    return ok;
}

static void random_cases(MPI_Comm comm, const char *cname, int ncases, unsigned base)
{
    bool ok = true;
    for (int k = 0; k < ncases; ++k) {
        const unsigned c = base + (unsigned)k;
        const tinfo_t *ti = &types[draw(c, 11) % NTYPES];
        /* counts: 0, 1, odd, small (Bruck under the default threshold), large (pairwise) */
        static const size_t fixed[] = {0, 1, 3};
        const uint64_t kind = draw(c, 12) % 6;
        size_t count = kind < 3   ? fixed[kind]
                       : kind < 5 ? 1 + draw(c, 13) % (1024 / ti->esz)
                                  : 1 + draw(c, 13) % (3u << 20) / ti->esz / 4;
        ok &= alltoall_one(comm, cname, ti, count, (int)(draw(c, 14) % 3 == 0), c);
        const int maxc = (int)(draw(c, 15) % 2 ? 64 : (1u << 20) / ti->esz);
        ok &= alltoallv_one(comm, cname, ti, c, (int)(draw(c, 16) % 4), maxc, c + 7);
    }
    char what[96];
    snprintf(what, sizeof(what), "%d random alltoall + alltoallv cases on %s", ncases, cname);
    note(ok, what);
}

/* Every kind back to back on one communicator, nothing between them. */
static void interleaved(MPI_Comm comm, const char *cname)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    bool ok = true;
    for (int round = 0; round < 6; ++round) {
        ok &= alltoall_one(comm, cname, &types[2], 100 + (size_t)round * 3000, round % 2,
                           900u + round);
        long v[77], want = 0;
        for (int i = 0; i < 77; ++i) {
            v[i] = crank + i + round;
        }
        for (int r = 0; r < csize; ++r) {
            want += r + round;
        }
        ok &= MPI_Allreduce(MPI_IN_PLACE, v, 77, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS;
        for (int i = 0; i < 77; ++i) {
            ok &= v[i] == want + (long)i * csize;
        }
        ok &= alltoallv_one(comm, cname, &types[0], 5000u + round, round % 4, 30000, 950u + round);
        int b = crank == round % csize ? 4242 + round : -1;
        ok &= MPI_Bcast(&b, 1, MPI_INT, round % csize, comm) == MPI_SUCCESS && b == 4242 + round;
    }
    char what[96];
    snprintf(what, sizeof(what), "interleaved kinds on %s", cname);
    note(ok, what);
}

/*
 * One rank at a time receives from all the others and sends nothing, passing NULL as its
 * send buffer (not MPI_IN_PLACE), as mpi4py and mixture-of-experts dispatchers do; the others
 * send to it only. Blocks above ucx_mr's copy limit: a rank that took NULL for in place sent
 * its receive blocks to peers that expected nothing and waited for their acknowledgement.
 */
static void receive_only(void)
{
    const int bytes = 40000;
    int *cnt = calloc(4 * (size_t)size, sizeof(int)), *sc = cnt, *sd = cnt + size,
        *rc = sd + size, *rd = rc + size;
    unsigned char *in = malloc((size_t)bytes), *out = malloc((size_t)bytes * (size_t)size + 1);
    if (cnt == NULL || in == NULL || out == NULL) {
        fprintf(stderr, "alltoall_check: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    bool ok = true; /* every rank runs every round, whatever it saw */
    for (int sink = 0; sink < size; ++sink) {
        memset(cnt, 0, 4 * (size_t)size * sizeof(int));
        memset(out, 0xa5, (size_t)bytes * (size_t)size + 1);
        for (int i = 0; i < bytes; ++i) {
            in[i] = pattern(rank, sink, (size_t)i, 77u + (unsigned)sink);
        }
        if (rank == sink) {
            for (int q = 0; q < size; ++q) {
                rc[q] = q == sink ? 0 : bytes;
                /* an empty block's displacement is never read: far outside the buffer here
                 * (device buffers were staged from the lowest displacement of any block) */
                rd[q] = q == sink ? -1000000 : q * bytes;
            }
        } else {
            sc[sink] = bytes;
        }
        void *dout = to_dev(out, (size_t)bytes * (size_t)size + 1);
        void *din = rank == sink ? NULL : to_dev(in, (size_t)bytes);
        const int r = MPI_Alltoallv(din, sc, sd, MPI_BYTE, dout, rc, rd, MPI_BYTE,
                                    MPI_COMM_WORLD);
        from_dev(out, dout, (size_t)bytes * (size_t)size + 1);
        if (din != NULL) {
            from_dev(in, din, (size_t)bytes);
        }
        bool good = r == MPI_SUCCESS;
        for (int q = 0; good && q < size; ++q) {
            for (int i = 0; good && i < bytes; ++i) {
                const unsigned char want = rank == sink && q != sink
                                               ? pattern(q, sink, (size_t)i, 77u + (unsigned)sink)
                                               : 0xa5;
                good = out[(size_t)q * (size_t)bytes + (size_t)i] == want;
            }
        }
        good = good && out[(size_t)bytes * (size_t)size] == 0xa5;
        ok &= good;
        if (!good) {
            printf("FAILED on rank %d: alltoallv to rank %d with a NULL send buffer there "
                   "(rc %d)\n", rank, sink, r);
            fflush(stdout);
        }
    }
    free(cnt);
    free(in);
    free(out);
    note(ok, "alltoallv: a rank that sends nothing passes NULL as its send buffer");
}

/*
 * The mirror: one rank at a time sends to all the others and receives nothing, passing one
 * buffer as both its send and its receive buffer (not MPI_IN_PLACE: no byte is received, so
 * none overlaps), its first block at displacement 0; the others receive from it only. The
 * component took the equal pointers for in place and sent by the receive counts, all zero:
 * its peers waited for data that never came.
 */
static void send_only_aliased(void)
{
    const int bytes = 40000;
    int *cnt = calloc(4 * (size_t)size, sizeof(int)), *sc = cnt, *sd = cnt + size,
        *rc = sd + size, *rd = rc + size;
    unsigned char *buf = malloc((size_t)bytes * (size_t)size + 1);
    if (cnt == NULL || buf == NULL) {
        fprintf(stderr, "alltoall_check: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    bool ok = true; /* every rank runs every round, whatever it saw */
    for (int source = 0; source < size; ++source) {
        memset(cnt, 0, 4 * (size_t)size * sizeof(int));
        memset(buf, 0xa5, (size_t)bytes * (size_t)size + 1);
        if (rank == source) {
            for (int q = 0; q < size; ++q) {
                sc[q] = q == source ? 0 : bytes;
                sd[q] = q * bytes;
                for (int i = 0; q != source && i < bytes; ++i) {
                    buf[(size_t)q * (size_t)bytes + (size_t)i] =
                        pattern(source, q, (size_t)i, 99u + (unsigned)source);
                }
            }
        } else {
            rc[source] = bytes;
        }
        void *dbuf = to_dev(buf, (size_t)bytes * (size_t)size + 1);
        const int r = MPI_Alltoallv(dbuf, sc, sd, MPI_BYTE, dbuf, rc, rd, MPI_BYTE,
                                    MPI_COMM_WORLD);
        from_dev(buf, dbuf, (size_t)bytes * (size_t)size + 1);
        bool good = r == MPI_SUCCESS;
        for (int i = 0; good && rank != source && i < bytes; ++i) {
            good = buf[i] == pattern(source, rank, (size_t)i, 99u + (unsigned)source);
        }
        for (size_t i = rank == source ? (size_t)bytes * (size_t)size : (size_t)bytes;
             good && i <= (size_t)bytes * (size_t)size; ++i) {
            good = buf[i] == 0xa5;
        }
        ok &= good;
        if (!good) {
            printf("FAILED on rank %d: alltoallv from rank %d, one buffer for sending and "
                   "receiving there (rc %d)\n", rank, source, r);
            fflush(stdout);
        }
    }
    free(cnt);
    free(buf);
    note(ok, "alltoallv: a rank that receives nothing passes its send buffer as the receive "
             "buffer");
}

/*
 * One buffer as send and receive buffer with blocks going both ways and counts that differ
 * by direction (not MPI_IN_PLACE: erroneous, the two overlap, and MPI leaves the contents
 * undefined). What is checked is that the call completes on every rank: taken for in place
 * (sending by the receive counts), each rank sent its peers block sizes they did not expect.
 */
static void aliased_both_ways(void)
{
    int *cnt = calloc(4 * (size_t)size, sizeof(int)), *sc = cnt, *sd = cnt + size,
        *rc = sd + size, *rd = rc + size;
    if (cnt == NULL) {
        fprintf(stderr, "alltoall_check: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* rank r sends 1000 * (1 + r + 2q) bytes to q: q receives that from r */
    size_t send_end = 0, recv_end = 0;
    for (int q = 0; q < size; ++q) {
        sc[q] = 1000 * (1 + rank + 2 * q);
        rc[q] = 1000 * (1 + q + 2 * rank);
        sd[q] = (int)send_end;
        rd[q] = (int)recv_end;
        send_end += (size_t)sc[q];
        recv_end += (size_t)rc[q];
    }
    const size_t n = send_end > recv_end ? send_end : recv_end;
    unsigned char *buf = malloc(n);
    if (buf == NULL) {
        fprintf(stderr, "alltoall_check: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(buf, rank + 1, n);
    void *dbuf = to_dev(buf, n);
    const int r = MPI_Alltoallv(dbuf, sc, sd, MPI_BYTE, dbuf, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    from_dev(buf, dbuf, n);
    free(cnt);
    free(buf);
    if (r != MPI_SUCCESS) {
        printf("FAILED on rank %d: alltoallv with one buffer both ways returned %d\n", rank, r);
        fflush(stdout);
    }
    note(r == MPI_SUCCESS, "alltoallv: one buffer both ways (not in place) completes");
}

/* Derived datatypes go to the previous module; holes stay untouched. */
static void fallbacks(void)
{
    MPI_Datatype vec0, vec;
    MPI_Type_vector(5, 1, 2, MPI_INT, &vec0);
    MPI_Type_create_resized(vec0, 0, 10 * sizeof(int), &vec);
    MPI_Type_free(&vec0);
    MPI_Type_commit(&vec);
    const size_t n = 10 * (size_t)size;
    int *in = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n);
    int *cnt = malloc(sizeof(int) * 2 * (size_t)size), *dsp = cnt + size;
    bool ok = true;
    for (int v = 0; v < 2; ++v) {
        for (size_t i = 0; i < n; ++i) {
            in[i] = rank * 100000 + (int)i;
            out[i] = -1;
        }
        for (int q = 0; q < size; ++q) {
            cnt[q] = 1;
            dsp[q] = q;
        }
        ok &= (v == 0 ? MPI_Alltoall(in, 1, vec, out, 1, vec, MPI_COMM_WORLD)
                      : MPI_Alltoallv(in, cnt, dsp, vec, out, cnt, dsp, vec, MPI_COMM_WORLD)) ==
              MPI_SUCCESS;
        for (int q = 0; q < size; ++q) {
            for (int i = 0; i < 10; ++i) {
                const int want = i % 2 == 0 ? q * 100000 + rank * 10 + i : -1;
                ok &= out[q * 10 + i] == want;
            }
        }
    }
    MPI_Type_free(&vec);
    free(in);
    free(out);
    free(cnt);
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
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--device") == 0) {
            standin_open("alltoall_check");
        }
    }
    if (rank == 0) {
        printf("alltoall_check: seed %llu (--seed to repeat)\n", (unsigned long long)seed);
    }
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
        random_cases(comms[c], names[c], quick ? 12 : (c == 0 ? 40 : 16), 1000u * (unsigned)c);
        interleaved(comms[c], names[c]);
    }
    receive_only();
    send_only_aliased();
    aliased_both_ways();
    fallbacks();
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
    MPI_Comm_free(&rev);
    if (rank == 0) {
        if (dev_mem != NULL) {
            printf("alltoall and alltoallv on device buffers (%s)\n", dev_mem->name);
        }
        printf("%ld passed, %ld failed\n", passed, failed);
    }
    standin_close();
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
