/*
 * Whether the UCX under ucx_mr can move device memory itself.
 * Kept apart from ucx_mr.h: only the GPU path asks.
 */
#ifndef DUALRAIL_MR_MEMTYPE_H
#define DUALRAIL_MR_MEMTYPE_H

#include "dualrail/ucx_mr.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default) /* the API of libdualrail_ucx_mr.so (built hidden) */

/*
 * Non-zero when every plane's UCP context reports CUDA memory among its
 * memory types (ucp_context_query, UCP_ATTR_FIELD_MEMORY_TYPES). Debian 12's
 * UCX 1.13 has no CUDA transports: 0 there.
 */
int dr_mr_cuda_memory_supported(const dr_mr_t *mr);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
