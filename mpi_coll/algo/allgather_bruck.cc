/*
 * Bruck allgather.
 *
 * Purpose:  small allgathers on any communicator size: ceil(log2 n) rounds
 *           (the ring needs n - 1), for sizes recursive doubling cannot take.
 * Accepts:  count >= 1 bytes per rank, n >= 2.
 * Limits:   scratch of n x count bytes (the rotated result) and one extra
 *           copy into recvbuf at the end; one message per round, not
 *           segmented (small messages).
 *
 * Rounds on 5 ranks. tmp is the result rotated so that this rank's block is
 * first: tmp[i] = block (r + i) mod n. In round k (d = 2^k) rank r sends
 * tmp[0 .. c) to r - d and receives tmp[d .. d + c) from r + d, where
 * c = min(d, n - d):
 *
 *   round  d  c   rank r holds tmp[0..)   sends to   receives from
 *    0     1  1   1 block                 r - 1      r + 1
 *    1     2  2   2 blocks                r - 2      r + 2
 *    2     4  1   4 blocks                r - 4      r + 4   (now all 5)
 *
 * Buffer rules: the run sent (tmp[0 .. c)) and the run received
 * (tmp[d .. d + c)) never overlap (c <= d), and later rounds only write past
 * them, so a round's two transfers run at once; the round ends when both
 * completed. A send may still read tmp after an error: the scratch is then
 * abandoned, never freed (engine.hpp).
 */
#include <cstring>

#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t allgather_bruck(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "bruck", lazy_note_slow);
    const int n = p.size, r = p.rank, rounds = log2_ceil(n);
    const size_t bs = p.count, total = bs * (size_t)n;
    int peers[64];
    for (int k = 0; k < rounds; ++k) {
        peers[2 * k] = bruck_to(r, n, k);
        peers[2 * k + 1] = bruck_from(r, n, k);
    }
    dr_status_t st = eng.init(2, peers, 2 * (size_t)rounds);
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    char *tmp = static_cast<char *>(scratch.reserve(total));
    if (tmp == nullptr) {
        return eng.finish(eng.engine().set_error(DR_ERR_NO_MEMORY,
                                                 "out of memory for %zu bytes of scratch", total),
                          err);
    }
    eng.set_scratch(tmp, total);
    char *out = static_cast<char *>(p.recvbuf);
    memcpy(tmp, p.sendbuf != nullptr ? p.sendbuf : out + (size_t)r * bs, bs);
    for (int k = 0; k < rounds && st == DR_OK; ++k) {
        const size_t d = (size_t)1 << k, run = (size_t)bruck_blocks(n, k) * bs;
        const uint64_t key = eng.key((uint32_t)k, 0, 0);
        if ((st = eng.irecv(0, bruck_from(r, n, k), (uint32_t)k, key, tmp + d * bs, run)) !=
                DR_OK ||
            (st = eng.isend(1, bruck_to(r, n, k), (uint32_t)k, key, tmp, run)) != DR_OK ||
            (st = eng.wait(0)) != DR_OK || (st = eng.wait(1)) != DR_OK) {
            break;
        }
    }
    if (st == DR_OK) {
        /* un-rotate: tmp[i] is block (r + i) mod n */
        const size_t head = (size_t)(n - r) * bs;
        memcpy(out + (size_t)r * bs, tmp, head);
        memcpy(out, tmp + head, (size_t)r * bs);
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
