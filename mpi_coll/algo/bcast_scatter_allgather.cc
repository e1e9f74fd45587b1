/*
 * Scatter + ring allgather bcast (van de Geijn), the allgather pipelined.
 *
 * Purpose:  large messages. The root's message is cut into n blocks; a
 *           binomial scatter gives relative rank v block v, then a ring
 *           allgather gives everyone every block. Each rank sends and
 *           receives about twice the message whatever n, where a tree sends
 *           it log2(n) times along its deepest path.
 * Accepts:  count >= 1 bytes, any root, 2 <= n <= kRingMaxRanks. With fewer
 *           bytes than ranks some blocks are empty; both sides skip them.
 * Limits:   the ring's n - 1 steps (after the scatter's step 0) must fit the
 *           key's step field; ring segments as allgather_ring.cc. Scatter
 *           messages are one message per tree edge (ucx_mr stripes them).
 *
 * Steps on 4 ranks, relative ranks (block b of the message belongs to v = b):
 *
 *   step  phase      v0         v1         v2         v3
 *    0    scatter    ->2 {2,3}             <-0 {2,3}
 *                    ->1 {1}    <-0 {1}    ->3 {3}    <-2 {3}
 *    1    allgather  s0 r3      s1 r0      s2 r1      s3 r2
 *    2    allgather  s3 r2      s0 r3      s1 r0      s2 r1
 *    3    allgather  s2 r1      s3 r2      s0 r3      s1 r0
 *
 * Subtree v covers relative ranks [v, v + binomial_span(v)), so its blocks
 * are one contiguous run of the buffer: one message per edge.
 *
 * Buffer rules: a rank forwards scatter runs only after its own arrived,
 * and the ring starts only when its scatter sends completed: the ring
 * receives blocks of the run the scatter sends read (the same bytes, but a
 * receive must never land in memory a running send reads).
 */
#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t bcast_scatter_allgather(Transport &t, const Params &p, std::string *err)
{
    Engine eng(t, p, "scatter-allgather");
    const int n = p.size, v = rel_rank(p.rank, p.root, n);
    const size_t bytes = p.count;
    char *buf = static_cast<char *>(p.recvbuf);
    int children[33], peers[36];
    const int nch = binomial_children(v, n, children);
    int npeers = 0;
    for (int i = 0; i < nch; ++i) {
        peers[npeers++] = abs_rank(children[i], p.root, n);
    }
    const int parent = v == 0 ? -1 : abs_rank(binomial_parent(v), p.root, n);
    if (parent >= 0) {
        peers[npeers++] = parent;
    }
    peers[npeers++] = abs_rank(ring_left(v, n), p.root, n);
    peers[npeers++] = abs_rank(ring_right(v, n), p.root, n);

    const RingAllgather ra{
        buf, bytes,          n, v, p.root, pipeline_segments(even_len(bytes, n, 0), p.segment_size),
        1,   (size_t)nch + 1};
    /* slots: 0 the scatter receive, 1..nch the scatter sends, then the ring's */
    dr_status_t st =
        eng.init(1 + (size_t)nch + ring_allgather_slots(n, ra.nseg), peers, (size_t)npeers);
    auto run_bytes = [&](int first, int span) {
        return even_offset(bytes, n, first + span) - even_offset(bytes, n, first);
    };
    if (st == DR_OK && parent >= 0) {
        const int span = binomial_span(v, n);
        if ((st = eng.irecv(0, parent, 0, eng.key(0, (uint32_t)v, 0),
                            buf + even_offset(bytes, n, v), run_bytes(v, span))) == DR_OK) {
            st = eng.wait(0);
        }
    }
    for (int i = 0; i < nch && st == DR_OK; ++i) {
        const int c = children[i], span = binomial_span(c, n);
        st = eng.isend(1 + (size_t)i, abs_rank(c, p.root, n), 0, eng.key(0, (uint32_t)c, 0),
                       buf + even_offset(bytes, n, c), run_bytes(c, span));
    }
    for (int i = 0; i < nch && st == DR_OK; ++i) {
        st = eng.wait(1 + (size_t)i);
    }
    if (st == DR_OK) {
        st = ring_allgather_run(eng, ra);
    }
    return eng.finish(st, err);
}

} // namespace coll
} // namespace dualrail
