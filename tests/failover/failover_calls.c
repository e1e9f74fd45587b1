/*
 * failover_loop's validated calls other than the allreduce (failover_loop.c says what each
 * checks): bcast, allgather, reduce, reduce_scatter_block (blocking or started and waited
 * for), alltoall and alltoallv; and the verdict line every call prints.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failover_loop.h"

void verdict(unsigned k, size_t bytes, int in_place, int rc, double c0, double c1, double t0,
             size_t wrong, size_t first, int got, int want, size_t src_changed, int quiet,
             char *msg_out)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    other_status = ST_OK;
    if (rc != MPI_SUCCESS) {
        int len = 0, cls = 0;
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, msg, &len);
        other_status = ST_MPI_ERROR;
        if (!quiet) {
            printf("failover_loop: rank %d: MPI error in %s #%u (%zu bytes) after %.3f s in the "
                   "call, %.3f s into the loop (epoch %.6f): error class %d (%s), code %d: %s\n",
                   rank, coll_mpi, k, bytes, c1 - c0, c1 - t0, c1, cls, class_name(cls), rc, msg);
        }
    } else if (wrong != 0 || src_changed != 0) {
        printf("failover_loop: rank %d: WRONG RESULT in %s #%u (%zu bytes%s), %.3f s into the "
               "loop: %zu elements wrong, first [%zu] = %d, expected %d; send buffer elements "
               "changed: %zu\n",
               rank, coll_mpi, k, bytes, in_place ? ", in place" : "", c1 - t0, wrong, first, got,
               want, src_changed);
        other_status = ST_WRONG;
    }
    if (msg_out != NULL) {
        memcpy(msg_out, msg, sizeof(msg));
    }
    fflush(stdout);
}

/*
 * One validated bcast, allgather(v), reduce, reduce_scatter_block, gather or scatter
 * (iteration k, count ints of buffer): sets
 * other_status, prints what went wrong. Returns the ints moved per rank.
 */
