/*
 * Datatype and op mapping for coll/dualrail, and the reduction callback.
 *
 * Reductions go through Open MPI's own op engine (ompi_op_reduce), with two
 * exceptions, done here because Open MPI 4.1.4 gets them wrong:
 *   - its AVX op component saturates 8- and 16-bit integer sums in its vector
 *     loops instead of wrapping (upstream issue 8045; measured here: 200 + 200
 *     as uint8 gives 255, 30000 + 30000 as int16 gives 32767, while the scalar
 *     tail wraps). MPI requires the wrapped value. Wider sums and products
 *     are right.
 *   - its base op component compares MPI_UNSIGNED_LONG as signed long in
 *     MPI_MAX and MPI_MIN (upstream issue 10525, a 4.1.2 regression fixed
 *     after 4.1.4; measured here: max(2^63, 2^61) gives 2^61, with or
 *     without op/avx). MPI_UINT64_T and MPI_UNSIGNED_LONG_LONG are right.
 * And one done here for speed: MPI_SUM of a few (up to kOwnSumMax) 32- and 64-bit integers,
 * floats and doubles, the small allreduce's common case, where Open MPI's dispatch
 * (ompi_op_reduce, then op/avx's function) was about 90 instructions of an 8-byte call
 * (perf/instr_count.sh). Each element the same single addition as Open MPI's loops
 * (out = out + in, integers wrapping), so the same bits, NaN payloads aside (where both
 * operands are NaNs, which payload survives follows the instruction's operand order,
 * which neither C nor Open MPI's vector and scalar loops fix alike); longer vectors go to
 * op/avx.
 * The GPU kernels (mpi_coll/gpu) compute every pair the MPI way, so host and
 * device buffers give the same results.
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

struct ompi_datatype_t *mca_coll_dualrail_holes(struct ompi_datatype_t *dtype)
{
    size_t size = 0;
    ptrdiff_t lb, extent;
    ompi_datatype_type_size(dtype, &size);
    ompi_datatype_get_extent(dtype, &lb, &extent);
    return (ptrdiff_t)size < extent ? dtype : NULL;
}

enum {
    DUALRAIL_OWN_UNSET = -1, /* not classified yet: at the first reduction */
    DUALRAIL_OWN_NONE = 0,
    DUALRAIL_OWN_SUM8,    /* wrapping 8-bit sum */
    DUALRAIL_OWN_SUM16,   /* wrapping 16-bit sum */
    DUALRAIL_OWN_UMAX,    /* unsigned long max */
    DUALRAIL_OWN_UMIN,    /* unsigned long min */
    DUALRAIL_OWN_SUM_U32, /* up to kOwnSumMax: 32-bit integer sum (wrapping) */
    DUALRAIL_OWN_SUM_U64, /* 64-bit integer sum (wrapping) */
    DUALRAIL_OWN_SUM_F32, /* float sum */
    DUALRAIL_OWN_SUM_F64  /* double sum */
};

/* Elements up to which the plain sums are done here (above: op/avx's vector loops). */
enum { kOwnSumMax = 64 };

void mca_coll_dualrail_reduce_ctx_init(mca_coll_dualrail_reduce_ctx_t *ctx, struct ompi_op_t *op,
                                       struct ompi_datatype_t *dtype)
{
    /* Classified at the first reduction, which comes after the call's first send: a small
     * exchange's latency pays for what runs before that send (README, Small messages). */
    mca_coll_dualrail_reduce_ctx_known(ctx, op, dtype, DUALRAIL_OWN_UNSET);
}

