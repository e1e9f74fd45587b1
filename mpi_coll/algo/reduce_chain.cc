/*
 * Pipelined chain reduce.
 *
 * Purpose:  large messages. Partial results, cut into segments
 *           (chain_math.hpp), flow along relative ranks n-1 -> n-2 -> ... -> 0
 *           (the root), each rank adding its own input to a segment before
 *           passing it on: every link carries the message once, and with the
 *           pipe full every link (and every plane of it) is busy at once.
 *           About (bytes + (n-2) x segment) / rate, where Rabenseifner's root
 *           receives (n-1)/n of the message twice (two thirds of the rate on
 *           4 ranks, 1.5x the message through the root's link).
 * Accepts:  count >= 1 elements, 2 <= n, any root, a commutative op. Chosen by
 *           reduce_choose when chain_wins (the message is at least n
 *           segments).
 * Limits:   at most kChainMaxSegments segments (the key's block and segment
 *           fields number them); a larger message gets larger segments.
 *           Scratch: `window` segments on every rank but the last of the
 *           chain.
 * Results:  element i is combined in chain order, x[v n-1] + x[v n-2] + ... +
 *           x[v 0] (relative ranks): the same value for exact arithmetic,
 *           possibly other last bits than MPI_Allreduce's ring for rounded
 *           floating sums (reduce_algorithm rabenseifner gives the ring's).
 *
 * Steps (one step; segment k under key block/seg k), 4 ranks, relative, in
 * time ("r" receive a partial, "+" add own input, "s" send it on):
 *
 *   t    v0 (root)       v1               v2               v3
 *   0                                                      s0 ->2
 *   1                                     r0+, s0 ->1      s1 ->2
 *   2                    r0+, s0 ->0      r1+, s1 ->1      s2 ->2
 *   3    r0+ (result)    r1+, s1 ->0      r2+, s2 ->1      s3 ->2
 *
 * Buffer rules: a partial lands in scratch slot k % window; a middle rank adds
 * its input into that slot and sends the slot on, so the receive of segment
 * k + window into the same slot is posted only once send k completed. The
 * root adds the partial into recvbuf (after copying its input there when out
 * of place) and the slot is free at once. The last rank sends straight from
 * its input, which is only read. Non-root recvbufs are never touched.
 */
#include <cstring>

#include "algo/chain.hpp"
#include "algo/reductions.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t reduce_chain(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    Engine eng(t, p, "chain");
    const int n = p.size, v = rel_rank(p.rank, p.root, n);
    const int from = v == n - 1 ? -1 : abs_rank(v + 1, p.root, n);
    const int to = v == 0 ? -1 : abs_rank(v - 1, p.root, n);
    const size_t esz = p.elem_size;
    const ChainPlan c = chain_plan(p.count, esz, p.segment_size);
    const size_t w = c.window, nseg = c.nseg, slot_bytes = c.seg_elems * esz;
    const char *in = static_cast<const char *>(p.sendbuf);
    char *dst = static_cast<char *>(p.recvbuf); /* the root's only */
    int peers[2];
    size_t npeers = 0;
    if (from >= 0) {
        peers[npeers++] = from;
    }
    if (to >= 0) {
        peers[npeers++] = to;
    }
    /* slots: receive k in k % w, send k in w + k % w */
    dr_status_t st = eng.init(2 * w, peers, npeers);
    char *slots = nullptr;
    if (st == DR_OK && from >= 0) {
        slots = static_cast<char *>(scratch.reserve(w * slot_bytes));
        if (slots == nullptr) {
            st = eng.set_error(DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch",
                               w * slot_bytes);
        } else {
            eng.set_scratch(slots, w * slot_bytes);
        }
    }
    /* The last rank has all its (own) segments ready; the root sends none. */
    size_t posted = from >= 0 ? 0 : nseg, received = posted;
    ChainSends out{to >= 0 ? 0 : nseg, to >= 0 ? 0 : nseg, w, w, to};
    auto seg = [&](size_t k, const void **b, size_t *len) {
        const Span s = chain_segment(c, p.count, k);
        *b = from >= 0 ? slots + (k % w) * slot_bytes : in + s.offset * esz;
        *len = s.count * esz;
    };
    while (st == DR_OK && (received < nseg || out.done < nseg)) {
        bool moved = false;
        /* slot posted % w is free once receive posted - w was added up and, on a middle
         * rank, its send completed */
        for (; st == DR_OK && posted < nseg && posted < received + w &&
               (to < 0 || posted < out.done + w);
             ++posted) {
            const Span s = chain_segment(c, p.count, posted);
            st = eng.irecv(posted % w, from, 0,
                           eng.key(0, chain_key_block(posted), chain_key_seg(posted)),
                           slots + (posted % w) * slot_bytes, s.count * esz);
        }
        while (st == DR_OK && received < posted) {
            if ((st = eng.test(received % w)) == DR_INPROGRESS) {
                st = DR_OK;
                break;
            }
            const Span s = chain_segment(c, p.count, received);
            char *slot = slots + (received % w) * slot_bytes;
            if (to < 0) {
                char *d = dst + s.offset * esz;
                if (d != in + s.offset * esz) {
                    memcpy(d, in + s.offset * esz, s.count * esz);
                }
                p.reduce(slot, d, s.count, p.reduce_arg);
            } else {
                p.reduce(in + s.offset * esz, slot, s.count, p.reduce_arg);
            }
            ++received;
            moved = true;
        }
        if (st == DR_OK) {
            st = out.advance(eng, received, seg, &moved);
        }
        if (st == DR_OK && !moved) {
            st = eng.stalled(received < nseg ? from : to, 0);
        }
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
