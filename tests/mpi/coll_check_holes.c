/*
 * Pair types with holes through every reduction coll/dualrail takes: MPI_DOUBLE_INT,
 * MPI_LONG_INT, MPI_SHORT_INT and MPI_LONG_DOUBLE_INT carry padding between or after their
 * two members, bytes outside the type map, where MPI writes nothing (stock Open MPI leaves
 * them as they were). The algorithms move and reduce whole extents, holes included, so a
 * result built in the caller's buffer carried some other rank's padding there.
 *
 * Every rank fills the holes of its receive buffer with its own byte (0xa0 + rank) and
 * those of its send buffer with another (0xc0 + rank); after MPI_Allreduce, MPI_Reduce (every
 * root), MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Iallreduce and
 * MPI_Ireduce_scatter_block with MPI_MINLOC and MPI_MAXLOC, in place or not, every element
 * of the result must hold the reference pair and its holes this rank's 0xa0 byte. With
 * --device the buffers are stand-in device memory (standin_buffers.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"

struct di {
    double a;
    int b;
};
struct li {
    long a;
    int b;
};
struct si {
    short a;
    int b;
};
struct ldi {
    long double a;
    int b;
};

typedef struct {
    MPI_Datatype t, value; /* the pair type, the type of its first member */
    const char *name;
    size_t ioff, extent; /* where the int is; the pair's extent in C */
} ptype_t;

#define P(t, v, s) {t, v, #t, offsetof(struct s, b), sizeof(struct s)}
static const ptype_t ptypes[] = {P(MPI_DOUBLE_INT, MPI_DOUBLE, di), P(MPI_LONG_INT, MPI_LONG, li),
                                 P(MPI_SHORT_INT, MPI_SHORT, si),
                                 P(MPI_LONG_DOUBLE_INT, MPI_LONG_DOUBLE, ldi)};

/* Whether byte off of an element lies outside the type map. */
static bool hole(const ptype_t *p, size_t off)
{
    int vsize = 0;
    MPI_Type_size(p->value, &vsize);
    return (off >= (size_t)vsize && off < p->ioff) || off >= p->ioff + sizeof(int);
}

/* The value of element i of rank r: small integers, so every member type holds it exactly
 * and MINLOC/MAXLOC meet ties (broken by the lower index). */
static long value_of(size_t i, int r)
{
    return (long)((i * 31 + (size_t)r * 17) % 23);
}

static void put(const ptype_t *p, unsigned char *e, long v, int idx)
{
    if (p->value == MPI_DOUBLE) {
        double x = (double)v;
        memcpy(e, &x, sizeof(x));
    } else if (p->value == MPI_LONG) {
        memcpy(e, &v, sizeof(v));
    } else if (p->value == MPI_SHORT) {
        short x = (short)v;
        memcpy(e, &x, sizeof(x));
    } else {
        long double x = (long double)v;
        memcpy(e, &x, sizeof(x));
    }
    memcpy(e + p->ioff, &idx, sizeof(idx));
}

static long value_in(const ptype_t *p, const unsigned char *e)
{
    if (p->value == MPI_DOUBLE) {
        double x;
        memcpy(&x, e, sizeof(x));
        return (long)x;
    } else if (p->value == MPI_LONG) {
        long x;
        memcpy(&x, e, sizeof(x));
        return x;
    } else if (p->value == MPI_SHORT) {
        short x;
        memcpy(&x, e, sizeof(x));
        return x;
    }
    long double x;
    memcpy(&x, e, sizeof(x));
    return (long)x;
}

/* n elements from element first (the global index of buf's first element) of rank r, holes
 * set to fill. */
static void fill(const ptype_t *p, unsigned char *buf, size_t first, size_t n, int r,
                 unsigned char holes)
{
    for (size_t k = 0; k < n; ++k) {
        unsigned char *e = buf + k * p->extent;
        memset(e, holes, p->extent);
        put(p, e, value_of(first + k, r), r);
    }
}

/* n elements of a result starting at global element first: the reference pair (over the
 * csize ranks of the communicator, whose index is the comm rank), and holes of this rank. */
static bool check(const ptype_t *p, MPI_Op op, const unsigned char *buf, size_t first, size_t n,
                  int csize, unsigned char holes, const char *what)
{
    for (size_t k = 0; k < n; ++k) {
        const size_t i = first + k;
        long best = value_of(i, 0);
        int at = 0;
        for (int r = 1; r < csize; ++r) {
            const long v = value_of(i, r);
            if (op == MPI_MINLOC ? v < best : v > best) {
                best = v;
                at = r;
            }
        }
        const unsigned char *e = buf + k * p->extent;
        int idx;
        memcpy(&idx, e + p->ioff, sizeof(idx));
        bool ok = value_in(p, e) == best && idx == at;
        for (size_t off = 0; ok && off < p->extent; ++off) {
            ok = !hole(p, off) || e[off] == holes;
        }
        if (!ok) {
            fprintf(stderr, "coll_check: rank %d: %s: element %zu is (%ld, %d), want (%ld, %d)%s\n",
                    rank, what, i, value_in(p, e), idx, best, at,
                    value_in(p, e) == best && idx == at ? ", a hole's byte changed" : "");
            return false;
        }
    }
    return true;
}