int mca_coll_dualrail_reduce_class(struct ompi_op_t *op, struct ompi_datatype_t *dtype)
{
    if (op == &ompi_mpi_op_sum.op) {
        if (narrow_int(dtype) != 0) {
            return narrow_int(dtype) == 1 ? DUALRAIL_OWN_SUM8 : DUALRAIL_OWN_SUM16;
        }
        if (dtype == &ompi_mpi_double.dt) {
            return DUALRAIL_OWN_SUM_F64;
        }
        if (dtype == &ompi_mpi_float.dt) {
            return DUALRAIL_OWN_SUM_F32;
        }
        if (dtype == &ompi_mpi_int.dt || dtype == &ompi_mpi_unsigned.dt ||
            dtype == &ompi_mpi_int32_t.dt || dtype == &ompi_mpi_uint32_t.dt) {
            return sizeof(int) == 4 ? DUALRAIL_OWN_SUM_U32 : DUALRAIL_OWN_NONE;
        }
        if (dtype == &ompi_mpi_long.dt || dtype == &ompi_mpi_unsigned_long.dt ||
            dtype == &ompi_mpi_long_long_int.dt || dtype == &ompi_mpi_unsigned_long_long.dt ||
            dtype == &ompi_mpi_int64_t.dt || dtype == &ompi_mpi_uint64_t.dt) {
            return sizeof(long) == 8 && sizeof(long long) == 8 ? DUALRAIL_OWN_SUM_U64
                                                               : DUALRAIL_OWN_NONE;
        }
    } else if (dtype == &ompi_mpi_unsigned_long.dt && op == &ompi_mpi_op_max.op) {
        return DUALRAIL_OWN_UMAX;
    } else if (dtype == &ompi_mpi_unsigned_long.dt && op == &ompi_mpi_op_min.op) {
        return DUALRAIL_OWN_UMIN;
    }
    return DUALRAIL_OWN_NONE;
}

void mca_coll_dualrail_reduce_ctx_known(mca_coll_dualrail_reduce_ctx_t *ctx, struct ompi_op_t *op,
                                        struct ompi_datatype_t *dtype, int own)
{
    ctx->op = op;
    ctx->dtype = dtype;
    ctx->own = own;
}

void mca_coll_dualrail_reduce(const void *in, void *inout, size_t count, void *arg)
{
    mca_coll_dualrail_reduce_ctx_t *ctx = arg;
    if (ctx->own == DUALRAIL_OWN_UNSET) {
        ctx->own = mca_coll_dualrail_reduce_class(ctx->op, ctx->dtype);
    }
    switch (ctx->own) {
    case DUALRAIL_OWN_SUM8: {
        /* Two's complement: signed and unsigned sums wrap identically as unsigned. */
        const uint8_t *a = in;
        uint8_t *b = inout;
        for (size_t i = 0; i < count; ++i) {
            b[i] = (uint8_t)(a[i] + b[i]);
        }
        return;
    }
    case DUALRAIL_OWN_SUM16: {
        const uint16_t *a = in;
        uint16_t *b = inout;
        for (size_t i = 0; i < count; ++i) {
            b[i] = (uint16_t)(a[i] + b[i]);
        }
        return;
    }
    case DUALRAIL_OWN_UMAX:
    case DUALRAIL_OWN_UMIN: {
        const unsigned long *a = in;
        unsigned long *b = inout;
        const int max = ctx->own == DUALRAIL_OWN_UMAX;
        for (size_t i = 0; i < count; ++i) {
            if (max ? a[i] > b[i] : a[i] < b[i]) {
                b[i] = a[i];
            }
        }
        return;
    }
    /* Up to kOwnSumMax elements; longer vectors fall out of the switch to op/avx. Each
     * element is Open MPI's out = out + in; integers as unsigned (two's complement wraps
     * alike, and signed overflow would be undefined in C). */
#define DUALRAIL_OWN_SUM(type)                                                                     \
    if (count <= kOwnSumMax) {                                                                     \
        const type *a = in;                                                                        \
        type *b = inout;                                                                           \
        for (size_t i = 0; i < count; ++i) {                                                       \
            b[i] = b[i] + a[i];                                                                    \
        }                                                                                          \
        return;                                                                                    \
    }                                                                                              \
    break
    case DUALRAIL_OWN_SUM_F64:
        DUALRAIL_OWN_SUM(double);
    case DUALRAIL_OWN_SUM_F32:
        DUALRAIL_OWN_SUM(float);
    case DUALRAIL_OWN_SUM_U32:
        DUALRAIL_OWN_SUM(uint32_t);
    case DUALRAIL_OWN_SUM_U64:
        DUALRAIL_OWN_SUM(uint64_t);
#undef DUALRAIL_OWN_SUM
    default:
        break;
    }
    ompi_op_reduce(ctx->op, (void *)in, inout, count, ctx->dtype);
}
