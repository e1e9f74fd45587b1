/*
 * DualRail status codes: one internal status type shared by every layer.
 * Each boundary (UCX, Open MPI) converts to and from it exactly once.
 */
#ifndef DUALRAIL_STATUS_H
#define DUALRAIL_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default) /* the API of libdualrail_ucx_mr.so (built hidden) */

typedef enum dr_status {
    DR_OK = 0,
    DR_INPROGRESS = 1,           /* not an error: the operation is still running */
    DR_ERR_INVALID = -1,         /* bad argument */
    DR_ERR_CONFIG = -2,          /* bad plane/device configuration */
    DR_ERR_NO_DEVICE = -3,       /* a configured device does not exist here */
    DR_ERR_UCX = -4,             /* UCX refused an operation */
    DR_ERR_NO_MEMORY = -5,
    DR_ERR_PEER_UNREACHABLE = -6, /* every plane to the peer is down */
    DR_ERR_TRUNCATED = -7,       /* message larger than the receive buffer */
    DR_ERR_TIMEOUT = -8,         /* a caller-given wait expired (the transfer goes on) */
    DR_ERR_PEER_MISMATCH = -9,   /* the peer runs a different plane layout or version */
    DR_ERR_CANCELED = -10,       /* the request was cancelled (dr_mr_cancel, dr_mr_destroy) */
    DR_ERR_GPU = -11             /* the GPU (CUDA driver or runtime) failed an operation */
} dr_status_t;

/* A short constant description ("peer unreachable", ...). Never NULL. */
const char *dr_status_str(dr_status_t status);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