static const char *kinds[] = {"MPI_Allreduce",      "MPI_Reduce",     "MPI_Reduce_scatter_block",
                              "MPI_Reduce_scatter", "MPI_Iallreduce", "MPI_Ireduce_scatter_block"};

/* One call: kind 0 allreduce, 1 reduce (root), 2 reduce_scatter_block, 3 reduce_scatter,
 * 4 iallreduce, 5 ireduce_scatter_block; c elements per rank (per block for the scatters). */
static bool one(MPI_Comm comm, const ptype_t *p, MPI_Op op, int kind, size_t c, bool in_place,
                int root)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    const bool scatter = kind == 2 || kind == 3 || kind == 5;
    int *counts = malloc(sizeof(int) * (size_t)csize);
    size_t total = 0, mine_first = 0;
    for (int r = 0; r < csize; ++r) {
        counts[r] = (int)(kind == 3 ? c + (size_t)r : c);
        if (r < crank) {
            mine_first += (size_t)counts[r];
        }
        total += (size_t)counts[r];
    }
    const size_t in_n = scatter ? total : c, out_n = scatter ? (size_t)counts[crank] : c;
    const unsigned char mine = (unsigned char)(0xa0 + (crank & 0x1f));
    const unsigned char theirs = (unsigned char)(0xc0 + (crank & 0x1f));
    unsigned char *sb = malloc(in_n * p->extent + 1), *rb = malloc(in_n * p->extent + 1);
    fill(p, sb, 0, in_n, crank, theirs);
    if (in_place) {
        fill(p, rb, 0, in_n, crank, mine);
    } else {
        fill(p, rb, 0, in_n, 0x7f, mine); /* not read: a wrong value shows */
    }
    const size_t bytes = in_n * p->extent;
    void *ds = to_dev(sb, bytes), *dr = to_dev(rb, bytes);
    const void *s = in_place ? MPI_IN_PLACE : ds;
    const bool at_root = crank == root;
    int rc = MPI_SUCCESS;
    MPI_Request req;
    switch (kind) {
    case 0:
        rc = MPI_Allreduce(s, dr, (int)c, p->t, op, comm);
        break;
    case 1:
        rc = MPI_Reduce(at_root ? s : ds, at_root ? dr : NULL, (int)c, p->t, op, root, comm);
        break;
    case 2:
        rc = MPI_Reduce_scatter_block(s, dr, (int)c, p->t, op, comm);
        break;
    case 3:
        rc = MPI_Reduce_scatter(s, dr, counts, p->t, op, comm);
        break;
    case 4:
        rc = MPI_Iallreduce(s, dr, (int)c, p->t, op, comm, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        break;
    default:
        rc = MPI_Ireduce_scatter_block(s, dr, (int)c, p->t, op, comm, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        break;
    }
    from_dev(sb, ds, bytes);
    from_dev(rb, dr, bytes);
    char what[200];
    snprintf(what, sizeof(what), "%s %s %s count %zu%s", kinds[kind], p->name,
             op == MPI_MINLOC ? "MPI_MINLOC" : "MPI_MAXLOC", c, in_place ? " in place" : "");
    bool ok = rc == MPI_SUCCESS;
    if (ok && (kind != 1 || at_root)) {
        ok = check(p, op, rb, scatter ? mine_first : 0, out_n, csize, mine, what);
    }
    free(sb);
    free(rb);
    free(counts);
    return ok;
}

void holes_checks(MPI_Comm comm, const char *cname, bool quick)
{
    int csize;
    MPI_Comm_size(comm, &csize);
    const size_t counts[] = {0, 1, 7, 1000, 20001};
    const int ncounts = quick ? 4 : 5;
    const MPI_Op ops[] = {MPI_MINLOC, MPI_MAXLOC};
    for (size_t t = 0; t < sizeof(ptypes) / sizeof(ptypes[0]); ++t) {
        for (int kind = 0; kind < 6; ++kind) {
            bool ok = true;
            for (int o = 0; o < 2; ++o) {
                for (int k = 0; k < ncounts; ++k) {
                    for (int ip = 0; ip < 2; ++ip) {
                        ok &= one(comm, &ptypes[t], ops[o], kind, counts[k], ip == 1,
                                  (k + ip) % csize);
                    }
                }
            }
            char what[160];
            snprintf(what, sizeof(what), "%s %s on %s: results exact, holes left alone",
                     kinds[kind], ptypes[t].name, cname);
            note(ok, what);
        }
    }
}
