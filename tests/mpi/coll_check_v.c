/*
 * MPI_Allgatherv, MPI_Gather, MPI_Gatherv, MPI_Scatter and MPI_Scatterv
 * correctness (part of coll_check, on the same communicators; run_coll.sh
 * checks that coll/dualrail ran them). Gather and scatter: counts 0, 1, 13,
 * 1009 (70001 on MPI_COMM_WORLD without --quick) x every root x in place or
 * not; the v variants with the allgatherv patterns and layouts below, every
 * root.
 *
 * Receive counts: equal, zero on odd ranks, skewed (rank r gets r x c), all
 * on one rank; counts 0, 1, 13, 1009 and 70001 (MPI_COMM_WORLD without
 * --quick); blocks packed in rank order or in reverse order with a gap
 * before each (the gaps must stay untouched); in place or not; MPI_BYTE,
 * MPI_INT, MPI_C_DOUBLE_COMPLEX in turn. Negative displacements: allgatherv
 * with odd ranks passing their buffer's end (each rank chooses its own
 * displacements, so ranks must not decide differently on them), gatherv and
 * scatterv with the root doing so. Each result is checked byte by
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

/* shifted: odd ranks pass recvbuf at the end of their buffer and displacements made
 * negative to match (MPI allows them; each rank chooses its own). */
static bool allgatherv_one(MPI_Comm comm, const char *cname, const vtype_t *t, int pattern,
                           int layout, int c, bool inplace, bool shifted, unsigned salt)
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
    const int shift = shifted && crank % 2 == 1 ? at : 0;
    for (int r = 0; r < csize; ++r) {
        displs[r] -= shift;
    }
    const int rc =
        MPI_Allgatherv(inplace ? MPI_IN_PLACE : din, counts[crank], t->t,
                       (char *)dout + (size_t)shift * t->esz, counts, displs, t->t, comm);
    from_dev(out, dout, len + 1);
    if (!inplace) {
        from_dev(in, din, mine + 1);
    }
    bool ok = rc == MPI_SUCCESS && memcmp(out, want, len + 1) == 0;
    for (size_t i = 0; ok && !inplace && i < mine; ++i) {
        ok = in[i] == vpattern(crank, i, salt);
    }
    if (!ok) {
        printf("FAILED on rank %d: allgatherv on %s: pattern %d, layout %d, count %d x %s%s%s "
               "(rc %d)\n",
               rank, cname, pattern, layout, c, t->name, inplace ? ", in place" : "",
               shifted ? ", negative displacements on odd ranks" : "", rc);
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
        for (int c = 0; c < (light ? 3 : quick ? 4 : 5); ++c) {
            for (int layout = 0; layout < 2; ++layout) {
                for (int inplace = 0; inplace < 2; ++inplace, ++salt) {
                    const vtype_t *t = &vtypes[cs[c] > 10000 ? salt % 2 : salt % 3];
                    ok &= allgatherv_one(comm, cname, t, pattern, layout, cs[c], inplace, false,
                                         salt);
                }
            }
        }
        for (int layout = 0; layout < 2; ++layout) {
            for (int inplace = 0; inplace < 2; ++inplace, ++salt) {
                ok &= allgatherv_one(comm, cname, &vtypes[salt % 3], pattern, layout, 13, inplace,
                                     true, salt);
            }
        }
    }
    char what[96];
    snprintf(what, sizeof(what), "allgatherv counts x layouts on %s", cname);
    note(ok, what);
}

/* Counts (elements) and displacements of pattern/layout as allgatherv_one's; returns the
 * root buffer's length in elements. */
static int v_layout(int pattern, int layout, int c, int csize, int *counts, int *displs)
{
    int at = 0;
    for (int r = 0; r < csize; ++r) {
        counts[r] = pattern == 0   ? c
                    : pattern == 1 ? (r % 2 ? 0 : c + r)
                    : pattern == 2 ? r * c
                                   : (r == csize / 2 ? c * csize : 0);
    }
    for (int i = 0; i < csize; ++i) {
        const int r = layout == 0 ? i : csize - 1 - i;
        at += layout;
        displs[r] = at;
        at += counts[r];
    }
    return at;
}

/*
 * One MPI_Gather(v) or MPI_Scatter(v) (v: counts and displacements of pattern/layout;
 * else c elements per rank, packed): the root's buffer byte by byte (gaps untouched),
 * every rank's own block, in place at the root or not.
 */
