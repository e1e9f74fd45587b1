/*
 * coll/dualrail algorithm layer: the C API the Open MPI glue calls.
 *
 * Pure C++ behind it (mpi_coll/algo/), no Open MPI and no MPI calls: the glue
 * maps datatype/op to elem_size/reduce, the communicator to rank/size/
 * peer_ids/comm_id, and keeps the per-communicator sequence number.
 *
 * Every rank of the communicator must pass the same count, elem_size,
 * algorithm, rd_max_bytes, segment_size, comm_id and seq (the algorithm
 * choice and the message keys depend on them).
 */
#ifndef DUALRAIL_MPI_COLL_DR_COLL_H
#define DUALRAIL_MPI_COLL_DR_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "dualrail/ucx_mr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* inout[i] = in[i] op inout[i], count in elements; commutative ops only. */
typedef void (*dr_reduce_fn)(const void *in, void *inout, size_t count, void *arg);

enum { DR_ALGO_AUTO = 0, DR_ALGO_RING = 1, DR_ALGO_RD = 2 };

#define DR_ALLREDUCE_RD_MAX_DEFAULT  (64 * 1024)   /* rd_max_bytes when 0 */
#define DR_ALLREDUCE_SEGMENT_DEFAULT (1024 * 1024) /* segment_size when 0 */
#define DR_ALLREDUCE_RING_MAX_RANKS  2048          /* ring: 2(n-1) steps fit the key */
#define DR_ALLREDUCE_MAX_ELEM_SIZE   64

/* A zero-filled struct gets the defaults for rd_max_bytes, segment_size and timeout. */
typedef struct dr_allreduce_args {
    const void *sendbuf; /* NULL or == recvbuf means in place */
    void *recvbuf;
    size_t count;     /* elements; count*elem_size may exceed 2 GiB */
    size_t elem_size; /* bytes per element (1..64) */
    dr_reduce_fn reduce;
    void *reduce_arg;
    int rank, size;           /* in the communicator */
    const uint32_t *peer_ids; /* size entries: ucx_mr process id of each comm rank */
    uint32_t comm_id;         /* 16 bits, unique per communicator in the job */
    uint32_t seq;             /* per-communicator allreduce sequence number (taken mod 2^16) */
    int algorithm;            /* DR_ALGO_* */
    /* AUTO: recursive doubling up to this many bytes, ring above (0: 64 KiB) */
    size_t rd_max_bytes;
    /* ring pipeline segment (0: 1 MiB); tiny values reach many-segment paths */
    size_t segment_size;
    /* seconds without any of the call's transfers completing, then DR_ERR_TIMEOUT; <= 0: none */
    double timeout;
    /* called when a wait made no progress (NULL: sched_yield after a short spin) */
    void (*idle)(void *arg);
    void *idle_arg;
    /* Not DR_OK: this rank cannot take part (the caller failed to stage its buffers). The
     * call moves no data and neither reads nor writes the buffers (pass the caller's own:
     * they are only checked, as on the other ranks); it tells the peers this rank's
     * schedule would have exchanged with, which then return an error instead of waiting
     * for it, and returns `fail` with fail_why (one line) in err. */
    dr_status_t fail;
    const char *fail_why;
} dr_allreduce_args_t;

/*
 * Blocking allreduce. DR_OK (err is set to ""), or an error with a one-line
 * reason in err naming the peer rank and dr_mr_last_error():
 *   DR_ERR_INVALID            bad arguments (same verdict on every rank), or a
 *                             forced ring on more than 2048 ranks
 *   DR_ERR_NO_MEMORY          scratch could not be allocated
 *   DR_ERR_PEER_UNREACHABLE   ucx_mr lost every plane to a peer (or a peer
 *                             aborted the collective for that reason)
 *   DR_ERR_TIMEOUT            no progress for `timeout` seconds
 *   DR_ERR_TRUNCATED          a peer sent a different amount (ranks disagree)
 * After an error the communicator may be used again: ranks may have stopped at
 * different steps, but a later call never takes a message the failed one left
 * behind (mr_transport.hpp, StaleCalls).
 * count 0 returns DR_OK at once; size 1 copies sendbuf to recvbuf.
 */
dr_status_t dr_allreduce(dr_mr_t *mr, const dr_allreduce_args_t *a, char *err, size_t errlen);

/*
 * A communicator is gone: drop every message ucx_mr still holds for comm_id (left behind by
 * a collective that failed), which a later communicator given the same id would otherwise
 * take for its own (mr_transport.hpp, StaleCalls).
 */
void dr_coll_forget_comm(dr_mr_t *mr, uint32_t comm_id);

/*
 * Scratch memory each thread keeps between blocking collectives, at most, in each of its
 * three buffers (dr_coll_scratch_held's; the default DR_COLL_KEEP_SCRATCH_DEFAULT): a call
 * that needs more gives its scratch back when it returns, and the next one maps it afresh,
 * paying a page fault per 4 KiB at first write. Process-wide; takes effect at the next
 * call's return.
 */
#define DR_COLL_KEEP_SCRATCH_DEFAULT (64u << 20)
void dr_coll_set_keep_scratch(size_t bytes);
/* Bytes of scratch the calling thread holds between blocking collectives (its allreduce's,
 * alltoall(v)'s and the other kinds' buffers). */
size_t dr_coll_scratch_held(void);

/* The algorithm dr_allreduce runs for these arguments: DR_ALGO_RING or DR_ALGO_RD. */
int dr_allreduce_choose(const dr_allreduce_args_t *a);

