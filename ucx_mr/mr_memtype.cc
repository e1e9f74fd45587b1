/* dr_mr_cuda_memory_supported (dualrail/mr_memtype.h): a read-only query of each plane. */
#include "dualrail/mr_memtype.h"

#include <ucp/api/ucp.h>

#include "mr_internal.hpp"

extern "C" int dr_mr_cuda_memory_supported(const dr_mr_t *mr)
{
    if (mr == nullptr || mr->planes.empty()) {
        return 0;
    }
    for (const auto &pl : mr->planes) {
        ucp_context_attr_t attr;
        attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
        if (pl->context == nullptr || ucp_context_query(pl->context, &attr) != UCS_OK ||
            (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) == 0) {
            return 0;
        }
    }
    return 1;
}