static bool rooted_one(MPI_Comm comm, const char *cname, bool gath, bool v, const vtype_t *t,
                       int pattern, int layout, int c, int root, bool inplace, bool shifted,
                       unsigned salt)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    int *counts = malloc(sizeof(int) * (size_t)csize),
        *displs = malloc(sizeof(int) * (size_t)csize);
    const int len_el = v ? v_layout(pattern, layout, c, csize, counts, displs) : c * csize;
    if (!v) {
        for (int r = 0; r < csize; ++r) {
            counts[r] = c;
            displs[r] = r * c;
        }
    }
    const bool at_root = crank == root;
    inplace = inplace && at_root;
    const size_t len = (size_t)len_el * t->esz, mine = (size_t)counts[crank] * t->esz;
    unsigned char *big = malloc(len + 1), *want = malloc(len + 1), *small = malloc(mine + 1);
    memset(want, 0xa5, len + 1);
    for (int r = 0; r < csize; ++r) {
        for (size_t i = 0; i < (size_t)counts[r] * t->esz; ++i) {
            want[(size_t)displs[r] * t->esz + i] = vpattern(r, i, salt);
        }
    }
    memset(big, 0xa5, len + 1);
    memset(small, 0xa5, mine + 1);
    unsigned char *own = inplace ? big + (size_t)displs[crank] * t->esz : small;
    if (gath) {
        for (size_t i = 0; i < mine; ++i) {
            own[i] = vpattern(crank, i, salt);
        }
    } else if (at_root) {
        memcpy(big, want, len + 1);
    }
    void *dbig = at_root ? to_dev(big, len + 1) : NULL, *dsmall = to_dev(small, mine + 1);
    int rc;
    const int n = counts[crank];
    /* shifted (v only): the root passes its buffer's end and displacements made negative to
     * match; the others never read displacements. */
    const int shift = shifted && v && at_root ? len_el : 0;
    for (int r = 0; r < csize; ++r) {
        displs[r] -= shift;
    }
    char *vbig = dbig == NULL ? NULL : (char *)dbig + (size_t)shift * t->esz;
    if (gath) {
        const void *sb = inplace ? MPI_IN_PLACE : dsmall;
        rc = v ? MPI_Gatherv(sb, n, t->t, vbig, counts, displs, t->t, root, comm)
               : MPI_Gather(sb, n, t->t, dbig, c, t->t, root, comm);
    } else {
        void *rb = inplace ? MPI_IN_PLACE : dsmall;
        rc = v ? MPI_Scatterv(vbig, counts, displs, t->t, rb, n, t->t, root, comm)
               : MPI_Scatter(dbig, c, t->t, rb, n, t->t, root, comm);
    }
    if (at_root) {
        from_dev(big, dbig, len + 1);
    }
    from_dev(small, dsmall, mine + 1);
    bool ok = rc == MPI_SUCCESS && (!at_root || memcmp(big, want, len + 1) == 0);
    for (size_t i = 0; ok && !inplace && i < mine; ++i) {
        ok = small[i] == vpattern(crank, i, salt);
    }
    ok = ok && small[mine] == 0xa5;
    if (!ok) {
        printf("FAILED on rank %d: %s%s on %s: pattern %d, layout %d, count %d x %s, root %d%s%s "
               "(rc %d)\n",
               rank, gath ? "gather" : "scatter", v ? "v" : "", cname, pattern, layout, c, t->name,
               root, inplace ? ", in place" : "", shift != 0 ? ", negative displacements" : "", rc);
        fflush(stdout);
    }
    free(big);
    free(want);
    free(small);
    free(counts);
    free(displs);
    return ok;
}

void rooted_checks(MPI_Comm comm, const char *cname, bool quick)
{
    int csize;
    MPI_Comm_size(comm, &csize);
    const int cs[] = {0, 1, 13, 1009, 70001};
    unsigned salt = 500;
    char what[96];
    for (int g = 0; g < 2; ++g) {
        bool ok = true;
        /* regular: counts x every root x in place */
        for (int c = 0; c < (light ? 3 : quick ? 4 : 5); ++c) {
            for (int root = 0; root < csize; ++root) {
                if (cs[c] > 10000 && root != 0 && root != csize - 1) {
                    continue;
                }
                for (int inplace = 0; inplace < 2; ++inplace, ++salt) {
                    const vtype_t *t = &vtypes[cs[c] > 10000 ? salt % 2 : salt % 3];
                    ok &= rooted_one(comm, cname, g == 0, false, t, 0, 0, cs[c], root, inplace,
                                     false, salt);
                }
            }
        }
        /* v: patterns x layouts x every root, in place alternating */
        for (int pattern = 0; pattern < 4; ++pattern) {
            for (int c = 0; c < (light ? 3 : quick ? 4 : 5); ++c) {
                for (int root = 0; root < csize; ++root, ++salt) {
                    if (cs[c] > 10000 && root != csize / 2) {
                        continue;
                    }
                    const vtype_t *t = &vtypes[cs[c] > 10000 ? salt % 2 : salt % 3];
                    ok &= rooted_one(comm, cname, g == 0, true, t, pattern, (root + c) % 2, cs[c],
                                     root, (salt / 2) % 2, false, salt);
                }
            }
            /* negative displacements at the root (MPI allows them) */
            for (int root = 0; root < csize; ++root, ++salt) {
                ok &= rooted_one(comm, cname, g == 0, true, &vtypes[salt % 3], pattern, root % 2,
                                 13, root, (salt / 2) % 2, true, salt);
            }
        }
        snprintf(what, sizeof(what), "%s and %sv on %s", g == 0 ? "gather" : "scatter",
                 g == 0 ? "gather" : "scatter", cname);
        note(ok, what);
    }
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
    /* gather, gatherv, scatter, scatterv with the same type: the previous module */
    for (int i = 0; ok && i < stride * size; ++i) {
        all[i] = -1;
    }
    const int root = size - 1;
    ok &= MPI_Gather(buf, 1, vec, all, 1, vec, root, MPI_COMM_WORLD) == MPI_SUCCESS;
    ok &= MPI_Gatherv(buf, 1, vec, all, counts, displs, vec, root, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int r = 0; ok && rank == root && r < size; ++r) {
        for (int i = 0; i < 19; ++i) {
            ok &= all[r * stride + i] == (i % 2 == 0 ? r * 100 + i : -1);
        }
    }
    for (int i = 0; i < 20; ++i) {
        buf[i] = -2;
    }
    ok &= MPI_Scatter(all, 1, vec, buf, 1, vec, root, MPI_COMM_WORLD) == MPI_SUCCESS;
    ok &= MPI_Scatterv(all, counts, displs, vec, buf, 1, vec, root, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int i = 0; rank != root && i < 19; ++i) {
        ok &= buf[i] == (i % 2 == 0 ? rank * 100 + i : -2);
    }
    free(all);
    MPI_Type_free(&vec);
    note(ok, "allgatherv, gather(v), scatter(v) with a derived datatype through the previous "
             "module");
}