/*
 * Bcast, barrier and allgather: collectives that move bytes without reducing
 * them, one argument struct for all three (each reads what it needs). Every
 * rank passes the same bytes, root, algorithm, small_max_bytes,
 * segment_size, comm_id and seq. A zero-filled struct gets the defaults.
 */
enum { DR_BCAST_AUTO = 0, DR_BCAST_BINOMIAL = 1, DR_BCAST_SCATTER_ALLGATHER = 2, DR_BCAST_CHAIN = 3 };
enum { DR_ALLGATHER_AUTO = 0, DR_ALLGATHER_RING = 1, DR_ALLGATHER_RD = 2, DR_ALLGATHER_BRUCK = 3 };

#define DR_COLL_SMALL_MAX_DEFAULT (64 * 1024) /* small_max_bytes when 0 */

typedef struct dr_coll_args {
    const void *sendbuf; /* allgather: this rank's block; NULL or == its place in recvbuf: in place */
    void *recvbuf;       /* bcast: the buffer (read at the root); allgather: size x bytes */
    size_t bytes;        /* bcast: the message; allgather: one rank's block; barrier: unused */
    int root;            /* bcast */
    int rank, size;
    const uint32_t *peer_ids;
    uint32_t comm_id;
    uint32_t seq; /* per communicator and collective kind (taken mod 2^16) */
    int algorithm; /* DR_BCAST_* or DR_ALLGATHER_* */
    /* AUTO: bcast: binomial tree up to this many bytes; allgather: recursive doubling
     * (power-of-two sizes) or Bruck up to this many bytes in all (0: 64 KiB) */
    size_t small_max_bytes;
    size_t segment_size; /* pipeline segment (0: 1 MiB) */
    double timeout;
    void (*idle)(void *arg);
    void *idle_arg;
    /* The reducing kinds (reduce, reduce_scatter_block, reduce_scatter): bytes is a
     * whole number of elements of elem_size bytes (1..64), reduced by reduce. */
    size_t elem_size;
    dr_reduce_fn reduce;
    void *reduce_arg;
    /* v variants: size entries of bytes per rank (reduce_scatter: each rank's block of
     * the result; allgatherv, gatherv, scatterv: each rank's block), and their byte
     * offsets in the gathered or scattered buffer (allgatherv, gatherv, scatterv) */
    const size_t *counts;
    const size_t *displs;
    /* As dr_allreduce_args_t's: this rank tells its schedule's peers and fails the call. */
    dr_status_t fail;
    const char *fail_why;
} dr_coll_args_t;

/* Blocking; statuses and err as dr_allreduce's. */
dr_status_t dr_bcast(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
dr_status_t dr_barrier(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
dr_status_t dr_allgather(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
/* The algorithm run for these arguments (DR_BCAST_* / DR_ALLGATHER_*, never AUTO). */
int dr_bcast_choose(const dr_coll_args_t *a);
int dr_allgather_choose(const dr_coll_args_t *a);

/*
 * Reduce, reduce_scatter_block, reduce_scatter: the same arguments with
 * elem_size, reduce and reduce_arg set (commutative ops only).
 *   dr_reduce                 bytes: the message; root's recvbuf gets the result
 *                             (sendbuf NULL or == recvbuf at the root: in place);
 *                             recvbuf is not touched on the other ranks
 *   dr_reduce_scatter_block   bytes: one rank's block; sendbuf holds size blocks
 *                             (NULL: in place, recvbuf holds them and gets the
 *                             result at its start)
 *   dr_reduce_scatter         counts[r]: rank r's block in bytes; sendbuf holds all
 *                             of them in rank order (NULL: in place, as above)
 * small_max_bytes: AUTO picks the small-message algorithm up to this many bytes of
 * input per rank (0: 64 KiB).
 */
enum { DR_REDUCE_AUTO = 0, DR_REDUCE_BINOMIAL = 1, DR_REDUCE_RABENSEIFNER = 2, DR_REDUCE_CHAIN = 3 };
enum { DR_REDUCE_SCATTER_AUTO = 0, DR_REDUCE_SCATTER_RING = 1, DR_REDUCE_SCATTER_HALVING = 2 };
dr_status_t dr_reduce(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
dr_status_t dr_reduce_scatter_block(dr_mr_t *mr, const dr_coll_args_t *a, char *err,
                                    size_t errlen);
dr_status_t dr_reduce_scatter(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
/* The algorithm run for these arguments (DR_REDUCE_* / DR_REDUCE_SCATTER_*, never AUTO). */
int dr_reduce_choose(const dr_coll_args_t *a);
int dr_reduce_scatter_block_choose(const dr_coll_args_t *a);

/* Allgatherv: counts[r] bytes of rank r land at recvbuf + displs[r] on every rank; sendbuf:
 * this rank's block (NULL or recvbuf + displs[rank]: in place). small_max_bytes: AUTO
 * takes Bruck up to this many bytes in all (0: 64 KiB), the ring above. */
enum { DR_ALLGATHERV_AUTO = 0, DR_ALLGATHERV_RING = 1, DR_ALLGATHERV_BRUCK = 2 };
dr_status_t dr_allgatherv(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);

/*
 * Gather, scatter (binomial trees; bytes: one rank's block, the same on every rank) and
 * gatherv, scatterv (linear with a window; at the root counts and displs in bytes, on the
 * others bytes: this rank's block). In place at the root: gather(v) sendbuf NULL (its
 * block already in recvbuf), scatter(v) recvbuf NULL (its block stays in sendbuf).
 * algorithm: 0 or 1 (the only one).
 */
dr_status_t dr_gather(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
dr_status_t dr_scatter(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
dr_status_t dr_gatherv(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);
dr_status_t dr_scatterv(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
