/*
 * Bruck alltoall.
 *
 * Purpose:  small blocks: ceil(log2 n) rounds of one message each, where
 *           the pairwise exchange needs n - 1. Each round forwards about n/2
 *           blocks, so it moves log2(n)/2 times the data of the pairwise
 *           exchange: a win only while per-message latency dominates.
 * Accepts:  count >= 1 bytes per block, n >= 2; in place (sendbuf nullptr)
 *           as out of place, the data is copied into scratch first.
 * Limits:   scratch of n blocks (the rotated buffer) plus two pack buffers
 *           of the largest round's blocks; rounds are not segmented.
 *
 * tmp is the send buffer rotated so that index i is the block for rank
 * (r + i) mod n. In round k (d = 2^k) rank r packs the indices with bit k
 * set, sends them to r + d, and receives as many from r - d into the same
 * indices. An index travels i ranks in all, so at the end rank q's index i
 * holds what rank q - i sent it, which goes to block (q - i) mod n.
 *
 * Rounds on 5 ranks (indices moved; all arithmetic mod 5):
 *
 *   round  d   indices    sends to   receives from
 *    0     1   1 3        r + 1      r - 1
 *    1     2   2 3        r + 2      r - 2
 *    2     4   4          r + 4      r - 4
 *
 * Buffer rules: a round's send reads its own pack buffer and its receive
 * fills the other; both complete before tmp is touched again, so nothing in
 * flight shares memory with what is being unpacked. A send may still read
 * the pack buffer after an error: the scratch is then abandoned, never freed
 * (engine.hpp).
 */
#include <cstring>

#include "algo/alltoall.hpp"
#include "algo/alltoall_math.hpp"
#include "algo/engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t alltoall_bruck(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    Engine eng(t, p, "bruck");
    const int n = p.size, r = p.rank, rounds = log2_ceil(n);
    const size_t bs = p.count;
    int peers[64];
    for (int k = 0; k < rounds; ++k) {
        peers[2 * k] = bruck_a2a_to(r, n, k);
        peers[2 * k + 1] = bruck_a2a_from(r, n, k);
    }
    dr_status_t st = eng.init(2, peers, 2 * (size_t)rounds);
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    const size_t pack = (size_t)bruck_a2a_max_blocks(n, rounds) * bs;
    const size_t total = (size_t)n * bs + 2 * pack;
    char *tmp = static_cast<char *>(scratch.reserve(total));
    if (tmp == nullptr) {
        return eng.finish(
            eng.set_error(DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", total), err);
    }
    eng.set_scratch(tmp, total);
    char *spack = tmp + (size_t)n * bs, *rpack = spack + pack;
    char *out = static_cast<char *>(p.recvbuf);
    const char *in = p.sendbuf != nullptr ? static_cast<const char *>(p.sendbuf) : out;
    /* rotate: tmp[i] = block (r + i) mod n */
    const size_t head = (size_t)(n - r) * bs;
    memcpy(tmp, in + (size_t)r * bs, head);
    memcpy(tmp + head, in, (size_t)r * bs);
    for (int k = 0; k < rounds && st == DR_OK; ++k) {
        const size_t d = (size_t)1 << k, len = (size_t)bruck_a2a_blocks(n, k) * bs;
        size_t o = 0;
        for (size_t i = d; i < (size_t)n; ++i) {
            if (i & d) {
                memcpy(spack + o, tmp + i * bs, bs);
                o += bs;
            }
        }
        const uint64_t key = eng.key((uint32_t)k, 0, 0);
        if ((st = eng.irecv(0, bruck_a2a_from(r, n, k), (uint32_t)k, key, rpack, len)) != DR_OK ||
            (st = eng.isend(1, bruck_a2a_to(r, n, k), (uint32_t)k, key, spack, len)) != DR_OK ||
            (st = eng.wait(0)) != DR_OK || (st = eng.wait(1)) != DR_OK) {
            break;
        }
        o = 0;
        for (size_t i = d; i < (size_t)n; ++i) {
            if (i & d) {
                memcpy(tmp + i * bs, rpack + o, bs);
                o += bs;
            }
        }
    }
    if (st == DR_OK) {
        for (int i = 0; i < n; ++i) {
            memcpy(out + (size_t)bruck_a2a_final_block(r, n, i) * bs, tmp + (size_t)i * bs, bs);
        }
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
