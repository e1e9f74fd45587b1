/*
 * Pipelined chain bcast.
 *
 * Purpose:  large messages. The message, cut into segments (chain_math.hpp),
 *           flows along relative ranks 0 -> 1 -> ... -> n-1: every rank
 *           receives it once and sends it once, and once the pipe is full
 *           every link (and every plane of it: ucx_mr stripes each segment)
 *           is busy at the same time. About (bytes + (n-2) x segment) / rate,
 *           where scatter + allgather puts 2(n-1)/n x bytes through the root's
 *           link (two thirds of the rate on 4 ranks).
 * Accepts:  count >= 1 bytes, any root, 2 <= n. Chosen by bcast_choose when
 *           chain_wins (the message is at least n segments).
 * Limits:   at most kChainMaxSegments segments (the key's block and segment
 *           fields number them); a larger message gets larger segments. Its
 *           latency is n - 1 hops of a segment, so small messages keep the
 *           binomial tree.
 *
 * Steps (one step; segment k under key block/seg k), 4 ranks, relative, in
 * time, once segments 0..3 are on their way ("r" receive, "s" send on):
 *
 *   t    v0         v1            v2            v3
 *   0    s0 ->1
 *   1    s1 ->1     r0, s0 ->2
 *   2    s2 ->1     r1, s1 ->2    r0, s0 ->3
 *   3    s3 ->1     r2, s2 ->2    r1, s1 ->3    r0
 *
 * Receives run up to `window` segments ahead of the last completed one;
 * sends up to `window` ahead of the last completed send.
 *
 * Buffer rules: every segment lands at its own offset of the buffer and is
 * written once, by its receive; it is forwarded only after that receive
 * completed, so no send reads memory a receive still writes. No scratch.
 */
#include "algo/chain.hpp"
#include "algo/collectives.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t bcast_chain(Transport &t, const Params &p, std::string *err)
{
    Engine eng(t, p, "chain");
    const int n = p.size, v = rel_rank(p.rank, p.root, n);
    const int parent = v == 0 ? -1 : abs_rank(v - 1, p.root, n);
    const int child = v == n - 1 ? -1 : abs_rank(v + 1, p.root, n);
    const ChainPlan c = chain_plan(p.count, 1, p.segment_size);
    const size_t w = c.window, nseg = c.nseg;
    char *buf = static_cast<char *>(p.recvbuf);
    int peers[2];
    size_t npeers = 0;
    if (parent >= 0) {
        peers[npeers++] = parent;
    }
    if (child >= 0) {
        peers[npeers++] = child;
    }
    /* slots: receive k in k % w, send k in w + k % w */
    dr_status_t st = eng.init(2 * w, peers, npeers);
    /* The root holds every segment from the start; a leaf forwards none. */
    size_t posted = parent >= 0 ? 0 : nseg, received = posted;
    ChainSends out{child >= 0 ? 0 : nseg, child >= 0 ? 0 : nseg, w, w, child};
    auto seg = [&](size_t k, const void **b, size_t *len) {
        const Span s = chain_segment(c, p.count, k);
        *b = buf + s.offset;
        *len = s.count;
    };
    while (st == DR_OK && (received < nseg || out.done < nseg)) {
        bool moved = false;
        for (; st == DR_OK && posted < nseg && posted < received + w; ++posted) {
            const Span s = chain_segment(c, p.count, posted);
            st = eng.irecv(posted % w, parent, 0,
                           eng.key(0, chain_key_block(posted), chain_key_seg(posted)),
                           buf + s.offset, s.count);
        }
        while (st == DR_OK && received < posted) {
            if ((st = eng.test(received % w)) == DR_INPROGRESS) {
                st = DR_OK;
                break;
            }
            ++received;
            moved = true;
        }
        if (st == DR_OK) {
            st = out.advance(eng, received, seg, &moved);
        }
        if (st == DR_OK && !moved) {
            st = eng.stalled(received < nseg ? parent : child, 0);
        }
    }
    return eng.finish(st, err);
}

} // namespace coll
} // namespace dualrail
