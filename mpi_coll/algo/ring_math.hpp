/*
 * Ring allreduce arithmetic: which block a rank sends and receives at each
 * step, how count elements split into blocks and blocks into segments. Pure
 * functions, no state, unit-tested in tests/unit/test_algo_math.cc.
 *
 * Steps 0 .. n-2 reduce-scatter, steps n-1 .. 2n-3 allgather. In both phases
 * rank r sends block (r - step) mod n to its right and receives block
 * (r - step - 1) mod n from its left: the allgather formula is the
 * reduce-scatter one shifted by n - 1 steps, which is the same block mod n.
 * After the reduce-scatter rank r holds the full result of block (r + 1) mod n.
 */
#ifndef DUALRAIL_ALGO_RING_MATH_HPP
#define DUALRAIL_ALGO_RING_MATH_HPP

#include <cstddef>

namespace dualrail {
namespace coll {

/* The step field of a key is 12 bits and 2(n-1) steps (plus one reserved) must fit. */
constexpr int kRingMaxRanks = 2048;
/* The segment field of a key is 4 bits. */
constexpr int kMaxSegments = 16;

/* A run of elements: [offset, offset + count). */
struct Span {
    size_t offset;
    size_t count;
};

inline int ring_mod(long long v, int n)
{
    long long m = v % n;
    return (int)(m < 0 ? m + n : m);
}

inline int ring_left(int rank, int n)
{
    return ring_mod((long long)rank - 1, n);
}
inline int ring_right(int rank, int n)
{
    return ring_mod((long long)rank + 1, n);
}
inline int ring_steps(int n)
{
    return n < 2 ? 0 : 2 * (n - 1);
}
inline bool ring_is_reduce_step(int n, int step)
{
    return step < n - 1;
}
inline int ring_send_block(int rank, int n, int step)
{
    return ring_mod((long long)rank - step, n);
}
inline int ring_recv_block(int rank, int n, int step)
{
    return ring_mod((long long)rank - step - 1, n);
}
/* The block whose full result rank holds after the reduce-scatter. */
inline int ring_owned_block(int rank, int n)
{
    return ring_mod((long long)rank + 1, n);
}

/* Split count items into parts pieces; the first count % parts pieces are one larger. */
inline Span partition(size_t count, size_t parts, size_t index)
{
    const size_t base = count / parts, extra = count % parts;
    return Span{index * base + (index < extra ? index : extra), base + (index < extra ? 1 : 0)};
}

inline size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0 ? 1 : 0);
}

/* Block b of count elements over n ranks. */
inline Span ring_block(size_t count, int n, int b)
{
    return partition(count, (size_t)n, (size_t)b);
}
inline size_t ring_block_max(size_t count, int n)
{
    return ceil_div(count, (size_t)n);
}

/*
 * Segments per block: as many segment_bytes pieces as the largest block
 * needs, but at most kMaxSegments (the key's segment field): past that the
 * segments grow instead. Every block uses the same count so that a segment
 * index means the same thing on both sides; at least one.
 */
inline int ring_segments(size_t block_max_elems, size_t elem_size, size_t segment_bytes)
{
    size_t seg_elems = segment_bytes / elem_size;
    if (seg_elems == 0) {
        seg_elems = 1;
    }
    size_t s = ceil_div(block_max_elems, seg_elems);
    if (s > (size_t)kMaxSegments) {
        s = kMaxSegments;
    }
    return s == 0 ? 1 : (int)s;
}

/* Segment k of block (absolute element offsets). */
inline Span ring_segment(Span block, int nseg, int k)
{
    Span s = partition(block.count, (size_t)nseg, (size_t)k);
    s.offset += block.offset;
    return s;
}

/*
 * The pipelined ring's geometry for one call: 2(n-1) steps x nseg segments =
 * `units` units, u = step * nseg + segment, and the bytes of the largest
 * segment rounded up to 64 (a scratch slot). The host ring and the staged ring
 * (device buffers) both use it, so they put the same messages on the wire.
 */
struct RingPlan {
    size_t count;
    int n, steps, nseg;
    size_t units, slot_bytes;

    RingPlan(size_t count_, int n_, size_t elem_size, size_t segment_bytes)
        : count(count_), n(n_), steps(ring_steps(n_)),
          nseg(ring_segments(ring_block_max(count_, n_), elem_size, segment_bytes)),
          units((size_t)steps * (size_t)nseg),
          slot_bytes((ceil_div(ring_block_max(count_, n_), (size_t)nseg) * elem_size + 63) / 64 * 64)
    {
    }
    int step_of(size_t u) const { return (int)(u / (size_t)nseg); }
    int seg_of(size_t u) const { return (int)(u % (size_t)nseg); }
    /* Segment k of block b (absolute element offsets). */
    Span span(int b, int k) const { return ring_segment(ring_block(count, n, b), nseg, k); }
};

} // namespace coll
} // namespace dualrail

#endif
