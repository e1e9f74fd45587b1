/*
 * coll/dualrail algorithm layer, device buffers: the C API the Open MPI glue
 * calls when a buffer of MPI_Allreduce is in GPU memory (algo/staged.hpp).
 *
 * Everything here is cheap when there is no GPU: dr_buffers_on_device()
 * answers from a cached "no GPU" after its first call, and nothing is
 * allocated or printed until a device buffer is actually seen.
 */
#ifndef DUALRAIL_MPI_COLL_DR_COLL_GPU_H
#define DUALRAIL_MPI_COLL_DR_COLL_GPU_H

#include <stddef.h>

#include "dr_coll.h"
#include "gpu/dr_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dr_staging dr_staging_t;

/*
 * Non-zero when either buffer is device or managed memory of mem (NULL:
 * dr_mem_cuda()); a NULL buffer counts as host. Also where the driver is too
 * old for this build's runtime (the call then fails with no usable GPU
 * instead of the CPU reading device memory).
 */
int dr_buffers_on_device(const dr_mem_ops_t *mem, const void *sendbuf, const void *recvbuf);

/*
 * Per-communicator staging over mem (NULL: dr_mem_cuda()): streams and events
 * at the first call, on the device that holds its buffers (whichever device
 * the calling thread is on), pinned and device memory at the first call that
 * needs them. budget: pinned host bytes for the ring's staging slots (0: 32
 * MiB). DR_ERR_NO_DEVICE when mem has no usable GPU.
 */
dr_status_t dr_staging_create(const dr_mem_ops_t *mem, size_t budget, dr_staging_t **out, char *err,
                              size_t errlen);
void dr_staging_destroy(dr_staging_t *s);

#define DR_STAGING_BUDGET_DEFAULT (32u * 1024 * 1024)

/*
 * dr_allreduce() for buffers that may be device memory. gpu_op/gpu_type name
 * the kernel (dr_gpu.h) for the call's (op, datatype), or -1 when there is
 * none (the host reduction a->reduce then runs on a host copy). Same errors,
 * and the same wire schedule, as dr_allreduce().
 */
dr_status_t dr_allreduce_device(dr_mr_t *mr, const dr_allreduce_args_t *a, int gpu_op, int gpu_type,
                                dr_staging_t *s, char *err, size_t errlen);

/*
 * Calls on s that should have taken the staged ring but could not allocate
 * its pinned slots or device scratch, and so ran the whole message through
 * ordinary host memory (same results, same wire schedule, slower); *reason
 * (may be NULL) gets the last allocation failure ("" when none).
 */
unsigned long dr_staging_fallbacks(const dr_staging_t *s, const char **reason);

/* What dr_allreduce_device runs: "host", "staged ring" or "staged whole message". */
const char *dr_allreduce_device_path(const dr_allreduce_args_t *a, int gpu_op, int gpu_type,
                                     const dr_staging_t *s);

#ifdef __cplusplus
}
#endif

#endif
