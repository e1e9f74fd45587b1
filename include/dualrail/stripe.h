/*
 * Stripe arithmetic: how one message is cut across planes and segments.
 * Pure functions, no allocation; unit-tested without a network.
 */
#ifndef DUALRAIL_STRIPE_H
#define DUALRAIL_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default) /* the API of libdualrail_ucx_mr.so (built hidden) */

typedef struct dr_extent {
    uint64_t offset;
    uint64_t length;
} dr_extent_t;

/*
 * Split len bytes over n planes in proportion to weights[0..n-1].
 *
 * - A plane of weight 0 gets nothing (that is how a down plane is skipped).
 * - Boundaries between stripes fall on multiples of align (align >= 1), so an
 *   element is never cut in two; the last stripe takes the remainder.
 * - A message of at most min_stripe bytes is not split: it goes whole to one
 *   plane, the first plane of non-zero weight at or after `first` (callers
 *   rotate `first` so that many small messages spread over the planes).
 *
 * out[i] receives plane i's extent (length 0 when it gets nothing; stripes are
 * contiguous and in plane order). Returns the number of planes with a
 * non-empty stripe, 0 when len is 0, or -1 when n is out of range, align is
 * 0 or every weight is 0.
 */
int dr_stripe_split(uint64_t len, const uint32_t *weights, int n, uint64_t align,
                    uint64_t min_stripe, int first, dr_extent_t *out);

/* Number of segments of at most seg_size bytes that cover len bytes (0 for len 0). */
uint64_t dr_segment_count(uint64_t len, uint64_t seg_size);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
