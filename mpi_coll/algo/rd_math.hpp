/*
 * Recursive doubling arithmetic with folding for rank counts that are not a
 * power of two. Pure functions, unit-tested in tests/unit/test_algo_math.cc.
 *
 * p = largest power of two <= n, rem = n - p. Of the first 2*rem ranks the
 * even ones are extra: they fold out (send their data to rank + 1) and get
 * the result back at the end. The odd ones among the first 2*rem and every
 * rank from 2*rem on take part under a virtual rank 0 .. p-1:
 *     rank < 2*rem, odd:  vrank = rank / 2
 *     rank >= 2*rem:      vrank = rank - rem
 * In round j (0 .. log2(p)-1) vrank v exchanges with vrank v ^ 2^j.
 *
 * Key steps: fold = 0, round j = 1 + j, unfold = rounds + 1.
 */
#ifndef DUALRAIL_ALGO_RD_MATH_HPP
#define DUALRAIL_ALGO_RD_MATH_HPP

namespace dualrail {
namespace coll {

enum class RdRole {
    kExtra,   /* folds out: sends its data to rank + 1, receives the result */
    kPartner, /* reduces an extra rank's data in, sends it the result */
    kPlain    /* neither */
};

/* log2(p), 0 for n < 2. A bit scan, not a loop: the schedules of small collectives call
 * these several times per call, and the loops were a tenth of the recursive doubling's
 * own instructions on an 8-byte allreduce. */
inline int rd_rounds(int n)
{
    return n < 2 ? 0 : 31 - __builtin_clz((unsigned)n);
}

inline int rd_pow2_floor(int n)
{
    return 1 << rd_rounds(n);
}

inline int rd_rem(int n)
{
    return n - rd_pow2_floor(n);
}

inline int rd_step_fold()
{
    return 0;
}
inline int rd_step_round(int j)
{
    return 1 + j;
}
inline int rd_step_unfold(int n)
{
    return rd_rounds(n) + 1;
}

inline RdRole rd_role(int rank, int n)
{
    if (rank >= 2 * rd_rem(n)) {
        return RdRole::kPlain;
    }
    return rank % 2 == 0 ? RdRole::kExtra : RdRole::kPartner;
}

/* -1 for an extra rank. */
inline int rd_vrank(int rank, int n)
{
    const int rem = rd_rem(n);
    if (rank < 2 * rem) {
        return rank % 2 == 0 ? -1 : rank / 2;
    }
    return rank - rem;
}

inline int rd_real_rank(int vrank, int n)
{
    const int rem = rd_rem(n);
    return vrank < rem ? 2 * vrank + 1 : vrank + rem;
}

/* The other side of a fold (extra <-> partner); -1 for a plain rank. */
inline int rd_fold_peer(int rank, int n)
{
    switch (rd_role(rank, n)) {
    case RdRole::kExtra:
        return rank + 1;
    case RdRole::kPartner:
        return rank - 1;
    default:
        return -1;
    }
}

/* Real rank of the partner in round j; -1 for an extra rank. */
inline int rd_partner(int rank, int n, int round)
{
    const int v = rd_vrank(rank, n);
    if (v < 0) {
        return -1;
    }
    return rd_real_rank(v ^ (1 << round), n);
}

/* Most ranks rd_peers() gives: the fold peer and one partner per round (n < 2^31). */
constexpr int kRdMaxPeers = 1 + 31;

/* The ranks a rank's recursive doubling exchanges with, in step order: the fold peer, then
 * round j's partner; -1 where there is none (a plain rank's fold, an extra rank's rounds).
 * peers holds kRdMaxPeers; returns how many were written (1 + rounds). */
inline int rd_peers(int rank, int n, int *peers)
{
    int np = 0;
    peers[np++] = rd_fold_peer(rank, n);
    for (int j = 0; j < rd_rounds(n); ++j) {
        peers[np++] = rd_partner(rank, n, j);
    }
    return np;
}

/*
 * Recursive halving reduce-scatter (reduce_scatter_halving.cc): vrank v ends
 * with group v of the result, the blocks of the ranks it stands for: blocks
 * [rh_group_first(v), rh_group_first(v + 1)), i.e. 2v and 2v+1 for v < rem
 * (the extra rank's and its partner's), v + rem above. rh_group_first(p) = n.
 */
inline int rh_group_first(int v, int n)
{
    const int rem = rd_rem(n);
    return v < rem ? 2 * v : v + rem;
}

} // namespace coll
} // namespace dualrail

#endif
