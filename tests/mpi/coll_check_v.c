/*
 * MPI_Allgatherv correctness (part of coll_check, on the same communicators;
 * run_coll.sh checks that coll/dualrail ran it).
 *
 * Receive counts: equal, zero on odd ranks, skewed (rank r gets r x c), all
 * on one rank; counts 0, 1, 13, 1009 and 70001 (MPI_COMM_WORLD without
 * --quick); blocks packed in rank order or in reverse order with a gap
 * before each (the gaps must stay untouched); in place or not; MPI_BYTE,
 * MPI_INT, MPI_C_DOUBLE_COMPLEX in turn. Each result is checked byte by
 * byte against a pattern every rank can compute. With --device the buffers
 * are stand-in device memory. allgatherv_fallbacks: a derived datatype goes
 * to the previous module.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"

static unsigned char vpattern(int r, size_t i, unsigned salt)
{
    return (unsigned char)((unsigned)(r + 3) * 97u + (unsigned)i * 5u + (unsigned)(i >> 9) * 11u +
                           salt * 17u);
}

typedef struct vtype {
    MPI_Datatype t;
    const char *name;
    size_t esz;
} vtype_t;
static const vtype_t vtypes[] = {
    {MPI_BYTE, "MPI_BYTE", 1},
    {MPI_INT, "MPI_INT", 4},
    {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 16},
};

static bool allgatherv_one(MPI_Comm comm, const char *cname, const vtype_t *t, int pattern,
                           int layout, int c, bool inplace, unsigned salt)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    int *counts = malloc(sizeof(int) * (size_t)csize),
        *displs = malloc(sizeof(int) * (size_t)csize);
    int at = 0;
    for (int r = 0; r < csize; ++r) {
        counts[r] = pattern == 0   ? c
                    : pattern == 1 ? (r % 2 ? 0 : c + r)
                    : pattern == 2 ? r * c
                                   : (r == csize / 2 ? c * csize : 0);
    }
    for (int i = 0; i < csize; ++i) {
        const int r = layout == 0 ? i : csize - 1 - i;
        at += layout; /* a gap of one element before each block */
        displs[r] = at;
        at += counts[r];
    }
    const size_t len = (size_t)at * t->esz, mine = (size_t)counts[crank] * t->esz;
    unsigned char *out = malloc(len + 1), *in = malloc(mine + 1), *want = malloc(len + 1);
    memset(out, 0xa5, len + 1);
    memset(want, 0xa5, len + 1);
    for (int r = 0; r < csize; ++r) {
        for (size_t i = 0; i < (size_t)counts[r] * t->esz; ++i) {
            want[(size_t)displs[r] * t->esz + i] = vpattern(r, i, salt);
        }
    }
    unsigned char *src = inplace ? out + (size_t)displs[crank] * t->esz : in;
    for (size_t i = 0; i < mine; ++i) {
        src[i] = vpattern(crank, i, salt);
    }
    void *dout = to_dev(out, len + 1), *din = inplace ? NULL : to_dev(in, mine + 1);
    const int rc = MPI_Allgatherv(inplace ? MPI_IN_PLACE : din, counts[crank], t->t, dout, counts,
                                  displs, t->t, comm);
    from_dev(out, dout, len + 1);
    if (!inplace) {
        from_dev(in, din, mine + 1);
    }
    bool ok = rc == MPI_SUCCESS && memcmp(out, want, len + 1) == 0;
    for (size_t i = 0; ok && !inplace && i < mine; ++i) {
        ok = in[i] == vpattern(crank, i, salt);
    }
    if (!ok) {
        printf("FAILED on rank %d: allgatherv on %s: pattern %d, layout %d, count %d x %s%s "
               "(rc %d)\n",
               rank, cname, pattern, layout, c, t->name, inplace ? ", in place" : "", rc);
        fflush(stdout);
    }
    free(out);
    free(in);
    free(want);
    free(counts);
    free(displs);
    return ok;
}

void allgatherv_checks(MPI_Comm comm, const char *cname, bool quick)
{
    const int cs[] = {0, 1, 13, 1009, 70001};
    bool ok = true;
    unsigned salt = 1;
    for (int pattern = 0; pattern < 4; ++pattern) {
        for (int c = 0; c < (quick ? 4 : 5); ++c) {
            for (int layout = 0; layout < 2; ++layout) {
                for (int inplace = 0; inplace < 2; ++inplace, ++salt) {
                    const vtype_t *t = &vtypes[cs[c] > 10000 ? salt % 2 : salt % 3];
                    ok &= allgatherv_one(comm, cname, t, pattern, layout, cs[c], inplace, salt);
                }
            }
        }
    }
    char what[96];
    snprintf(what, sizeof(what), "allgatherv counts x layouts on %s", cname);
    note(ok, what);
}

/* A derived datatype (a vector with holes) through the previous module. */
void allgatherv_fallbacks(void)
{
    MPI_Datatype vec;
    MPI_Type_vector(10, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(vec, &lb, &extent);
    const int stride = (int)(extent / (MPI_Aint)sizeof(int));
    int buf[20], *all = malloc(sizeof(int) * (size_t)stride * (size_t)size), counts[64], displs[64];
    bool ok = size <= 64;
    for (int i = 0; i < 20; ++i) {
        buf[i] = rank * 100 + i;
    }
    for (int r = 0; ok && r < size; ++r) {
        counts[r] = 1;
        displs[r] = r;
    }
    for (int i = 0; ok && i < stride * size; ++i) {
        all[i] = -1;
    }
    if (ok) {
        ok &= MPI_Allgatherv(buf, 1, vec, all, counts, displs, vec, MPI_COMM_WORLD) == MPI_SUCCESS;
        for (int r = 0; r < size; ++r) {
            for (int i = 0; i < 19; ++i) {
                ok &= all[r * stride + i] == (i % 2 == 0 ? r * 100 + i : -1);
            }
        }
    }
    free(all);
    MPI_Type_free(&vec);
    note(ok, "allgatherv with a derived datatype through the previous module");
}