int other_status;
size_t other_call(unsigned k, size_t count, int *in, int *out, double t0, double *c0, double *c1)
{
    int rc;
    size_t per = count, wrong = 0, first = 0, src_changed = 0;
    int want_first = 0;
    const int root = (int)(k % (unsigned)nranks);
    const int in_place = (coll == COLL_ALLGATHER || coll == COLL_REDUCE_SCATTER_BLOCK ||
                          (coll == COLL_REDUCE && rank == root)) &&
                         (k & 1);
    const int tri = nranks * (nranks - 1) / 2;
    if (coll == COLL_REDUCE || coll == COLL_REDUCE_SCATTER_BLOCK) {
        /* the sum of every rank's a + r b, checked at the root (reduce) or on this rank's
         * block (count / n elements per rank) */
        const int rsb = coll == COLL_REDUCE_SCATTER_BLOCK;
        per = rsb ? (count / (size_t)nranks > 0 ? count / (size_t)nranks : 1) : count;
        const size_t total = rsb ? per * (size_t)nranks : count;
        const size_t base = rsb ? per * (size_t)rank : 0;
        int *src = in_place ? out : in;
        for (size_t i = 0; i < total; ++i) {
            src[i] = val_a(i, k) + rank * val_b(i, k);
        }
        if (!in_place) {
            memset(out, 0xa5, total * sizeof(int));
        }
        *c0 = epoch_now();
        const void *send = in_place ? MPI_IN_PLACE : in;
        MPI_Request req;
        if (rsb && nonblocking) {
            rc = waited(MPI_Ireduce_scatter_block(send, out, (int)per, MPI_INT, MPI_SUM,
                                                  MPI_COMM_WORLD, &req),
                        &req);
        } else if (rsb) {
            rc = MPI_Reduce_scatter_block(send, out, (int)per, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        } else {
            rc = MPI_Reduce(send, out, (int)count, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        }
        *c1 = epoch_now();
        const size_t check = rsb || rank == root ? per : 0;
        for (size_t i = 0; rc == MPI_SUCCESS && i < check; ++i) {
            const int want = nranks * val_a(base + i, k) + tri * val_b(base + i, k);
            if (out[i] != want && wrong++ == 0) {
                first = i, want_first = want;
            }
        }
        for (size_t i = 0; rc == MPI_SUCCESS && !in_place && i < total; ++i) {
            src_changed += in[i] != val_a(i, k) + rank * val_b(i, k);
        }
    } else if (coll == COLL_GATHER || coll == COLL_SCATTER) {
        /* count/n elements per rank; rank r's block holds a + r b. Gather: in place at the
         * root (its block already in recvbuf) in odd iterations; scatter: in place at the
         * root (recvbuf MPI_IN_PLACE, its block left in sendbuf) in odd iterations. */
        per = count / (size_t)nranks > 0 ? count / (size_t)nranks : 1;
        const size_t total = per * (size_t)nranks;
        const int ip = (k & 1) && rank == root;
        if (coll == COLL_GATHER) {
            if (rank == root) {
                memset(out, 0xa5, total * sizeof(int));
            }
            int *mine = ip ? out + (size_t)rank * per : in;
            for (size_t i = 0; i < per; ++i) {
                mine[i] = val_a(i, k) + rank * val_b(i, k);
            }
            *c0 = epoch_now();
            rc = MPI_Gather(ip ? MPI_IN_PLACE : in, (int)per, MPI_INT, out, (int)per, MPI_INT, root,
                            MPI_COMM_WORLD);
            *c1 = epoch_now();
            for (size_t j = 0; rc == MPI_SUCCESS && rank == root && j < total; ++j) {
                const int want = val_a(j % per, k) + (int)(j / per) * val_b(j % per, k);
                if (out[j] != want && wrong++ == 0) {
                    first = j, want_first = want;
                }
            }
            for (size_t i = 0; rc == MPI_SUCCESS && !ip && i < per; ++i) {
                src_changed += in[i] != val_a(i, k) + rank * val_b(i, k);
            }
        } else {
            if (rank == root) {
                for (size_t j = 0; j < total; ++j) {
                    in[j] = val_a(j % per, k) + (int)(j / per) * val_b(j % per, k);
                }
            }
            memset(out, 0xa5, per * sizeof(int));
            *c0 = epoch_now();
            rc = MPI_Scatter(in, (int)per, MPI_INT, ip ? MPI_IN_PLACE : out, (int)per, MPI_INT,
                             root, MPI_COMM_WORLD);
            *c1 = epoch_now();
            for (size_t i = 0; rc == MPI_SUCCESS && !ip && i < per; ++i) {
                const int want = val_a(i, k) + rank * val_b(i, k);
                if (out[i] != want && wrong++ == 0) {
                    first = i, want_first = want;
                }
            }
            for (size_t j = 0; rc == MPI_SUCCESS && rank == root && j < total; ++j) {
                src_changed += in[j] != val_a(j % per, k) + (int)(j / per) * val_b(j % per, k);
            }
        }
    } else if (coll == COLL_ALLGATHERV) {
        /* Unequal blocks that change every iteration, one of them empty (rank k mod n's), each
         * followed by one int that must stay untouched; odd iterations in place. */
        static int *cnt;
        if (cnt == NULL && (cnt = malloc(sizeof(int) * 2 * (size_t)nranks)) == NULL) {
            fprintf(stderr, "failover_loop: rank %d: out of memory\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int *displ = cnt + nranks;
        const size_t unit =
            count > (size_t)(2 * nranks) ? (count - (size_t)nranks) / (size_t)nranks : 1;
        size_t end = 0;
        for (int r = 0; r < nranks; ++r) {
            cnt[r] = r == root ? 0 : (int)(unit * (size_t)(1 + (r + (int)k) % 3) / 3);
            displ[r] = (int)end;
            end += (size_t)cnt[r] + 1;
        }
        const int ip = k & 1;
        memset(out, 0xa5, end * sizeof(int));
        per = (size_t)cnt[rank];
        int *mine = ip ? out + displ[rank] : in;
        for (size_t i = 0; i < per; ++i) {
            mine[i] = val_a(i, k) + rank * val_b(i, k);
        }
        *c0 = epoch_now();
        rc = MPI_Allgatherv(ip ? MPI_IN_PLACE : in, cnt[rank], MPI_INT, out, cnt, displ, MPI_INT,
                            MPI_COMM_WORLD);
        *c1 = epoch_now();
        for (int r = 0; rc == MPI_SUCCESS && r < nranks; ++r) {
            for (int j = 0; j <= cnt[r]; ++j) {
                const int want = j == cnt[r] ? (int)0xa5a5a5a5 /* the gap */
                                             : val_a((size_t)j, k) + r * val_b((size_t)j, k);
                if (out[displ[r] + j] != want && wrong++ == 0) {
                    first = (size_t)(displ[r] + j), want_first = want;
                }
            }
        }
        for (size_t i = 0; rc == MPI_SUCCESS && !ip && i < per; ++i) {
            src_changed += in[i] != val_a(i, k) + rank * val_b(i, k);
        }
    } else if (coll == COLL_BCAST) {
        for (size_t i = 0; i < count; ++i) {
            out[i] = rank == root ? val_a(i, k) + root * val_b(i, k) : (int)0xa5a5a5a5;
        }
        *c0 = epoch_now();
        rc = MPI_Bcast(out, (int)count, MPI_INT, root, MPI_COMM_WORLD);
        *c1 = epoch_now();
        for (size_t i = 0; rc == MPI_SUCCESS && i < count; ++i) {
            const int want = val_a(i, k) + root * val_b(i, k);
            if (out[i] != want && wrong++ == 0) {
                first = i, want_first = want;
            }
        }
    } else {
        per = count / (size_t)nranks > 0 ? count / (size_t)nranks : 1;
        memset(out, 0xa5, per * (size_t)nranks * sizeof(int));
        int *mine = in_place ? out + (size_t)rank * per : in;
        for (size_t i = 0; i < per; ++i) {
            mine[i] = val_a(i, k) + rank * val_b(i, k);
        }
        *c0 = epoch_now();
        rc = MPI_Allgather(in_place ? MPI_IN_PLACE : in, (int)per, MPI_INT, out, (int)per, MPI_INT,
                           MPI_COMM_WORLD);
        *c1 = epoch_now();
        for (size_t j = 0; rc == MPI_SUCCESS && j < per * (size_t)nranks; ++j) {
            const int r = (int)(j / per);
            const int want = val_a(j % per, k) + r * val_b(j % per, k);
            if (out[j] != want && wrong++ == 0) {
                first = j, want_first = want;
            }
        }
        for (size_t i = 0; rc == MPI_SUCCESS && !in_place && i < per; ++i) {
            src_changed += in[i] != val_a(i, k) + rank * val_b(i, k);
        }
    }
    verdict(k, per * sizeof(int), in_place, rc, *c0, *c1, t0, wrong, first,
            wrong != 0 ? out[first] : 0, want_first, src_changed, 0, NULL);
    return per;
}

/* alltoallv: ints rank s sends rank d in iteration k (sym: the same both ways). */
static size_t a2av_count(int s, int d, unsigned k, size_t per, int sym)
{
    if (sym && s > d) {
        const int t = s;
        s = d, d = t;
    }
    const unsigned h = ((unsigned)s * 2654435761u) ^ ((unsigned)d * 40503u) ^ (k * 2246822519u);
    const unsigned x = (h ^ (h >> 15)) * 2246822519u;
    if (!sym && d == (int)(k % (unsigned)nranks)) {
        return 2 * per; /* the iteration's hot destination */
    }
    return (x >> 7) % 5 == 0 ? 0 : per * (1 + (x >> 3) % 3) / 2;
}

static inline int val_a2a(size_t j, unsigned k, int s, int d)
{
    return val_a(j, k) + s * val_b(j, k) + d * 3;
}

/*
 * One validated alltoall or alltoallv (iteration k, count ints: count/n per pair
 * on average): sets other_status, prints what went wrong. Returns the ints this
 * rank received.
 */
int a2a_quiet;
char a2a_msg[MPI_MAX_ERROR_STRING];
size_t a2a_call(unsigned k, size_t count, int *in, int *out, double t0, double *c0, double *c1)
{
    static int *cnt;
    if (cnt == NULL) {
        cnt = malloc(sizeof(int) * 4 * (size_t)nranks);
    }
    int *sc = cnt, *sd = cnt + nranks, *rc = sd + nranks, *rd = rc + nranks;
    const size_t per = count / (size_t)nranks > 0 ? count / (size_t)nranks : 1;
    const int in_place = k & 1, v = coll == COLL_ALLTOALLV;
    size_t so = 0, ro = 0;
    for (int q = 0; q < nranks; ++q) {
        sc[q] = (int)(v ? a2av_count(rank, q, k, per, in_place) : per);
        rc[q] = (int)(v ? a2av_count(q, rank, k, per, in_place) : per);
        sd[q] = (int)so, rd[q] = (int)ro;
        so += (size_t)sc[q], ro += (size_t)rc[q];
    }
    memset(out, 0xa5, ro * sizeof(int));
    for (int q = 0; q < nranks; ++q) {
        int *dst = in_place ? out + rd[q] : in + sd[q];
        for (int j = 0; j < (in_place ? rc[q] : sc[q]); ++j) {
            dst[j] = val_a2a((size_t)j, k, rank, q);
        }
    }
    int rcode;
    *c0 = epoch_now();
    if (v) {
        rcode = MPI_Alltoallv(in_place ? MPI_IN_PLACE : in, sc, sd, MPI_INT, out, rc, rd, MPI_INT,
                              MPI_COMM_WORLD);
    } else if (nonblocking) {
        MPI_Request req;
        rcode = waited(MPI_Ialltoall(in_place ? MPI_IN_PLACE : in, (int)per, MPI_INT, out, (int)per,
                                     MPI_INT, MPI_COMM_WORLD, &req),
                       &req);
    } else {
        rcode = MPI_Alltoall(in_place ? MPI_IN_PLACE : in, (int)per, MPI_INT, out, (int)per,
                             MPI_INT, MPI_COMM_WORLD);
    }
    *c1 = epoch_now();
    size_t wrong = 0, first = 0, src_changed = 0;
    int want_first = 0;
    for (int q = 0; rcode == MPI_SUCCESS && q < nranks; ++q) {
        for (int j = 0; j < rc[q]; ++j) {
            const int want = val_a2a((size_t)j, k, q, rank);
            if (out[rd[q] + j] != want && wrong++ == 0) {
                first = (size_t)(rd[q] + j), want_first = want;
            }
        }
    }
    for (int q = 0; rcode == MPI_SUCCESS && !in_place && q < nranks; ++q) {
        for (int j = 0; j < sc[q]; ++j) {
            src_changed += in[sd[q] + j] != val_a2a((size_t)j, k, rank, q);
        }
    }
    verdict(k, ro * sizeof(int), in_place, rcode, *c0, *c1, t0, wrong, first,
            wrong != 0 ? out[first] : 0, want_first, src_changed, a2a_quiet, a2a_msg);
    return ro;
}
