/*
 * Peer and block arithmetic of the all-to-all schedules (alltoall_pairwise.cc,
 * alltoall_bruck.cc, alltoallv_pairwise.cc): pure functions, unit-tested
 * without a network (tests/unit/test_algo_alltoall.cc).
 */
#ifndef DUALRAIL_ALGO_ALLTOALL_MATH_HPP
#define DUALRAIL_ALGO_ALLTOALL_MATH_HPP

#include <cstddef>
#include <cstdint>

#include "algo/ring_math.hpp"

namespace dualrail {
namespace coll {

/*
 * Pairwise exchange, step s in [1, n): rank r sends its block for (r + s) mod n
 * and receives the block (r - s) mod n holds for it. Over the n - 1 steps every
 * ordered pair meets exactly once, and in each step every rank has exactly one
 * destination and one source (the step is a permutation), so no rank is the
 * target of two senders at once.
 */
inline int pairwise_to(int r, int n, int s)
{
    return ring_mod((long long)r + s, n);
}
inline int pairwise_from(int r, int n, int s)
{
    return ring_mod((long long)r - s, n);
}

/*
 * The key fields of pairwise step s (engine.hpp's key(step, block, seg)). The step field
 * holds 12 bits and its top value is the abort step, so the steps continue in the block
 * field, which the pairwise exchange leaves unused otherwise: step 1 + (s - 1) mod 4094,
 * block (s - 1) / 4094. Distinct for every s in [1, kPairwiseMaxSteps], never the abort
 * step: communicators of up to kPairwiseMaxSteps + 1 ranks (a pair meets in one step only,
 * so keys need only be unique per pair; distinct per step keeps them recognisable).
 */
constexpr uint32_t kPairwiseStepSpan = 4094;
constexpr long long kPairwiseMaxSteps = (long long)kPairwiseStepSpan * 4096;
inline uint32_t pairwise_key_step(int s)
{
    return 1 + (uint32_t)(s - 1) % kPairwiseStepSpan;
}
inline uint32_t pairwise_key_block(int s)
{
    return (uint32_t)(s - 1) / kPairwiseStepSpan;
}

/*
 * Bruck all-to-all, round k (d = 2^k): the rotated buffer's blocks whose index
 * has bit k set go to (r + d) mod n; as many arrive from (r - d) mod n into
 * the same indices. Index i (block for (r + i) mod n at the start) travels
 * i ranks in all, one power of two per set bit, so after the rounds rank q's
 * index i holds the block rank q - i sent it.
 */
inline int bruck_a2a_to(int r, int n, int k)
{
    return ring_mod((long long)r + (1LL << k), n);
}
inline int bruck_a2a_from(int r, int n, int k)
{
    return ring_mod((long long)r - (1LL << k), n);
}
/* How many indices in [0, n) have bit k set: the blocks of round k. */
inline int bruck_a2a_blocks(int n, int k)
{
    const long long d = 1LL << k, period = 2 * d;
    const long long full = (long long)n / period, rest = (long long)n % period;
    return (int)(full * d + (rest > d ? rest - d : 0));
}
/* The most blocks any round moves (the pack buffers' size in blocks). */
inline int bruck_a2a_max_blocks(int n, int rounds)
{
    int m = 0;
    for (int k = 0; k < rounds; ++k) {
        const int b = bruck_a2a_blocks(n, k);
        m = b > m ? b : m;
    }
    return m;
}
/* Where rank r's rotated index i lands at the end: block (r - i) mod n of recvbuf. */
inline int bruck_a2a_final_block(int r, int n, int i)
{
    return ring_mod((long long)r - i, n);
}

} // namespace coll
} // namespace dualrail

#endif
