#ifndef DUALRAIL_ALGO_BARRIER_DISSEMINATION_HPP
#define DUALRAIL_ALGO_BARRIER_DISSEMINATION_HPP

/*
 * Dissemination barrier (Hensgen, Finkel and Manber).
 *
 * Purpose:  MPI_Barrier in ceil(log2 n) rounds on any communicator size,
 *           with no root and no second (release) phase.
 * Accepts:  n >= 2.
 * Limits:   one 1-byte message per rank and round (len 0 posts nothing, so
 *           the token carries a byte); rounds are sequential.
 *
 * Rounds on 5 ranks (rank r signals r + 2^k and waits for r - 2^k):
 *
 *   round  rank 0    rank 1    rank 2    rank 3    rank 4
 *    0     ->1 <-4   ->2 <-0   ->3 <-1   ->4 <-2   ->0 <-3
 *    1     ->2 <-3   ->3 <-4   ->4 <-0   ->0 <-1   ->1 <-2
 *    2     ->4 <-1   ->0 <-2   ->1 <-3   ->2 <-4   ->3 <-0
 *
 * After round k a rank has heard, directly or through others, from the 2^(k+1)
 * - 1 ranks before it, so after the last round from all: no rank leaves before
 * every rank entered. The token is a static byte (a send's buffer must outlive
 * an abandoned send); each round's receive has its own byte.
 *
 * Slots: 0 the round's receive, 1 its send. A LazyEngine (lazy_engine.hpp) runs
 * them: up to 16 ranks (8 peers, the engine's inline storage), a blocking call
 * builds the engine only when a wait is long, a send is not copied or something
 * fails; beyond, and for a non-blocking barrier's task, the engine runs the
 * call from its start.
 *
 * A template on the transport: barrier() (collectives.cc) runs it over any
 * Transport, dr_barrier (dr_coll.cc) over MrTransport without the vtable.
 */
#include <string>

#include "algo/coll.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

/* The token every round sends (static: see above). */
inline constexpr char kBarrierToken = 1;

/* The engine's peers (LazyEngine::PeersFn): round k's target and source. */
inline size_t barrier_peers(const Params &p, int *out)
{
    const int rounds = log2_ceil(p.size);
    for (int k = 0; k < rounds; ++k) {
        out[2 * k] = dissem_to(p.rank, p.size, k);
        out[2 * k + 1] = dissem_from(p.rank, p.size, k);
    }
    return 2 * (size_t)rounds;
}

template <class T> dr_status_t barrier_dissemination_on(T &t, const Params &p, std::string *err)
{
    const int n = p.size, r = p.rank, rounds = log2_ceil(n);
    LazyEngine<T> e(t, p, "dissemination", lazy_note_slow); /* lazy_slow_calls() counts */
    char got[32];
    dr_status_t st = e.init(2, 2 * (size_t)rounds, barrier_peers);
    for (int k = 0; k < rounds && st == DR_OK; ++k) {
        const uint32_t step = (uint32_t)k;
        const uint64_t key = e.key(step, 0, 0);
        if ((st = e.irecv(0, dissem_from(r, n, k), step, key, &got[k], 1)) != DR_OK ||
            (st = e.isend(1, dissem_to(r, n, k), step, key, &kBarrierToken, 1)) != DR_OK ||
            (st = e.wait(0)) != DR_OK || (st = e.wait(1)) != DR_OK) {
            break;
        }
    }
    return e.finish(st, err);
}

/* barrier()'s checks and trivial case, then the algorithm: the entry over any transport. */
template <class T> dr_status_t barrier_on(T &t, const Params &in, std::string *err)
{
    if (in.kind != kKindBarrier) {
        return reject(err, in.kind, "not a barrier");
    }
    const dr_status_t st = check_common(in, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.size == 1) {
        clear_err(err);
        return DR_OK;
    }
    return barrier_dissemination_on(t, in, err);
}

} // namespace coll
} // namespace dualrail

#endif
