/*
 * Peer arithmetic of the data-movement collectives (bcast, barrier,
 * allgather): binomial trees, van de Geijn's scatter ranges, dissemination,
 * recursive doubling and Bruck partners, and the even split of bytes into
 * blocks and segments. Pure functions, unit-tested in
 * tests/unit/test_algo_tree_math.cc without a network.
 *
 * Rooted collectives work in relative ranks: v = (rank - root) mod n, so the
 * root is v = 0 and rank = (v + root) mod n.
 */
#ifndef DUALRAIL_ALGO_TREE_MATH_HPP
#define DUALRAIL_ALGO_TREE_MATH_HPP

#include <cstddef>

#include "algo/ring_math.hpp"

namespace dualrail {
namespace coll {

inline int rel_rank(int rank, int root, int n)
{
    return ring_mod((long long)rank - root, n);
}
inline int abs_rank(int v, int root, int n)
{
    return ring_mod((long long)v + root, n);
}

/* Smallest power of two >= n (n >= 1). */
inline int pow2_ceil(int n)
{
    int p = 1;
    while (p < n) {
        p <<= 1;
    }
    return p;
}
inline bool is_pow2(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}
/* Rounds of dissemination, recursive doubling and Bruck: ceil(log2 n). */
inline int log2_ceil(int n)
{
    int k = 0;
    while ((1 << k) < n) {
        ++k;
    }
    return k;
}

/*
 * Binomial tree over relative ranks 0..n-1 rooted at 0. Relative rank v
 * (v > 0) hangs below v minus its lowest set bit; its subtree is
 * [v, v + binomial_span(v, n)). Its children are v + m for each power of two
 * m below its lowest set bit (below pow2_ceil(n) for the root), largest first,
 * while v + m < n.
 */
inline int binomial_lowbit(int v, int n)
{
    return v == 0 ? pow2_ceil(n) : (v & -v);
}
inline int binomial_parent(int v)
{
    return v == 0 ? -1 : v - (v & -v);
}
/* Relative ranks in v's subtree, v included. */
inline int binomial_span(int v, int n)
{
    const int m = binomial_lowbit(v, n);
    return m < n - v ? m : n - v;
}
/* v's children, largest subtree first, into out (room for log2_ceil(n) + 1); returns how many. */
inline int binomial_children(int v, int n, int *out)
{
    int k = 0;
    for (int m = binomial_lowbit(v, n) >> 1; m >= 1; m >>= 1) {
        if (v + m < n) {
            out[k++] = v + m;
        }
    }
    return k;
}

/* bytes split into n blocks as evenly as possible; block i (the first bytes % n one larger). */
inline size_t even_offset(size_t bytes, int n, long long i)
{
    const size_t q = bytes / (size_t)n, rem = bytes % (size_t)n;
    const size_t ui = (size_t)i;
    return ui * q + (ui < rem ? ui : rem);
}
inline size_t even_len(size_t bytes, int n, long long i)
{
    return even_offset(bytes, n, i + 1) - even_offset(bytes, n, i);
}

/* Segments for a pipeline of blocks of at most max_block bytes: within [1, kMaxSegments]. */
inline int pipeline_segments(size_t max_block, size_t segment_size)
{
    if (segment_size == 0) {
        return 1;
    }
    const size_t s = (max_block + segment_size - 1) / segment_size;
    return s < 1 ? 1 : s > (size_t)kMaxSegments ? kMaxSegments : (int)s;
}

/* Dissemination barrier, round k: signal (r + 2^k) mod n, hear from (r - 2^k) mod n. */
inline int dissem_to(int r, int n, int k)
{
    return ring_mod((long long)r + (1LL << k), n);
}
inline int dissem_from(int r, int n, int k)
{
    return ring_mod((long long)r - (1LL << k), n);
}

/* Recursive doubling allgather (n a power of two), round k: partner and the first block each
 * side holds (2^k blocks, contiguous). */
inline int rd_ag_partner(int r, int k)
{
    return r ^ (1 << k);
}
inline int rd_ag_first_block(int r, int k)
{
    return (r >> k) << k;
}

/* Bruck allgather, round k: send the first bruck_blocks(n, k) blocks of the rotated buffer
 * to (r - 2^k) mod n, receive as many after the first 2^k from (r + 2^k) mod n. */
inline int bruck_to(int r, int n, int k)
{
    return ring_mod((long long)r - (1LL << k), n);
}
inline int bruck_from(int r, int n, int k)
{
    return ring_mod((long long)r + (1LL << k), n);
}
inline int bruck_blocks(int n, int k)
{
    const int d = 1 << k;
    return d < n - d ? d : n - d;
}

} // namespace coll
} // namespace dualrail

#endif
