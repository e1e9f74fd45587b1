/*
 * Datatype and op mapping for coll/dualrail, and the reduction callback.
 *
 * Reductions go through Open MPI's own op engine (ompi_op_reduce), with one
 * exception: Open MPI 4.1.4's AVX op component saturates 8- and 16-bit
 * integer sums in its vector loops instead of wrapping (upstream issue 8045;
 * measured here: 200 + 200 as uint8 gives 255, 30000 + 30000 as int16 gives
 * 32767, while the scalar tail wraps). MPI requires the wrapped value, so sums
 * of 8- and 16-bit integers are done here. Wider sums and products are right.
 */
#include "coll_dualrail.h"

#include <stdint.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"

/* Bytes of a narrow integer type whose sum is done here, else 0. */
static int narrow_int(const struct ompi_datatype_t *d)
{
    if (d == &ompi_mpi_int8_t.dt || d == &ompi_mpi_uint8_t.dt || d == &ompi_mpi_char.dt ||
        d == &ompi_mpi_signed_char.dt || d == &ompi_mpi_unsigned_char.dt) {
        return 1;
    }
    if (d == &ompi_mpi_int16_t.dt || d == &ompi_mpi_uint16_t.dt || d == &ompi_mpi_short.dt ||
        d == &ompi_mpi_unsigned_short.dt) {
        return 2;
    }
    return 0;
}

bool mca_coll_dualrail_op_supported(struct ompi_op_t *op, struct ompi_datatype_t *dtype,
                                    size_t *elem_size)
{
    if (!ompi_op_is_intrinsic(op) || !ompi_op_is_commute(op) ||
        !ompi_datatype_is_predefined(dtype)) {
        return false;
    }
    /* MPI_NO_OP / MPI_REPLACE and undefined (op, type) pairs: let the previous module decide. */
    if (dtype->id >= OMPI_DATATYPE_MAX_PREDEFINED || -1 == ompi_op_ddt_map[dtype->id] ||
        NULL == op->o_func.intrinsic.fns[ompi_op_ddt_map[dtype->id]]) {
        return false;
    }
    ptrdiff_t lb, extent, true_lb, true_extent;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    /* Elements are moved as whole extents; pair types with padding included. */
    if (lb != 0 || true_lb != 0 || extent <= 0 || extent > 64 || true_extent > extent) {
        return false;
    }
    *elem_size = (size_t)extent;
    return true;
}

void mca_coll_dualrail_reduce_ctx_init(mca_coll_dualrail_reduce_ctx_t *ctx, struct ompi_op_t *op,
                                       struct ompi_datatype_t *dtype)
{
    ctx->op = op;
    ctx->dtype = dtype;
    ctx->wrap_sum = op == &ompi_mpi_op_sum.op ? narrow_int(dtype) : 0;
}

void mca_coll_dualrail_reduce(const void *in, void *inout, size_t count, void *arg)
{
    const mca_coll_dualrail_reduce_ctx_t *ctx = arg;
    /* Two's complement: signed and unsigned sums wrap identically as unsigned. */
    if (ctx->wrap_sum == 1) {
        const uint8_t *a = in;
        uint8_t *b = inout;
        for (size_t i = 0; i < count; ++i) {
            b[i] = (uint8_t)(a[i] + b[i]);
        }
        return;
    }
    if (ctx->wrap_sum == 2) {
        const uint16_t *a = in;
        uint16_t *b = inout;
        for (size_t i = 0; i < count; ++i) {
            b[i] = (uint16_t)(a[i] + b[i]);
        }
        return;
    }
    ompi_op_reduce(ctx->op, (void *)in, inout, count, ctx->dtype);
}
