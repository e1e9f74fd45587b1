/*
 * Bruck allgatherv.
 *
 * Purpose:  small allgathervs on any communicator size: ceil(log2 n) rounds
 *           where the ring needs n - 1, blocks of any sizes.
 * Accepts:  n >= 2; blocks of any sizes, zeros included, anywhere in recvbuf.
 * Limits:   scratch of all blocks together (the rotated result) and one copy
 *           per block into recvbuf at the end; one message per round, not
 *           segmented (small messages).
 *
 * As allgather_bruck.cc, with blocks of their own sizes: tmp holds the
 * blocks rotated so that this rank's is first, tmp[i] = block (r + i) mod n,
 * packed one after the other (rot_off: prefix sums of the sizes in that
 * order). In round k (d = 2^k) rank r sends tmp[0 .. c) to r - d and
 * receives tmp[d .. d + c) from r + d, c = min(d, n - d): the blocks the
 * sender holds first are (r + d + i) mod n, exactly the receiver's
 * tmp[d + i], so both sides compute the same byte count.
 *
 *   round  d  c   rank r holds tmp[0..)   sends to   receives from
 *    0     1  1   1 block                 r - 1      r + 1
 *    1     2  2   2 blocks                r - 2      r + 2
 *    2     4  1   4 blocks                r - 4      r + 4   (n = 5: all)
 *
 * Buffer rules: the run sent (tmp[0 .. c)) and the run received
 * (tmp[d .. d + c)) never overlap (c <= d), later rounds only write past
 * them; a round ends when both transfers completed. After an error a send
 * may still read tmp: the scratch is then abandoned, never freed.
 */
#include <cstring>
#include <vector>

#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/gathers.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t allgatherv_bruck(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "bruck", lazy_note_slow);
    const int n = p.size, r = p.rank, rounds = log2_ceil(n);
    /* rot[i]: bytes before rotated block i (block (r + i) mod n); rot[n]: all */
    std::vector<size_t> rot((size_t)n + 1, 0);
    for (int i = 0; i < n; ++i) {
        rot[(size_t)i + 1] = rot[(size_t)i] + p.counts[ring_mod((long long)r + i, n)];
    }
    const size_t total = rot[(size_t)n];
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
    if (p.counts[r] != 0) {
        memcpy(tmp, p.sendbuf, p.counts[r]);
    }
    for (int k = 0; k < rounds && st == DR_OK; ++k) {
        const int d = 1 << k, c = bruck_blocks(n, k);
        /* what the sender (r + d) holds first: its blocks r + d .. r + d + c - 1 */
        const size_t in = rot[(size_t)(d + c)] - rot[(size_t)d], send = rot[(size_t)c];
        const uint64_t key = eng.key((uint32_t)k, 0, 0);
        if ((st = eng.irecv(0, bruck_from(r, n, k), (uint32_t)k, key, tmp + rot[(size_t)d], in)) !=
                DR_OK ||
            (st = eng.isend(1, bruck_to(r, n, k), (uint32_t)k, key, tmp, send)) != DR_OK ||
            (st = eng.wait(0)) != DR_OK || (st = eng.wait(1)) != DR_OK) {
            break;
        }
    }
    for (int i = 0; i < n && st == DR_OK; ++i) {
        const int b = ring_mod((long long)r + i, n);
        if (p.counts[b] != 0 && (b != r || p.sendbuf != out + p.displs[r])) {
            memcpy(out + p.displs[b], tmp + rot[(size_t)i], p.counts[b]);
        }
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
