/*
 * Binomial-tree bcast, pipelined in segments.
 *
 * Purpose:  small messages: ceil(log2 n) hops from the root to the farthest
 *           rank, every rank receiving the message once.
 * Accepts:  count >= 1 bytes, any root, n >= 2.
 * Limits:   at most kMaxSegments segments (the key's field), so a large
 *           message forced onto the tree gets larger segments; no scratch
 *           (receives go straight into the buffer).
 *
 * Tree on 6 ranks in relative ranks v = (rank - root) mod n (v's parent is v
 * minus its lowest set bit; children largest subtree first):
 *
 *   step (hop)   sends
 *    0           0->4  (subtree 4,5)
 *    1           0->2 (2,3)   4->5
 *    2           0->1   2->3
 *
 * Pipeline: a rank posts receives of all nseg segments from its parent at
 * once, and forwards segment k to its children the moment it arrives, so
 * segment k+1 crosses the upper edge while segment k crosses the lower ones.
 *
 * Buffer rules: a segment is written once (by its receive) before any send
 * reads it; sends are waited for at the end (they read the buffer until the
 * child has the data). Keys: (step 0, block 0, segment k); a pair of ranks
 * has one tree edge, one direction.
 */
#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t bcast_binomial(Transport &t, const Params &p, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "binomial", lazy_note_slow);
    const int n = p.size, v = rel_rank(p.rank, p.root, n);
    const int parent = v == 0 ? -1 : abs_rank(binomial_parent(v), p.root, n);
    int children[33], peers[34];
    const int nch = binomial_children(v, n, children);
    int npeers = 0;
    for (int i = 0; i < nch; ++i) {
        children[i] = abs_rank(children[i], p.root, n);
        peers[npeers++] = children[i];
    }
    if (parent >= 0) {
        peers[npeers++] = parent;
    }
    char *buf = static_cast<char *>(p.recvbuf);
    const int nseg = pipeline_segments(p.count, p.segment_size);
    /* slots: nseg receives, then nseg x nch sends */
    dr_status_t st = eng.init((size_t)nseg * (size_t)(1 + nch), peers, (size_t)npeers);
    auto forward = [&](int k) {
        const size_t off = even_offset(p.count, nseg, k), len = even_len(p.count, nseg, k);
        for (int c = 0; c < nch; ++c) {
            dr_status_t s = eng.isend((size_t)nseg + (size_t)k * (size_t)nch + (size_t)c,
                                      children[c], 0, eng.key(0, 0, (uint32_t)k), buf + off, len);
            if (s != DR_OK) {
                return s;
            }
        }
        return DR_OK;
    };
    if (st == DR_OK && parent < 0) {
        for (int k = 0; k < nseg && st == DR_OK; ++k) {
            st = forward(k);
        }
    } else if (st == DR_OK) {
        for (int k = 0; k < nseg && st == DR_OK; ++k) {
            st = eng.irecv((size_t)k, parent, 0, eng.key(0, 0, (uint32_t)k),
                           buf + even_offset(p.count, nseg, k), even_len(p.count, nseg, k));
        }
        for (int k = 0; k < nseg && st == DR_OK; ++k) {
            if ((st = eng.wait((size_t)k)) == DR_OK) {
                st = forward(k);
            }
        }
    }
    if (st == DR_OK) {
        st = eng.wait_all(); /* the forwards to the children */
    }
    return eng.finish(st, err);
}

} // namespace coll
} // namespace dualrail
