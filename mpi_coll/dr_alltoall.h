/*
 * coll/dualrail algorithm layer: the C API of alltoall and alltoallv (the
 * other kinds are in dr_coll.h). Pure C++ behind it (mpi_coll/algo/
 * alltoall.hpp), no Open MPI and no MPI calls.
 */
#ifndef DUALRAIL_MPI_COLL_DR_ALLTOALL_H
#define DUALRAIL_MPI_COLL_DR_ALLTOALL_H

#include <stddef.h>

#include "dr_coll.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { DR_ALLTOALL_AUTO = 0, DR_ALLTOALL_PAIRWISE = 1, DR_ALLTOALL_BRUCK = 2 };

#define DR_ALLTOALL_SMALL_MAX_DEFAULT 1024 /* small_max_bytes when 0: Bruck up to this block */
#define DR_ALLTOALL_WINDOW_DEFAULT    4    /* window when 0: pairwise steps in flight */

/*
 * c: the arguments every kind shares. alltoall: c.bytes is one block (rank r's
 * block for rank q at sendbuf + q * bytes, from q at recvbuf + q * bytes);
 * c.small_max_bytes: under AUTO, Bruck for blocks up to this many bytes (0:
 * 1 KiB). alltoallv: c.bytes is unused, the four arrays (size entries each,
 * bytes) give each pair's count and displacement. c.sendbuf NULL or ==
 * recvbuf: MPI_IN_PLACE (alltoallv: sendcounts/sdispls are ignored).
 */
typedef struct dr_alltoall_args {
    dr_coll_args_t c;
    int window; /* pairwise steps in flight (0: 4) */
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
} dr_alltoall_args_t;

/* Blocking; statuses and err as dr_allreduce's. */
dr_status_t dr_alltoall(dr_mr_t *mr, const dr_alltoall_args_t *a, char *err, size_t errlen);
dr_status_t dr_alltoallv(dr_mr_t *mr, const dr_alltoall_args_t *a, char *err, size_t errlen);
/* The algorithm dr_alltoall runs (DR_ALLTOALL_PAIRWISE or _BRUCK). */
int dr_alltoall_choose(const dr_alltoall_args_t *a);

#ifdef __cplusplus
}
#endif

#endif
