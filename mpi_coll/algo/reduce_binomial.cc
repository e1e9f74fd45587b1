/*
 * Binomial-tree reduce, pipelined in segments.
 *
 * Purpose:  small messages: ceil(log2 n) hops from the farthest rank to the
 *           root, every rank sending the message once (to its parent).
 * Accepts:  count >= 1 elements, any root, n >= 2, a commutative op.
 * Limits:   at most kMaxSegments segments (the key's field), so a large
 *           message forced onto the tree gets larger segments. Scratch: one
 *           receive area of the message's size per child (at most
 *           ceil(log2 n)), and the partial result on inner ranks other than
 *           the root (the root reduces into recvbuf, a leaf sends its input).
 *
 * Tree on 6 ranks in relative ranks v = (rank - root) mod n, the bcast's
 * tree (tree_math.hpp) with the edges reversed; "+" reduce in:
 *
 *   hop   sends
 *    0    1->0 +    3->2 +    5->4 +
 *    1    2->0 +    (2 holds 2,3)
 *    2    4->0 +    (4 holds 4,5)
 *
 * Pipeline: every receive (child, segment) is posted at once; segment k is
 * reduced from each child in the children's order and sent to the parent
 * as soon as the last child's segment k is in, so segment k climbs the upper
 * edges while segment k+1 crosses the lower ones.
 *
 * Buffer rules: a segment of the partial is written (copy of the input,
 * then one reduction per child) before its send to the parent and never
 * after; receives land in the children's areas, read by nothing else.
 * Sends are waited for at the end. Keys: (step 0, block 0, segment k); a
 * pair of ranks has one tree edge, one direction.
 */
#include <cstring>

#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/reductions.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t reduce_binomial(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "binomial", lazy_note_slow);
    const int n = p.size, v = rel_rank(p.rank, p.root, n);
    const size_t esz = p.elem_size, bytes = p.count * esz;
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
    const int nseg = pipeline_segments(bytes, p.segment_size);
    /* slots: nch x nseg receives (child-major), then nseg sends */
    const size_t nrecv = (size_t)nch * (size_t)nseg;
    dr_status_t st = eng.init(nrecv + (size_t)nseg, peers, (size_t)npeers);
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    const char *src = static_cast<const char *>(p.sendbuf);
    /* the partial: recvbuf at the root, scratch on inner ranks, the input itself on leaves */
    const bool inner = parent >= 0 && nch > 0;
    const size_t area = (bytes + 63) / 64 * 64;
    const size_t need = area * ((size_t)nch + (inner ? 1 : 0));
    char *scr = nullptr;
    if (need != 0) {
        scr = static_cast<char *>(scratch.reserve(need));
        if (scr == nullptr) {
            return eng.finish(eng.engine().set_error(
                                  DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", need),
                              err);
        }
        eng.set_scratch(scr, need);
    }
    char *acc = parent < 0 ? static_cast<char *>(p.recvbuf)
                : inner    ? scr + area * (size_t)nch
                           : const_cast<char *>(src); /* a leaf only sends it */
    if (acc != src && nch > 0) {
        memcpy(acc, src, bytes);
    }
    for (int c = 0; c < nch && st == DR_OK; ++c) {
        for (int k = 0; k < nseg && st == DR_OK; ++k) {
            const size_t off = even_offset(p.count, nseg, k) * esz;
            st = eng.irecv((size_t)c * (size_t)nseg + (size_t)k, children[c], 0,
                           eng.key(0, 0, (uint32_t)k), scr + area * (size_t)c + off,
                           even_len(p.count, nseg, k) * esz);
        }
    }
    for (int k = 0; k < nseg && st == DR_OK; ++k) {
        const size_t off = even_offset(p.count, nseg, k), cnt = even_len(p.count, nseg, k);
        for (int c = 0; c < nch && st == DR_OK; ++c) {
            if ((st = eng.wait((size_t)c * (size_t)nseg + (size_t)k)) == DR_OK && cnt != 0) {
                p.reduce(scr + area * (size_t)c + off * esz, acc + off * esz, cnt, p.reduce_arg);
            }
        }
        if (st == DR_OK && parent >= 0) {
            st = eng.isend(nrecv + (size_t)k, parent, 0, eng.key(0, 0, (uint32_t)k),
                           acc + off * esz, cnt * esz);
        }
    }
    for (int k = 0; k < nseg && st == DR_OK; ++k) {
        st = eng.wait(nrecv + (size_t)k);
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
