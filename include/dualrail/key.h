/*
 * Message keys: the 64-bit identity every message carries, so a receiver
 * places data correctly whatever plane it came on and a late message from an
 * earlier collective never matches a later one.
 *
 *   63          48 47          28 27         16 15          4 3      0
 *  +--------------+--------------+-------------+-------------+--------+
 *  | comm id (16) | sequence (20)| step (12)   | block (12)  | seg (4)|
 *  +--------------+--------------+-------------+-------------+--------+
 *
 * Widths bound what one key can name: 4096 steps and blocks cover rings of
 * up to 2048 ranks; the sequence wraps after 2^20 collectives on one
 * communicator, long after any message of the old one can still be in flight.
 */
#ifndef DUALRAIL_KEY_H
#define DUALRAIL_KEY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DR_KEY_COMM_BITS 16
#define DR_KEY_SEQ_BITS 20
#define DR_KEY_STEP_BITS 12
#define DR_KEY_BLOCK_BITS 12
#define DR_KEY_SEG_BITS 4

typedef struct dr_key_fields {
    uint32_t comm;
    uint32_t seq;
    uint32_t step;
    uint32_t block;
    uint32_t seg;
} dr_key_fields_t;

#define DR_KEY_MASK_(bits) ((UINT64_C(1) << (bits)) - 1)

/* Pack f into *key. Returns false (and leaves *key alone) when a field does not fit. */
static inline bool dr_key_pack(const dr_key_fields_t *f, uint64_t *key)
{
    if (f->comm > DR_KEY_MASK_(DR_KEY_COMM_BITS) || f->seq > DR_KEY_MASK_(DR_KEY_SEQ_BITS) ||
        f->step > DR_KEY_MASK_(DR_KEY_STEP_BITS) || f->block > DR_KEY_MASK_(DR_KEY_BLOCK_BITS) ||
        f->seg > DR_KEY_MASK_(DR_KEY_SEG_BITS)) {
        return false;
    }
    uint64_t k = f->comm;
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
    f.comm = (uint32_t)(key & DR_KEY_MASK_(DR_KEY_COMM_BITS));
    return f;
}

#ifdef __cplusplus
}
#endif

#endif
