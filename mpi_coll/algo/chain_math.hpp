/*
 * Geometry of the pipelined chains (bcast_chain.cc, reduce_chain.cc): pure
 * functions, unit-tested in test_algo_math.cc.
 *
 * A chain cuts the message into segments that flow along relative ranks
 * 0 -> 1 -> ... -> n-1 (bcast) or n-1 -> ... -> 0 (reduce). Every link carries
 * the message once and, with the pipe full, every link is busy at once, so a
 * chain takes about (bytes + (n - 2) x segment) / rate, where scatter +
 * allgather (bcast) and Rabenseifner (reduce) put 2(n-1)/n x bytes on the
 * root's link. Segments are therefore small against the message (the pipe's
 * fill and drain is n - 2 of them), but not so small that per-message costs
 * show: bytes / kChainSegsWanted, at least kChainMinSegBytes, at most the
 * configured segment_size.
 */
#ifndef DUALRAIL_ALGO_CHAIN_MATH_HPP
#define DUALRAIL_ALGO_CHAIN_MATH_HPP

#include <cstddef>
#include <cstdint>

#include "algo/coll.hpp"
#include "algo/ring_math.hpp" /* Span */
#include "dualrail/key.h"

namespace dualrail {
namespace coll {

/* Segment k travels under key block k >> DR_KEY_SEG_BITS, segment k & mask, step 0:
 * the key's block and segment fields together number the segments. */
constexpr size_t kChainMaxSegments = size_t(1) << (DR_KEY_BLOCK_BITS + DR_KEY_SEG_BITS);
constexpr size_t kChainSegsWanted = 64;
constexpr size_t kChainMinSegBytes = 64 * 1024;
/* Receives (and sends) in flight per rank, bounded by this much scratch, within [2, 16]. */
constexpr size_t kChainScratchBudget = 8u << 20;

struct ChainPlan {
    size_t seg_elems; /* elements per segment (the last may be shorter) */
    size_t nseg;      /* segments, >= 1 for count >= 1 */
    size_t window;    /* segments in flight per direction */
};

inline ChainPlan chain_plan(size_t count, size_t esz, size_t segment_size)
{
    const size_t bytes = count * esz;
    size_t seg = bytes / kChainSegsWanted;
    seg = seg < kChainMinSegBytes ? kChainMinSegBytes : seg;
    seg = segment_size != 0 && seg > segment_size ? segment_size : seg;
    /* every segment must get a key */
    const size_t at_least = (bytes + kChainMaxSegments - 1) / kChainMaxSegments;
    seg = seg < at_least ? at_least : seg;
    ChainPlan c;
    c.seg_elems = seg / esz == 0 ? 1 : seg / esz;
    c.nseg = (count + c.seg_elems - 1) / c.seg_elems;
    if (c.nseg > kChainMaxSegments) { /* at_least rounded down to whole elements */
        c.seg_elems = (count + kChainMaxSegments - 1) / kChainMaxSegments;
        c.nseg = (count + c.seg_elems - 1) / c.seg_elems;
    }
    const size_t slot = c.seg_elems * esz;
    size_t w = kChainScratchBudget / (slot == 0 ? 1 : slot);
    w = w < 2 ? 2 : w > 16 ? 16 : w;
    c.window = w > c.nseg ? (c.nseg == 0 ? 1 : c.nseg) : w;
    return c;
}

/* Segment k in elements. */
inline Span chain_segment(const ChainPlan &c, size_t count, size_t k)
{
    const size_t off = k * c.seg_elems;
    const size_t left = off < count ? count - off : 0;
    return Span{off, left < c.seg_elems ? left : c.seg_elems};
}

inline uint32_t chain_key_block(size_t k)
{
    return (uint32_t)(k >> DR_KEY_SEG_BITS);
}
inline uint32_t chain_key_seg(size_t k)
{
    return (uint32_t)(k & ((size_t(1) << DR_KEY_SEG_BITS) - 1));
}

/*
 * Whether the chain beats the two-phase algorithms (scatter + allgather, Rabenseifner) for
 * a message of `bytes` on n ranks: (bytes + (n - 2) seg) < 2 (n - 1) / n x bytes, that is
 * seg < bytes / n for n > 2. On 2 ranks both send the message once; the chain sends it in
 * fewer, larger messages.
 */
inline bool chain_wins(size_t count, size_t esz, int n, size_t segment_size)
{
    if (n <= 2) {
        return true;
    }
    const ChainPlan c = chain_plan(count, esz, segment_size);
    return c.seg_elems * (size_t)n <= count;
}

} // namespace coll
} // namespace dualrail

#endif
