/*
 * Binomial-tree gather.
 *
 * Purpose:  MPI_Gather: ceil(log2 n) hops from the farthest rank, one
 *           message per tree edge (the subtree's blocks together), so the
 *           root receives log2(n) messages instead of n - 1.
 * Accepts:  count >= 1 bytes per rank, any root, n >= 2.
 * Limits:   one message per edge, not segmented (ucx_mr stripes it over the
 *           planes; a subtree's run waits for its whole subtree). Scratch on
 *           inner ranks other than the root: their subtree's blocks; at the
 *           root only for a child's run that wraps past the end of recvbuf.
 *
 * Tree on 6 ranks in relative ranks v = (rank - root) mod n (tree_math.hpp;
 * subtree v = [v, v + span)): blocks travel up, a subtree's blocks in
 * relative order, one contiguous run:
 *
 *   hop   sends
 *    0    1->0 {1}    3->2 {3}    5->4 {5}
 *    1    2->0 {2,3}
 *    2    4->0 {4,5}
 *
 * Buffer rules: an inner rank's run holds its own block first, then each
 * child's run at (child - v) blocks, each written once by its receive; it is
 * sent up after every child's run arrived. Relative run [c, c + span) is
 * absolute ranks c + root .. (mod n): at the root it lands straight in
 * recvbuf unless it wraps, then in scratch, copied in two pieces. Keys:
 * (step 0, block 0, segment 0); a pair of ranks has one tree edge.
 */
#include <cstring>

#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/gathers.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t gather_binomial(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "binomial", lazy_note_slow);
    const int n = p.size, v = rel_rank(p.rank, p.root, n), span = binomial_span(v, n);
    const size_t bs = p.count;
    const int parent = v == 0 ? -1 : abs_rank(binomial_parent(v), p.root, n);
    int children[33], peers[34];
    const int nch = binomial_children(v, n, children);
    int npeers = 0;
    for (int i = 0; i < nch; ++i) {
        peers[npeers++] = abs_rank(children[i], p.root, n);
    }
    if (parent >= 0) {
        peers[npeers++] = parent;
    }
    /* slots: one receive per child, then the send to the parent */
    dr_status_t st = eng.init((size_t)nch + 1, peers, (size_t)npeers);
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    char *out = static_cast<char *>(p.recvbuf);
    const char *src = static_cast<const char *>(p.sendbuf);
    /* the root: recvbuf in absolute order; an inner rank: its run in relative order */
    size_t need = 0;
    if (parent >= 0 && nch > 0) {
        need = (size_t)span * bs;
    } else if (parent < 0) {
        for (int i = 0; i < nch; ++i) {
            const int c = children[i];
            if (abs_rank(c, p.root, n) + binomial_span(c, n) > n) {
                need = (size_t)binomial_span(c, n) * bs; /* at most one run wraps */
            }
        }
    }
    char *run = nullptr;
    if (need != 0) {
        run = static_cast<char *>(scratch.reserve(need));
        if (run == nullptr) {
            return eng.finish(eng.engine().set_error(
                                  DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", need),
                              err);
        }
        eng.set_scratch(run, need);
    }
    if (parent >= 0 && nch > 0) {
        memcpy(run, src, bs);
    } else if (parent < 0 && src != out + (size_t)p.rank * bs) {
        memcpy(out + (size_t)p.rank * bs, src, bs);
    }
    for (int i = 0; i < nch && st == DR_OK; ++i) {
        const int c = children[i], cs = binomial_span(c, n), a = abs_rank(c, p.root, n);
        char *dst = parent >= 0  ? run + (size_t)(c - v) * bs
                    : a + cs > n ? run
                                 : out + (size_t)a * bs;
        st =
            eng.irecv((size_t)i, abs_rank(c, p.root, n), 0, eng.key(0, 0, 0), dst, (size_t)cs * bs);
    }
    for (int i = 0; i < nch && st == DR_OK; ++i) {
        st = eng.wait((size_t)i);
        const int c = children[i], cs = binomial_span(c, n), a = abs_rank(c, p.root, n);
        if (st == DR_OK && parent < 0 && a + cs > n) {
            const size_t head = (size_t)(n - a) * bs;
            memcpy(out + (size_t)a * bs, run, head);
            memcpy(out, run + head, (size_t)cs * bs - head);
        }
    }
    if (st == DR_OK && parent >= 0) {
        st = eng.isend((size_t)nch, parent, 0, eng.key(0, 0, 0), nch > 0 ? run : src,
                       (size_t)span * bs);
        if (st == DR_OK) {
            st = eng.wait((size_t)nch);
        }
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
