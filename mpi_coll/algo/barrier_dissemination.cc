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
 */
#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

namespace {
const char kToken = 1;
} // namespace

dr_status_t barrier_dissemination(Transport &t, const Params &p, std::string *err)
{
    Engine eng(t, p, "dissemination");
    const int n = p.size, r = p.rank, rounds = log2_ceil(n);
    int peers[64];
    for (int k = 0; k < rounds; ++k) {
        peers[2 * k] = dissem_to(r, n, k);
        peers[2 * k + 1] = dissem_from(r, n, k);
    }
    char got[32];
    dr_status_t st = eng.init(2, peers, 2 * (size_t)rounds);
    for (int k = 0; k < rounds && st == DR_OK; ++k) {
        const uint64_t key = eng.key((uint32_t)k, 0, 0);
        if ((st = eng.irecv(0, dissem_from(r, n, k), (uint32_t)k, key, &got[k], 1)) != DR_OK ||
            (st = eng.isend(1, dissem_to(r, n, k), (uint32_t)k, key, &kToken, 1)) != DR_OK ||
            (st = eng.wait(0)) != DR_OK || (st = eng.wait(1)) != DR_OK) {
            break;
        }
    }
    return eng.finish(st, err);
}

} // namespace coll
} // namespace dualrail
