/*
 * Recursive doubling allgather.
 *
 * Purpose:  small allgathers on power-of-two communicators: log2(n) rounds,
 *           each rank's blocks doubling every round.
 * Accepts:  count >= 1 bytes per rank, n a power of two (allgather() sends
 *           other sizes to Bruck).
 * Limits:   no scratch (receives go to their place in recvbuf); one message
 *           per round and partner, not segmented (small messages).
 *
 * Rounds on 4 ranks (blocks held before the round -> partner):
 *
 *   round  rank 0       rank 1       rank 2       rank 3
 *    0     {0}   <> 1   {1}   <> 0   {2}   <> 3   {3}   <> 2
 *    1     {0,1} <> 2   {0,1} <> 3   {2,3} <> 0   {2,3} <> 1
 *
 * In round k rank r holds the 2^k contiguous blocks starting at
 * rd_ag_first_block(r, k) and exchanges them with r ^ 2^k, whose blocks are
 * the adjacent run. Buffer rules: the run a rank sends is never written again
 * and the run it receives is not sent until it has arrived, so both
 * transfers of a round run at once; the round ends when both completed.
 */
#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t allgather_rd(Transport &t, const Params &p, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "recursive-doubling", lazy_note_slow);
    const int n = p.size, r = p.rank, rounds = log2_ceil(n);
    char *buf = static_cast<char *>(p.recvbuf);
    int peers[32];
    for (int k = 0; k < rounds; ++k) {
        peers[k] = rd_ag_partner(r, k);
    }
    dr_status_t st = eng.init(2, peers, (size_t)rounds);
    for (int k = 0; k < rounds && st == DR_OK; ++k) {
        const int q = peers[k];
        const size_t run = ((size_t)1 << k) * p.count;
        const uint64_t key = eng.key((uint32_t)k, 0, 0);
        if ((st = eng.irecv(0, q, (uint32_t)k, key, buf + (size_t)rd_ag_first_block(q, k) * p.count,
                            run)) != DR_OK ||
            (st = eng.isend(1, q, (uint32_t)k, key, buf + (size_t)rd_ag_first_block(r, k) * p.count,
                            run)) != DR_OK ||
            (st = eng.wait(0)) != DR_OK || (st = eng.wait(1)) != DR_OK) {
            break;
        }
    }
    return eng.finish(st, err);
}

} // namespace coll
} // namespace dualrail
