/*
 * Binomial-tree scatter.
 *
 * Purpose:  MPI_Scatter: ceil(log2 n) hops to the farthest rank, one
 *           message per tree edge (the child's subtree's blocks together),
 *           so the root sends log2(n) messages instead of n - 1.
 * Accepts:  count >= 1 bytes per rank, any root, n >= 2.
 * Limits:   one message per edge, not segmented (ucx_mr stripes it over the
 *           planes). Scratch on inner ranks other than the root: their
 *           subtree's blocks; at the root only for a child's run that wraps
 *           past the end of sendbuf (packed there first).
 *
 * Tree on 6 ranks in relative ranks (the gather's, edges reversed):
 *
 *   hop   sends
 *    0    0->4 {4,5}
 *    1    0->2 {2,3}    4->5 {5}
 *    2    0->1 {1}      2->3 {3}
 *
 * Buffer rules: an inner rank receives its subtree's run (its own block
 * first) into scratch, copies its block out and forwards each child's part
 * from there; nothing is written after the receive. A leaf receives
 * straight into recvbuf. Sends are waited for at the end. Keys: (step 0,
 * block 0, segment 0); a pair of ranks has one tree edge.
 */
#include <cstring>

#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/gathers.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t scatter_binomial(Transport &t, const Params &p, Scratch &scratch, std::string *err)
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
    /* slots: 0 the receive from the parent, 1.. the sends to the children */
    dr_status_t st = eng.init((size_t)nch + 1, peers, (size_t)npeers);
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    char *out = static_cast<char *>(p.recvbuf);
    const char *src = static_cast<const char *>(p.sendbuf);
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
    if (parent >= 0) {
        st = eng.irecv(0, parent, 0, eng.key(0, 0, 0), nch > 0 ? run : out, (size_t)span * bs);
        if (st == DR_OK) {
            st = eng.wait(0);
        }
        if (st == DR_OK && nch > 0) {
            memcpy(out, run, bs);
        }
    } else if (out != nullptr) {
        /* the root's own block (in place: recvbuf is nullptr, it stays in sendbuf) */
        memcpy(out, src + (size_t)p.rank * bs, bs);
    }
    for (int i = 0; i < nch && st == DR_OK; ++i) {
        const int c = children[i], cs = binomial_span(c, n), a = abs_rank(c, p.root, n);
        const char *from;
        if (parent >= 0) {
            from = run + (size_t)(c - v) * bs;
        } else if (a + cs > n) {
            const size_t head = (size_t)(n - a) * bs;
            memcpy(run, src + (size_t)a * bs, head);
            memcpy(run + head, src, (size_t)cs * bs - head);
            from = run;
        } else {
            from = src + (size_t)a * bs;
        }
        st = eng.isend(1 + (size_t)i, a, 0, eng.key(0, 0, 0), from, (size_t)cs * bs);
    }
    if (st == DR_OK) {
        st = eng.wait_all(); /* the sends to the children */
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
