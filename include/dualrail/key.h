/*
 * Message keys: the 64-bit identity every message carries, so a receiver
 * places data correctly whatever plane it came on and a late message from an
 * earlier collective never matches a later one.
 *
 *   63        48 47    44 43        28 27       16 15        4 3      0
 *  +------------+--------+------------+-----------+-----------+--------+
 *  | comm (16)  |kind (4)| seq (16)   | step (12) | block (12)| seg (4)|
 *  +------------+--------+------------+-----------+-----------+--------+
 *
 * The kind (DR_KIND_*) names the collective, so collectives of different
 * kinds interleaved on one communicator never match each other's messages,
 * whatever their sequence numbers. Its 4 bits came from the sequence (20 bits
 * before issue 13): 16 kinds cover MPI's blocking collectives. Step and
 * block keep 12 bits each because ring schedules need them: 2(n-1) steps
 * and n blocks for rings of up to 2048 ranks (step 4095 is the abort step).
 * The sequence counts the collectives of one kind on one communicator and
 * wraps after 2^16 of them; ranks are at most a few collectives apart (every
 * send completes only when its receiver has it), so no message of the old
 * number can still be in flight.
 */
#ifndef DUALRAIL_KEY_H
#define DUALRAIL_KEY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DR_KEY_COMM_BITS 16
#define DR_KEY_KIND_BITS 4
#define DR_KEY_SEQ_BITS 16
#define DR_KEY_STEP_BITS 12
#define DR_KEY_BLOCK_BITS 12
#define DR_KEY_SEG_BITS 4

/* The collective kinds (values are on the wire: append, never renumber). */
enum {
    DR_KIND_ALLREDUCE = 0,
    DR_KIND_BCAST = 1,
    DR_KIND_BARRIER = 2,
    DR_KIND_ALLGATHER = 3,
    /* Reserved up front for the collectives still being added (issues 13 and 14), so
     * that work on them in parallel never assigns one wire value twice. */
    DR_KIND_REDUCE = 4,
    DR_KIND_REDUCE_SCATTER_BLOCK = 5,
    DR_KIND_REDUCE_SCATTER = 6,
    DR_KIND_ALLGATHERV = 7,
    DR_KIND_GATHER = 8,
    DR_KIND_GATHERV = 9,
    DR_KIND_SCATTER = 10,
    DR_KIND_SCATTERV = 11,
    DR_KIND_ALLTOALL = 12,
    DR_KIND_ALLTOALLV = 13,
    DR_KIND_COUNT /* kinds in use; at most 1 << DR_KEY_KIND_BITS */
};

typedef struct dr_key_fields {
    uint32_t comm;
    uint32_t kind;
    uint32_t seq;
    uint32_t step;
    uint32_t block;
    uint32_t seg;
} dr_key_fields_t;

#define DR_KEY_MASK_(bits) ((UINT64_C(1) << (bits)) - 1)
/* Sequence numbers are taken modulo this + 1 (callers count freely and mask). */
#define DR_KEY_SEQ_MASK ((uint32_t)DR_KEY_MASK_(DR_KEY_SEQ_BITS))

#ifdef __cplusplus
#define DR_KEY_STATIC_ASSERT_ static_assert
#else
#define DR_KEY_STATIC_ASSERT_ _Static_assert
#endif
DR_KEY_STATIC_ASSERT_(DR_KEY_COMM_BITS + DR_KEY_KIND_BITS + DR_KEY_SEQ_BITS + DR_KEY_STEP_BITS +
                              DR_KEY_BLOCK_BITS + DR_KEY_SEG_BITS ==
                          64,
                      "a key is 64 bits");
DR_KEY_STATIC_ASSERT_(DR_KIND_COUNT <= (1 << DR_KEY_KIND_BITS), "kinds fit the kind field");

/* Pack f into *key. Returns false (and leaves *key alone) when a field does not fit. */
static inline bool dr_key_pack(const dr_key_fields_t *f, uint64_t *key)
{
    if (f->comm > DR_KEY_MASK_(DR_KEY_COMM_BITS) || f->kind > DR_KEY_MASK_(DR_KEY_KIND_BITS) ||
        f->seq > DR_KEY_MASK_(DR_KEY_SEQ_BITS) ||
        f->step > DR_KEY_MASK_(DR_KEY_STEP_BITS) || f->block > DR_KEY_MASK_(DR_KEY_BLOCK_BITS) ||
        f->seg > DR_KEY_MASK_(DR_KEY_SEG_BITS)) {
        return false;
    }
    uint64_t k = f->comm;
    k = (k << DR_KEY_KIND_BITS) | f->kind;
    k = (k << DR_KEY_SEQ_BITS) | f->seq;
    k = (k << DR_KEY_STEP_BITS) | f->step;
    k = (k << DR_KEY_BLOCK_BITS) | f->block;
    k = (k << DR_KEY_SEG_BITS) | f->seg;
    *key = k;
    return true;
}

static inline dr_key_fields_t dr_key_unpack(uint64_t key)
{
    dr_key_fields_t f;
    f.seg = (uint32_t)(key & DR_KEY_MASK_(DR_KEY_SEG_BITS));
    key >>= DR_KEY_SEG_BITS;
    f.block = (uint32_t)(key & DR_KEY_MASK_(DR_KEY_BLOCK_BITS));
    key >>= DR_KEY_BLOCK_BITS;
    f.step = (uint32_t)(key & DR_KEY_MASK_(DR_KEY_STEP_BITS));
    key >>= DR_KEY_STEP_BITS;
    f.seq = (uint32_t)(key & DR_KEY_MASK_(DR_KEY_SEQ_BITS));
    key >>= DR_KEY_SEQ_BITS;
    f.kind = (uint32_t)(key & DR_KEY_MASK_(DR_KEY_KIND_BITS));
    key >>= DR_KEY_KIND_BITS;
    f.comm = (uint32_t)(key & DR_KEY_MASK_(DR_KEY_COMM_BITS));
    return f;
}

#ifdef __cplusplus
}
#endif

#endif
